"""Occupancy by the CUDA rules, checked on the H200 kernels whose compile metadata kprof stored."""

from __future__ import annotations

import pytest

from kprof.compile_info import occupancy

H200 = dict(threads_per_sm=2048, registers_per_sm=65536, shared_per_sm=233472)


@pytest.mark.parametrize(
    ("warps", "registers", "shared", "expected"),
    [
        (4, 214, 56576, 2),  # mla stage 1, every lever: 214 → 216 regs/thread, 9 warps of registers
        (4, 188, 83968, 2),  # mla stage 1, baseline: registers allow 2, shared memory 2
        (1, 255, 64, 8),  # gdn recurrent, BV 32: 8 one-warp programs of 256 registers
        (1, 80, 16, 25),  # gdn recurrent, BV 8: 25 programs
        (8, 40, 64, 6),  # 8 warps of 40 registers: registers, not threads (8), limit it
        (1, 16, 0, 32),  # tiny programs: the 32-blocks-per-SM cap
        (4, 32, 120_000, 1),  # shared memory limits
    ],
)
def test_occupancy_on_h200(warps: int, registers: int, shared: int, expected: int) -> None:
    assert occupancy(warps, registers, shared, **H200) == expected
