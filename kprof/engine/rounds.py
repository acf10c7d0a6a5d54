"""Timed rounds: every timed leg in the round's seeded balanced order, ``samples`` cold samples
each, from graphs captured afresh for the round (``--captures per-round``, in a seeded order); a
round whose SM clock sagged below 90% of the run's median is redone (up to 3 attempts); after each
round every leg is replayed once more on that round's buffers, poisoned first, and compared with
the baseline (a race shows as a mismatch). Each round is on disk before the next."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from kprof.correctness import compare, poison
from kprof.engine.capture import Captured
from kprof.engine.context import CaseContext, Item, emit
from kprof.engine.gate import GateResult, check_row, sync
from kprof.engine.schedule import round_orders
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
    total = ctx.run.rounds + ctx.run.processes
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


def race_check(ctx: CaseContext, gate: GateResult, items: list[Item], r: int) -> list[dict[str, Any]]:
    timer = ctx.timer
    assert timer is not None
    w = ctx.workload
    rows = []
    for li, k in items:
        leg = ctx.legs[li]
        if leg.plant is not None and leg.plant[0] == SPIN_PARAM:
            continue
        poison(w.outputs(ctx.states[k]))
        w.reset(ctx.states[k])
        timer.replay((li, k))
        sync(ctx.device)
        res = compare(w.outputs(ctx.states[k]), gate.baseline_outputs[k], None, ctx.rule(leg), math.inf)
        rows.append(check_row(ctx.case.name, leg.name, r, k, res))
        if not res.passed:
            emit(event="race", case=ctx.case.name, leg=leg.name, round=r, detail=res.detail)
    return rows


def run_rounds(ctx: CaseContext, gate: GateResult, captured: Captured) -> None:
    timer = ctx.timer
    assert timer is not None
    last_round = ctx.run.rounds + ctx.run.processes - 1
    done = set(ctx.folder.finished_rounds(ctx.case_index))
    clocks: list[float] = []
    for r, order in orders_of(ctx, captured).items():
        if r in done:
            continue
        items = round_items(ctx, captured, order, r)
        ctx.at("round", str(r))
        if ctx.run.captures == "per-round":
            timer.recapture(capture_order(items, ctx.run.seed, ctx.case_index, r))
        for attempt in range(MAX_ATTEMPTS):  # noqa: B007 - recorded with the round below
            times = timer.time_round(items, captured.samples)
            cond = timer.round_conditions()
            if not clock_sagged(cond, clocks):
                break
        if cond.get("sm_clock_mhz") is not None:
            clocks.append(cond["sm_clock_mhz"])
        checks = race_check(ctx, gate, items, r)
        rows = [
            row
            for slot, (li, k) in enumerate(items)
            for row in sample_rows(
                ctx.case.name, ctx.legs[li].name, r, k, slot, times[(li, k)], timer.label, ctx.part.burn_in(r)
            )
        ]
        store_round(ctx.folder, ctx.case_index, ctx.case.name, r, rows, attempt, cond, checks, ctx.part_index)
        emit(event="round", case=ctx.case.name, round=r, rounds=last_round)
