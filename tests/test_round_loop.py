"""The one round loop every run goes through (kprof.engine.rounds.timed_rounds), driven through a
stand-in transport: what it stores, when it redoes a round, and what a resume skips. The in-process
and leg-host transports are exercised end to end by the slow pipeline tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kprof.engine.rounds import MAX_ATTEMPTS, RoundPlan, timed_rounds
from kprof.run_model import CaseRecord, Leg, Protocol, Role, Run, WorkloadSubject
from kprof.store.run_folder import RunFolder

LEGS = ["base", "fast"]


@dataclass
class ScriptedLegs:
    """Times each leg at a fixed value; the SM clock reads what the script says, attempt by attempt."""

    clocks: list[float]
    label: str = "stand-in timer"
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def start_round(self, items: list[tuple[int, int]], r: int) -> None:
        self.calls.append(("start", r))

    def time_round(self, items: list[tuple[int, int]], samples: int) -> dict[tuple[int, int], list[float]]:
        self.calls.append(("time", list(items)))
        return {item: [1000.0 * (item[0] + 1)] * samples for item in items}

    def conditions(self) -> dict[str, Any]:
        return {"sm_clock_mhz": self.clocks.pop(0)}

    def race(self, items: list[tuple[int, int]], r: int) -> list[dict[str, Any]]:
        return []

    def leg_name(self, item: tuple[int, int]) -> str:
        return LEGS[item[0]]


def _folder(tmp_path: Path) -> RunFolder:
    legs = [
        Leg("base", roles=frozenset({Role.BASELINE})),
        Leg("fast", frozenset({"f"}), roles=frozenset({Role.ADD_ONE})),
    ]
    folder = RunFolder(tmp_path / "run")
    folder.create(Run(WorkloadSubject(spec="w", name="w"), legs, [CaseRecord("c")], Protocol(rounds=6)))
    return folder


def _plan(folder: RunFolder, rounds: range) -> RoundPlan:
    return RoundPlan(
        folder=folder,
        case_index=0,
        case="c",
        samples=3,
        rounds={r: [(r % 2, r % 4), (1 - r % 2, r % 4)] for r in rounds},
        last_round=rounds[-1],
        burn_in=lambda r: r == 0,
    )


def test_rounds_are_stored_in_order_with_their_slots_sets_and_burn_in(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    said: list[str] = []
    timed_rounds(_plan(folder, range(3)), ScriptedLegs([1980.0] * 3), lambda done: said.append(done.text()))
    samples = folder.read("samples")
    assert said == ["c: round 1/3 (burn-in)", "c: round 2/3", "c: round 3/3"]  # as the progress bar counts
    assert len(samples) == 3 * 2 * 3  # rounds × legs × samples
    first = samples[(samples["round"] == 1) & (samples["slot"] == 0)]
    assert set(first["leg"]) == {"fast"} and set(first["buffer_set"]) == {1}
    assert set(samples.loc[samples["round"] == 0, "burn_in"]) == {True}
    assert not samples.loc[samples["round"] > 0, "burn_in"].any()
    assert set(samples.groupby("leg")["time_ns"].first()) == {1000.0, 2000.0}
    assert set(samples["timer"]) == {"stand-in timer"}


def test_a_round_whose_clock_sagged_is_timed_again(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    legs = ScriptedLegs([1980.0, 1980.0, 1000.0, 1975.0, 1990.0])  # round 2's first attempt sagged
    timed_rounds(_plan(folder, range(4)), legs, lambda done: None)
    rounds = folder.read("rounds").set_index("round")
    assert rounds.loc[2, "attempt"] == 1 and rounds.loc[2, "sm_clock_mhz"] == 1975.0
    assert rounds.drop(index=2)["attempt"].eq(0).all()
    assert [c for c in legs.calls if c[0] == "start"] == [("start", r) for r in range(4)]  # once a round
    assert sum(c[0] == "time" for c in legs.calls) == 5


def test_a_round_that_never_recovers_is_kept_after_the_last_attempt(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    legs = ScriptedLegs([1980.0, 1980.0] + [900.0] * MAX_ATTEMPTS)
    timed_rounds(_plan(folder, range(3)), legs, lambda done: None)
    assert folder.read("rounds").set_index("round").loc[2, "attempt"] == MAX_ATTEMPTS - 1


def test_a_resume_times_only_the_rounds_not_on_disk(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    timed_rounds(_plan(folder, range(2)), ScriptedLegs([1980.0] * 2), lambda done: None)
    again = ScriptedLegs([1980.0] * 2)
    said: list[int] = []
    timed_rounds(_plan(folder, range(4)), again, lambda done: said.append(done.round))
    assert said == [2, 3]
    assert sorted(folder.read("samples")["round"].unique()) == [0, 1, 2, 3]
