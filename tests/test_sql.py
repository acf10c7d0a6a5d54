"""`kprof sql`: DuckDB over a saved trace folder (hive-partitioned by rank) and over a run folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import ROOT
from kprof.cli import app
from kprof.store.run_folder import RunFolder

pytest.importorskip("duckdb")
runner = CliRunner()
RUN = ROOT / "docs" / "runs" / "h200-2026-11-30-s4" / "gdn_rev"


def _rows(query: str, folder: Path) -> list[dict]:
    res = runner.invoke(app, ["sql", query, str(folder), "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["rows"]


def test_sql_over_saved_ranks(tmp_path: Path) -> None:
    from test_trace_collection import _rank_traces

    ranks = _rank_traces(tmp_path / "ranks")
    assert runner.invoke(app, ["trace", str(ranks), "--save", str(tmp_path / "saved")]).exit_code == 0
    per_rank = _rows("SELECT rank, count(*) AS n FROM kernel_events GROUP BY rank ORDER BY rank", tmp_path / "saved")
    assert per_rank == [{"rank": r, "n": 320} for r in range(3)]
    slowest = _rows("SELECT DISTINCT slowest_rank FROM rank_steps", tmp_path / "saved")
    assert slowest == [{"slowest_rank": 2}]


def test_sql_over_a_run_folder() -> None:
    (row,) = _rows("SELECT count(*) AS n FROM samples", RUN)
    assert row["n"] == len(RunFolder(RUN).read("samples"))


def test_sql_errors_are_one_line(tmp_path: Path) -> None:
    res = runner.invoke(app, ["sql", "SELEC 1", str(RUN)])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "syntax error" in res.stderr
    assert "samples" in res.stderr  # the tables it could have used
    empty = runner.invoke(app, ["sql", "SELECT 1", str(tmp_path)])
    assert empty.exit_code == 2 and "holds no kprof tables" in empty.stderr


def test_an_unreadable_table_file_is_named_in_one_line(tmp_path: Path) -> None:
    from conftest import GRAPH

    saved = tmp_path / "saved"
    assert runner.invoke(app, ["trace", str(GRAPH), "--save", str(saved)]).exit_code == 0
    (saved / "annotations.parquet").write_bytes(b"")  # a save cut short, a disk that filled
    res = runner.invoke(app, ["sql", "SELECT count(*) FROM kernel_events", str(saved)])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
    assert "annotations.parquet: is not a readable parquet file (Parquet file size is 0 bytes)" in res.stderr
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    part = sorted(run.rglob("*.parquet"))[0]
    part.write_bytes(b"PAR1 not a footer")
    res = runner.invoke(app, ["sql", "SELECT 1", str(run)])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert f"{part.name}: is not a readable parquet" in res.stderr


def test_the_documented_queries_run(tmp_path: Path) -> None:
    """The three queries of docs/trace.md, as written there, on a saved trace and a stored run."""
    import re

    text = (ROOT / "docs" / "trace.md").read_text()
    queries = [" ".join(q.split()) for q in re.findall(r'kprof sql "(.*?)" \S+/\n', text, flags=re.S)]
    assert len(queries) == 3
    assert runner.invoke(app, ["trace", str(ROOT / "traces"), "--save", str(tmp_path / "saved")]).exit_code == 0
    assert len(_rows(queries[0], tmp_path / "saved")) == 10
    traces = len(list((ROOT / "traces").glob("*.json.gz")))  # one rank per file of the folder
    assert {r["rank"] for r in _rows(queries[1], tmp_path / "saved")} == set(range(traces))
    rounds = _rows(queries[2], ROOT / "docs" / "runs" / "h200-2026-11-30" / "gdn_pr")
    assert [r["round"] for r in rounds] == list(range(1, len(rounds) + 1)) and len(rounds) >= 6


def _saved(tmp_path: Path) -> Path:
    saved = tmp_path / "saved"
    assert runner.invoke(app, ["trace", str(ROOT / "traces"), "--save", str(saved)]).exit_code == 0
    return saved


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("COPY (SELECT 1) TO '{folder}/meta.json'", "SELECT and EXPLAIN only, not COPY"),
        ("SELECT * FROM read_csv('/etc/passwd')", "Permission Error"),
        ("SELECT * FROM read_parquet('{folder}/../*.parquet')", "Permission Error"),
        ("ATTACH '{folder}/x.db'", "not ATTACH"),
        ("INSTALL httpfs", "SELECT and EXPLAIN only"),
        ("SET enable_external_access = true", "not SET"),
        ("SELECT 1; DROP VIEW kernels", "SELECT and EXPLAIN only"),
        ("", "is empty"),
    ],
)
def test_sql_is_read_only_and_stays_in_the_folder(tmp_path: Path, query: str, says: str) -> None:
    saved = _saved(tmp_path)
    meta = (saved / "meta.json").read_bytes()
    res = runner.invoke(app, ["sql", query.format(folder=saved), str(saved)])
    assert res.exit_code == 2 and says in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert (saved / "meta.json").read_bytes() == meta and not (saved / "x.db").exists()


def test_sql_results_are_capped_and_file_names_never_become_sql(tmp_path: Path) -> None:
    from kprof.commands.sql import MAX_ROWS

    saved = _saved(tmp_path)
    res = runner.invoke(app, ["sql", "SELECT * FROM range(1000000)", str(saved), "--format", "json"])
    out = json.loads(res.stdout)
    assert res.exit_code == 0 and len(out["rows"]) == MAX_ROWS and out["cut"] is True
    evil = saved / "k'); COPY (SELECT 42) TO 'pwned.csv'; SELECT ('.parquet"
    evil.write_bytes((saved / "kernels.parquet").read_bytes())
    res = runner.invoke(app, ["sql", "SELECT count(*) AS n FROM kernels", str(saved), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert not list(tmp_path.rglob("pwned.csv")) and not Path("pwned.csv").exists()


def test_a_run_table_reads_as_the_report_reads_it_after_a_resume(tmp_path: Path) -> None:
    """A part written after the compaction (a resumed round) replaces that round's compacted rows:
    the query counts each row once, as RunFolder.read does."""
    import pyarrow.parquet as pq
    from fake_runs import write_run

    from kprof.designs.legs import design_legs

    folder = write_run(tmp_path / "run", design_legs(("a",), "endpoints"), lambda leg, case: 0.0, rounds=6)
    folder.compact()
    rows = pq.read_table(folder.root / "samples" / "compact.parquet").to_pandas()
    again = rows[rows["_part"] == "c000-r0003"].drop(columns="_part").iloc[:4]  # round 3 timed again
    folder.write_part("samples", 0, 3, again)
    assert len(folder.read("samples")) == len(rows) - 9 + 4
    assert _rows("SELECT count(*) AS n FROM samples", folder.root) == [{"n": len(rows) - 9 + 4}]
    assert _rows("SELECT count(*) AS n FROM samples WHERE round = 3", folder.root) == [{"n": 4}]


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("EXPLAIN ANALYZE COPY (SELECT 1 AS a) TO '{table}' (FORMAT parquet)", "explains a SELECT only, not COPY"),
        ("EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1", "explains a SELECT only, not CREATE"),
        ("EXPLAIN ANALYZE DROP VIEW samples", "explains a SELECT only, not DROP"),
        ("SELECT * FROM read_parquet('{table}')", "Permission Error"),  # DuckDB itself reads no file
    ],
)
def test_nothing_wrapped_in_explain_writes_a_run(tmp_path: Path, query: str, says: str) -> None:
    """The issue's attacks: EXPLAIN ANALYZE runs what it explains; a statement filter on the first
    keyword let a COPY overwrite a run's compacted samples (exit 0)."""
    from fake_runs import write_run

    from kprof.designs.legs import design_legs

    folder = write_run(tmp_path / "run", design_legs(("a",), "endpoints"), lambda leg, case: 0.0, rounds=6)
    folder.compact()
    table = folder.root / "samples" / "compact.parquet"
    before = table.read_bytes()
    res = runner.invoke(app, ["sql", query.format(table=table), str(folder.root)])
    assert res.exit_code == 2 and says in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert table.read_bytes() == before
    assert _rows("SELECT count(*) AS n FROM samples", folder.root)[0]["n"] == len(folder.read("samples"))


def test_a_query_that_would_not_end_is_stopped(tmp_path: Path) -> None:
    saved = _saved(tmp_path)
    for query in (
        "SELECT sum(i) FROM range(10000000000000) t(i)",
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
    ):
        res = runner.invoke(app, ["sql", query, str(saved), "--timeout", "1"])
        assert res.exit_code == 2 and "ran longer than --timeout 1 s" in res.stderr, res.stderr


def test_a_result_too_large_is_one_line_and_an_empty_one_is_an_answer(tmp_path: Path, monkeypatch) -> None:
    import kprof.commands.sql as sql_command

    saved = _saved(tmp_path)
    monkeypatch.setattr(sql_command, "MAX_RESULT_BYTES", 1 << 20)
    res = runner.invoke(app, ["sql", "SELECT repeat('x', 2000000) AS s", str(saved)])
    assert res.exit_code == 2 and "kprof sql returns at most 1 MiB" in res.stderr, res.stderr
    res = runner.invoke(app, ["sql", "SELECT name FROM kernels WHERE false", str(saved), "--format", "csv"])
    assert res.exit_code == 0 and res.stdout == "name\n", res.output
