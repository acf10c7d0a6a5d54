"""The verdict rules on seeded synthetic runs with known effects (the small version of
benchmarks/verdict_simulation.py; docs/benchmarks.md has the full one, before and after)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kprof.analysis import simulation as sim
from kprof.analysis.run_effects import leg_effects
from kprof.run_model import Leg, Role

QUIET = sim.Noise(sample_sigma=0.003, round_sigma=0.001)
NOISY = sim.Noise(sample_sigma=0.02, round_sigma=0.005)


@pytest.mark.slow  # thousands of simulated runs (10 s)
def test_the_printed_resolvable_effect_is_found_as_often_as_promised() -> None:
    """The summary promises that an effect of the printed size is called FASTER 80% of the time in
    a case its A/A does not gate (the old rule, which also needed the estimate past that size and
    BH, did so 40% of the time)."""
    out = sim.scenario_mde(NOISY, 16, 0.5, 120, np.random.default_rng(1))
    assert out["printed_mde_pct"] > 0.5  # the noise, not the threshold, sets it here
    assert 0.74 <= out["faster_rate_quoted"] <= 0.92  # 0.87 here; 1,000 runs: 0.83 (0.73 unmodelled)


def test_same_means_within_the_users_threshold() -> None:
    """A real 1% gain with a 0.5% threshold in a noisy run is UNRESOLVED or FASTER, never SAME (the
    old rule, whose equivalence margin grew with the noise, called it SAME in 20–30% of runs)."""
    out = sim.scenario_same(1.0, NOISY, 16, 0.5, 60, np.random.default_rng(2))
    assert out["SAME"] <= 0.02
    assert out["FASTER"] >= 0.35  # 1,000 runs: 43% (52% before the case's placement floor)


@pytest.mark.slow  # several seconds on the 2-core machine: CI's slow step runs it
def test_a_legs_verdict_does_not_depend_on_unrelated_legs() -> None:
    """The same samples with and without an unrelated 30%-slower leg give every other leg the same
    estimate and, but where the case's pooled placement floor moves, the same verdict (100 runs:
    7 of 1,000 leg verdicts at 8 rounds, none at 16); and at 8 rounds a lone real 2% gain among 8
    null legs is FASTER (the old report-wide BH made it FASTER in 0% of runs alone and 100% beside
    the slow leg)."""
    rng = np.random.default_rng(3)
    effects = {"real": 2.0} | {f"null{i}": 0.0 for i in range(8)} | {"unrelated": -30.0}
    without = {k: v for k, v in effects.items() if k != "unrelated"}
    changed = compared = 0
    for _ in range(30):
        samples = sim.samples_for(effects, QUIET, 8, rng)
        with_it, _ = leg_effects(samples, sim.legs_for(effects), 0.5)
        alone, _ = leg_effects(samples[samples["leg"] != "unrelated"], sim.legs_for(without), 0.5)
        with_it = with_it[with_it["leg"] != "unrelated"].reset_index(drop=True)
        assert with_it["leg"].tolist() == alone["leg"].tolist()
        np.testing.assert_allclose(with_it["effect_pct"].fillna(0), alone["effect_pct"].fillna(0), rtol=0, atol=1e-12)
        judged = with_it["verdict"].isin(["FASTER", "SLOWER", "SAME", "UNRESOLVED"])
        changed += int((with_it["verdict"] != alone["verdict"])[judged].sum())
        compared += int(judged.sum())
    assert compared == 30 * 10 and changed <= 0.02 * compared
    lone = sim.scenario_lone(2.0, 8, None, QUIET, 8, 30, rng)
    assert lone["faster_rate"] >= 0.9


@pytest.mark.slow  # several seconds on the 2-core machine: CI's slow step runs it
def test_intervals_cover_the_truth_and_null_legs_are_rarely_called() -> None:
    rng = np.random.default_rng(4)
    for noise in (QUIET, NOISY):
        out = sim.scenario_coverage([0.0, 1.0, 5.0], noise, 16, 0.5, 40, rng)
        assert all(out[p]["coverage"] >= 0.88 for p in (0.0, 1.0, 5.0)), out
        assert out[0.0]["false_call_rate"] <= 0.05 and out[5.0]["false_call_rate"] == 0.0
        assert out["biased_rate"] <= 0.15  # the A/A gate silences about its 5% of clean cases


def _aa_run(copy_bias_pct: float, rng: np.random.Generator) -> bool:
    """Whether a case with three A/A copies, the third off by ``copy_bias_pct``, is gated."""
    effects = {"A/A 2": 0.0, "A/A 3": copy_bias_pct, "x": 1.0}
    legs = sim.legs_for({"x": 1.0})
    legs += [Leg(n, frozenset(), (), frozenset({Role.AA}), replica=i) for i, n in ((2, "A/A 2"), (3, "A/A 3"))]
    _, summaries = leg_effects(sim.samples_for(effects, QUIET, 16, rng), legs, 0.5)
    return summaries["c"].biased


def test_every_aa_copy_gates_the_case_at_a_shared_level() -> None:
    rng = np.random.default_rng(5)
    assert _aa_run(-1.0, rng)  # only the third copy is off: the case is still BIASED
    clean = [_aa_run(0.0, rng) for _ in range(60)]
    assert np.mean(clean) <= 0.1  # three copies at 1 − 0.05/3 each: a clean case is rarely gated


def test_the_planted_size_has_its_own_interval() -> None:
    """Calibration: a 1% plant whose spin is 1 µs on a 100 µs leg. The spin's length comes from the
    spin-alone legs with an interval: over 30 seeded runs the planted interval covers the true
    −0.990% about 95% of the time, and the recovered interval covers it too."""
    from kprof.analysis.run_effects import calibration_table
    from kprof.designs.legs import calibration_legs

    legs = calibration_legs(["f"], [1.0], 1)
    base, aa, planted, zero, spin = (leg.name for leg in legs)
    true_ns = {base: 100e3, aa: 100e3, planted: 101e3, zero: 1e3, spin: 2e3}
    truth = 100 * (100 / 101 - 1)
    rng = np.random.default_rng(6)
    planted_covers, recovered_covers = [], []
    for _ in range(30):
        rows = [
            dict(
                case="c", leg=leg, round=r, sample=i, time_ns=t * (1 + rng.normal(0, 0.001)), timer="t", burn_in=r == 0
            )
            for r in range(17)
            for leg, t in true_ns.items()
            for i in range(5)
        ]
        samples = pd.DataFrame(rows)
        effects, _ = leg_effects(samples, legs, 0.5)
        (row,) = calibration_table(samples, effects, legs).to_dict("records")
        assert row["planted_ci_low_pct"] <= row["planted_effect_pct"] <= row["planted_ci_high_pct"]
        planted_covers.append(row["planted_ci_low_pct"] <= truth <= row["planted_ci_high_pct"])
        recovered_covers.append(row["ci_low_pct"] <= truth <= row["ci_high_pct"])
    print(f"planted interval covers {np.mean(planted_covers):.2f}, recovered {np.mean(recovered_covers):.2f}")
    assert np.mean(planted_covers) >= 0.8 and np.mean(recovered_covers) >= 0.8


def test_placement_spread_is_measured_and_folded_into_the_interval() -> None:
    """A leg whose time depends on where its buffers lie (per-set effects of SD 0.5% around a true
    −1%): the spread is estimated, and the widened interval covers the −1% — the effect averaged
    over where buffers may lie — far more often than the rounds-only interval; a leg without
    placement effects counts only the case's pooled floor."""
    from kprof.analysis import stats as S
    from kprof.analysis.run_effects import per_round_logs, round_statistics

    rng = np.random.default_rng(8)
    effects = {"x": -1.0, "y": 0.0}
    raw_cover, placed_cover, spreads, quiet = [], [], [], []
    for _ in range(40):
        placement = {"x": list(rng.normal(0, 0.005, 4))}
        samples = sim.samples_for(effects, QUIET, 16, rng, placement=placement)
        table = leg_effects(samples, sim.legs_for(effects), 0.5)[0].set_index("leg")
        spreads.append(table.loc["x", "placement_pct"])
        quiet.append(table.loc["y", "placement_pct"])
        placed_cover.append(table.loc["x", "ci_low_pct"] <= -1.0 <= table.loc["x", "ci_high_pct"])
        logs = per_round_logs(round_statistics(samples), "c")
        raw = S.estimate((logs["x"] - logs["baseline"]).dropna().to_numpy())
        raw_cover.append(raw.ci_low_pct <= -1.0 <= raw.ci_high_pct)
    placed, rounds_only = np.mean(placed_cover), np.mean(raw_cover)
    print(f"spread {np.median(spreads):.2f}% (y {np.median(quiet):.2f}%), covers {placed:.2f} vs {rounds_only:.2f}")
    # y's own spread is none; what it counts is the case's floor, x's spread pooled over three legs
    assert 0.25 < np.median(spreads) < 0.8 and np.median(quiet) < 0.7 * np.median(spreads)
    assert placed >= 0.85 and placed >= rounds_only + 0.2


