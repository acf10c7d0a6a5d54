"""Every lever of every bundled workload changes what is launched (a kernel, a grid, a constexpr or
a launch option) at some case: a lever whose name is mistyped in ``launch`` changes nothing and
fails here, and the engine's gate flags such a leg in a real run."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import DEVICE
from kprof.engine.gate import silent_no_ops
from kprof.launches import recording
from kprof.run_model import Leg, Role
from kprof.workload import Case, Workload, bundled_names, load_workload
from kprof_kernels.mla_decode.workload import WORKLOAD as MLA
from kprof_kernels.mla_decode.workload import _case as mla_case

# Cases where a lever that is a no-op at smoke shapes takes effect: wave_fit_splits raises the split
# count only when the last wave of stage-1 programs is short (24 requests × 12 heads: 10 → 11 splits).
EXTRA_CASES: dict[str, tuple[Case, ...]] = {"mla_decode": (mla_case("b24-h12-c640", 24, 12, 640, 320, 8),)}


def launches(workload: Workload, state: object, features: frozenset[str]) -> list:
    """What a call launches (recorded dry: nothing runs). Tensors are compared by address too, so
    both sides of a comparison use the same buffer set."""
    with recording(dry=True) as seen:
        workload.launch(state, features, {})()
    return seen


def cases_where_it_matters(workload: Workload, lever: str) -> list[str]:
    found = []
    for case in (*workload.cases("smoke"), *EXTRA_CASES.get(workload.name, ())):
        state = workload.setup(case, DEVICE, "float32", 0)
        if launches(workload, state, frozenset({lever})) != launches(workload, state, frozenset()):
            found.append(case.name)
    return found


LEVERS = [(name, f.name) for name in bundled_names() for f in load_workload(name).features]


@pytest.mark.parametrize(("workload", "lever"), LEVERS, ids=[f"{w}-{lv}" for w, lv in LEVERS])
def test_each_lever_changes_what_is_launched(workload: str, lever: str) -> None:
    w = load_workload(workload)
    state = w.setup(w.cases("smoke")[0], DEVICE, "float32", 0)
    assert launches(w, state, frozenset()), "the baseline launches Triton kernels"
    assert cases_where_it_matters(w, lever), f"{workload}: turning {lever} on changes no launch at any case"


class MistypedMla(type(MLA)):  # type: ignore[misc]
    """mla_decode with one feature name misspelled in launch: the lever silently does nothing."""

    def launch(self, state, features, params):  # type: ignore[no-untyped-def]
        renamed = frozenset("pipelined_load" if f == "pipelined_loads" else f for f in features)
        return super().launch(state, renamed, params)


def test_a_mistyped_feature_name_is_caught() -> None:
    assert cases_where_it_matters(MLA, "pipelined_loads")
    assert not cases_where_it_matters(MistypedMla(), "pipelined_loads")


def test_the_gate_flags_legs_that_launch_what_the_baseline_launches() -> None:
    mistyped = MistypedMla()
    state = mistyped.setup(MLA.cases("smoke")[0], DEVICE, "float32", 0)
    base = Leg("baseline", roles=frozenset({Role.BASELINE}))
    real = Leg("split_major_grid", frozenset({"split_major_grid"}), roles=frozenset({Role.ADD_ONE}))
    silent = Leg("pipelined_loads", frozenset({"pipelined_loads"}), roles=frozenset({Role.ADD_ONE}))
    swept = replace(silent, name="swept", params=(("num_splits", 2),))
    seen = {
        "baseline": launches(mistyped, state, frozenset()),
        "split_major_grid": launches(mistyped, state, real.features),
        "pipelined_loads": launches(mistyped, state, silent.features),
        "swept": launches(mistyped, state, silent.features),
    }
    assert silent_no_ops([base, real, silent, swept], seen) == ["pipelined_loads"]
