"""The case protocol written once (kprof.engine.case): the round loop driven through a scripted
runner (what it stores, when it redoes a round, what a resume skips), and a stage added in one
place running in all three runners — legs in a worker process, legs in revision hosts, whole
programs. The runners' own timing is exercised end to end by the pipeline tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import kprof.engine.case as case_module
from conftest import ROOT
from kprof.engine.case import MAX_ATTEMPTS, CaseRun, Prepared, run_protocol, samples_of, time_rounds
from kprof.events import Event
from kprof.run_model import CaseRecord, Leg, Protocol, Role, Run, Sample, WorkloadSubject
from kprof.store.run_folder import RunFolder

LEGS = ["base", "fast"]


@dataclass
class ScriptedRunner:
    """Times each leg at a fixed value; the SM clock reads what the script says, attempt by attempt."""

    clocks: list[float]
    label: str = "stand-in timer"
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def prepare(self) -> Prepared:
        self.calls.append(("prepare", None))
        return Prepared(legs=2, samples=3)

    def item(self, i: int, r: int) -> tuple[int, int]:
        return i, r % 4

    def start_round(self, items: list[tuple[int, int]], r: int) -> None:
        self.calls.append(("start", r))

    def time_round(self, items: list[tuple[int, int]], samples: int) -> dict[tuple[int, int], list[Sample]]:
        self.calls.append(("time", list(items)))
        return {item: samples_of("c", [1000.0 * (item[0] + 1)] * samples) for item in items}

    def conditions(self) -> dict[str, Any]:
        return {"sm_clock_mhz": self.clocks.pop(0)}

    def race(self, items: list[tuple[int, int]], r: int) -> list[dict[str, Any]]:
        return []

    def leg_name(self, item: tuple[int, int]) -> str:
        return LEGS[item[0]]

    def finish(self, rounds: dict[int, list[tuple[int, int]]]) -> None:
        self.calls.append(("finish", sorted(rounds)))


def _folder(tmp_path: Path) -> RunFolder:
    legs = [
        Leg("base", roles=frozenset({Role.BASELINE})),
        Leg("fast", frozenset({"f"}), roles=frozenset({Role.ADD_ONE})),
    ]
    folder = RunFolder(tmp_path / "run")
    folder.create(Run(WorkloadSubject(spec="w", name="w"), legs, [CaseRecord("c")], Protocol(rounds=6)))
    return folder


def _case(folder: RunFolder, runner: ScriptedRunner, rounds: int, on_event: Callable[[Event], None]) -> CaseRun:
    protocol = Protocol(rounds=rounds - 1)  # one process: its burn-in and rounds - 1 timed rounds
    return CaseRun(folder, 0, "c", protocol, 0, runner, on_event)


def _timed(folder: RunFolder, runner: ScriptedRunner, rounds: int, on_event: Callable[[Event], None]) -> None:
    run_protocol(_case(folder, runner, rounds, on_event))


def test_rounds_are_stored_in_order_with_their_slots_sets_and_burn_in(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    said: list[str] = []
    _timed(folder, ScriptedRunner([1980.0] * 3), 3, lambda done: said.append(done.text()))
    samples = folder.read("samples")
    assert said == ["c: round 1/3 (burn-in)", "c: round 2/3", "c: round 3/3"]  # as the progress bar counts
    assert len(samples) == 3 * 2 * 3  # rounds × legs × samples
    assert set(samples.loc[samples["round"] == 1, "buffer_set"]) == {1}
    assert samples.groupby("round")["slot"].nunique().eq(2).all()  # both legs, in the round's order
    assert set(samples.loc[samples["round"] == 0, "burn_in"]) == {True}
    assert not samples.loc[samples["round"] > 0, "burn_in"].any()
    assert set(samples.groupby("leg")["time_ns"].first()) == {1000.0, 2000.0}
    assert set(samples["timer"]) == {"stand-in timer"}


def test_a_round_whose_clock_sagged_is_timed_again(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    legs = ScriptedRunner([1980.0, 1980.0, 1000.0, 1975.0, 1990.0])  # round 2's first attempt sagged
    _timed(folder, legs, 4, lambda done: None)
    rounds = folder.read("rounds").set_index("round")
    assert rounds.loc[2, "attempt"] == 1 and rounds.loc[2, "sm_clock_mhz"] == 1975.0
    assert rounds.drop(index=2)["attempt"].eq(0).all()
    assert [c for c in legs.calls if c[0] == "start"] == [("start", r) for r in range(4)]  # once a round
    assert sum(c[0] == "time" for c in legs.calls) == 5


def test_a_round_that_never_recovers_is_kept_after_the_last_attempt(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    legs = ScriptedRunner([1980.0, 1980.0] + [900.0] * MAX_ATTEMPTS)
    _timed(folder, legs, 3, lambda done: None)
    assert folder.read("rounds").set_index("round").loc[2, "attempt"] == MAX_ATTEMPTS - 1


def test_a_resume_times_only_the_rounds_not_on_disk(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    first = _case(folder, ScriptedRunner([1980.0] * 2), 4, lambda done: None)
    case_module.prepare(first)
    first.plan = {r: items for r, items in first.plan.items() if r < 2}  # stopped after round 1
    time_rounds(first)
    again = ScriptedRunner([1980.0] * 2)
    said: list[int] = []
    _timed(folder, again, 4, lambda done: said.append(done.round))
    assert said == [2, 3]
    assert sorted(folder.read("samples")["round"].unique()) == [0, 1, 2, 3]


def test_the_stages_run_in_order_once_each(tmp_path: Path) -> None:
    runner = ScriptedRunner([1980.0] * 3)
    _timed(_folder(tmp_path), runner, 3, lambda done: None)
    kinds = [kind for kind, _ in runner.calls]
    assert kinds[0] == "prepare" and kinds[-1] == "finish" and kinds.count("start") == 3
    assert runner.calls[-1] == ("finish", [0, 1, 2])


class Seen(Exception):
    """Stops a case right after the added stage saw it (its rounds are not the point here)."""


@pytest.mark.slow  # 5–12 s on the 2-core machine: CI's slow step runs it
def test_a_stage_added_in_one_place_runs_in_every_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One stage appended after preparation, in kprof.engine.case alone, is run by a workload's
    worker, by a revision run's hosts and by a whole program's runner, each with what its
    preparation found."""
    from test_revisions import _commit, workload_repo

    from kprof.commands.run import start
    from kprof.engine.hosted import run_hosted_case
    from kprof.engine.lifeline import Workers
    from kprof.engine.program import ProgramRequest, execute_program
    from kprof.engine.request import RunRequest, create_run
    from kprof.engine.worker import run_case

    seen: list[tuple[str, int]] = []

    def looked(case: CaseRun) -> None:
        assert case.prepared is not None
        seen.append((type(case.runner).__name__, case.prepared.legs))
        raise Seen

    monkeypatch.setattr(case_module, "STAGES", [case_module.prepare, looked, *case_module.STAGES[1:]])

    workload = create_run(tmp_path / "local", RunRequest(workload="copy", preset="smoke", device="cpu", rounds=6))
    with pytest.raises(Seen):
        run_case(workload.root, 0, set())

    repo = workload_repo(tmp_path, monkeypatch)
    _commit(repo, "double the work", "REPEATS = 4", "REPEATS = 8")
    request = RunRequest(workload=str(repo / "wl.py"), revs=["HEAD~1", "HEAD"], repo=str(repo), device="cpu", rounds=6)
    revisions = create_run(tmp_path / "hosted", request)
    with pytest.raises(Seen):
        run_hosted_case(revisions, 0, lambda event: None, None, Workers())

    monkeypatch.setenv("PATH", f"{ROOT / 'tests' / 'fake_bin'}{os.pathsep}{os.environ['PATH']}")
    legs = ["a", "b:X=1"]
    program = start(
        ProgramRequest(legs=legs, program=[sys.executable, "-c", "pass"], collector="rocprofv3"), tmp_path / "p"
    )
    with pytest.raises(Seen):
        execute_program(program, lambda event: None)

    assert seen[0][0] == "LocalRunner" and seen[0][1] >= 2  # the baseline and its A/A copy at least
    assert seen[1] == ("HostedRunner", 3)  # two revisions and the baseline's A/A copy
    assert seen[2] == ("ProgramRunner", 3)  # both legs and the baseline's A/A copy