def test_a_placement_spread_too_small_to_test_significant_still_widens_the_interval() -> None:
    """Per-set effects of SD 0.2% with quiet rounds: an F-test over four placements misses the
    spread in many runs. Folding it in only when the test finds it covered the −1% in 85% of these
    runs; folding in the estimated spread always covers it in at least 90%."""
    rng = np.random.default_rng(8)
    covers = []
    for _ in range(60):
        placement = {"x": list(rng.normal(0, 0.002, 4))}
        samples = sim.samples_for({"x": -1.0}, QUIET, 16, rng, placement=placement)
        table = leg_effects(samples, sim.legs_for({"x": -1.0}), 0.5)[0].set_index("leg")
        covers.append(table.loc["x", "ci_low_pct"] <= -1.0 <= table.loc["x", "ci_high_pct"])
    assert np.mean(covers) >= 0.9


def test_a_clear_spread_in_one_leg_counts_the_spreads_of_its_neighbours() -> None:
    from kprof.analysis.stats import Spread, counted_spreads

    weak, strong, flat = Spread(0.002, 0.5), Spread(0.01, 1e-6), Spread(0.0, 0.9)
    assert counted_spreads({"weak": weak, "flat": flat}) == {"weak": 0.0, "flat": 0.0}
    counted = counted_spreads({"weak": weak, "strong": strong, "flat": flat})
    assert counted == {"weak": 0.002, "strong": 0.01, "flat": 0.0}
    assert counted_spreads({"weak": Spread(0.002, 0.1)}) == {"weak": 0.002}  # its own test, at p < 0.2
    assert counted_spreads({}) == {}


