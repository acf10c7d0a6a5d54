"""`kprof compare` on traces (single and repeated) and on stored H200 run folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import EAGER, GRAPH, ROOT
from kprof.cli import app

runner = CliRunner()
RUNS = ROOT / "docs" / "runs" / "h200-2026-11-30"


def _json(*args: str) -> dict:
    res = runner.invoke(app, ["compare", *args, "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_one_trace_per_side_gives_deltas_and_no_verdict() -> None:
    out = _json(str(EAGER), str(GRAPH))
    assert not out["repeated"] and "no verdict" in out["note"]
    both = [k for k in out["kernels"] if not k["verdict"].startswith("ONLY")]
    assert both and all(k["verdict"] == "ONE SAMPLE" for k in both)
    step = out["steps"][0]
    assert step["effect_pct"] == pytest.approx(100 * (step["a"] / step["b"] - 1))


def test_repeated_identical_traces_are_the_same(tmp_path: Path) -> None:
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        for i in range(4):
            shutil.copy(GRAPH, tmp_path / side / f"rep{i}.json.gz")
    out = _json(str(tmp_path / "a"), str(tmp_path / "b"))
    assert out["repeated"]
    verdicts = {k["verdict"] for k in out["kernels"]}
    assert verdicts <= {"SAME"}  # zero shift, interval [0, 0]


def test_saved_parquet_side(tmp_path: Path) -> None:
    assert runner.invoke(app, ["trace", str(GRAPH), "--save", str(tmp_path / "g")]).exit_code == 0
    out = _json(str(tmp_path / "g"), str(GRAPH))
    kernel = next(k for k in out["kernels"] if k["verdict"] == "ONE SAMPLE")
    assert abs(kernel["effect_pct"]) < 1e-9  # the same trace, read two ways


def test_runs_compare_per_leg_and_fail_on() -> None:
    a, b = RUNS / "cal_paged_decode_b64-s2048", RUNS / "prm_paged_decode_b64-s2048"
    out = _json(str(a), str(b))
    assert out["repeated"] and out["legs"]
    for row in out["legs"]:
        assert row["ci_low_pct"] <= row["effect_pct"] <= row["ci_high_pct"]
    res = runner.invoke(app, ["compare", str(a), str(a), "--fail-on", "slower>1%"])
    assert res.exit_code == 0  # a run against itself breaks nothing
    bad = runner.invoke(app, ["compare", str(a), str(b), "--fail-on", "slower>0.1%"])
    assert bad.exit_code == 1 and "--fail-on" in bad.stderr


def test_compare_errors() -> None:
    run = RUNS / "gdn_pr"
    for args, word in [
        ([str(run), str(GRAPH)], "compare like with like"),
        ([str(GRAPH), "/no/such/trace.json"], "no such"),
        ([str(GRAPH), str(GRAPH), "--fail-on", "worse"], "--fail-on"),
    ]:
        res = runner.invoke(app, ["compare", *args])
        assert res.exit_code == 2 and res.stderr.count("\n") == 1 and word in res.stderr, (args, res.stderr)
