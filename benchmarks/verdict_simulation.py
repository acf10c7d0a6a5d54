"""The verdict rules on synthetic runs with known effects (kprof.analysis.simulation), full size.

About 14,000 synthetic runs through kprof's own ``leg_effects``; prints one JSON document with every
scenario's rates, each beside its standard error (``<rate>_se``: binomial over the scenario's
independent units, its runs or, for the rerun_ and gate_ scenarios, its pairs; where a unit holds
several comparisons, as a pair of runs holds one per leg and direction, an upper bound, since
they are correlated). Run it on two revisions to compare rules (docs/benchmarks.md, "Verdict rules"):

    python benchmarks/verdict_simulation.py [--runs 1000] [--seed 0] [--only rerun] [--without-tick-bound] > out.json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from kprof.analysis.simulation import (
    Noise,
    Tick,
    scenario_aa_bias,
    scenario_coverage,
    scenario_gate,
    scenario_gate_runs,
    scenario_lone,
    scenario_mde,
    scenario_printed_counts,
    scenario_rerun,
    scenario_same,
    scenario_same_rounds,
    scenario_tick,
)

QUIET = Noise(sample_sigma=0.003, round_sigma=0.001)
STILL = Noise(sample_sigma=0.0001, round_sigma=0.00005, drift_sigma=0.0)  # a kernel whose time hardly moves
NOISY = Noise(sample_sigma=0.02, round_sigma=0.005)
HALF_PCT = Noise(sample_sigma=0.005, round_sigma=0.001)  # issue 54's "0.5% sample noise"
TENTH_PCT = Noise(sample_sigma=0.001, round_sigma=0.0003)  # issue 54's short kernel "at 0.1% noise"


PAIRED = ("rerun_", "gate_")  # scenarios whose independent units are pairs of runs (n // 4 of them)
NOT_RATES = ("printed_", "median_")  # values a scenario prints that are not shares of its units


def with_standard_errors(result: dict, units: int) -> dict:
    """Each share in a scenario's result (nested per rule or per true effect) followed by its
    binomial standard error over ``units`` independent units, ``<name>_se``; taken at
    (share·units + ½)/(units + 1), so that a share of 0 or 1 is not given an error of 0."""
    out: dict = {}
    for key, value in result.items():
        if isinstance(value, dict):
            out[key] = with_standard_errors(value, units)
            continue
        out[key] = value
        is_share = isinstance(value, float) and 0.0 <= value <= 1.0 and not str(key).startswith(NOT_RATES)
        if is_share and units > 0:
            shrunk = (value * units + 0.5) / (units + 1)
            out[f"{key}_se"] = float(np.sqrt(shrunk * (1 - shrunk) / units))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=1000, help="runs per scenario (pairs: a quarter of it)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", default="", help="run only the scenarios whose name starts with this")
    p.add_argument(
        "--without-tick-bound", action="store_true", help="leave the timer-rounding bound out (the old rule)"
    )
    a = p.parse_args()
    if a.without_tick_bound:
        from kprof.analysis import run_effects

        run_effects.tick_bounds = lambda samples, quantum: {}
    rng = np.random.default_rng(a.seed)
    n = a.runs
    t0 = time.time()
    scenarios = {
        "mde_found_quiet_16": lambda: scenario_mde(QUIET, 16, 0.5, n, rng),
        "mde_found_noisy_16": lambda: scenario_mde(NOISY, 16, 0.5, n, rng),
        "mde_found_noisy_8": lambda: scenario_mde(NOISY, 8, 0.5, n, rng),
        # every leg's time also depends on its buffer set (SD 0.3% or 1% per set, drawn anew per run)
        "mde_found_noisy_16_placement_0.3": lambda: scenario_mde(NOISY, 16, 0.5, n, rng, 0.003),
        "mde_found_noisy_16_placement_1": lambda: scenario_mde(NOISY, 16, 0.5, n, rng, 0.01),
        # every leg shifted by its run (SD 0.3%), each run told the SD of an effect (0.42%, --between-runs)
        "mde_found_quiet_16_run_0.3_told_0.42": lambda: scenario_mde(QUIET, 16, 0.5, n, rng, 0.0, 0.003, 0.42),
        "mde_found_noisy_16_run_0.3_told_0.42": lambda: scenario_mde(NOISY, 16, 0.5, n, rng, 0.0, 0.003, 0.42),
        # the printed rounds at which a leg with no effect reads SAME 80% of the time, then run at them
        "printed_counts_quiet": lambda: scenario_printed_counts(QUIET, 0.5, n, rng),
        "same_rounds_quiet": lambda: scenario_same_rounds(QUIET, 0.5, n, rng),
        "same_rounds_quiet_placement_0.1": lambda: scenario_same_rounds(QUIET, 0.5, n, rng, 0.001),
        # the first count printed where a placement spread or A/A bias is not beyond doubt ("if chance")
        "same_rounds_quiet_if_chance": lambda: scenario_same_rounds(QUIET, 0.5, n, rng, if_chance=True),
        "same_rounds_quiet_placement_0.1_if_chance": lambda: scenario_same_rounds(QUIET, 0.5, n, rng, 0.001, True),
        "true_1pct_noisy_16": lambda: scenario_same(1.0, NOISY, 16, 0.5, n, rng),
        "true_1pct_noisy_8": lambda: scenario_same(1.0, NOISY, 8, 0.5, n, rng),
        "lone_2pct_8_rounds": lambda: scenario_lone(2.0, 8, None, QUIET, 8, n, rng),
        "lone_2pct_8_rounds_with_unrelated_30pct_slower": lambda: scenario_lone(2.0, 8, -30.0, QUIET, 8, n, rng),
        "lone_1pct_8_rounds": lambda: scenario_lone(1.0, 8, None, QUIET, 8, n, rng),
        "lone_1pct_8_rounds_with_unrelated_30pct_slower": lambda: scenario_lone(1.0, 8, -30.0, QUIET, 8, n, rng),
        "coverage_quiet_16": lambda: scenario_coverage([0.0, 1.0, 5.0], QUIET, 16, 0.5, n, rng),
        "coverage_noisy_16": lambda: scenario_coverage([0.0, 1.0, 5.0], NOISY, 16, 0.5, n, rng),
        # every leg's time also depends on where its buffers lie (SD per buffer set, drawn anew per run)
        "coverage_quiet_16_placement_0.1": lambda: scenario_coverage([0.0, 1.0, 5.0], QUIET, 16, 0.5, n, rng, 0.001),
        "coverage_quiet_16_placement_0.3": lambda: scenario_coverage([0.0, 1.0, 5.0], QUIET, 16, 0.5, n, rng, 0.003),
        "coverage_quiet_16_placement_1": lambda: scenario_coverage([0.0, 1.0, 5.0], QUIET, 16, 0.5, n, rng, 0.01),
        "coverage_noisy_16_placement_1": lambda: scenario_coverage([0.0, 1.0, 5.0], NOISY, 16, 0.5, n, rng, 0.01),
        # the A/A copy alone carries a real bias: the case is flagged, its bound folded in
        "aa_bias_0_true_200": lambda: scenario_aa_bias(200.0, 0.0, QUIET, 16, n, rng),
        "aa_bias_0.05_true_200": lambda: scenario_aa_bias(200.0, 0.05, QUIET, 16, n, rng),
        "aa_bias_0.5_true_2": lambda: scenario_aa_bias(2.0, 0.5, QUIET, 16, n, rng),
        "aa_bias_0.5_true_0": lambda: scenario_aa_bias(0.0, 0.5, QUIET, 16, n, rng),
        # clean cases (no A/A bias) at 0.5% sample noise, each leg shifted by each worker process
        # (SD 0.3%) dealt as --processes P deals them: how often the case is flagged (issue 54: ≤ 5%)
        **{
            f"aa_bias_0_true_0_noise0.5_process0.3_p{p}": (
                lambda p=p: scenario_aa_bias(0.0, 0.0, HALF_PCT, 16, n, rng, 0.003 if p else 0.0, max(p, 1))
            )
            for p in (0, 1, 2, 4)
        },
        # a 6.41 µs leg 3× faster than its baseline, both read through a 32 ns tick: each duration
        # rounded to the nearest tick, or a count from a start at a random point of a tick
        **{
            f"tick_32ns_{name}_{'phase' if phase else 'rounded'}": (
                lambda noise=noise, phase=phase: scenario_tick(200.0, 6410, Tick(32, phase), noise, 16, n, rng)
            )
            for name, noise in (("still", STILL), ("quiet", QUIET))
            for phase in (False, True)
        },
        # issue 54: a 6.41 µs leg against an equal baseline at 0.1% noise per sample, 32 ns tick
        **{
            f"tick_32ns_null_0.1pct_{'phase' if phase else 'rounded'}": (
                lambda phase=phase: scenario_tick(0.0, 6410, Tick(32, phase), TENTH_PCT, 16, n, rng)
            )
            for phase in (False, True)
        },
        # pairs of independent runs: n // 4 pairs each
        "rerun_noisy_16": lambda: scenario_rerun([0.0, 2.0, 10.0], NOISY, 16, n // 4, rng),
        "rerun_noisy_16_placement": lambda: scenario_rerun([0.0, 2.0, 10.0], NOISY, 16, n // 4, rng, 0.004),
        # every leg also shifted by the worker process that timed it (SD 0.2%), a case's sets dealt
        # over 1, 2 or 4 processes (--processes)
        **{
            f"rerun_{name}_16_process_0.2_p{p}": (
                lambda noise=noise, p=p: scenario_rerun([0.0, 2.0, 10.0], noise, 16, n // 4, rng, 0.0, 0.002, p)
            )
            for name, noise in (("quiet", QUIET), ("noisy", NOISY))
            for p in (1, 2, 4)
        },
        # every leg also shifted by its run (SD 0.3%, the same in both of its processes, each of
        # which adds its own SD 0.3%): what a run cannot see from inside (issue 54)
        **{
            f"rerun_{name}_16_process_0.3_p2_run_0.3": (
                lambda noise=noise: scenario_rerun([0.0, 2.0, 10.0], noise, 16, n // 4, rng, 0.0, 0.003, 2, 0.003)
            )
            for name, noise in (("quiet", QUIET), ("noisy", NOISY))
        },
        # the same runs told that spread (--between-runs): the SD of a leg's effect between runs,
        # 0.3%·√2 = 0.42% (the leg's and the baseline's offsets), and half that (an underestimate)
        **{
            f"rerun_{name}_16_process_0.3_p2_run_0.3_told_{told:g}": (
                lambda noise=noise, told=told: scenario_rerun(
                    [0.0, 2.0, 10.0], noise, 16, n // 4, rng, 0.0, 0.003, 2, 0.003, told
                )
            )
            for name, noise in (("quiet", QUIET), ("noisy", NOISY))
            for told in (0.42, 0.21)
        },
        # compare's gate on two runs of the same legs: B's machine 0.5% slower, every leg shifted by
        # each worker process (SD 0.3%, drawn anew per run); one leg 2% slower or none; n // 4 pairs
        **{
            f"gate_{name}_shift0.5_between0.3_reg{reg:g}{'_control' if ctl else ''}_p{p}": (
                lambda noise=noise, reg=reg, ctl=ctl, p=p: scenario_gate(
                    reg, 0.5, 0.003, noise, 16, n // 4, rng, 1.0, ctl, p
                )
            )
            for name, noise in (("quiet", QUIET), ("noisy", NOISY))
            for ctl in (None, "ctl")
            for reg in (0.0, 2.0)
            for p in (2, 4)
        },
        # compare's gate between folders of R fresh runs a side (issue 54): B's machine 0.5% slower,
        # each leg shifted by each of its 2 worker processes (SD 0.3%) and by its run (SD 0.3%),
        # both drawn anew per run; one leg 2% slower or none; n // 4 pairs of sides
        **{
            f"gate_runs_{name}_R{r}_reg{reg:g}{'_control' if ctl else ''}": (
                lambda noise=noise, r=r, reg=reg, ctl=ctl: scenario_gate_runs(
                    reg, r, noise, 16, n // 4, rng, control=ctl
                )
            )
            for name, noise in (("quiet", QUIET), ("noisy", NOISY))
            for r in (2, 3, 4, 5)
            for ctl in (None, "ctl")
            for reg in (0.0, 2.0)
        },
    }
    out = {
        name: with_standard_errors(run(), n // 4 if name.startswith(PAIRED) else n)
        for name, run in scenarios.items()
        if name.startswith(a.only)
    }
    out["seconds"] = time.time() - t0
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