def test_every_leg_carries_at_least_the_cases_pooled_placement_floor() -> None:
    """The floor pools the legs' excess between-set variances (cut at 0 after averaging, so legs
    whose sets differ less than their noise pull it down) at 99.5% with L·(K−1) degrees of
    freedom; a leg whose own counted term is wider keeps its own."""
    from kprof.analysis.stats import Spread, case_placement, placement_half_width, t_quantile

    k = 4
    quiet = {f"q{i}": Spread(0.0, 0.8, -1e-6) for i in range(3)}
    assert all(t.half_width == 0 for t in case_placement(quiet, k).terms.values())
    spreads = quiet | {"loud": Spread(0.01, 1e-4, 1e-4)}  # its own F-test counts it (and case-wide)
    case = case_placement(spreads, k)
    terms = case.terms
    pooled = (1e-4 - 3e-6) / 4
    floor = t_quantile(1 - 0.0025, 4 * (k - 1)) * pooled**0.5 / k**0.5
    assert terms["q0"].half_width == pytest.approx(floor) and terms["q0"].sigma == pytest.approx(pooled**0.5)
    assert case.pooled == pytest.approx(pooled**0.5) and case.legs == 4
    # case-wide: the quiet legs' own spreads (0) are counted, so they carry the floor alone
    assert terms["loud"].half_width == pytest.approx(placement_half_width(0.01, k))
    assert terms["loud"].half_width > floor
    lonely = case_placement({"x": Spread(0.0, 0.9, 4e-6), "A/A": Spread(0.0, 0.9, 0.0)}, k).terms
    assert lonely["A/A"].half_width == lonely["x"].half_width > 0  # one floor per case, from x's excess
    alone = case_placement(spreads, 1)  # one placement: nothing to pool
    assert alone.terms["loud"].half_width == 0 and alone.legs == 0


def test_a_rerun_lands_inside_the_rerun_interval() -> None:
    """Two independent runs of the same legs: one run's estimate lies inside the other's 95%
    interval less often than a fresh run's would lie inside an exact interval (both estimates
    vary: ~83% for exact intervals without placement terms), inside the rerun interval (√2 wider
    about the estimate) about 95% of the time."""
    out = sim.scenario_rerun([0.0, 2.0, 10.0], sim.Noise(0.01, 0.003), 16, 30, np.random.default_rng(3))
    assert out["inside_rerun_interval"] >= 0.9
    # 300 runs: 92.2% / 97.4% (the interval carries the case's placement floor; 83–88% without)
    assert 0.85 <= out["inside_interval"] < out["inside_rerun_interval"]


def test_cases_split_over_processes_put_what_a_process_holds_in_the_interval() -> None:
    """Every leg shifted by the process that timed it (SD 0.2%, the size two fresh H200 runs of the
    paged preset showed): with one process per case the shift is invisible to a run and reruns miss
    its rerun interval; dealt over processes as a run deals its sets (kprof.parts) the spread
    between sets holds it — partly with two processes (the default: one degree of freedom for the
    process), fully with one set per process. With one process the A/A copy's own process shift is
    caught as a bias and bounded, which covers part of it (0.79 here; it was below 0.6 under the
    veto), not all."""
    quiet = sim.Noise(0.004, 0.001)
    inside = {
        p: sim.scenario_rerun([0.0, 2.0, 10.0], quiet, 16, 12, np.random.default_rng(5), 0.0, 0.002, p)[
            "inside_rerun_interval"
        ]
        for p in (1, 2, 4)
    }
    assert inside[1] < 0.85 and inside[4] >= 0.9 and inside[4] > inside[1] + 0.1, inside


