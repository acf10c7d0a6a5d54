"""Saved tables read by the tools people use on parquet: pandas, pyarrow (each table, each
partitioned dataset), DuckDB and polars, for `kprof trace --save` folders and run folders."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from kprof.commands.trace import run_trace
from kprof.store.run_folder import RunFolder
from kprof.store.run_tables import TABLES
from tests.conftest import EAGER, GRAPH, ROOT

PARTITIONED = ("kernel_events", "ranges")


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    out = tmp_path_factory.mktemp("saved") / "S"
    result = run_trace([EAGER, GRAPH], save=out)
    # rows per partitioned table as kprof held them, counted before anything was read back
    rows = {"kernel_events": sum(r.tables.summary["activities"] for r in result.ranks)}
    return out, rows


def test_partitioned_tables_read_in_every_reader(saved: tuple[Path, dict[str, int]]) -> None:
    out, rows = saved
    for name in PARTITIONED:
        folder = out / name
        frame = pd.read_parquet(folder)
        assert sorted(frame["rank"].astype(int).unique()) == [0, 1]
        assert list(frame.columns).count("rank") == 1
        n = len(frame)
        assert ds.dataset(folder, partitioning="hive").count_rows() == n
        assert duckdb.execute(
            f"SELECT COUNT(*) FROM read_parquet('{folder}/*/*.parquet', hive_partitioning = true)"
        ).fetchone() == (n,)
        assert pl.scan_parquet(folder, hive_partitioning=True).select(pl.len()).collect().item() == n
    assert len(pd.read_parquet(out / "kernel_events")) == rows["kernel_events"]


def test_result_tables_read_in_every_reader_with_one_rank_type(saved: tuple[Path, dict[str, int]]) -> None:
    out, _ = saved
    for path in sorted(out.glob("*.parquet")):
        n = pq.read_metadata(path).num_rows
        assert len(pd.read_parquet(path)) == n
        assert duckdb.execute(f"SELECT COUNT(*) FROM '{path}'").fetchone() == (n,)
        assert pl.read_parquet(path).height == n
        if "rank" in pq.read_schema(path).names:
            assert str(pq.read_schema(path).field("rank").type) == "int32", path.name
    # the whole folder as one dataset (what the partitions' int32 rank must agree with)
    assert ds.dataset(out, partitioning="hive", exclude_invalid_files=True).count_rows() > 0


def _stored_runs() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "docs" / "runs").glob("*/*/meta.json"))[:3]


@pytest.mark.parametrize("run", _stored_runs(), ids=lambda p: p.name)
def test_run_folder_tables_read_in_every_reader(run: Path) -> None:
    folder = RunFolder(run)
    for table in TABLES:
        if not (run / table).is_dir():
            continue
        n = len(folder.read(table))
        assert len(pd.read_parquet(run / table)) == n
        assert ds.dataset(run / table).count_rows() == n
        assert duckdb.execute(f"SELECT COUNT(*) FROM read_parquet('{run / table}/*.parquet')").fetchone() == (n,)
        assert pl.scan_parquet(run / table).select(pl.len()).collect().item() == n
