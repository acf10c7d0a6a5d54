"""Fresh captures every round (``--captures per-round``) and spins planted by a measured ladder.

On an H200 two captures of the same 6 µs copy differ by 0.3% (SD) of their own, fixed for the
graph's life: captured once, that offset is a bias of the leg (A/A copies excluded 0 in half the
comparisons); captured afresh each round it is noise between rounds, inside the interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from fake_runs import as_version_3

import kprof.engine.context as context_module
from kprof.engine.request import RunRequest, create_run
from kprof.engine.worker import capture_order, run_case
from kprof.errors import KprofInputError
from kprof.report.run_report import spin_ladder_note
from kprof.run_model import Run
from kprof.timer import Item
from kprof.timer.host import HostTimer
from kprof.timer.spins import LADDER_ROUNDS, cycles_for, ladder, ladder_fit, measure_ladder, size_spins


class RecordingTimer(HostTimer):
    """The host timer, noting every recapture it is asked for."""

    calls: list[list[Item]] = []

    def recapture(self, items: Sequence[Item]) -> None:
        RecordingTimer.calls.append(list(items))


@pytest.mark.parametrize("captures", ["per-round", "once"])
def test_each_round_recaptures_its_items_in_a_seeded_order(tmp_path: Path, monkeypatch, captures: str) -> None:
    RecordingTimer.calls = []
    monkeypatch.setattr(context_module, "make_timer", lambda device, graphs=True: RecordingTimer())
    req = RunRequest(workload="copy", preset="smoke", rounds=6, samples=1, device="cpu", aa_copies=2, captures=captures)
    folder = create_run(tmp_path / "run", req)
    run_case(folder.root, 0, set())
    if captures == "once":
        assert RecordingTimer.calls == []
        return
    assert len(RecordingTimer.calls) == 7  # the burn-in round and six timed rounds
    legs = {li for call in RecordingTimer.calls for li, _ in call}
    assert legs == {0, 1, 2}  # the baseline and both A/A copies, every round
    for r, call in enumerate(RecordingTimer.calls):
        assert {k for _, k in call} == {r % 4}  # the round's buffer set
    assert len({tuple(li for li, _ in call) for call in RecordingTimer.calls}) > 1  # the order changes


def test_capture_order_is_a_seeded_permutation_that_moves_legs() -> None:
    items = [(li, 0) for li in range(8)]
    orders = [capture_order(items, seed=3, case_index=0, r=r) for r in range(16)]
    assert all(sorted(o) == items for o in orders)
    assert orders == [capture_order(items, seed=3, case_index=0, r=r) for r in range(16)]
    first = [o[0] for o in orders]
    assert len(set(first)) >= 4  # the first capture is not always the same leg


def test_captures_is_recorded_and_old_folders_read_as_once(tmp_path: Path) -> None:
    folder = create_run(tmp_path / "run", RunRequest(workload="copy", preset="smoke", device="cpu", captures="once"))
    assert folder.read_run().protocol.captures == "once"
    record = folder.read_run().record()
    assert record["protocol"]["captures"] == "once"
    record = as_version_3(record)
    del record["captures"]  # a folder from before the choice: its kprof captured once
    assert Run.from_record(record).protocol.captures == "once"
    fresh = create_run(tmp_path / "run2", RunRequest(workload="copy", preset="smoke", device="cpu"))
    assert fresh.read_run().protocol.captures == "per-round"


class LadderTimer:
    """Stand-in GPU timer: a spin of c cycles takes 650 ns, plus half a ns per cycle above 128."""

    kernel_time = True

    def __init__(self) -> None:
        self.fns: dict[Item, int] = {}
        self.recaptured = 0

    def prepare(self, item: Item, fn) -> None:
        self.fns[item] = item[1]

    def recapture(self, items: Sequence[Item]) -> None:
        self.recaptured += len(items)

    def time_round(self, items: Sequence[Item], samples: int) -> dict[Item, list[float]]:
        rng = np.random.default_rng(len(self.fns))
        return {i: list(650 + 0.5 * max(0, i[1] - 128) + rng.normal(0, 3, samples)) for i in items}


def test_planted_spins_are_sized_on_the_measured_ladder_not_the_clock() -> None:
    rungs = ladder(2 * 136 * 1.98)
    timer = LadderTimer()
    added = measure_ladder(timer, rungs, seed=0)  # type: ignore[arg-type]
    assert timer.recaptured == len(rungs) * LADDER_ROUNDS  # every rung on fresh graphs every round
    assert added[0] == 0 and added[max(i for i, c in enumerate(rungs) if c <= 128)] == pytest.approx(0, abs=3)
    fit = ladder_fit(rungs, added)
    assert fit == pytest.approx((128, 0.5), rel=0.1)
    for target in (34.0, 68.0, 136.0, 5000.0):  # 0.5/1/2% of 6.8 µs, and past the top rung
        cycles = cycles_for(target, fit)
        assert 0.5 * max(0, cycles - 128) == pytest.approx(target, rel=0.1)
    # At the nominal clock (1.98 cycles per ns) these spins would have added 0 / 5 / 70 ns.
    assert cycles_for(0.0, fit) == 0


def test_the_ladder_is_recorded_and_named_in_the_calibration_report() -> None:
    sized = size_spins(LadderTimer(), {0.5: 34.0, 1.0: 68.0, 0.0: 0.0}, ghz=1.98, seed=0)  # type: ignore[arg-type]
    assert set(sized["planted_cycles"]) == {"0.5", "1", "0"} and sized["planted_cycles"]["0"] == 0
    assert sized["planted_cycles"]["1"] > sized["planted_cycles"]["0.5"] > 128
    assert len(sized["cycles"]) == len(sized["added_ns"])
    note = spin_ladder_note("8MiB", sized)
    assert note.startswith("8MiB: spins sized on a ladder") and f"1% = {sized['planted_cycles']['1']:,} cycles" in note


def test_the_report_says_when_graphs_were_captured_once(tmp_path: Path) -> None:
    from dataclasses import replace

    from kprof.report.run_report import header

    run = create_run(tmp_path / "run", RunRequest(workload="copy", preset="smoke", device="cpu")).read_run()
    once = replace(run.protocol, captures="once")
    on_gpu = replace(run, placement=replace(run.placement, device="cuda"))
    assert "captured once" in header(replace(on_gpu, protocol=once))
    assert "captured once" not in header(on_gpu)  # per-round, the default
    assert "captured once" not in header(replace(run, protocol=once))  # nothing is captured on a CPU


def _synced_call() -> None:
    raise RuntimeError(
        "CUDA error: operation not permitted when stream is capturing\n"
        "Compile with TORCH_USE_CUDA_DSA to enable device-side assertions."
    )


def test_a_capture_that_fails_on_a_host_sync_is_said_in_one_line() -> None:
    """torch raises the sync's error inside the capture and another as the capture ends: the line
    names the user's call that synced (not torch's or kprof's frames) and the two ways out."""
    from kprof.timer.cuda import capture_refusal

    try:
        try:
            _synced_call()
        except RuntimeError:
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture") from None
    except RuntimeError as e:
        line = capture_refusal(e)
    assert line is not None and "\n" not in line
    assert line.startswith("cannot be captured in a CUDA graph: the call synchronises with the host (")
    assert "test_captures.py" in line and "_synced_call" not in line.split("(", 1)[0]
    assert "--captures none" in line
    assert capture_refusal(RuntimeError("CUDA out of memory")) is None  # any other error is not this one