def test_an_offset_of_the_whole_run_is_invisible_from_inside_it() -> None:
    """Every leg shifted by its run (the same in all its processes): four processes see each
    other's offsets but not the run's, so reruns miss even the rerun interval; the same spread per
    process instead is in the interval (docs/benchmarks.md, "What one run cannot see")."""
    quiet = sim.Noise(0.003, 0.001)
    per_run = sim.scenario_rerun([0.0, 2.0], quiet, 16, 12, np.random.default_rng(7), 0.0, 0.0, 4, 0.01)
    per_process = sim.scenario_rerun([0.0, 2.0], quiet, 16, 12, np.random.default_rng(7), 0.0, 0.01, 4)
    assert per_run["inside_rerun_interval"] < 0.8 and per_process["inside_rerun_interval"] >= 0.9, (
        per_run,
        per_process,
    )


@pytest.mark.slow  # several seconds on the 2-core machine: CI's slow step runs it
def test_a_spread_between_runs_told_to_the_run_puts_a_rerun_inside_its_rerun_interval() -> None:
    """The offset of the whole run above (SD 1% per leg's time, so 1.41% per leg's effect), passed
    as --between-runs: the rerun interval then holds the other run's estimate (250 pairs: 96.4%;
    30 here: 94.2%); untold, 63%."""
    quiet = sim.Noise(0.003, 0.001)

    def inside(told: float) -> float:
        rng = np.random.default_rng(3)
        return sim.scenario_rerun([0.0, 2.0], quiet, 16, 30, rng, 0.0, 0.0, 4, 0.01, told)["inside_rerun_interval"]

    assert inside(1.41) >= 0.9 and inside(0.0) < 0.8


@pytest.mark.slow  # several seconds on the 2-core machine: CI's slow step runs it
def test_the_resolvable_effect_of_a_run_told_the_spread_between_runs_is_found_in_fresh_runs() -> None:
    """Every leg shifted by its run (SD 0.3%), each run told 0.42% (--between-runs): a true effect of
    the printed resolvable size is found in about 80% of fresh runs (400 runs: 76.8%, 79.9% of those
    not gated), since each power draw moves by its run's offset too (without: 0.92% printed, found
    57%) and a copy moved by the spread is not read as a bias (before: 72%)."""
    out = sim.scenario_mde(sim.Noise(0.003, 0.001), 16, 0.5, 80, np.random.default_rng(1), 0.0, 0.003, 0.42)
    assert 1.0 < out["printed_mde_pct"] < 1.5 and 0.7 <= out["faster_rate"] <= 0.92, out


def test_process_offsets_flag_clean_cases_unless_each_set_has_a_process() -> None:
    """A clean case's A/A copy shifted by its worker processes like every leg (SD 1%): one process
    cannot tell that shift from a bias (flagged in most runs); one buffer set per process puts it in
    the interval (flagged about as often as a 95% interval misses)."""
    noise = sim.Noise(0.005, 0.001)
    flagged = {
        p: sim.scenario_aa_bias(0.0, 0.0, noise, 16, 40, np.random.default_rng(11), 0.01, p)["case_flagged"]
        for p in (1, 4)
    }
    assert flagged[1] > 0.5 and flagged[4] <= 0.1, flagged


def test_the_placement_line_counts_the_legs_whose_spread_is_in_their_intervals() -> None:
    from kprof.report.run_report import placement_line

    assert "no spread between sets is counted" in placement_line(4, pd.Series([0.0, 0.0]))
    line = placement_line(4, pd.Series([0.0, 0.31, 1.2]))
    assert "2 leg(s) vary between sets (largest ±1.20%)" in line and "in their intervals" in line
    assert "4 buffer sets at varied offsets in 2 processes;" in placement_line(4, pd.Series([0.1]), 2)
    pooled = placement_line(4, pd.Series([0.12, 0.12, 0.4]), 2, 0.12)
    assert "spread pooled over the legs ±0.12%, in every interval; 1 leg(s) vary beyond it (largest ±0.40%)" in pooled
    assert "vary" not in placement_line(4, pd.Series([0.12, 0.12]), 2, 0.12)


