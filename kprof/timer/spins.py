"""Planted delays: a spin of known length appended to a leg, to check that kprof recovers an effect
it was told about (``kprof calibrate``), and the same spin alone, to measure what was planted.

On a GPU the spin is ``torch.cuda._sleep(cycles)``, and cycles are not time: on an H200 a few
hundred cycles added about half their length at the SM clock, and under ~100 cycles nothing
measurable (docs/benchmarks.md). So the cycle count for each planted length is read off a ladder of
spins timed by the case's own timer: the length a spin adds is its time minus that of a spin of
zero cycles, measured, and the cycles for each target come from a line fitted to that curve.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from kprof.timer import Timer
from kprof.timer.clocks import host_gpu_index

LADDER_FIRST = 16  # cycles of the shortest non-zero rung
LADDER_STEP = 1.5  # each next rung is this much longer (the curve bends where short spins start to count)
LADDER_ROUNDS = 12  # interleaved rounds over the ladder, each on graphs captured afresh
LADDER_SAMPLES = 10  # cold samples per rung per round
TRIM = 0.1  # share cut from each end before averaging a rung


def sm_clock_ghz(device: str) -> float:
    """Current SM clock (NVML) or the device's nominal clock; sizes the ladder's top rung."""
    import torch

    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(host_gpu_index(torch.device(device).index or 0))
        return pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM) / 1000.0
    except Exception:
        return torch.cuda.get_device_properties(device).clock_rate / 1e6


def host_spin(ns: float) -> Callable[[], None]:
    """Keep the host busy for ``ns`` nanoseconds (the interpreter path: host-clock timing)."""

    def spin() -> None:
        end = time.perf_counter_ns() + ns
        while time.perf_counter_ns() < end:
            pass

    return spin


def gpu_sleep(cycles: int) -> Callable[[], None]:
    import torch

    return lambda: torch.cuda._sleep(cycles)


def ladder(top_cycles: float) -> list[int]:
    """0, then LADDER_FIRST growing by LADDER_STEP until a rung reaches ``top_cycles``."""
    rungs = [0, LADDER_FIRST]
    while rungs[-1] < top_cycles:
        rungs.append(int(round(rungs[-1] * LADDER_STEP)))
    return rungs


def hinge_fit(rungs: list[int], added_ns: np.ndarray) -> tuple[float, float]:
    """(c0, slope): least-squares fit of added = slope · max(0, c − c0), the shape the spin has (a
    short spin hides inside the kernel's fixed cost, past c0 each cycle counts). Every rung informs
    the fit, so one rung's noise does not move a planted length the way interpolating between two
    neighbours would."""
    c = np.asarray(rungs, dtype=float)
    y = np.asarray(added_ns, dtype=float)
    best = (math.inf, 0.0, 0.0)
    for c0 in np.linspace(0.0, c[-2], 200):
        x = np.maximum(c - c0, 0.0)
        slope = float(x @ y / (x @ x))
        sse = float(((y - slope * x) ** 2).sum())
        if slope > 0 and sse < best[0]:
            best = (sse, float(c0), slope)
    return best[1], best[2]


def cycles_for(target_ns: float, fit: tuple[float, float]) -> int:
    """Cycles whose spin adds ``target_ns`` on the fitted curve (c0, slope) of ``hinge_fit``."""
    if target_ns <= 0:
        return 0
    c0, slope = fit
    return int(round(c0 + target_ns / slope))


def ladder_fit(rungs: list[int], added_ns: np.ndarray) -> tuple[float, float]:
    """``hinge_fit``, or where the ladder saw no spin at all, the top rung's average rate."""
    c0, slope = hinge_fit(rungs, added_ns)
    if slope <= 0:
        return 0.0, max(float(added_ns[-1]), 1e-9) / rungs[-1]
    return c0, slope


def measure_ladder(timer: Timer, rungs: list[int], seed: int) -> np.ndarray:
    """What each rung's spin adds to a spin of zero cycles (ns), in the timer the case uses: trimmed
    means over fresh captures every round (kernel times come in ticks of tens of ns: averaged, they
    resolve a few ns)."""
    items = [("spin ladder", c) for c in rungs]
    for item, c in zip(items, rungs):
        timer.prepare(item, gpu_sleep(c))
    times: dict[object, list[float]] = {item: [] for item in items}
    rng = random.Random(seed)
    for _ in range(LADDER_ROUNDS):
        order = items[:]
        rng.shuffle(order)
        timer.recapture(order)  # a graph's own offset (tens of ns) would bias its rung: average it out
        rng.shuffle(order)
        for item, values in timer.time_round(order, LADDER_SAMPLES).items():
            times[item] += values
    from scipy.stats import trim_mean  # 1.4 s to import: only a calibration run needs it

    means = np.array([trim_mean(times[item], TRIM) for item in items])
    return means - means[0]


def size_spins(timer: Timer, targets_ns: dict[float, float], ghz: float, seed: int) -> dict[str, Any]:
    """The ladder for ``targets_ns`` (percentage → ns) measured and fitted: what the case's status
    records (``spin_ladder``) and the cycles each percentage is planted with."""
    rungs = ladder(2.0 * max(targets_ns.values(), default=0.0) * ghz)
    added = measure_ladder(timer, rungs, seed)
    c0, slope = ladder_fit(rungs, added)
    return {
        "cycles": rungs,
        "added_ns": [round(float(a), 2) for a in added],
        "c0_cycles": round(c0, 1),
        "ns_per_cycle": round(slope, 4),
        "planted_cycles": {f"{pct:g}": cycles_for(ns, (c0, slope)) for pct, ns in targets_ns.items()},
    }


def planted_delays(
    timer: Timer, device: str, targets_ns: dict[float, float], seed: int
) -> tuple[dict[float, Callable[[], None]], dict[str, Any] | None]:
    """A spin per planted percentage, each adding its target length (ns) as the case's timer sees
    it, and the ladder it was sized on (None on the host, where a spin is timed by the clock)."""
    if device == "cpu":
        return {pct: host_spin(ns) for pct, ns in targets_ns.items()}, None
    sized = size_spins(timer, targets_ns, sm_clock_ghz(device), seed)
    return {pct: gpu_sleep(sized["planted_cycles"][f"{pct:g}"]) for pct in targets_ns}, sized


def with_spin(work: Callable[[], None], delay: Callable[[], None]) -> Callable[[], None]:
    """The leg's work followed by the planted delay, as one callable (captured as one graph)."""

    def planted() -> None:
        work()
        delay()

    return planted
