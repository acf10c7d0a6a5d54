"""Start-of-run self-checks: does the flush make samples cold, is a launch gap timed when nothing
precedes the start event, and how much do events add to a graph replay's kernel time (which sets
the size below which kernel times time a case)? The measurements run on the GPU; the judgements
are plain functions so they can be tested anywhere."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from kprof.timer.kernel_time import kernel_time_below_ns, time_round_kernels

FLUSH_AGREEMENT = 0.02  # F and 2F flushes must give the same cold time within 2%
SPIN_CYCLES = 200_000
LAUNCH_GAP_NS = 1000.0  # a gap above 1 µs means the start event must be preceded by GPU work


def judge_flush(warm_ns: float, flush_ns: float, double_flush_ns: float) -> dict[str, Any]:
    """The flush works when a twice-as-large flush changes nothing and both are slower than warm."""
    agree = abs(flush_ns - double_flush_ns) / double_flush_ns <= FLUSH_AGREEMENT
    colder = flush_ns > warm_ns and double_flush_ns > warm_ns
    return {
        "warm_ns": warm_ns,
        "flush_ns": flush_ns,
        "double_flush_ns": double_flush_ns,
        "passed": bool(agree and colder),
        "note": "flush makes samples cold"
        if agree and colder
        else "flush size matters or does not evict: cold samples are not cold",
    }


def judge_launch_gap(idle_ns: float, preroll_ns: float) -> dict[str, Any]:
    gap = idle_ns - preroll_ns
    return {
        "idle_stream_ns": idle_ns,
        "preroll_ns": preroll_ns,
        "gap_ns": gap,
        "note": (
            "a launch gap is timed on an idle stream: kprof precedes every start event with the flush"
            if gap > LAUNCH_GAP_NS
            else "no launch gap measurable"
        ),
    }


def judge_event_overhead(events_ns: float, kernel_ns: float) -> dict[str, Any]:
    overhead = events_ns - kernel_ns
    below = kernel_time_below_ns(overhead)
    return {
        "events_ns": events_ns,
        "kernel_time_ns": kernel_ns,
        "overhead_ns": overhead,
        "kernel_time_below_ns": below,
        "note": f"events add {overhead / 1e3:.2f} µs to a replay: cases under {below / 1e3:.0f} µs get kernel times",
    }


def _event_overhead(flush: Any, work: Callable[[], None], samples: int = 30) -> dict[str, Any]:
    """The same captured graph timed both ways, cold: median events time against median kernel time."""
    import torch

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        work()
    graph.replay()
    torch.cuda.synchronize()
    events = _median_event_ns(graph.replay, flush.zero_, samples)
    kernel = time_round_kernels({0: graph.replay}, flush.zero_, [0], samples)[0]
    return judge_event_overhead(events, statistics.median(kernel))


def _median_event_ns(run: Callable[[], None], before: Callable[[], None] | None, samples: int = 20) -> float:
    import torch

    times = []
    for _ in range(samples):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if before is not None:
            before()
        else:
            torch.cuda.synchronize()  # an idle stream: nothing queued ahead of the start event
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e6)
    return statistics.median(times)


def run_self_checks(flush: Any, l2_bytes: int) -> dict[str, Any]:
    """Flush check with a copy of a quarter of L2, and the launch-gap check with a tiny kernel."""
    import torch

    out: dict[str, Any] = {}
    try:
        n = max(l2_bytes // 8, 1 << 20)  # bf16 elements in a quarter of L2 (2 bytes each)
        src = torch.randn(n, device=flush.device).to(torch.bfloat16)
        dst = torch.empty_like(src)
        double = torch.empty(2 * flush.numel(), dtype=torch.uint8, device=flush.device)
        # GPU work ahead of the start event: ~100 µs, longer than the host takes to queue the start
        # event and the kernel behind it (a 10 µs spin ran dry first on an H200: 9 µs "kernels").
        spin = lambda: torch.cuda._sleep(SPIN_CYCLES)  # noqa: E731
        copy = lambda: dst.copy_(src)  # noqa: E731
        warm = _median_event_ns(copy, lambda: (copy(), spin()))
        out["flush"] = judge_flush(warm, _median_event_ns(copy, flush.zero_), _median_event_ns(copy, double.zero_))
        del double
        if torch.version.hip is None:  # the activity-record path is not run on AMD hardware here
            out["event_overhead"] = _event_overhead(flush, lambda: torch.mul(src, 2, out=dst))
        tiny = torch.zeros(1, device=flush.device)
        bump = lambda: tiny.add_(1)  # noqa: E731
        out["launch_gap"] = judge_launch_gap(_median_event_ns(bump, None), _median_event_ns(bump, spin))
    except Exception as e:  # a self-check must never stop a run; say what went wrong instead
        out["error"] = f"{type(e).__name__}: {e}"
    return out
