"""Capture and warm-up: every leg that passed the gate is prepared for timing (a CUDA graph on a
GPU), the legs are replayed interleaved until the clocks are up, the baseline's bare time is
measured, planted delays are sized from it, and the cold samples per round are chosen."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from kprof.engine.case import Item
from kprof.engine.context import CaseContext
from kprof.engine.gate import GateResult
from kprof.engine.gpus import own_timer_info
from kprof.run_model import PLANT
from kprof.timer import Timer
from kprof.timer.kernel_time import wants_kernel_time
from kprof.timer.spins import planted_delays, with_spin

WARMUP_SECONDS = 0.2
ESTIMATE = "estimate"  # the item that times the baseline's bare work when the baseline is planted


@dataclass
class Captured:
    timed: list[int]  # leg indices that are timed, in leg order
    samples: int  # cold samples per leg per round
    baseline_warmup_ns: float
    spin_ladder: dict[str, Any] | None = None  # how the planted spins were sized (GPU calibrations)


def samples_per_round(t_est_ns: float, device: str, requested: int | None) -> int:
    """m = clamp(ceil(2 ms / t), 10, 100) on a GPU: enough samples that a round lasts about 2 ms
    of kernel time, at least 10 for the trimmed mean; 3 on the interpreter."""
    if requested:
        return requested
    if device == "cpu":
        return 3
    return int(min(100, max(10, math.ceil(2e6 / max(t_est_ns, 1.0)))))


def warm_up(timer: Timer, items: list[Item], device: str) -> dict[Item, list[float]]:
    """Interleaved single replays of ``items`` for WARMUP_SECONDS on a GPU (clocks up from idle);
    the last round's times, one per item, estimate each item's length."""
    if not items:
        return {}
    t_end = time.perf_counter() + (WARMUP_SECONDS if device != "cpu" else 0.0)
    est = timer.time_round(items, 1)
    while time.perf_counter() < t_end:
        est = timer.time_round(items, 1)
    return est


def capture(ctx: CaseContext, gate: GateResult) -> Captured:
    timer = ctx.timer
    assert timer is not None
    timed = [li for li, leg in enumerate(ctx.legs) if leg.name not in gate.failed]
    plain = [li for li in timed if ctx.legs[li].plant is None]
    for (li, k), fn in gate.fns.items():
        if li in plain:
            ctx.at("capture", ctx.legs[li].name)
            timer.prepare((li, k), fn)

    # Warm-up: interleaved replays of every leg, to leave idle clocks behind (not recorded). The
    # baseline's bare work is timed too: planted spins are sized from it.
    ctx.at("warmup")
    base_li = ctx.baseline_index
    first_round = ctx.part.rounds.start
    base_item: Item = (base_li, ctx.buffer_set(base_li, first_round))
    estimate_item: Item = base_item if base_li in plain else (ESTIMATE, 0)
    if base_li not in plain:
        timer.prepare(estimate_item, gate.fns[base_item])
    first = [(li, ctx.buffer_set(li, first_round)) for li in plain] + ([] if base_li in plain else [estimate_item])
    est = warm_up(timer, first, ctx.device)
    t_base = est[estimate_item][0]

    # Small cases are timed by kernel time: the event overhead, measured at the start of the run,
    # is over 1% of their time (kprof.timer.kernel_time). Planted spins are then sized from the
    # baseline's kernel time, so "1%" is 1% of what the case's samples measure.
    chosen = ctx.first_part  # a later process times as the first one chose
    timer.kernel_time = (
        chosen.kernel_time
        if chosen is not None
        else wants_kernel_time(
            ctx.run.protocol.timer_mode,
            t_base,
            own_timer_info(ctx.run.timer_info),
            ctx.device,
            graphs=ctx.run.protocol.captures != "none",
        )
    )
    if timer.kernel_time and any(ctx.legs[li].plant is not None for li in timed):
        t_base = sorted(timer.time_round([estimate_item], 9)[estimate_item])[4]

    # Planted legs: the leg's work plus a spin sized from the baseline's time; spins alone. The
    # spins' cycle counts are calibrated in the case's timer (kprof.timer.spins).
    plants = {plant for li in timed if (plant := ctx.legs[li].plant) is not None}
    spin_ladder = None
    if plants:
        ctx.at("spins")
        targets = {pct: pct / 100.0 * t_base for _, pct in plants}
        delays, spin_ladder = planted_delays(timer, ctx.device, targets, ctx.run.seed + ctx.case_index)
    for li in timed:
        plant = ctx.legs[li].plant
        if plant is None:
            continue
        delay = delays[plant[1]]
        for k in ctx.states:
            if ctx.uses_set(li, k):
                timer.prepare((li, k), with_spin(gate.fns[(li, k)], delay) if plant[0] == PLANT else delay)
    t_est = sorted(v[0] for v in est.values())[len(est) // 2] if est else 1.0
    if chosen is not None and chosen.samples:
        samples = chosen.samples  # a later process times as many samples per round as the first
    else:
        samples = samples_per_round(t_est, ctx.device, ctx.run.protocol.samples)
    return Captured(timed, samples, t_base, spin_ladder)
