"""Where does the A/A difference of small kernels come from? Four ways to time the same work.

A bandwidth-bound Triton row sum (bf16 rows of 4,096 → fp32) is captured twice as two legs that do
identical work on the same buffers (an A/A pair). For each size and timer, ``--runs`` independent
repetitions (fresh captures) of 16 interleaved rounds give the A/A estimate and its 95% interval
(kprof's paired Hodges–Lehmann on per-round trimmed means). An honest timer has intervals that
hold 0 in about 95% of repetitions.

Timers:
  events-1      kprof's default: flush, start event, replay of a graph of one call, stop event;
                a separate graph per leg and buffer set.
  events-1-same the same, but leg A' replays leg A's graphs: tells per-capture cost from the rest.
  events-K      one graph per leg holding K calls over K rotated buffer sets (more than 3× L2 in
                all, so each call starts cold); the time per call is the sample / K.
  cupti-1       the events-1 replays under the PyTorch profiler, timed by kprof's kernel times
                (CUPTI activity records: first kernel start to last end; no launch, no event overhead).

With ``--legs N`` there are N identical legs (captured in leg order, replayed in a random order
each round), each compared with leg 0: a bias that follows the capture order shows as the same
sign for one leg index in every repetition. ``--work`` picks the work: the Triton row sum, a
device-to-device copy (a memcpy node), or that copy followed by a one-cycle spin kernel (what
``kprof calibrate`` captures for its A/A legs).

Usage (GPU): python benchmarks/small_kernel_timers.py OUT.json [--runs 8] [--mib 8 32 512]
             [--legs 2] [--work rowsum|copy|copy+spin]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl
from scipy import stats as sps

from kprof.analysis import stats as S
from kprof.timer.kernel_time import time_round_kernels

COLS = 4096
ROUNDS = 16
MIB = 1 << 20


@triton.jit
def row_sum(x_ptr, out_ptr, COLS: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, COLS)
    x = tl.load(x_ptr + row * COLS + offs).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


def make_sets(mib: int, count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    rows = mib * MIB // (2 * COLS)
    return [
        (torch.randn(rows, COLS, device="cuda", dtype=torch.bfloat16), torch.empty(rows, device="cuda"))
        for _ in range(count)
    ]


def call(buf: tuple[torch.Tensor, torch.Tensor], work: str = "rowsum") -> None:
    x, out = buf
    if work == "rowsum":
        row_sum[(x.shape[0],)](x, out, COLS=COLS, num_warps=4)
        return
    out_x = out_like(x)
    out_x.copy_(x)
    if work == "copy+spin":
        torch.cuda._sleep(1)


_COPY_OUT: dict[int, torch.Tensor] = {}


def out_like(x: torch.Tensor) -> torch.Tensor:
    """One destination per source, kept alive for the graphs that write it."""
    if x.data_ptr() not in _COPY_OUT:
        _COPY_OUT[x.data_ptr()] = torch.empty_like(x)
    return _COPY_OUT[x.data_ptr()]


def capture(fn) -> torch.cuda.CUDAGraph:
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        fn()
    g.replay()
    torch.cuda.synchronize()
    return g


def time_events(graphs: list[torch.cuda.CUDAGraph], flush: torch.Tensor, samples: int, per: int) -> list[float]:
    pairs = []
    for _ in range(samples):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush.zero_()
        start.record()
        for g in graphs:
            g.replay()
        stop.record()
        pairs.append((start, stop))
    torch.cuda.synchronize()
    return [a.elapsed_time(b) * 1e6 / per for a, b in pairs]


def aa_run(mib: int, timer: str, flush: torch.Tensor, samples: int, seed: int, legs: int, work: str) -> list[dict]:
    """One repetition: fresh captures, 16 rounds + burn-in, the legs interleaved in a random order;
    one row per leg after the first (its A/A against leg 0)."""
    rng = random.Random(seed)
    _COPY_OUT.clear()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    k_calls = max(4, math.ceil(3 * l2 / (mib * MIB))) if timer == "events-K" else 1
    sets = make_sets(mib, max(4, k_calls))
    names = list(range(legs))
    if timer == "events-K":
        graphs = {leg: [capture(lambda: [call(b, work) for b in sets[:k_calls]])] for leg in names}
    else:
        graphs = {leg: [capture(lambda b=b: call(b, work)) for b in sets] for leg in names}
        if timer == "events-1-same":
            graphs = {leg: graphs[0] for leg in names}
    t: dict[int, list[float]] = {leg: [] for leg in names}
    for r in range(ROUNDS + 1):
        order = names[:]
        rng.shuffle(order)
        k = r % len(graphs[0])
        if timer == "cupti-1":
            times = time_round_kernels({leg: graphs[leg][k].replay for leg in order}, flush.zero_, order, samples)
        else:
            times = {leg: time_events(graphs[leg][k : k + 1], flush, samples, k_calls) for leg in order}
        if r > 0:
            for leg in names:
                t[leg].append(float(sps.trim_mean(times[leg], 0.2)))
    rows = []
    for leg in names[1:]:
        e = S.estimate(np.log(np.array(t[leg]) / np.array(t[0])))
        rows.append(
            dict(
                mib=mib,
                timer=timer,
                work=work,
                seed=seed,
                leg=leg,
                k_calls=k_calls,
                time_us=float(np.median(t[0])) / 1e3,
                effect_pct=e.effect_pct,
                ci_low_pct=e.ci_low_pct,
                ci_high_pct=e.ci_high_pct,
                holds_zero=bool(e.low <= 0 <= e.high),
            )
        )
    return rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--mib", type=int, nargs="+", default=[8, 32, 512])
    p.add_argument("--timers", nargs="+", default=["events-1", "events-1-same", "events-K", "cupti-1"])
    p.add_argument("--legs", type=int, default=2)
    p.add_argument("--work", default="rowsum", choices=["rowsum", "copy", "copy+spin"])
    a = p.parse_args()
    flush = torch.empty(
        max(512 * MIB, 2 * torch.cuda.get_device_properties(0).L2_cache_size), dtype=torch.uint8, device="cuda"
    )
    rows = []
    t0 = time.time()
    for mib in a.mib:
        for seed in range(a.runs):
            for timer in a.timers:
                samples = 100 if mib < 128 else 20
                for r in aa_run(mib, timer, flush, samples, seed, a.legs, a.work):
                    rows.append(r)
                    print(
                        f"{mib:4d} MiB {a.work} {timer:14s} seed {seed} leg {r['leg']}: {r['time_us']:8.2f} us  "
                        f"A/A {r['effect_pct']:+.3f}% [{r['ci_low_pct']:+.3f}, {r['ci_high_pct']:+.3f}]",
                        flush=True,
                    )
                torch.cuda.empty_cache()
    summary = []
    for mib in a.mib:
        for timer in a.timers:
            for leg in range(1, a.legs):
                sub = [r for r in rows if r["mib"] == mib and r["timer"] == timer and r["leg"] == leg]
                summary.append(
                    dict(
                        mib=mib,
                        timer=timer,
                        work=a.work,
                        leg=leg,
                        runs=len(sub),
                        holds_zero=sum(r["holds_zero"] for r in sub),
                        mean_effect_pct=float(np.mean([r["effect_pct"] for r in sub])),
                        mean_abs_effect_pct=float(np.mean([abs(r["effect_pct"]) for r in sub])),
                        mean_width_pct=float(np.mean([r["ci_high_pct"] - r["ci_low_pct"] for r in sub])),
                        time_us=float(np.median([r["time_us"] for r in sub])),
                    )
                )
                print(summary[-1], flush=True)
    a.out.write_text(
        json.dumps(
            dict(
                rows=rows,
                summary=summary,
                seconds=time.time() - t0,
                torch=torch.__version__,
                triton=triton.__version__,
                gpu=torch.cuda.get_device_name(),
            ),
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
