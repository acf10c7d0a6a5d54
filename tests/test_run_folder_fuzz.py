"""Fuzzing run folders: any file of a finished run truncated, overwritten, replaced by JSON of
another shape, or deleted; `report`, `attribute` and `compare` then either report (every intact round
still there) or fail with one line and exit 2 — never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from damage import damage_one_file
from fake_runs import write_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import report_fuzz_count
from kprof.cli import app
from kprof.designs.legs import design_legs

runner = CliRunner()
TRIED: list[str] = []


def _pristine(root: Path) -> Path:
    """A finished run: baseline, both levers, A/A; 8 rounds, one case."""
    source = root / "pristine"
    if not source.exists():
        legs = design_legs(("a", "b"), "endpoints")
        write_run(source, legs, lambda leg, case: -0.05 * len(leg.features), rounds=8, features=("a", "b"))
    return source


@pytest.mark.slow  # 40 damaged run folders, each analysed and reported (20 s)
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    which=st.integers(0, 10_000),
    how=st.integers(0, 3),
    where=st.floats(0, 1),
    data=st.binary(min_size=1, max_size=16),
)
def test_damaged_run_folders_never_give_a_traceback(tmp_path_factory, which, how, where, data) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    folder = root / "run"
    shutil.copytree(_pristine(tmp_path_factory.getbasetemp()), folder)
    what = damage_one_file(folder, which, how, where, data)
    TRIED.append(what)
    for args in (
        ["report", str(folder), "--format", "json"],
        ["attribute", str(folder), "--format", "json"],
        ["compare", str(folder), str(folder), "--format", "json"],
    ):
        res = runner.invoke(app, args)
        assert res.exit_code in (0, 2), (what, args, res.output)
        assert "Traceback" not in res.output and not isinstance(res.exception, Exception) or res.exit_code == 2, (
            what,
            args,
            repr(res.exception),
        )
        if res.exit_code == 2:
            assert res.stderr.startswith("kprof: error:") and res.stderr.count("\n") == 1, (what, res.stderr)
        elif args[0] == "report":
            legs = json.loads(res.stdout)["legs"]
            assert legs and all(r["rounds"] >= 7 for r in legs if r["verdict"] != "REFERENCE"), what


@pytest.mark.slow  # with its fuzz test, in CI's slow step (alone it would always skip)
def test_fuzz_count(capsys) -> None:
    """Says how many damaged folders the fuzz test tried (it runs first in this file)."""
    report_fuzz_count(capsys, "run-folder", TRIED, 40)


@pytest.mark.parametrize("kept", [0, 1, 2, 5])
def test_a_run_stopped_after_any_round_reports_what_it_has_or_says_it_has_nothing(tmp_path: Path, kept: int) -> None:
    """Both cases killed after their burn-in round (0) or after a few timed rounds: every command
    reports the rounds there are and names the unfinished cases, or says in one line that nothing is
    timed yet (report and attribute once crashed there with KeyError 'case' / 'design')."""
    from fake_runs import forget_rounds

    from kprof.store.run_folder import RunFolder

    folder = tmp_path / "run"
    legs = design_legs(("a", "b"), "endpoints")
    run = write_run(folder, legs, lambda leg, case: -0.05 * len(leg.features), cases=("c", "d"), rounds=8)
    run.compact()
    forget_rounds(folder, set(range(kept + 1, 9)))
    run.update_case("c", status="")
    run.update_case("d", status="")
    for args in (["report", str(folder)], ["attribute", str(folder)], ["compare", str(folder), str(folder)]):
        res = runner.invoke(app, [*args, "--format", "json"])
        if kept == 0:
            assert res.exit_code == 2 and res.stderr == f"kprof: error: {folder}: holds no finished round yet\n"
            continue
        assert res.exit_code == 0, (args, res.output)
        if args[0] == "report":
            doc = json.loads(res.stdout)
            assert {r["rounds"] for r in doc["legs"] if r["verdict"] != "REFERENCE"} == {kept}
            assert doc["missing"] == [{"case": c, "leg": "", "reason": "", "refused": False} for c in ("c", "d")]
    assert RunFolder(folder).read_statuses().missing(["c"])[0].text == "case c has not finished"
