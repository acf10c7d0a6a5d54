"""The protocol of one case, written once: prepare (buffers, correctness gate, timer, capture and
warm-up) → timed rounds → finish.

Timed rounds: every leg in the round's seeded balanced order (one design over all of the case's
rounds), ``samples`` cold samples each; a round whose SM clock sagged below 90% of the case's
median so far is timed again (up to 3 attempts); after each round every leg is replayed once more
and checked (a race shows as a mismatch); each round is on disk before the next starts, so a
resume times only what is missing. Each process's first round is a burn-in.

Where the legs live is a :class:`LegRunner`'s business, in three implementations: legs in one
worker process (kprof.engine.worker.LocalRunner), legs in a leg host per revision tree
(kprof.engine.hosted.HostedRunner), a whole program per leg per round
(kprof.engine.program.ProgramRunner). A stage added to :data:`STAGES` runs in all three.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd

from kprof.engine.schedule import round_orders
from kprof.events import Event, RoundDone
from kprof.run_model import Protocol as RunProtocol
from kprof.run_model import Sample
from kprof.store.run_folder import RunFolder

CLOCK_SAG = 0.9
MAX_ATTEMPTS = 3

Item = tuple[Any, int]  # (a leg's index, or a probe's name; its buffer set)


def samples_of(case: str, times: list[float]) -> list[Sample]:
    return [Sample(case, i, float(t)) for i, t in enumerate(times)]


@dataclass(frozen=True)
class Prepared:
    """What the rounds need from preparation: how many legs the balanced order is over (the legs
    that passed the gate) and how many cold samples each takes per round."""

    legs: int
    samples: int


class LegRunner(Protocol):
    """Where a case's legs run, and how each stage reaches them. An item is (leg, buffer set)."""

    label: str  # the timer's label, written into every sample row

    def prepare(self) -> Prepared:
        """Buffers, the correctness gate, the timer and its record, capture and warm-up."""

    def item(self, i: int, r: int) -> Item:
        """The i-th timed leg of round r, on the buffer set it uses there."""

    def start_round(self, items: list[Item], r: int) -> None:
        """Before round r's first attempt (fresh graphs, where legs are captured per round)."""

    def time_round(self, items: list[Item], samples: int) -> dict[Item, list[Sample]]:
        """``samples`` timings of every item, in the round's order (an item may give none)."""

    def conditions(self) -> dict[str, Any]:
        """Clock, temperature and throttle state after the round."""

    def race(self, items: list[Item], r: int) -> list[dict[str, Any]]:
        """Each item replayed once more on the round's buffers and checked: rows of the checks table."""

    def leg_name(self, item: Item) -> str: ...

    def finish(self, rounds: dict[int, list[Item]]) -> None:
        """After the last round (a profile of the timed rounds, the case's status)."""


@dataclass
class CaseRun:
    """One case (or one process's share of it) going through the stages."""

    folder: RunFolder
    case_index: int
    case: str
    protocol: RunProtocol
    seed: int
    runner: LegRunner
    on_event: Callable[[Event], None]
    rounds: range | None = None  # the rounds this process times (None: every round of the case)
    process: int | None = None  # which of the case's processes (kprof.parts); None for one host per revision
    prepared: Prepared | None = None
    plan: dict[int, list[Item]] = field(default_factory=dict)  # round → its items in timing order

    @property
    def own_rounds(self) -> range:
        return self.rounds if self.rounds is not None else range(self.protocol.total_rounds)

    def burn_in(self, r: int) -> bool:
        return r == self.own_rounds.start


def prepare(case: CaseRun) -> None:
    """The runner's preparation, then every round's items in the order one balanced design over
    all of the case's rounds gives them."""
    case.prepared = case.runner.prepare()
    orders = round_orders(case.prepared.legs, case.protocol.total_rounds, case.seed + case.case_index)
    case.plan = {r: [case.runner.item(i, r) for i in orders[r]] for r in case.own_rounds}


def clock_sagged(conditions: dict[str, Any], clocks: list[float]) -> bool:
    """Whether the SM clock read after a round fell below CLOCK_SAG × the case's median so far."""
    sm = conditions.get("sm_clock_mhz")
    return sm is not None and bool(clocks) and sm < CLOCK_SAG * sorted(clocks)[len(clocks) // 2]


def time_rounds(case: CaseRun) -> None:
    """Every round of the plan not on disk yet: timed (again while the clock sagged), race-checked,
    stored; a RoundDone event after each."""
    assert case.prepared is not None
    runner, done = case.runner, set(case.folder.finished_rounds(case.case_index))
    clocks: list[float] = []
    for r, items in case.plan.items():
        if r in done:
            continue
        runner.start_round(items, r)
        for attempt in range(MAX_ATTEMPTS):  # noqa: B007 - recorded with the round below
            times = runner.time_round(items, case.prepared.samples)
            conditions = runner.conditions()
            if not clock_sagged(conditions, clocks):
                break
        if conditions.get("sm_clock_mhz") is not None:
            clocks.append(conditions["sm_clock_mhz"])
        checks = runner.race(items, r)
        rows = [
            dict(
                s._asdict(),
                leg=runner.leg_name(item),
                round=r,
                buffer_set=item[1],
                slot=slot,
                timer=runner.label,
                burn_in=case.burn_in(r),
            )
            for slot, item in enumerate(items)
            for s in times.get(item, [])
        ]
        store_round(case, r, rows, dict(attempt=attempt, process=case.process, **conditions), checks)
        last = case.protocol.total_rounds - 1
        case.on_event(RoundDone(case=case.case, round=r, rounds=last, burn_in=case.burn_in(r)))


def store_round(
    case: CaseRun, r: int, samples: list[dict[str, Any]], reading: dict[str, Any], checks: list[dict[str, Any]]
) -> None:
    """A finished round on disk: its samples, the clock readings (with the attempt and the process
    that timed it) and the race checks."""
    case.folder.write_part("samples", case.case_index, r, pd.DataFrame(samples))
    case.folder.write_part("rounds", case.case_index, r, pd.DataFrame([dict(case=case.case, round=r, **reading)]))
    case.folder.write_part("checks", case.case_index, r, pd.DataFrame(checks))


def finish(case: CaseRun) -> None:
    case.runner.finish(case.plan)


Stage = Callable[[CaseRun], None]
STAGES: list[Stage] = [prepare, time_rounds, finish]


def run_protocol(case: CaseRun) -> None:
    """Every stage, in order, for one case."""
    for stage in STAGES:
        stage(case)
