"""One comparison, one number: the same leg against the same baseline prints the same estimate,
interval and verdict in `kprof report`, `kprof attribute` (its total and add-one rows) and the A/A
footer, on the project's stored H200 runs."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kprof.cli import app
from kprof.commands.analyse import attribute
from kprof.report.effects import effect_text
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


def _twin_runs() -> tuple[Path, Path]:
    """Two stored runs of one workload, design and cases (the same command run twice)."""
    seen: dict[str, Path] = {}
    for meta in sorted((ROOT / "docs" / "runs").glob("*/*/meta.json")):
        record = json.loads(meta.read_text())
        key = json.dumps([record.get(k) for k in ("workload", "design", "cases", "levers")], default=str)
        if key in seen:
            return seen[key], meta.parent
        seen[key] = meta.parent
    pytest.skip("no two stored runs of one command")


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


@functools.cache  # each command's JSON is read by several tests: computed once
def _printed_once(args: tuple[str, ...]) -> str:
    res = runner.invoke(app, list(args), env={"COLUMNS": "300"}, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def _printed(args: list[str]) -> str:
    return _printed_once(tuple(args))


def _holds_each(rows: list[dict], out: str, key: tuple[str, ...], where: str) -> int:
    """Every row's effect text and verdict stand together on one line of ``out`` that names its key."""
    lines = out.splitlines()
    for row in rows:
        text = effect_text(row)
        found = [line for line in lines if text in line and all(str(row[k]) in line for k in key)]
        assert found, (where, row, text)
        assert any(row["verdict"] in line for line in found), (where, row["verdict"], found)
    return len(rows)


@pytest.mark.parametrize("fmt", ["table", "md"])
def test_report_prints_its_json_numbers_in_every_format(fmt: str) -> None:
    run = str(RUNS[0])
    legs = json.loads(_printed(["report", run, "--format", "json"]))["legs"]
    assert _holds_each(
        [r for r in legs if r["verdict"] != "REFERENCE"], _printed(["report", run, "--format", fmt]), ("leg",), fmt
    )


@pytest.mark.parametrize("fmt", ["table", "md", "html"])
def test_attribute_prints_its_json_numbers_in_every_format(fmt: str) -> None:
    if fmt == "html":
        pytest.importorskip("matplotlib")
    run = str(RUNS[0])
    levers = json.loads(_printed(["attribute", run, "--format", "json"]))["levers"]
    assert _holds_each(levers, _printed(["attribute", run, "--format", fmt]), ("case",), fmt)


@pytest.mark.parametrize("fmt", ["table", "md", "csv"])
def test_compare_prints_its_json_numbers_in_every_format(fmt: str) -> None:
    a, b = (str(run) for run in _twin_runs())
    legs = json.loads(_printed(["compare", a, b, "--format", "json"]))["legs"]
    out = _printed(["compare", a, b, "--format", fmt])
    if fmt != "csv":
        assert _holds_each(legs, out, ("case", "leg"), fmt)
        return
    import csv
    import io

    rows = [r for r in csv.DictReader(io.StringIO(out)) if r["table"] == "legs"]
    assert len(rows) == len(legs)
    for row, leg in zip(rows, legs):
        assert (row["case"], row["leg"], row["verdict"]) == (leg["case"], leg["leg"], leg["verdict"])
        for f in ("effect_pct", "ci_low_pct", "ci_high_pct"):
            assert float(row[f]) == pytest.approx(leg[f], rel=1e-9, abs=1e-9), (row["leg"], f)


@pytest.mark.parametrize(
    ("effect", "lo", "hi", "text"),
    [
        (257.58, 256.62, 259.28, "+257.58% [+256.62, +259.28] (3.58× faster)"),
        (-50.0, -52.0, -48.0, "-50.00% [-52.00, -48.00] (2× slower)"),
        (-75.0, -80.0, -70.0, "-75.00% [-80.00, -70.00] (4× slower)"),
        (16654.09, 365.14, 482339.72, "+16654.09% [+365.14, +482339.72] (168× faster)"),
        (49.9, 40.0, 60.0, "+49.90% [+40.00, +60.00]"),
        (-11.56, -11.91, -11.13, "-11.56% [-11.91, -11.13]"),
    ],
)
def test_large_effects_also_read_as_ratios(effect: float, lo: float, hi: float, text: str) -> None:
    row = {"verdict": "FASTER", "effect_pct": effect, "ci_low_pct": lo, "ci_high_pct": hi}
    assert effect_text(row) == text