def test_eager_calls_are_a_capture_mode(tmp_path: Path) -> None:
    """--captures none: the timer calls each leg instead of replaying a graph (CPU: the option is
    checked and recorded; the GPU test times it)."""
    from kprof.engine.options import RunRequest, check_options

    check_options(RunRequest(workload="paged_decode", captures="none"))
    with pytest.raises(KprofInputError, match="--captures: must be one of per-round, once, none"):
        check_options(RunRequest(workload="paged_decode", captures="never"))
    with pytest.raises(KprofInputError, match="kernel-time reads each graph replay's activity records"):
        check_options(RunRequest(workload="paged_decode", captures="none", timer_mode="kernel-time"))
    from kprof.timer.kernel_time import wants_kernel_time

    below = {"self_checks": {"event_overhead": {"kernel_time_below_ns": 1e6}}}
    assert wants_kernel_time("auto", 10e3, below, "cuda") and not wants_kernel_time("auto", 10e3, below, "cuda", False)


def test_a_compile_error_says_what_went_wrong_not_only_where() -> None:
    """Triton's CompilationError starts with "at 147:38:" and the source; its cause says what."""
    from kprof.engine.gate import launch_failure

    try:
        try:
            raise NameError("Cannot access global variable LOG2_E from within @jit'ed function.")
        except NameError as cause:
            raise RuntimeError("at 147:38:\n    e = tl.exp2(x * LOG2_E)\n                    ^") from cause
    except RuntimeError as e:
        said = launch_failure(e)
    assert (
        said == "launch: RuntimeError: at 147:38: NameError: Cannot access global variable LOG2_E "
        "from within @jit'ed function."
    )
    assert (
        launch_failure(RuntimeError("out of resource: shared memory"))
        == "launch: RuntimeError: out of resource: shared memory"
    )
