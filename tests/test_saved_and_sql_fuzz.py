"""Fuzzing saved trace folders and `kprof sql`: a `kprof trace --save` folder with any file damaged,
then `compare` and `sql` over it; and queries put together from SQL's words and kprof's tables,
including the ones that write or read elsewhere. Each either answers or fails in one line with exit
2 — never a traceback — and no query changes a byte of the folder or writes beside it."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from damage import damage_one_file
from fake_runs import write_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import GRAPH, report_fuzz_count
from kprof.cli import app
from kprof.designs.legs import design_legs

runner = CliRunner()
SAVED: list[str] = []
QUERIES: list[str] = []
WORDS = [
    "SELECT", "*", "count(*)", "FROM", "samples", "kernels", "kernel_events", "rounds", "meta", "WHERE",
    "1=1", "GROUP BY", "leg", "ORDER BY", "time_ns", "LIMIT", "5", ";", ",", "(", ")", "'", '"', "--", "/*",
    "COPY", "TO", "'out.csv'", "ATTACH", "'x.db'", "AS", "x", "INSTALL", "httpfs", "LOAD", "SET",
    "memory_limit='1TB'", "PRAGMA", "EXPORT DATABASE", "'dump'", "read_csv('/etc/passwd')",
    "read_parquet('/tmp/*.parquet')", "range(100000000)", "UNION ALL", "CREATE TABLE", "DROP VIEW",
    "EXPLAIN", "getenv('HOME')", "glob('/*')", "\\x00", "ñ",
]  # fmt: skip


def _one_line_or_answer(res, what: str) -> None:
    assert res.exit_code in (0, 2), (what, res.output, repr(res.exception))
    assert "Traceback" not in res.output, (what, res.output)
    if res.exit_code == 2:
        assert res.stderr.startswith("kprof: error:") and res.stderr.count("\n") == 1, (what, res.stderr)


def _saved(base: Path) -> Path:
    source = base / "saved-pristine"
    if not source.exists():
        assert runner.invoke(app, ["trace", str(GRAPH), "--save", str(source)]).exit_code == 0
    return source


@pytest.mark.slow  # 30 damaged saved folders, each compared and queried (25 s)
@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    which=st.integers(0, 10_000), how=st.integers(0, 3), where=st.floats(0, 1), data=st.binary(min_size=1, max_size=16)
)
def test_damaged_saved_trace_folders_never_give_a_traceback(tmp_path_factory, which, how, where, data) -> None:
    pytest.importorskip("duckdb")
    folder = tmp_path_factory.mktemp("saved") / "saved"
    shutil.copytree(_saved(tmp_path_factory.getbasetemp()), folder)
    what = damage_one_file(folder, which, how, where, data)
    SAVED.append(what)
    for args in (
        ["compare", str(folder), str(GRAPH), "--format", "json"],
        ["sql", "SELECT count(*) FROM kernel_events", str(folder), "--format", "json"],
    ):
        _one_line_or_answer(runner.invoke(app, args), what)


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


@pytest.mark.slow  # 60 queries over one run folder (20 s)
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(WORDS), min_size=0, max_size=12))
def test_any_query_answers_or_fails_in_one_line_and_writes_nothing(tmp_path_factory, words) -> None:
    pytest.importorskip("duckdb")
    base = tmp_path_factory.getbasetemp()
    run = base / "sql-run"
    if not run.exists():
        legs = design_legs(("a",), "endpoints")
        write_run(run, legs, lambda leg, case: 0.0, rounds=6, features=("a",)).compact()
    before, around = _digest(run), sorted(p.name for p in base.iterdir())
    query = " ".join(words)
    QUERIES.append(query)
    res = runner.invoke(app, ["sql", "--format", "json", "--", query, str(run)])
    _one_line_or_answer(res, query)
    assert "root:" not in res.stdout and "/bin/" not in res.stdout, query  # nothing read from outside
    assert _digest(run) == before, query  # no byte of the folder changed, nothing written in it
    assert sorted(p.name for p in base.iterdir()) == around, query  # nor beside it


@pytest.mark.slow  # with its fuzz tests, in CI's slow step
def test_fuzz_counts(capsys) -> None:
    """Says how many damaged saved folders and queries the fuzz tests above tried."""
    report_fuzz_count(capsys, "saved-folder", SAVED, 30)
    report_fuzz_count(capsys, "sql", QUERIES, 60)
