"""One comparison, one number: the same leg against the same baseline prints the same estimate,
interval and verdict in `kprof report`, `kprof attribute` (its total and add-one rows) and the A/A
footer, on the project's stored H200 runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kprof.analysis.run_analysis import attribute
from kprof.cli import app
from kprof.run_model import Role
from kprof.store.run_folder import RunFolder
from tests.conftest import ROOT

runner = CliRunner()
FIELDS = ("effect_pct", "ci_low_pct", "ci_high_pct", "verdict")


def _runs_with_levers() -> list[Path]:
    """Stored runs with every lever alone and all together (the designs attribution reads)."""
    found = []
    for meta in sorted((ROOT / "docs" / "runs").glob("*/*/meta.json")):
        if json.loads(meta.read_text()).get("design") == "all":
            found.append(meta.parent)
    return found


RUNS = _runs_with_levers()


def _same(a: dict, b: dict, where: str) -> None:
    for f in FIELDS:
        x, y = a[f], b[f]
        if isinstance(x, float) and isinstance(y, float):
            assert x == pytest.approx(y, abs=1e-9), (where, f, x, y)
        else:
            assert x == y, (where, f, x, y)


@pytest.mark.parametrize("run", RUNS[:6], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_attribution_rows_are_the_leg_rows_and_the_footer_the_aa_row(run: Path) -> None:
    result = attribute(run)
    legs = result.run.effects
    by_features = {}
    for leg in result.run.run.legs:
        if not (leg.params or leg.replica or leg.has(Role.AA)):
            by_features.setdefault(leg.features, leg.name)
    levers = result.run.run.lever_names
    checked = 0
    for row in result.levers.to_dict("records"):
        if row["design"] not in ("total", "add_one"):
            continue
        features = frozenset(levers) if row["design"] == "total" else frozenset({row["lever"]})
        leg = legs[(legs["case"] == row["case"]) & (legs["leg"] == by_features[features])].iloc[0].to_dict()
        _same(row, leg, f"{row['case']} {row['design']} {row['lever']}")
        checked += 1
    assert checked
    for case, summary in result.run.summaries.items():
        if summary.aa is None:
            continue
        aa_leg = next(leg.name for leg in result.run.run.legs if leg.has(Role.AA))
        row = legs[(legs["case"] == case) & (legs["leg"] == aa_leg)].iloc[0]
        assert (summary.aa.effect_pct, summary.aa.ci_low_pct, summary.aa.ci_high_pct) == pytest.approx(
            (row["effect_pct"], row["ci_low_pct"], row["ci_high_pct"]), abs=1e-9
        )


def test_report_and_attribute_print_the_same_numbers() -> None:
    run = RUNS[0]
    report = json.loads(runner.invoke(app, ["report", str(run), "--format", "json"], catch_exceptions=False).stdout)
    attributed = json.loads(runner.invoke(app, ["attribute", str(run), "--format", "json"]).stdout)
    legs = {(r["case"], r["leg"]): r for r in report["legs"]}
    total = [r for r in attributed["levers"] if r["design"] == "total"]
    assert total
    spec = RunFolder(run).read_run()
    full = next(
        leg.name
        for leg in spec.legs
        if leg.features == frozenset(spec.lever_names) and not (leg.params or leg.replica or leg.has(Role.AA))
    )
    for row in total:
        _same(row, legs[(row["case"], full)], row["case"])
