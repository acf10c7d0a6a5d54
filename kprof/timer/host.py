"""Host-clock timing for machines without a GPU (the Triton interpreter path).

These numbers measure the interpreter on the CPU. They exist so the whole pipeline can be
developed and tested anywhere; they say nothing about GPU speed, and every output says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from kprof.timer.protocol import Item

HOST_LABEL = "host-clock (CPU, Triton interpreter: not device time)"
PYTHON_LABEL = "host-clock (CPU, plain Python and PyTorch, no Triton kernel: not device time)"


class HostTimer:
    label = HOST_LABEL
    kernel_time = False  # device timing only

    def __init__(self) -> None:
        self._fns: dict[Item, Callable[[], None]] = {}

    def prepare(self, item: Item, fn: Callable[[], None]) -> None:
        self._fns[item] = fn

    def recapture(self, items: Sequence[Item]) -> None:
        """Nothing is captured on the host: every call is already fresh."""

    def replay(self, item: Item) -> None:
        self._fns[item]()

    def time_round(self, items: Sequence[Item], samples: int) -> dict[Item, list[float]]:
        out: dict[Item, list[float]] = {}
        clock = time.perf_counter_ns
        for item in items:
            fn = self._fns[item]
            values = out.setdefault(item, [])
            for _ in range(samples):
                t0 = clock()
                fn()
                values.append(float(clock() - t0))
        return out

    def round_conditions(self) -> dict[str, Any]:
        return {}

    def describe(self) -> dict[str, Any]:
        return {"timer": self.label, "flush": "none (host clock)"}

    def measure_device(self) -> dict[str, Any]:
        return {}
