"""`kprof sql QUERY FOLDER`: SQL over a saved trace folder or a run folder, with DuckDB.

DuckDB reads the parquet files where they lie (the rank partitions of a trace folder, the per-round
parts of a run folder) and pushes filters into the scan, so a query over thousands of ranks never
loads them into memory as pandas would. It is an optional extra (``pip install 'kprof[sql]'``):
most users never need SQL, and it is a large binary wheel.

Read-only by construction: the folder's tables are handed to DuckDB as Arrow datasets (pyarrow
reads the files; DuckDB scans them with its filters pushed down), and DuckDB itself may touch no
file at all (external access off, the setting locked): a ``COPY … TO`` into the folder, a
``read_csv('/etc/passwd')``, an ``ATTACH`` fail however they are wrapped (``EXPLAIN ANALYZE`` runs
what it explains). On top, only a SELECT runs (an EXPLAIN only of a SELECT); no extension is
installed or loaded; memory is bounded, a query stops after ``--timeout`` seconds, and a result
holds at most ``MAX_ROWS`` rows and ``MAX_RESULT_BYTES``. Tables are registered through DuckDB's
relation API, never spelled into SQL, so a file's name cannot inject a statement.
"""

from __future__ import annotations

import re
import threading
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
MAX_RESULT_BYTES = 256 << 20
MEMORY_LIMIT = "4GB"
TIMEOUT_S = 60.0
EXPLAINED = re.compile(r"^\s*EXPLAIN(\s+ANALY[SZ]E)?(\s*\([^)]*\))?\s+(?P<inner>.*)$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class RunTable:
    """A run folder's table as kprof reads it: the compacted file less the rows of every part
    written since, and those parts (never a stray copy of a part, whose rows would count twice)."""

    compact: Path | None
    parts: list[Path]

    def relation(self, con: Any) -> Any:
        import pyarrow.compute as pc
        from duckdb import ColumnExpression

        written = con.from_arrow(_dataset(self.parts)) if self.parts else None
        if self.compact is None:
            return written
        kept = _dataset([self.compact])
        columns = [c for c in kept.schema.names if c != PART_COLUMN]
        if written is not None:  # the compacted rows less those of every part written since
            kept = kept.filter(~pc.field(PART_COLUMN).isin([p.stem for p in self.parts]))
            columns = [c for c in columns if c in written.columns]
        kept_rows = con.from_arrow(kept).select(*map(ColumnExpression, columns))
        if written is None:
            return kept_rows
        return kept_rows.union(written.select(*map(ColumnExpression, columns)))


def _dataset(files: list[Path], base: Path | None = None) -> Any:
    """The parquet ``files`` as one Arrow dataset: with ``base``, a saved trace's hive partitions
    below it (their columns too); else a run table's parts, their schemas unified (a later part may
    carry a column an earlier one lacks)."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    paths = [str(f) for f in files]
    where = {"partitioning": ds.partitioning(flavor="hive"), "partition_base_dir": str(base)} if base else {}
    try:
        found = ds.dataset(paths, format="parquet", **where)  # the first file's columns and the partitions'
        if base is not None:  # a saved trace's partitions share one schema: no footer read per rank
            return found
        schema = pa.unify_schemas([found.schema, *(pq.read_schema(p) for p in paths)], promote_options="permissive")
        return ds.dataset(paths, format="parquet", schema=schema, **where)
    except (pa.ArrowException, OSError) as e:
        raise _unreadable(files, e) from None


def _unreadable(files: list[Path], error: Exception) -> KprofInputError:
    """The error naming the first of ``files`` whose parquet footer cannot be read, and why."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for file in files:
        try:
            pq.read_metadata(file)
        except (pa.ArrowException, OSError) as e:
            return KprofInputError(file, f"is not a readable parquet file ({_first_line(e)})")
    return KprofInputError(files[0].parent, f"holds parquet files that cannot be read together ({_first_line(error)})")


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def folder_tables(folder: Path) -> dict[str, tuple[list[Path], Path | None] | RunTable]:
    """Each table the folder holds, by its documented name: its parquet files (and the folder below
    which hive partitions are columns), or a run folder's table."""
    if not folder.is_dir():
        raise KprofInputError(folder, "is not a folder (give a `kprof trace --save` folder or a run folder)")
    tables: dict[str, tuple[list[Path], Path | None] | RunTable] = {}
    for name in PARTITIONED:  # trace folder: hive-partitioned datasets
        files = sorted((folder / name).glob("**/*.parquet")) if (folder / name).is_dir() else []
        if files:
            tables[name] = (files, folder / name)
    if is_run_folder(folder):
        run = RunFolder(folder)
        for name in RUN_TABLES:  # run folder: a compacted file and the parts written since
            compact, parts = run.table_files(name)
            if compact is not None or parts:
                tables[name] = RunTable(compact, parts)
    for file in sorted(folder.glob("*.parquet")):  # small result tables of a saved trace folder
        tables.setdefault(file.stem, ([file], None))
    if not tables:
        raise KprofInputError(folder, "holds no kprof tables (no parquet files or datasets)")
    return tables


def run_sql(query: str, folder: Path, timeout_s: float = TIMEOUT_S) -> tuple[pd.DataFrame, list[str], bool]:
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
    stop = threading.Timer(timeout_s, con.interrupt)
    try:
        for name, where in tables.items():
            relation = where.relation(con) if isinstance(where, RunTable) else con.from_arrow(_dataset(*where))
            relation.create_view(name)
        con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        con.execute("SET enable_external_access = false")  # DuckDB touches no file: the datasets are Arrow's
        con.execute("SET lock_configuration = true")
        statement = _one_select(con, query)
        stop.start()
        result = _arrow(con.sql(statement).limit(MAX_ROWS + 1))
        if result.nbytes > MAX_RESULT_BYTES:
            raise KprofInputError(
                "QUERY",
                f"gives {result.nbytes / 2**20:,.0f} MiB; kprof sql returns at most {MAX_RESULT_BYTES >> 20} MiB",
            )
        frame = result.to_pandas()
    except duckdb.InterruptException:
        raise KprofInputError("QUERY", f"ran longer than --timeout {timeout_s:g} s and was stopped") from None
    except duckdb.Error as e:
        raise KprofInputError("QUERY", f"{_first_line(e)} (tables: {', '.join(tables)})") from None
    except (OverflowError, MemoryError) as e:
        raise KprofInputError("QUERY", f"gives a result too large to return ({type(e).__name__})") from None
    finally:
        stop.cancel()
        con.close()
    cut = len(frame) > MAX_ROWS
    return frame.head(MAX_ROWS), list(tables), cut


def _one_select(con: Any, query: str) -> str:
    """The query, when it is one SELECT or an EXPLAIN of one (EXPLAIN ANALYZE runs what it explains)."""
    statements = con.extract_statements(query)
    kinds = {_kind(st) for st in statements}
    if not kinds <= {"SELECT", "EXPLAIN"}:
        refused = ", ".join(sorted(kinds - {"SELECT", "EXPLAIN"}))
        raise KprofInputError("QUERY", f"kprof sql runs SELECT and EXPLAIN only, not {refused} (it never writes)")
    if len(statements) != 1:
        raise KprofInputError("QUERY", f"holds {len(statements)} statements: give one SELECT")
    explained = EXPLAINED.match(statements[0].query) if kinds == {"EXPLAIN"} else None
    if kinds == {"EXPLAIN"}:
        inner = {_kind(st) for st in con.extract_statements(explained.group("inner"))} if explained else {"?"}
        if inner != {"SELECT"}:
            refused = ", ".join(sorted(inner))
            raise KprofInputError("QUERY", f"kprof sql explains a SELECT only, not {refused} (it never writes)")
    return statements[0].query


def _arrow(relation: Any) -> Any:
    """The relation's rows as an Arrow table (DuckDB 2 renamed the call)."""
    fetch = getattr(relation, "to_arrow_table", None) or relation.fetch_arrow_table
    return fetch()


def _kind(statement: Any) -> str:
    return str(statement.type).rsplit(".", 1)[-1]
