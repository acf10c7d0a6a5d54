"""A whole program for `kprof run --leg … -- python benchmarks/program_legs.py`: copies a 256 MiB
buffer a number of times; ``WORK`` scales the number of bytes copied, so a leg with ``WORK=1.1``
does 10% more work and should come out about 9.1% slower (100·(1/1.1 − 1)).

    kprof run --leg base --leg more:WORK=1.1 --collector torch --rounds 8 -- python benchmarks/program_legs.py
"""

from __future__ import annotations

import os

import torch

STEPS = 20
ELEMENTS = 128 << 20  # bf16: 256 MiB per buffer


def main() -> None:
    work = float(os.environ.get("WORK", "1.0"))
    n = int(ELEMENTS * work)
    src = torch.randn(n, device="cuda").to(torch.bfloat16)
    dst = torch.empty_like(src)
    for _ in range(STEPS):
        dst.copy_(src)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