def test_samples_of_a_leg_the_run_does_not_declare_are_left_out() -> None:
    """A folder's samples may name a leg its meta no longer lists: the declared legs are analysed."""
    samples = sim.samples_for({"x": 1.0, "gone": 0.0}, QUIET, 8, np.random.default_rng(0))
    legs = [leg for leg in sim.legs_for({"x": 1.0, "gone": 0.0}) if leg.name != "gone"]
    table = leg_effects(samples, legs, 0.5)[0]
    assert set(table["leg"]) == {"baseline", "A/A", "x"}


def test_an_aa_bias_bounds_the_intervals_instead_of_silencing_the_case() -> None:
    """A small real bias on the A/A copy (0.3%, inside the 0.5% threshold, its interval clear of 0):
    the case is flagged and its bias bound is in every other interval; a +200% leg stays FASTER
    (under a veto it was BIASED and quoted nothing), a true +0.3% leg — within what the bias could
    explain — is BIASED or unresolved, never FASTER."""
    rng = np.random.default_rng(11)
    effects = {"A/A": -0.3, "big": 200.0, "small": 0.3}
    legs = sim.legs_for({"big": 200.0, "small": 0.3})
    table, summaries = leg_effects(sim.samples_for(effects, QUIET, 16, rng), legs, 0.5)
    s = summaries["c"]
    assert s.biased and not s.distrust and 0.2 < 100 * (np.exp(s.bias) - 1) < 1.0  # the far end of its interval
    rows = table.set_index("leg")
    big, small = rows.loc["big"], rows.loc["small"]
    assert big["verdict"] == "FASTER" and big["bias_bound_pct"] == pytest.approx(100 * (np.exp(s.bias) - 1))
    # the interval is widened by the bound on each side (percent of a log interval, so nearly)
    assert big["ci_high_pct"] - big["ci_low_pct"] > 2 * 0.2 * (1 + big["effect_pct"] / 100)
    assert small["verdict"] in {"BIASED", "UNRESOLVED"}
    assert rows.loc["A/A", "bias_bound_pct"] == 0.0  # the evidence itself is shown as measured


def test_a_baseline_that_disagrees_with_its_aa_copy_leaves_no_verdict_standing(tmp_path, monkeypatch) -> None:
    """The baseline 1% off its own A/A copy (beyond the 0.5% threshold; on a loaded machine it was
    5-100x): every verdict of the case is BIASED or UNRESOLVED — a +200% leg and a null leg alike,
    in the leg table and in attribution — the report says why in place of its `fastest:` line, and
    the case is named for the run's exit code."""
    from fake_runs import write_run

    from kprof.commands.analyse import analyse_run, attribute
    from kprof.report.run_report import run_document, to_json
    from kprof.report.table import render

    rng = np.random.default_rng(12)
    effects = {"A/A": -1.0, "big": 200.0, "null": 0.0}
    legs = sim.legs_for({"big": 200.0, "null": 0.0})
    table, summaries = leg_effects(sim.samples_for(effects, QUIET, 16, rng), legs, 0.5)
    s = summaries["c"]
    assert "disagrees with its own A/A copy A/A" in s.distrust
    rows = table.set_index("leg")
    assert rows.loc["big", "verdict"] == "BIASED" and rows.loc["null", "verdict"] in {"UNRESOLVED", "BIASED"}
    assert rows.loc["A/A", "verdict"] == "SLOWER"  # the evidence, as measured

    log_effect = {"baseline": 0.0, "A/A": 0.01, "big": -np.log(3.0)}
    folder = write_run(
        tmp_path / "run", legs, lambda leg, case: log_effect.get(leg.name, 0.0), noise=0.001, features=("big", "null")
    )
    report = analyse_run(folder.root)
    assert report.summaries["c"].distrust
    assert set(report.effects.set_index("leg").loc[["big", "null"], "verdict"]) <= {"BIASED", "UNRESOLVED"}
    text = render(run_document(report), "md")
    assert "no verdict of this case stands" in text and "fastest:" not in text
    assert to_json(report)["aa"][0]["distrust"] == report.summaries["c"].distrust
    levers = attribute(folder.root).levers
    assert len(levers) and set(levers["verdict"]) <= {"BIASED", "UNRESOLVED"}

    from typer.testing import CliRunner

    import kprof.commands.run as run_command
    from kprof.cli import app

    monkeypatch.setattr(run_command, "run_and_analyse", lambda *args, **kwargs: report)
    res = CliRunner().invoke(app, ["run", "copy", "--preset", "smoke", "--device", "cpu", "--out", str(tmp_path / "r")])
    assert res.exit_code == 4 and "the baseline disagrees with its own A/A copy, no verdict stands: c" in res.stderr


