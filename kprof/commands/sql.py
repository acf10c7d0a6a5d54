"""`kprof sql QUERY FOLDER`: SQL over a saved trace folder or a run folder, with DuckDB.

DuckDB reads the parquet files where they lie (the rank partitions of a trace folder, the per-round
parts of a run folder) and pushes filters into the scan, so a query over thousands of ranks never
loads them into memory as pandas would. It is an optional extra (``pip install 'kprof[sql]'``):
most users never need SQL, and it is a large binary wheel.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kprof.errors import KprofInputError
from kprof.store.run_folder import is_run_folder
from kprof.store.run_tables import TABLES as RUN_TABLES
from kprof.store.trace_folder import PARTITIONED


def _sql_string(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def folder_views(folder: Path) -> dict[str, str]:
    """Each table the folder holds, by its documented name, as a DuckDB ``FROM`` expression."""
    if not folder.is_dir():
        raise KprofInputError(folder, "is not a folder (give a `kprof trace --save` folder or a run folder)")
    views: dict[str, str] = {}
    for name in PARTITIONED:  # trace folder: hive-partitioned datasets
        if (folder / name).is_dir():
            views[name] = f"read_parquet({_sql_string(folder / name / '**' / '*.parquet')}, hive_partitioning = true)"
    if is_run_folder(folder):
        for name in RUN_TABLES:  # run folder: one part per case and round
            if any((folder / name).glob("*.parquet")):
                views[name] = f"read_parquet({_sql_string(folder / name / '*.parquet')}, union_by_name = true)"
    for file in sorted(folder.glob("*.parquet")):  # small result tables of a saved trace folder
        views.setdefault(file.stem, f"read_parquet({_sql_string(file)})")
    if not views:
        raise KprofInputError(folder, "holds no kprof tables (no parquet files or datasets)")
    return views


def run_sql(query: str, folder: Path) -> tuple[pd.DataFrame, list[str]]:
    """The query's result, and the table names it could use."""
    try:
        import duckdb
    except ImportError:
        raise KprofInputError("kprof sql", "needs DuckDB: pip install 'kprof[sql]'") from None
    views = folder_views(folder)
    con = duckdb.connect()
    try:
        for name, source in views.items():
            con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM {source}')
        return con.execute(query).df(), list(views)
    except duckdb.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise KprofInputError("QUERY", f"{first} (tables: {', '.join(views)})") from None
    finally:
        con.close()
