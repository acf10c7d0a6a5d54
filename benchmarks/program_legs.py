"""A whole program for kprof's whole-program legs: STEPS identical elementwise kernels over a
256 MiB buffer. The GPU busy time is STEPS times one kernel's, so a leg or revision with 44 steps
instead of 40 should come out 100·(40/44 − 1) = −9.09% (slower) per process, at the same µs per call.
FP32_STEPS more run the same kernel template on fp32 buffers (another instantiation, twice the
bytes): legs that change the mix change the busy time, not any instantiation's µs per call.

    kprof run --leg base --leg more:STEPS=44 --collector torch --rounds 8 -- python benchmarks/program_legs.py
    kprof run --leg a:FP32_STEPS=20 --leg b:STEPS=50,FP32_STEPS=10 --collector torch --rounds 8 \\
        -- python benchmarks/program_legs.py
"""

from __future__ import annotations

import os

import torch

STEPS = 40
ELEMENTS = 128 << 20  # bf16: 256 MiB per buffer


def main() -> None:
    steps_per_dtype = {
        torch.bfloat16: int(os.environ.get("STEPS", STEPS)),
        torch.float32: int(os.environ.get("FP32_STEPS", 0)),
    }
    for dtype, steps in steps_per_dtype.items():
        src = torch.empty(ELEMENTS, dtype=dtype, device="cuda")  # no kernel: only the loop is timed
        dst = torch.empty_like(src)
        for _ in range(steps):
            torch.add(src, 1.0, out=dst)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
