"""Which delay kernel plants a small, steady delay? A one-thread spin (``torch.cuda._sleep``, what
``kprof calibrate`` plants) against a busy loop run by one CTA per SM (a Triton kernel), each timed
alone and after an 8 MiB copy in one graph, through kprof's own timer (kernel time, graphs
recaptured every round, cold L2).

On the H200 a one-thread spin's kernel time steps between levels about 96 ns apart for tens of
samples (docs/benchmarks.md, session 9), so a spin timed in one set of rounds and in another differ
by tens of ns — most of a 1% plant at 6 µs. For each delay this prints the added time against its
zero-length version (median of per-round differences), the SD of those per-round differences (what
decides how well a plant can be sized), and the share of samples more than 48 ns above the item's
median (the level steps).

Usage (GPU): python benchmarks/planted_delays.py OUT.json [--rounds 16] [--samples 40]
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

from kprof.timer.cuda import CudaEventTimer

SPIN_CYCLES = (0, 150, 300, 600)
BUSY_ITERS = (0, 16, 32, 64)


@triton.jit
def busy_kernel(out_ptr, n_iter, BLOCK: tl.constexpr):
    """A dependent multiply-add chain per thread: time grows with ``n_iter`` at the SM clock."""
    pid = tl.program_id(0)
    x = tl.full([BLOCK], 1.0, tl.float32) + pid
    for _ in range(n_iter):
        x = x * 0.999999 + 1e-6
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), x)


def delays(sms: int) -> dict[str, Callable[[], None]]:
    """Each delay by name; the busy loops' closures hold their output buffer while graphs replay."""
    scratch = torch.empty(sms * 128, device="cuda")
    out: dict[str, Callable[[], None]] = {}
    for c in SPIN_CYCLES:
        out[f"spin {c}"] = lambda c=c: torch.cuda._sleep(c)
    for n in BUSY_ITERS:
        out[f"busy {n}"] = lambda n=n: busy_kernel[(sms,)](scratch, n, BLOCK=128, num_warps=4)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--rounds", type=int, default=16)
    p.add_argument("--samples", type=int, default=40)
    a = p.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.randn(4 << 20, device="cuda", dtype=torch.bfloat16)  # 8 MiB
    y = torch.empty_like(x)
    kinds = delays(sms)
    items: dict[str, Callable[[], None]] = {}
    for name, delay in kinds.items():
        items[f"{name} alone"] = delay
        items[f"copy + {name}"] = lambda d=delay: (y.copy_(x), d())
    timer = CudaEventTimer()
    timer.kernel_time = True
    for name, fn in items.items():
        timer.prepare(name, fn)
    rng = random.Random(0)
    per_round: dict[str, list[float]] = {k: [] for k in items}
    samples: dict[str, list[float]] = {k: [] for k in items}
    for r in range(a.rounds + 1):
        order = list(items)
        rng.shuffle(order)
        timer.recapture(order)
        rng.shuffle(order)
        times = timer.time_round(order, a.samples)
        if r == 0:
            continue
        for k in order:
            per_round[k].append(float(np.median(times[k])))
            samples[k] += times[k]
    rows = {}
    for context in ("alone", "copy"):
        for family, zero in (("spin", "spin 0"), ("busy", "busy 0")):
            ref = f"{zero} alone" if context == "alone" else f"copy + {zero}"
            for name in (k for k in kinds if k.startswith(family) and k != zero):
                key = f"{name} alone" if context == "alone" else f"copy + {name}"
                diff = np.array(per_round[key]) - np.array(per_round[ref])
                s = np.array(samples[key])
                rows[key] = dict(
                    added_ns=float(np.median(diff)),
                    round_sd_ns=float(diff.std(ddof=1)),
                    median_ns=float(np.median(s)),
                    above_48ns=float(np.mean(s > np.median(s) + 48)),
                )
                print(
                    f"{key:22s} added {rows[key]['added_ns']:7.1f} ns  per-round SD {rows[key]['round_sd_ns']:6.1f} ns"
                    f"  median {rows[key]['median_ns']:8.1f} ns  above +48 ns {rows[key]['above_48ns']:.1%}"
                )
    for ref in ("spin 0 alone", "busy 0 alone", "copy + spin 0", "copy + busy 0"):
        s = np.array(samples[ref])
        print(f"{ref:22s} median {np.median(s):8.1f} ns  above +48 ns {np.mean(s > np.median(s) + 48):.1%}")
    first = {k: samples[k][: a.samples] for k in ("spin 0 alone", "busy 0 alone")}
    a.out.write_text(json.dumps(dict(rows=rows, per_round=per_round, first_round=first), indent=1))


if __name__ == "__main__":
    main()