def test_compares_gate_with_a_control_and_four_processes_passes_equal_code_and_catches_two_percent() -> None:
    """compare's gate on pairs of synthetic runs: B's machine 0.5% slower and every leg shifted by
    each worker process (SD 0.3%, anew per run). With --control and one buffer set per process the
    shift cancels and the process shifts average out: equal code passes `slower>1%` and a 2%
    regression of one leg fails it on that leg; without the control the machine shift makes
    identical legs fail (the rule has no way to tell a slower machine from slower code)."""
    rng = np.random.default_rng(7)
    null = sim.scenario_gate(0.0, 0.5, 0.003, QUIET, 16, 12, rng, 1.0, "ctl", 4)
    caught = sim.scenario_gate(2.0, 0.5, 0.003, QUIET, 16, 12, rng, 1.0, "ctl", 4)
    bare = sim.scenario_gate(0.0, 1.5, 0.003, QUIET, 16, 12, rng, 1.0, None, 4)
    assert null["slower>1%"]["fail"] <= 1 / 12 and null["credibly-slower>1%"]["fail"] == 0, null
    assert caught["slower>1%"]["caught"] >= 0.9, caught
    assert bare["slower>1%"]["fail"] >= 0.5, bare


@pytest.mark.slow  # several seconds on the 2-core machine: CI's slow step runs it
def test_the_documented_ci_recipe_passes_equal_code_and_catches_two_percent() -> None:
    """The recipe docs/run.md gives: five fresh runs a side, `credibly-slower>1%`, no control.
    B's machine 0.5% slower, each leg shifted by its processes and by its run (SD 0.3% each, anew
    per run): equal code never fails and a 2% regression of one leg fails on that leg."""
    rng = np.random.default_rng(11)
    null = sim.scenario_gate_runs(0.0, 5, QUIET, 16, 12, rng)
    caught = sim.scenario_gate_runs(2.0, 5, QUIET, 16, 12, rng)
    one_each = sim.scenario_gate_runs(2.0, 1, QUIET, 16, 4, rng)
    assert null["credibly-slower>1%"]["fail"] == 0, null
    assert caught["credibly-slower>1%"]["caught"] >= 10 / 12, caught
    assert one_each["credibly-slower>1%"]["undecided"] == 1.0, one_each  # one run a side decides nothing


QUIET_KERNEL = sim.Noise(sample_sigma=0.0001, round_sigma=0.00005, drift_sigma=0.0)


