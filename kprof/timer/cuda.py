"""Device time of captured graphs with a cold-cache flush: CUDA (or HIP) events, or kernel times.

One cold sample: ``flush.zero_()`` — a memset of max(512 MiB, 2 × L2)
bytes (1 GiB on AMD parts, whose Infinity Cache is larger than L2) that also keeps the GPU busy
while the host queues the rest — then start event, ``graph.replay()``, stop event. A whole round is
enqueued before one synchronisation. With ``kernel_time`` set (small kernels, see
kprof.timer.kernel_time) the same replays are timed by their CUPTI activity records instead.
Each graph is replayed once untimed after capture (the first replay of a new graph runs slow).
With ``--captures per-round`` every round times graphs captured afresh (``recapture``): two
captures of the same work differ by an amount of their own, fixed for the graph's life (SD 0.3% of
a 6 µs copy on an H200, docs/benchmarks.md), which one capture per leg turns into a bias of that
leg; fresh captures make it noise between rounds.
Captured graphs do not keep their tensors alive: the caller holds every buffer for as long as the
timer lives.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import torch

from kprof.timer.clocks import clock_reader
from kprof.timer.kernel_time import KERNEL_TIME_LABEL, time_round_kernels
from kprof.timer.protocol import Item
from kprof.timer.self_checks import run_self_checks

MIB = 1 << 20
RECAPTURE_WARMUP_S = 0.03
CUDA_LABEL = "cuda-events (device time, graph replay, cold L2)"
EAGER_LABEL = "cuda-events (device time, eager calls: launch gaps included, cold L2)"
# What CUDA says when a call synchronises with the host (or allocates on it) inside a capture.
HOST_SYNC_SIGNS = ("operation not permitted when stream is capturing", "capture", "Capture")
LIBRARY_PARTS = ("/torch/", "/kprof/", "/triton/", "/contextlib.py")


class Eager:
    """A leg's call in place of its graph (``--captures none``): replayed by calling it."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self.replay = fn


class CaptureFailed(RuntimeError):
    """A leg's call could not be captured in a CUDA graph; the message is one line saying why."""


def capture_refusal(error: BaseException) -> str | None:
    """One line for a capture that failed because the call synchronised with the host (``.item()``,
    ``.cpu()``, a data-dependent shape), naming the line outside torch and kprof that made the call
    last, and the two ways out; None for any other error. torch raises the sync's error inside the
    capture and a second one as the capture ends, so the whole chain is read."""
    chain: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__context__ or seen.__cause__
    if not any(sign in str(e) for e in chain for sign in HOST_SYNC_SIGNS):
        return None
    frames = [f for e in chain for f in traceback.extract_tb(e.__traceback__)]
    own = [f for f in frames if not any(part in f.filename for part in LIBRARY_PARTS)]
    where = f" ({own[-1].filename}:{own[-1].lineno}: {own[-1].line})" if own else ""
    return (
        f"cannot be captured in a CUDA graph: the call synchronises with the host{where}; time it with "
        "--captures none (eager calls, launch gaps included), or launch the kernel without the sync"
    )


def flush_bytes(device: torch.device) -> int:
    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    is_amd = torch.version.hip is not None
    return max(1024 * MIB if is_amd else 512 * MIB, 2 * l2)


class CudaEventTimer:
    kernel_time = False  # set per case (kprof.timer.kernel_time.wants_kernel_time)

    @property
    def label(self) -> str:
        if self.kernel_time:
            return KERNEL_TIME_LABEL
        return CUDA_LABEL if self.use_graphs else EAGER_LABEL

    def __init__(self, device: str = "cuda", graphs: bool = True) -> None:
        self.device = torch.device(device)
        self.use_graphs = graphs
        self.flush_bytes = flush_bytes(self.device)
        self.flush = torch.empty(self.flush_bytes, dtype=torch.uint8, device=self.device)
        self.graphs: dict[Item, torch.cuda.CUDAGraph | Eager] = {}
        self.fns: dict[Item, Callable[[], None]] = {}
        self.stream = torch.cuda.Stream(self.device)
        self.clocks = clock_reader(self.device.index or 0, hip=torch.version.hip is not None)

    def prepare(self, item: Item, fn: Callable[[], None]) -> None:
        with torch.cuda.stream(self.stream):
            fn()  # warm-up on the capture stream
        torch.cuda.current_stream().wait_stream(self.stream)
        self.fns[item] = fn
        self._capture(item)

    def recapture(self, items: Sequence[Item]) -> None:
        for item in items:
            self._capture(item)
        # Untimed replays until the GPU has been busy a while again: right after a round's captures
        # the first leg timed ran 10% slow for ~8 ms on an H200 (a 256 MiB copy, every round).
        t_end = time.perf_counter() + RECAPTURE_WARMUP_S
        while time.perf_counter() < t_end:
            for item in items:
                self.flush.zero_()
                self.graphs[item].replay()
            torch.cuda.synchronize(self.device)

    def _capture(self, item: Item) -> None:
        if not self.use_graphs:
            self.graphs[item] = Eager(self.fns[item])
            return
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=self.stream):
                self.fns[item]()
        except RuntimeError as e:
            refusal = capture_refusal(e)
            if refusal is None:
                raise
            raise CaptureFailed(refusal) from None
        graph.replay()
        torch.cuda.synchronize(self.device)
        self.graphs[item] = graph  # the graph it replaces is freed only now, after the new one ran

    def replay(self, item: Item) -> None:
        self.graphs[item].replay()

    def time_round(self, items: Sequence[Item], samples: int) -> dict[Item, list[float]]:
        if self.kernel_time:
            return time_round_kernels({i: self.graphs[i].replay for i in items}, self.flush.zero_, items, samples)
        events: list[tuple[Item, torch.cuda.Event, torch.cuda.Event]] = []
        for item in items:
            graph = self.graphs[item]
            for _ in range(samples):
                start = torch.cuda.Event(enable_timing=True)
                stop = torch.cuda.Event(enable_timing=True)
                self.flush.zero_()
                start.record()
                graph.replay()
                stop.record()
                events.append((item, start, stop))
        torch.cuda.synchronize(self.device)
        out: dict[Item, list[float]] = {}
        for item, start, stop in events:
            out.setdefault(item, []).append(start.elapsed_time(stop) * 1e6)
        return out

    def round_conditions(self) -> dict[str, Any]:
        return self.clocks.read()

    def copy_bandwidth(self, nbytes: int = 1 << 30, repeats: int = 10) -> float:
        """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written (median)."""
        src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=self.device).normal_()
        dst = torch.empty_like(src)
        dst.copy_(src)
        times = []
        for _ in range(repeats):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.flush.zero_()
            start.record()
            dst.copy_(src)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e6)
        del src, dst
        return 2 * (nbytes // 2) * 2 / sorted(times)[len(times) // 2]

    def describe(self) -> dict[str, Any]:
        props = torch.cuda.get_device_properties(self.device)
        return {
            "timer": self.label,
            "flush": "memset",
            "flush_bytes": self.flush_bytes,
            "device_name": props.name,
            "device_uuid": str(getattr(props, "uuid", "")) or None,
            "l2_bytes": int(getattr(props, "L2_cache_size", 0) or 0),
            "sms": props.multi_processor_count,
            "clock_readings": type(self.clocks).__name__ if self.clocks.handle is not None else None,
            "conditions_at_start": self.clocks.read(),
        }

    def measure_device(self) -> dict[str, Any]:
        l2 = int(getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 0) or 0)
        return {"copy_gbps": self.copy_bandwidth(), "self_checks": run_self_checks(self.flush, l2)}
