"""The bundled copy workload with a spin planted after every call of one case: the "head" of
issue 54's check that compare's CI gate fails a real 2% regression on the GPU
(benchmarks/gate_fresh_runs.sh), against fresh runs of the bundled copy itself as the base.

In the case named by ``KPROF_PLANT_CASE`` every call ends with ``torch.cuda._sleep`` of
``KPROF_PLANT_CYCLES`` cycles; every other case is the bundled copy, unchanged.

    python benchmarks/gate_plant.py size 256MiB 2     # the cycles for a 2% plant on this GPU
    KPROF_PLANT_CASE=256MiB KPROF_PLANT_CYCLES=N kprof run benchmarks/gate_plant.py --preset pr
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kprof.timer.spins import gpu_sleep, size_spins, sm_clock_ghz, with_spin
from kprof.workload import Case
from kprof_kernels.copy.workload import Copy, State


@dataclass
class PlantedState(State):
    cycles: int | None = None  # None: no spin (a case not planted)


class PlantedCopy(Copy):
    def setup(self, case: Case, device: str, dtype: str, seed: int) -> PlantedState:
        state = super().setup(case, device, dtype, seed)
        planted = case.name == os.environ.get("KPROF_PLANT_CASE")
        return PlantedState(state.src, state.dst, int(os.environ.get("KPROF_PLANT_CYCLES", "0")) if planted else None)

    def launch(self, state: PlantedState, features: frozenset[str], params: Mapping[str, Any]) -> Callable[[], None]:
        call = super().launch(state, features, params)
        return call if state.cycles is None else with_spin(call, gpu_sleep(state.cycles))


WORKLOAD = PlantedCopy()


def size(case_name: str, pct: float) -> int:
    """Cycles whose spin, appended to the case's call, adds ``pct`` percent to it: the call alone
    and with a spin of no length timed by kprof's CUDA event timer (graphs, cold L2, fresh captures
    every round), the rest of the target from a ladder of spins fitted as ``kprof calibrate`` does."""
    import numpy as np

    from kprof.timer.cuda import CudaEventTimer

    case = next(c for c in WORKLOAD.presets["pr"] if c.name == case_name)
    timer = CudaEventTimer("cuda")
    state = Copy.setup(WORKLOAD, case, "cuda", "bfloat16", 0)
    call = Copy.launch(WORKLOAD, state, frozenset(), {})
    items = ["call", "call + spin(0)"]
    timer.prepare(items[0], call)
    timer.prepare(items[1], with_spin(call, gpu_sleep(0)))
    times: dict[str, list[float]] = {item: [] for item in items}
    for _ in range(12):
        timer.recapture(items)
        for item, values in timer.time_round(items, 20).items():
            times[item] += values
    call_ns, zero_ns = (float(np.median(times[item])) for item in items)
    rest = pct / 100.0 * call_ns - (zero_ns - call_ns)
    sized = size_spins(timer, {pct: max(rest, 0.0)}, sm_clock_ghz("cuda"), 0)
    cycles = sized["planted_cycles"][f"{pct:g}"]
    print(
        f"{case_name}: call {call_ns:.0f} ns, with a spin of no length {zero_ns:.0f} ns; {pct:g}% = "
        f"{pct / 100.0 * call_ns:.0f} ns: {cycles} cycles for the {rest:.0f} ns beyond it; ladder {sized}",
        file=sys.stderr,
    )
    return cycles


if __name__ == "__main__":
    print(size(sys.argv[2], float(sys.argv[3])))
