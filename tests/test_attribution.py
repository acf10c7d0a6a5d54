"""Attribution on synthetic rounds with known lever effects and a known interaction, and the CLI on a
run recorded on an H200 (docs/runs)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fake_runs import write_run
from typer.testing import CliRunner

from conftest import DEVICE, ROOT
from kprof.analysis.attribution import attribute_run, sweep_table
from kprof.analysis.run_effects import leg_effects
from kprof.cli import app
from kprof.designs.legs import design_legs
from kprof.run_model import Leg

LEVERS = ("a", "b", "c")
# ln-time effect of each lever, and an a×b interaction term: t(S) = t0 · exp(Σ e_i + ab·[a and b]).
E = {"a": -0.10, "b": -0.05, "c": 0.0}
AB = 0.04


def _samples(rounds: int = 16, noise: float = 0.002, seed: int = 0) -> tuple[pd.DataFrame, list[Leg]]:
    rng = np.random.default_rng(seed)
    legs = design_legs(LEVERS, "all")
    rows = []
    for r in range(rounds + 1):
        drift = rng.normal(0, 0.01)  # shared by every leg of a round: pairing removes it
        for leg in legs:
            log_t = math.log(100e3) + drift + sum(E[f] for f in leg.features)
            log_t += AB if {"a", "b"} <= leg.features else 0.0
            for i in range(3):
                rows.append(
                    dict(
                        case="c",
                        leg=leg.name,
                        round=r,
                        sample=i,
                        buffer_set=r % 4,
                        slot=0,
                        time_ns=math.exp(log_t + rng.normal(0, noise)),
                        timer="cuda-events",
                        burn_in=r == 0,
                    )
                )
    return pd.DataFrame(rows), legs


def _row(table: pd.DataFrame, design: str, lever: str) -> pd.Series:
    return table[(table["design"] == design) & (table["lever"] == lever)].iloc[0]


def pct(x: float) -> float:
    return 100 * (math.exp(-x) - 1)


def test_add_one_leave_one_out_shapley_and_interaction_recover_the_truth() -> None:
    samples, legs = _samples()
    effects, summaries = leg_effects(samples, legs, 0.5)
    table = attribute_run(samples, legs, LEVERS, summaries, effects)
    tol = 0.15  # percent
    assert _row(table, "add_one", "a")["effect_pct"] == pytest.approx(pct(E["a"]), abs=tol)
    assert _row(table, "leave_one_out", "a")["effect_pct"] == pytest.approx(pct(E["a"] + AB), abs=tol)
    assert _row(table, "shapley", "a")["effect_pct"] == pytest.approx(pct(E["a"] + AB / 2), abs=tol)
    assert _row(table, "shapley", "b")["effect_pct"] == pytest.approx(pct(E["b"] + AB / 2), abs=tol)
    assert _row(table, "shapley", "c")["verdict"] == "SAME"
    # ±1-coded two-way effect of a pure pairwise term b_ab is b_ab / 2.
    assert _row(table, "interaction", "a×b")["effect_pct"] == pytest.approx(pct(AB / 2), abs=tol)
    assert _row(table, "interaction", "a×c")["verdict"] == "SAME"
    assert _row(table, "total", "(all levers)")["effect_pct"] == pytest.approx(pct(E["a"] + E["b"] + AB), abs=tol)
    assert _row(table, "unexplained", "(all levers)")["effect_pct"] == pytest.approx(pct(AB), abs=tol)
    for _, r in table.iterrows():
        assert r["ci_low_pct"] <= r["effect_pct"] <= r["ci_high_pct"]
        assert r["verdict"] in {"FASTER", "SLOWER", "SAME", "UNRESOLVED"}


def test_shapley_adds_up_to_the_total_in_every_round() -> None:
    from kprof.analysis.run_effects import per_round_logs, round_statistics
    from kprof.designs import LegValues, Quantity, lever_values

    samples, legs = _samples(noise=0.01, seed=3)
    logs = per_round_logs(round_statistics(samples), "c")
    values = lever_values(LegValues(logs, legs, tuple(LEVERS)))
    total = values[Quantity("total")]
    assert np.allclose(sum(values[Quantity("shapley", f)] for f in LEVERS), total)


@pytest.mark.slow
def test_cli_on_a_stored_h200_run(tmp_path: Path) -> None:
    run = ROOT / "docs" / "runs" / "h200-2026-11-30" / "gdn_pr"
    runner = CliRunner()
    res = runner.invoke(app, ["attribute", str(run), "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0
    out = json.loads(res.stdout)
    assert {"levers", "aa"} <= set(out)
    designs = {row["design"] for row in out["levers"]}
    assert {"add_one", "leave_one_out", "shapley"} <= designs
    for row in out["levers"]:
        assert {"case", "lever", "design", "effect_pct", "ci_low_pct", "ci_high_pct", "verdict"} <= set(row)
    md = runner.invoke(app, ["attribute", str(run), "--format", "md"], catch_exceptions=False).stdout
    assert "| case | conv_warps | early_state | reuse_state | stream_state |" in md
    html = runner.invoke(app, ["attribute", str(run), "--format", "html"], catch_exceptions=False).stdout
    assert html.startswith("<!doctype html>") and html.count("data:image/png;base64,") >= 8


def test_a_revision_runs_page_and_markdown_carry_its_commits_paths_and_refusals(tmp_path: Path) -> None:
    """The HTML page and the markdown of a revision run hold what its terminal report holds: the
    commit table with subjects, the --paths line, and each leg refused with why."""
    run = ROOT / "docs" / "runs" / "h200-2026-12-02-s16" / "fla_loo"
    runner = CliRunner()
    page = tmp_path / "loo.html"
    assert runner.invoke(app, ["attribute", str(run), "-o", str(page)], catch_exceptions=False).exit_code == 0
    md = runner.invoke(app, ["attribute", str(run), "--format", "md"], catch_exceptions=False).stdout
    for text in (page.read_text(), md):
        assert "[Misc] Reduce recompile (#764)" in text  # a commit's subject, not a bare SHA
        assert "--paths fla/ops/gated_delta_rule: 10 commits of the range touch them" in text
        assert "head − 047b5df not timed: refused: reverting 047b5df does not apply" in text


def test_sweep_table_on_the_stored_split_sweep() -> None:
    from kprof.commands.analyse import attribute

    result = attribute(ROOT / "docs" / "runs" / "h200-2026-11-30" / "paged_sweep")
    sweep = result.sweep
    assert sweep["value"].tolist() == [1, 2, 4, 8, 16, 32]
    assert sweep["trend_p"].iloc[0] < 0.01
    best = sweep.loc[sweep["time_us"].idxmin(), "value"]
    assert best == 8


def test_mechanism_sweep_measures_the_lever_at_every_dose() -> None:
    """Lever a's effect shrinks with the dose (ln t: −0.20, −0.10, 0.0 at doses 1, 2, 4) while the
    target at each dose is slower than the unforced target by 5% per doubling; the table recovers both,
    the trend of the lever's effect, and the workload's columns."""
    rng = np.random.default_rng(3)
    legs = design_legs(("a",), "endpoints", sweep=("n", [1, 2, 4]), sweep_baseline=True)
    lever = {1: -0.20, 2: -0.10, 4: 0.0}
    rows = []
    for r in range(17):
        drift = rng.normal(0, 0.01)
        for leg in legs:
            dose = dict(leg.params).get("n")
            log_t = math.log(50e3) + drift + (0.05 * math.log2(dose) if dose else 0.0)
            log_t += (lever[dose] if dose else -0.10) if "a" in leg.features else 0.0
            rows.append(
                dict(
                    case="c",
                    leg=leg.name,
                    round=r,
                    sample=0,
                    time_ns=math.exp(log_t + rng.normal(0, 0.002)),
                    burn_in=r == 0,
                )
            )
    columns = {"c": {"1": {"trips": 8}, "2": {"trips": 4}, "4": {"trips": 2}}}
    table = sweep_table(pd.DataFrame(rows), legs, {}, columns)
    assert table["value"].tolist() == [1, 2, 4] and table["trips"].tolist() == [8, 4, 2]
    expected_lever = [100 * (math.exp(-e) - 1) for e in lever.values()]  # +22.1%, +10.5%, 0%
    assert np.allclose(table["lever_effect_pct"], expected_lever, atol=0.3)
    assert table["lever_verdict"].tolist() == ["FASTER", "FASTER", "SAME"]
    for _, r in table.iterrows():
        assert r["lever_ci_low_pct"] <= r["lever_effect_pct"] <= r["lever_ci_high_pct"]
    # the target at dose 1 is the unforced target with the lever 10 points stronger
    assert np.allclose(
        table["effect_pct"],
        [100 * (math.exp(-(e + 0.10) - 0.05 * math.log2(d)) - 1) for d, e in lever.items()],
        atol=0.3,
    )
    assert table["lever_trend_p"].iloc[0] < 1e-3


def test_attribute_md_prints_the_mechanism_table(tmp_path: Path) -> None:
    """A stored mechanism sweep (target and baseline forced to each split count): the markdown
    table has the target's effect at every value, with the number the run was built with."""
    legs = design_legs(("a",), "endpoints", sweep=("num_splits", [1, 2, 4]), sweep_baseline=True)
    lever = {1: -0.20, 2: -0.10, 4: 0.0}

    def log_t(leg: Leg, case: str) -> float:
        dose = dict(leg.params).get("num_splits")
        return (lever[dose] if dose else -0.10) if "a" in leg.features else 0.0

    folder = write_run(tmp_path / "mech", legs, log_t, features=("a",), sweep=("num_splits", [1, 2, 4]))
    res = CliRunner().invoke(app, ["attribute", str(folder.root), "--format", "md"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "| num_splits | µs | vs unforced target [95% CI] | target vs baseline at this value [95% CI] |" in res.stdout
    row = next(line for line in res.stdout.splitlines() if line.startswith("| 1 |"))
    # lever at one split: ln t −0.20 → +22.14% faster, inside its interval, FASTER
    cell = row.split("|")[4].strip()
    estimate = float(cell.split("%")[0])
    low, high = (float(x) for x in cell.split("[")[1].split("]")[0].split(","))
    assert abs(estimate - 22.14) < 0.5 and low <= 22.14 <= high and cell.endswith("FASTER")


@pytest.mark.slow
def test_attribute_runs_a_workload_first(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app,
        [
            "attribute",
            "paged_decode",
            "--device",
            DEVICE,
            "--preset",
            "smoke",
            "--case",
            "b2",
            "--rounds",
            "6",
            "--samples",
            "1",
            "--buffer-sets",
            "1",
            "--design",
            "endpoints",
            "--target",
            "skip_masked_tiles",
            "--sweep",
            "num_splits=1,2",
            "--sweep-baseline",
            "--out",
            str(tmp_path / "mech"),
            "--format",
            "json",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [r["value"] for r in out["sweep"]] == [1, 2]
    assert all(r["ci_low_pct"] <= r["effect_pct"] <= r["ci_high_pct"] for r in out["sweep"])


def test_one_lever_prints_one_interval_for_one_quantity(tmp_path: Path) -> None:
    """With one lever, leave-one-out and Shapley are the leg against the baseline, round for round:
    each prints the leg's row (estimate, interval, verdict), not an interval of its own; the
    unexplained part is 0 by construction and widens nothing."""
    from kprof.commands.analyse import attribute

    legs = design_legs(("f",), "all")
    effect = {"baseline": 0.0, "f": -0.03}  # f: 3% faster
    folder = write_run(tmp_path / "run", legs, lambda leg, case: effect.get(leg.name, 0.0), features=("f",))
    result = attribute(folder.root)
    rows = result.levers.set_index("design")
    leg = result.run.effects.set_index("leg").loc["f"]
    for design in ("leave_one_out", "shapley", "add_one", "total"):
        row = rows.loc[design]
        assert (row["effect_pct"], row["ci_low_pct"], row["ci_high_pct"], row["verdict"]) == (
            leg["effect_pct"],
            leg["ci_low_pct"],
            leg["ci_high_pct"],
            leg["verdict"],
        ), design
    assert rows.loc["leave_one_out", "same_as_leg"] == "f"
    assert rows.loc["unexplained", "effect_pct"] == 0.0 and rows.loc["unexplained", "verdict"] == "SAME"


def test_a_spread_between_runs_widens_each_quantity_by_its_weight_in_leg_effects() -> None:
    """--between-runs: every leg's time moves by its own offset between fresh runs, so a quantity
    Σ w·ln t moves by √(Σw²/2) leg effects: leave-one-out and add-one by one, a three-lever
    Shapley value by √(5/18) (weights ±1/3 on four legs, ±1/6 on four). Each side of its interval
    grows by that much of 1.96·SD in quadrature, and no more."""
    from kprof.analysis import stats as S
    from kprof.analysis.attribution import offset_weights
    from kprof.analysis.run_effects import per_round_logs, round_statistics
    from kprof.designs import LegValues, Quantity

    samples, legs = _samples()
    logs = per_round_logs(round_statistics(samples), "c")
    weights = offset_weights(LegValues(logs, legs, LEVERS))
    assert weights[Quantity("leave_one_out", "a")] == pytest.approx(1.0)
    assert weights[Quantity("add_one", "b")] == pytest.approx(1.0)
    assert weights[Quantity("shapley", "a")] == pytest.approx(math.sqrt(5 / 18))

    def sides(between_pct: float) -> pd.DataFrame:
        effects, summaries = leg_effects(samples, legs, 0.5, between_runs_pct=between_pct)
        table = attribute_run(samples, legs, LEVERS, summaries, effects).set_index(["design", "lever"])
        est = -np.log1p(table["effect_pct"] / 100)
        return pd.DataFrame(
            {"low": est + np.log1p(table["ci_high_pct"] / 100), "high": -np.log1p(table["ci_low_pct"] / 100) - est}
        )

    before, after = sides(0.0), sides(0.5)
    for design, lever, weight in (("shapley", "a", math.sqrt(5 / 18)), ("leave_one_out", "b", 1.0)):
        added = S.between_runs_half_width(0.5, weight)
        for side in ("low", "high"):
            grown = math.sqrt(after.loc[(design, lever), side] ** 2 - before.loc[(design, lever), side] ** 2)
            assert grown == pytest.approx(added, rel=1e-6), (design, lever, side)
