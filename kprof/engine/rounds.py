"""Timed rounds, the one loop every run goes through: every timed leg in the round's seeded
balanced order, ``samples`` cold samples each, from graphs captured afresh for the round
(``--captures per-round``); a round whose SM clock sagged below 90% of the run's median is redone
(up to 3 attempts); after each round every leg is replayed once more on that round's buffers,
poisoned first, and compared (a race shows as a mismatch). Each round is on disk before the next.

Where the legs live is the transport's business (:class:`RoundLegs`): in this worker process
(:class:`LocalLegs`), or in a leg host per revision tree (kprof.engine.hosted.HostedLegs)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from kprof.correctness import compare, poison
from kprof.engine.capture import Captured
from kprof.engine.context import CaseContext, Item, emit
from kprof.engine.gate import GateResult, check_row, sync
from kprof.engine.schedule import round_orders
from kprof.events import Race, RoundDone
from kprof.run_model import SPIN_PARAM
from kprof.store.run_folder import RunFolder

CLOCK_SAG = 0.9
MAX_ATTEMPTS = 3


def clock_sagged(conditions: dict[str, Any], clocks: list[float]) -> bool:
    """Whether the SM clock read after a round fell below CLOCK_SAG × the run's median so far."""
    sm = conditions.get("sm_clock_mhz")
    return sm is not None and bool(clocks) and sm < CLOCK_SAG * sorted(clocks)[len(clocks) // 2]


def orders_of(ctx: CaseContext, captured: Captured) -> dict[int, list[int]]:
    """Leg order (indices into ``captured.timed``) for this process's rounds, from one balanced
    design over all of the case's rounds (one burn-in round per process)."""
    total = ctx.run.protocol.rounds + ctx.run.protocol.processes
    orders = round_orders(len(captured.timed), total, ctx.run.seed + ctx.case_index)
    return {r: orders[r] for r in ctx.part.rounds}


def round_items(ctx: CaseContext, captured: Captured, order: list[int], r: int) -> list[Item]:
    return [(captured.timed[i], ctx.buffer_set(captured.timed[i], r)) for i in order]


def capture_order(items: list[Item], seed: int, case_index: int, r: int) -> list[Item]:
    """The round's items in a seeded random order: where a graph falls in the capture sequence
    must not follow its leg from round to round."""
    perm = np.random.default_rng([seed, case_index, r]).permutation(len(items))
    return [items[i] for i in perm]


def sample_rows(
    case: str, leg: str, r: int, k: int, slot: int, times: list[float], timer: str, burn_in: bool
) -> list[dict[str, Any]]:
    """One leg's cold samples of round r as rows of the samples table."""
    return [
        dict(
            case=case,
            leg=leg,
            round=r,
            sample=i,
            buffer_set=k,
            slot=slot,
            time_ns=float(t),
            timer=timer,
            burn_in=burn_in,
        )
        for i, t in enumerate(times)
    ]


def store_round(
    folder: RunFolder,
    case_index: int,
    case: str,
    r: int,
    samples: list[dict[str, Any]],
    attempt: int,
    conditions: dict[str, Any],
    checks: list[dict[str, Any]],
    process: int | None = None,
) -> None:
    """A finished round on disk: its samples, the clock readings (with the attempt and the process
    that timed it) and race checks."""
    folder.write_part("samples", case_index, r, pd.DataFrame(samples))
    row = dict(case=case, round=r, attempt=attempt, process=process, **conditions)
    folder.write_part("rounds", case_index, r, pd.DataFrame([row]))
    folder.write_part("checks", case_index, r, pd.DataFrame(checks))


class RoundLegs(Protocol):
    """What the round loop needs of the legs, wherever they run. An item is (leg, buffer set)."""

    label: str  # the timer's label, written into every sample row

    def start_round(self, items: list[Item], r: int) -> None:
        """Before round r's first attempt (fresh graphs, where the legs are captured per round)."""

    def time_round(self, items: list[Item], samples: int) -> dict[Item, list[float]]:
        """``samples`` timings (ns) of every item, in the round's order."""

    def conditions(self) -> dict[str, Any]:
        """Clock, temperature and throttle state after the round."""

    def race(self, items: list[Item], r: int) -> list[dict[str, Any]]:
        """Each item replayed once more on the round's buffers and checked: rows of the checks table."""

    def leg_name(self, item: Item) -> str: ...


@dataclass(frozen=True)
class RoundPlan:
    """Which rounds a process times, with its items in order, and how they are stored."""

    folder: RunFolder
    case_index: int
    case: str
    samples: int
    rounds: dict[int, list[Item]]  # round → its (leg, buffer set) items in timing order
    last_round: int  # the case's last round (progress)
    burn_in: Callable[[int], bool]
    process: int | None = None  # which of the case's processes (kprof.parts), None for one host per revision


def timed_rounds(plan: RoundPlan, legs: RoundLegs, on_round: Callable[[RoundDone], None]) -> None:
    """Every round of the plan not on disk yet: timed (redone while the clock sagged), race-checked,
    stored; ``on_round`` told after each."""
    done = set(plan.folder.finished_rounds(plan.case_index))
    clocks: list[float] = []
    for r, items in plan.rounds.items():
        if r in done:
            continue
        legs.start_round(items, r)
        for attempt in range(MAX_ATTEMPTS):  # noqa: B007 - recorded with the round below
            times = legs.time_round(items, plan.samples)
            cond = legs.conditions()
            if not clock_sagged(cond, clocks):
                break
        if cond.get("sm_clock_mhz") is not None:
            clocks.append(cond["sm_clock_mhz"])
        checks = legs.race(items, r)
        rows = [
            row
            for slot, item in enumerate(items)
            for row in sample_rows(
                plan.case, legs.leg_name(item), r, item[1], slot, times[item], legs.label, plan.burn_in(r)
            )
        ]
        store_round(plan.folder, plan.case_index, plan.case, r, rows, attempt, cond, checks, plan.process)
        on_round(RoundDone(case=plan.case, round=r, rounds=plan.last_round, burn_in=plan.burn_in(r)))


@dataclass
class LocalLegs:
    """The legs of a case in this worker process: one timer, checked against the baseline's outputs."""

    ctx: CaseContext
    gate: GateResult

    @property
    def label(self) -> str:
        assert self.ctx.timer is not None
        return self.ctx.timer.label

    def start_round(self, items: list[Item], r: int) -> None:
        assert self.ctx.timer is not None
        self.ctx.at("round", str(r))
        if self.ctx.run.protocol.captures == "per-round":
            self.ctx.timer.recapture(capture_order(items, self.ctx.run.seed, self.ctx.case_index, r))

    def time_round(self, items: list[Item], samples: int) -> dict[Item, list[float]]:
        assert self.ctx.timer is not None
        return self.ctx.timer.time_round(items, samples)

    def conditions(self) -> dict[str, Any]:
        assert self.ctx.timer is not None
        return self.ctx.timer.round_conditions()

    def race(self, items: list[Item], r: int) -> list[dict[str, Any]]:
        return race_check(self.ctx, self.gate, items, r)

    def leg_name(self, item: Item) -> str:
        return self.ctx.legs[item[0]].name


def replayed_outputs(ctx: CaseContext, item: Item) -> dict[str, Any]:
    """The race check's replay, in every transport: the item's prepared call (a graph on a GPU)
    replayed once on its buffer set, outputs poisoned first, from the state's initial contents."""
    timer, state = ctx.timer, ctx.states[item[1]]
    assert timer is not None
    poison(ctx.workload.outputs(state))
    ctx.workload.reset(state)
    timer.replay(item)
    sync(ctx.device)
    return ctx.workload.outputs(state)


def race_check(ctx: CaseContext, gate: GateResult, items: list[Item], r: int) -> list[dict[str, Any]]:
    rows = []
    for li, k in items:
        leg = ctx.legs[li]
        if leg.plant is not None and leg.plant[0] == SPIN_PARAM:
            continue
        res = compare(replayed_outputs(ctx, (li, k)), gate.baseline_outputs[k], None, ctx.rule(leg), math.inf)
        rows.append(check_row(ctx.case.name, leg.name, r, k, res))
        if not res.passed:
            emit(Race(case=ctx.case.name, leg=leg.name, round=r, detail=res.detail or ""))
    return rows


def run_rounds(ctx: CaseContext, gate: GateResult, captured: Captured) -> None:
    """This process's rounds of the case, timed in this process."""
    plan = RoundPlan(
        folder=ctx.folder,
        case_index=ctx.case_index,
        case=ctx.case.name,
        samples=captured.samples,
        rounds={r: round_items(ctx, captured, order, r) for r, order in orders_of(ctx, captured).items()},
        last_round=ctx.run.protocol.rounds + ctx.run.protocol.processes - 1,
        burn_in=ctx.part.burn_in,
        process=ctx.part_index,
    )
    timed_rounds(plan, LocalLegs(ctx, gate), emit)
