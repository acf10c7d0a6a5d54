"""Fuzzing run folders: any file of a finished run truncated, overwritten, replaced by JSON of
another shape, or deleted; `report`, `attribute` and `compare` then either report (every intact round
still there) or fail with one line and exit 2 — never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fake_runs import write_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import report_fuzz_count
from kprof.cli import app
from kprof.engine.design import design_legs

runner = CliRunner()
TRIED: list[str] = []
SHAPES = [b"", b"{}", b"[]", b"42", b'"x"', b'{"legs": "oops"}', b"\xff\xfe", b"PAR1", b"null"]


def _pristine(root: Path) -> Path:
    """A finished run: baseline, both levers, A/A; 8 rounds, one case."""
    source = root / "pristine"
    if not source.exists():
        legs = design_legs(("a", "b"), "endpoints")
        write_run(source, legs, lambda leg, case: -0.05 * len(leg.features), rounds=8, features=("a", "b"))
    return source


def _mutate(folder: Path, which: int, how: int, where: float, data: bytes) -> str:
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    target = files[which % len(files)]
    raw = target.read_bytes()
    kind = ("truncate", "overwrite", "reshape", "delete")[how]
    if kind == "truncate":
        target.write_bytes(raw[: int(len(raw) * where)])
    elif kind == "overwrite":
        pos = int(len(raw) * where)
        target.write_bytes(raw[:pos] + data + raw[pos + len(data) :])
    elif kind == "reshape":
        target.write_bytes(SHAPES[int(where * len(SHAPES)) % len(SHAPES)])
    else:
        target.unlink()
    return f"{kind} {target.relative_to(folder)}"


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
    what = _mutate(folder, which, how, where, data)
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