@pytest.mark.parametrize("phase", [False, True], ids=["rounded", "random-phase"])
def test_a_short_quiet_kernel_read_through_a_coarse_tick_is_covered(
    phase: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 6.41 µs kernel 3× faster than its baseline, both read through a 32 ns tick with almost no
    noise: every reading rounds alike, so the estimate is off by a fraction of a tick that no number
    of rounds averages away. The interval carries the rounding's bound (half a tick per leg while
    the readings spread by less than half a tick; a fifth of one — the trimmed mean's cut — for the
    6.41 µs leg whose random-phase readings step between two ticks, 0.41 of the way, in most
    rounds; the 19.23 µs baseline sits 0.94 of the way and reads one value in most rounds) and
    covers the truth; without it, it did not."""
    import kprof.analysis.run_effects as run_effects

    tick = sim.Tick(32, phase)
    out = sim.scenario_tick(200.0, 6410, tick, QUIET_KERNEL, 16, 40, np.random.default_rng(7))
    assert out["coverage"] >= 0.9 and out["FASTER"] == 1.0
    leg_bound = run_effects.TRIM * 32 if phase else 16
    assert out["median_tick_bound_pct"] == pytest.approx(100 * (leg_bound / 6410 + 16 / 19230), rel=0.1)
    monkeypatch.setattr(run_effects, "tick_bounds", lambda samples, quantum: {})
    unbounded = sim.scenario_tick(200.0, 6410, tick, QUIET_KERNEL, 16, 40, np.random.default_rng(7))
    assert unbounded["coverage"] <= 0.75


def test_a_quiet_short_kernel_read_at_random_phase_can_be_same() -> None:
    """Issue 54: a 6.41 µs kernel at 0.1% noise against itself, through a 32 ns tick. Readings
    that step between two ticks come from random start phases, whose mean is exact: the bound is
    the trimmed mean's cut (a fifth of a tick), not half a tick per leg (0.50% a comparison, the
    threshold itself: no leg could read SAME)."""
    noise = sim.Noise(sample_sigma=0.001, round_sigma=0.0003)
    out = sim.scenario_tick(0.0, 6410, sim.Tick(32, True), noise, 16, 40, np.random.default_rng(7))
    assert out["median_tick_bound_pct"] < 0.25 and out["SAME"] >= 0.8 and out["coverage"] >= 0.95, out


def test_readings_one_tick_apart_are_dithered_and_jitter_about_one_value_is_not() -> None:
    """Readings at 16 ns past a 32 ns tick, jittering by ±1 ns about one value, read one value
    (half a tick of bound) however they round; readings a tick apart step between ticks (a fifth)."""
    from kprof.analysis.run_effects import TRIM, tick_bounds

    rng = np.random.default_rng(0)
    rounds = np.repeat(np.arange(1, 17), 10)
    one_value = 200 * 32 + 16 + rng.choice([-1.0, 1.0], rounds.size)
    two_values = 200 * 32 + 32.0 * rng.integers(0, 2, rounds.size)
    samples = pd.DataFrame(
        {
            "leg": np.repeat(["still", "stepping"], rounds.size),
            "round": np.tile(rounds, 2),
            "time_ns": np.concatenate([one_value, two_values]),
            "burn_in": False,
        }
    )
    bounds = tick_bounds(samples, 32.0)
    assert bounds["still"] == pytest.approx(16 / (200 * 32 + 16), rel=0.01)
    assert bounds["stepping"] == pytest.approx(TRIM * 32 / (200 * 32 + 32), rel=0.1)


def test_the_tick_is_found_from_quiet_legs_and_its_bound_fades_with_spread() -> None:
    from kprof.analysis.run_effects import tick_bias_ns, timer_quantum

    samples = sim.samples_for(
        {"x": 200.0}, QUIET_KERNEL, 16, np.random.default_rng(0), base_ns=19230, tick=sim.Tick(32)
    )
    # three values (6,400, an outlier's 9,600 and 19,232 ns): steps of 100 and 301 ticks, which a
    # tick a little larger fits within the readings' jitter too; the smallest step was the answer
    assert timer_quantum(samples) == pytest.approx(32, rel=0.1)
    assert tick_bias_ns(32, 0.0) == 16
    assert tick_bias_ns(32, 14.0) == 16  # below half a tick once the rounding's own spread is taken off
    assert tick_bias_ns(32, 14.0, dithered=True) == pytest.approx(6.4)  # random phase: the trim's cut
    assert tick_bias_ns(32, 32.0) < 0.01 * 32


def test_the_printed_rounds_for_same_deliver_it() -> None:
    """The footer's "a leg with no effect reads SAME 80% of the time from N rounds": run at N rounds,
    a null leg is SAME about that often (the old "rounds needed to resolve the threshold" printed 3
    here, where no interval exists below 6 rounds); where placement alone reaches the threshold, no
    number of rounds is promised."""
    out = sim.scenario_same_rounds(QUIET, 0.5, 48, np.random.default_rng(11))
    assert out["printed_rounds"] is not None and out["printed_rounds"] >= 6
    assert out["same_rate"] >= 0.7
    assert sim.scenario_same_rounds(QUIET, 0.5, 8, np.random.default_rng(12), 0.003)["printed_rounds"] is None


def test_a_count_resting_on_a_term_not_beyond_doubt_is_given_both_ways() -> None:
    """Quiet clean runs: a placement spread counted by chance (p < 0.2, one run in five) or an A/A
    copy excluding 0 at 95% but not at 99.5% made the single count jump (up to "not even at 64");
    such runs print the count were the term chance beside the count were it real, the first never
    larger, and the JSON record carries both. A run with no such term prints one count."""
    from kprof.report.run_report import _same_rounds, aa_records

    rng = np.random.default_rng(0)
    summaries = [sim.run_placed({"x": 0.0}, QUIET, 16, 0.5, rng, 0.0)[1] for _ in range(40)]
    doubtful = [s for s in summaries if s.doubtful]
    assert len(doubtful) >= 5  # about one run in four at this noise
    for s in doubtful:
        real = s.rounds_for_same if s.rounds_for_same is not None else 1 << 30
        assert s.rounds_for_same_if_chance is not None and s.rounds_for_same_if_chance < real
        text = _same_rounds(s)
        assert f"from {s.rounds_for_same_if_chance} rounds if this run's" in text and "if real" in text
        record = aa_records({s.case: s})[0]
        assert record["rounds_for_same_if_chance"] == s.rounds_for_same_if_chance and record["doubtful"]
    clean = next(s for s in summaries if not s.doubtful and s.rounds_for_same is not None)
    assert _same_rounds(clean) == f"a leg with no effect reads SAME 80% of the time from {clean.rounds_for_same} rounds"


def test_a_case_that_placement_keeps_from_same_says_so_and_what_narrows_it() -> None:
    """H200 runs whose legs' placement spreads pooled to ±0.4–1% said "not even at 64 rounds (noise
    or placement)"; rounds do not average where buffers lie, so the footer names placement and the
    option that narrows its term, and a clean case does not."""
    from kprof.report.run_report import _same_rounds, aa_records

    rng = np.random.default_rng(3)
    placed = [sim.run_placed({"x": 0.0}, QUIET, 16, 0.5, rng, 0.004)[1] for _ in range(4)]  # SD 0.4% a set
    s = next(s for s in placed if s.rounds_for_same is None)
    assert s.placement_in_the_way and aa_records({s.case: s})[0]["placement_in_the_way"] is True
    assert _same_rounds(s).endswith("(placement); more buffer sets narrow the placement term (--buffer-sets)")
    clean = sim.run_placed({"x": 0.0}, QUIET, 16, 0.5, rng, 0.0)[1]
    assert not clean.placement_in_the_way and "--buffer-sets" not in _same_rounds(clean)


@pytest.mark.slow  # 250 simulated runs (15 s): CI's slow step runs it
def test_the_first_count_delivers_where_its_terms_are_chance() -> None:
    """Run at the median first count of quiet clean runs (their terms chance), a null leg reads
    SAME about 80% of the time (400 runs: 82.0%)."""
    out = sim.scenario_same_rounds(QUIET, 0.5, 200, np.random.default_rng(11), if_chance=True)
    assert out["printed_rounds"] is not None and out["same_rate"] >= 0.72


@pytest.mark.slow  # 150 simulated runs with placements (20 s)
def test_the_printed_resolvable_effect_counts_the_placement_spread() -> None:
    """With a 0.3% spread between buffer sets the printed resolvable effect was found 36–47% of the
    time (it was computed for the rounds-only interval); computed for the interval printed, with the
    placement term, the shift the sets add to the estimate and the F-test that decides where the
    term is added and the case's floor, 79% here (1,000 quiet runs: 73%; noisy: 78%)."""
    out = sim.scenario_mde(QUIET, 16, 0.5, 250, np.random.default_rng(1), placement_sigma=0.003)
    assert out["faster_rate_quoted"] >= 0.65  # the rounds-only figure: 0.59% printed, found 36%


