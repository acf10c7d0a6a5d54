"""Does a captured graph carry its own time offset, and what decides it?

kprof's A/A copies of small kernels came out 0.2–0.5% apart with a sign fixed per copy across
seeds. This script captures G graphs of the same call on the same buffers through kprof's own
timer (``CudaEventTimer`` in kernel time: CUPTI activity records, cold L2) and measures each
graph's mean time over interleaved rounds, in several capture regimes:

  first       G graphs captured in order
  again       all dropped, recaptured in the same order (does the offset follow the position?)
  reversed    recaptured in reverse order (graph g is the (G-1-g)th capture)
  streams     recaptured each on a fresh capture stream
  padded      recaptured with a random-size allocation held before each capture
  one-graph   one graph replayed as all G items (the noise floor: no capture differs)

For each regime it prints the spread of the per-graph means (SD, max − min, in % of the mean) next
to the standard error of one graph's mean, and the correlation of the per-graph offsets with the
first regime's, by item.

Usage (GPU): python benchmarks/capture_offsets.py OUT.json [--work copy|rowsum] [--mib 8]
             [--graphs 12] [--rounds 12] [--samples 40]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import triton
from small_kernel_timers import COLS, row_sum  # the same Triton row sum (run from benchmarks/)

from kprof.timer.cuda import CudaEventTimer

MIB = 1 << 20


def make_call(work: str, mib: int) -> Callable[[], None]:
    x = torch.randn(mib * MIB // 2, device="cuda", dtype=torch.bfloat16)
    if work == "copy":
        y = torch.empty_like(x)
        return lambda: y.copy_(x)
    rows = x.numel() // COLS
    out = torch.empty(rows, device="cuda")
    return lambda: row_sum[(rows,)](x, out, COLS=COLS, num_warps=4)


def capture_all(timer: CudaEventTimer, fn: Callable[[], None], order: list[int], regime: str, keep: list) -> None:
    timer.graphs.clear()
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    for g in order:
        if regime == "streams":
            timer.stream = torch.cuda.Stream()
        if regime == "padded":
            pad = random.randint(1, 64) * MIB + random.randint(0, 255) * 4096
            keep.append(torch.empty(pad, dtype=torch.uint8, device="cuda"))
        if regime == "one-graph" and timer.graphs:
            timer.graphs[g] = next(iter(timer.graphs.values()))
            continue
        timer.prepare(g, fn)


def per_graph_means(timer: CudaEventTimer, graphs: int, rounds: int, samples: int, rng: random.Random) -> np.ndarray:
    """Mean kernel time of each item over ``rounds`` rounds in a random order (a burn-in round first)."""
    sums = np.zeros(graphs)
    counts = np.zeros(graphs)
    sq = np.zeros(graphs)
    for r in range(rounds + 1):
        order = list(range(graphs))
        rng.shuffle(order)
        times = timer.time_round(order, samples)
        if r == 0:
            continue
        for g in order:
            t = np.asarray(times[g])
            sums[g] += t.sum()
            sq[g] += (t * t).sum()
            counts[g] += len(t)
    mean = sums / counts
    sd = np.sqrt(np.maximum(sq / counts - mean**2, 0))
    return np.stack([mean, sd / np.sqrt(counts)])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--work", default="copy", choices=["copy", "rowsum"])
    p.add_argument("--mib", type=int, default=8)
    p.add_argument("--graphs", type=int, default=12)
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--samples", type=int, default=40)
    a = p.parse_args()
    random.seed(0)
    rng = random.Random(1)
    timer = CudaEventTimer()
    timer.kernel_time = True
    fn = make_call(a.work, a.mib)
    G = a.graphs
    regimes = [
        ("first", list(range(G))),
        ("again", list(range(G))),
        ("reversed", list(reversed(range(G)))),
        ("streams", list(range(G))),
        ("padded", list(range(G))),
        ("one-graph", list(range(G))),
        ("first-repeat", list(range(G))),
    ]
    out = dict(work=a.work, mib=a.mib, graphs=G, rounds=a.rounds, samples=a.samples, regimes={})
    t0 = time.time()
    first = None
    keep: list[torch.Tensor] = []
    for name, order in regimes:
        capture_all(timer, fn, order, name, keep)
        mean, se = per_graph_means(timer, G, a.rounds, a.samples, rng)
        off = 100 * (mean / mean.mean() - 1)
        if first is None:
            first = off
        corr = float(np.corrcoef(first, off)[0, 1]) if name != "first" else 1.0
        row = dict(
            mean_ns=mean.tolist(),
            se_ns=se.tolist(),
            offset_pct=off.tolist(),
            spread_sd_pct=float(off.std(ddof=1)),
            spread_range_pct=float(off.max() - off.min()),
            se_pct=float(100 * se.mean() / mean.mean()),
            corr_with_first=corr,
        )
        out["regimes"][name] = row
        print(
            f"{a.work} {a.mib} MiB {name:12s} mean {mean.mean():8.1f} ns  offsets SD {row['spread_sd_pct']:.3f}% "
            f"range {row['spread_range_pct']:.3f}%  (SE of one graph {row['se_pct']:.3f}%)  "
            f"corr with first {corr:+.2f}  "
            f"offsets {np.round(off, 2).tolist()}",
            flush=True,
        )
    gpu = torch.cuda.get_device_name()
    out.update(seconds=time.time() - t0, torch=torch.__version__, triton=triton.__version__, gpu=gpu)
    a.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
