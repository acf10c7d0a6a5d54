"""`kprof sql QUERY FOLDER`: SQL over a saved trace folder or a run folder, with DuckDB.

DuckDB reads the parquet files where they lie (the rank partitions of a trace folder, the per-round
parts of a run folder) and pushes filters into the scan, so a query over thousands of ranks never
loads them into memory as pandas would. It is an optional extra (``pip install 'kprof[sql]'``):
most users never need SQL, and it is a large binary wheel.

Read-only by construction: only SELECT (and EXPLAIN) statements run; DuckDB may read files inside
the folder only (external access off, the folder the one allowed directory, the setting locked),
installs and loads no extension, works in a bounded amount of memory, and returns at most
``MAX_ROWS`` rows. A query that writes (``COPY … TO``, ``ATTACH``, ``INSTALL``, ``SET``) or reads
elsewhere (``read_csv('/etc/passwd')``) is a one-line error. Tables are registered through DuckDB's
relation API, never spelled into SQL, so a file's name cannot inject a statement.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from kprof.errors import KprofInputError
from kprof.store.layout import is_run_folder
from kprof.store.run_folder import PART_COLUMN, RunFolder
from kprof.store.run_tables import TABLES as RUN_TABLES
from kprof.store.trace_folder import PARTITIONED

MAX_ROWS = 100_000  # rows returned at most: a result is for reading, not for moving data
MEMORY_LIMIT = "4GB"
READ_ONLY = {"SELECT", "EXPLAIN"}  # duckdb.StatementType names a query may hold


@dataclass(frozen=True)
class RunTable:
    """A run folder's table as kprof reads it: the compacted file less the rows of every part
    written since, and those parts (never a stray copy of a part, whose rows would count twice)."""

    compact: Path | None
    parts: list[Path]

    def relation(self, con: Any) -> Any:
        from duckdb import ColumnExpression, ConstantExpression

        written = con.read_parquet([str(p) for p in self.parts], union_by_name=True) if self.parts else None
        if self.compact is None:
            return written
        kept = con.read_parquet(str(self.compact))
        columns = [c for c in kept.columns if c != PART_COLUMN]
        if written is None:
            return kept.select(*map(ColumnExpression, columns))
        stems = [ConstantExpression(p.stem) for p in self.parts]
        kept = kept.filter(~ColumnExpression(PART_COLUMN).isin(*stems))
        columns = [c for c in columns if c in written.columns]
        return kept.select(*map(ColumnExpression, columns)).union(written.select(*map(ColumnExpression, columns)))


def folder_tables(folder: Path) -> dict[str, tuple[list[str], dict[str, bool]] | RunTable]:
    """Each table the folder holds, by its documented name: the parquet files (a glob) DuckDB reads
    and how (hive partitions), or a run folder's table."""
    if not folder.is_dir():
        raise KprofInputError(folder, "is not a folder (give a `kprof trace --save` folder or a run folder)")
    tables: dict[str, tuple[list[str], dict[str, bool]] | RunTable] = {}
    for name in PARTITIONED:  # trace folder: hive-partitioned datasets
        if (folder / name).is_dir():
            tables[name] = ([str(folder / name / "**" / "*.parquet")], {"hive_partitioning": True})
    if is_run_folder(folder):
        run = RunFolder(folder)
        for name in RUN_TABLES:  # run folder: a compacted file and the parts written since
            compact, parts = run.table_files(name)
            if compact is not None or parts:
                tables[name] = RunTable(compact, parts)
    for file in sorted(folder.glob("*.parquet")):  # small result tables of a saved trace folder
        tables.setdefault(file.stem, ([str(file)], {}))
    if not tables:
        raise KprofInputError(folder, "holds no kprof tables (no parquet files or datasets)")
    return tables


def run_sql(query: str, folder: Path) -> tuple[pd.DataFrame, list[str], bool]:
    """The query's result (at most ``MAX_ROWS`` rows), the table names it could use, and whether
    the result was cut at ``MAX_ROWS``."""
    try:
        import duckdb
    except ImportError:
        raise KprofInputError("kprof sql", "needs DuckDB: pip install 'kprof[sql]'") from None
    if not query.strip():
        raise KprofInputError("QUERY", "is empty (give a SELECT over the folder's tables)")
    folder = folder.resolve()
    tables = folder_tables(folder)
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        con.execute("SET allowed_directories = $dirs", {"dirs": [str(folder) + "/"]})
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        for name, where in tables.items():
            relation = where.relation(con) if isinstance(where, RunTable) else con.read_parquet(where[0], **where[1])
            relation.create_view(name)
        statements = con.extract_statements(query)
        kinds = {str(st.type).rsplit(".", 1)[-1] for st in statements}
        if not kinds <= READ_ONLY:
            refused = ", ".join(sorted(kinds - READ_ONLY))
            raise KprofInputError("QUERY", f"kprof sql runs SELECT and EXPLAIN only, not {refused} (it never writes)")
        if len(statements) != 1:
            raise KprofInputError("QUERY", f"holds {len(statements)} statements: give one SELECT")
        result = con.sql(statements[0].query).limit(MAX_ROWS + 1).df()
    except duckdb.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise KprofInputError("QUERY", f"{first} (tables: {', '.join(tables)})") from None
    finally:
        con.close()
    cut = len(result) > MAX_ROWS
    return result.head(MAX_ROWS), list(tables), cut