def test_widening_raises_the_resolvable_effect_and_the_rounds_for_same() -> None:
    from kprof.analysis import stats as S

    plain = S.minimum_detectable_effect(0.01, 16, 0.005)  # noise, not the threshold, sets it here
    placed = S.minimum_detectable_effect(0.01, 16, 0.005, widening=S.Widening.of(0.002, 4))
    bounded = S.minimum_detectable_effect(0.01, 16, 0.005, widening=S.Widening(bound=0.001))
    assert plain < placed and plain < bounded
    assert S.rounds_for_same(0.002, 0.005) < S.rounds_for_same(0.002, 0.005, widening=S.Widening(bound=0.001))
    assert S.rounds_for_same(0.002, 0.005, widening=S.Widening(bound=0.005)) is None


def test_significance_is_never_claimed_beside_an_interval_that_holds_zero() -> None:
    from kprof.analysis.run_effects import control_false_discoveries

    table = pd.DataFrame(
        {
            "p": [3.05e-05, 3.05e-05],
            "ci_low_pct": [-0.31, 0.40],
            "ci_high_pct": [1.97, 1.20],
            "verdict": ["UNRESOLVED", "FASTER"],
        }
    )
    control_false_discoveries(table, pd.Series([True, True]))
    assert table["bh_significant"].tolist() == [False, True]
    assert table["verdict"].tolist() == ["UNRESOLVED", "FASTER"]


def test_the_full_size_simulation_prints_every_rate_with_its_standard_error() -> None:
    """benchmarks/verdict_simulation.py: each share beside ``<share>_se`` over the scenario's units
    (runs here), nested per rule too; a share of 0 still has an error; printed figures have none."""
    import json
    import subprocess
    import sys

    from conftest import ROOT

    def run(only: str) -> dict:
        script = ROOT / "benchmarks" / "verdict_simulation.py"
        res = subprocess.run(
            [sys.executable, str(script), "--only", only, "--runs", "8"], capture_output=True, text=True, check=True
        )
        return json.loads(res.stdout)

    out = run("aa_bias_0.5_true_2")["aa_bias_0.5_true_2"]
    for rate in ("right_verdict", "biased", "false_call", "coverage", "case_flagged"):
        p, se = out[rate], out[f"{rate}_se"]
        shrunk = (8 * p + 0.5) / 9
        assert se == pytest.approx(np.sqrt(shrunk * (1 - shrunk) / 8)) and se > 0
    mde = run("mde_found_quiet_16")["mde_found_quiet_16"]
    assert "faster_rate_se" in mde and "printed_mde_pct_se" not in mde
