"""CSV traces read a block at a time, only the columns a loader asks for, straight into columns.

A profiler's CSV holds a row per kernel (or per API call), so it is as long as the trace. Read
whole as text it cost about 900 bytes a kernel at peak (a Python string per field); here Arrow's
streaming reader parses a few MB at a time, integers are cast per block and names dictionary
encoded, so only the finished columns grow with the file. Integers that Arrow will not cast are
given, a block at a time, to ``normalize.integers``: its reading and its one-line messages are the
definition, Arrow's cast is only the fast way to the same numbers.
"""

from __future__ import annotations

import csv
import gzip
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from kprof.errors import KprofInputError
from kprof.ingest.memory import MemoryGuard
from kprof.ingest.normalize import integers
from kprof.ingest.source import TRUNCATED_GZIP, check_file, is_gzip, text_stream

BLOCK_BYTES = 1 << 22
_SAMPLE_BYTES = 1 << 20
_TEXT = pa.dictionary(pa.int32(), pa.string())


@dataclass(frozen=True)
class CsvColumn:
    """One column a loader wants: the header names it goes by (lower case, the first found wins),
    whether it holds integers (else text), what messages call it, and whether every row needs it."""

    names: tuple[str, ...]
    what: str
    integer: bool = True
    required: bool = False


@dataclass
class CsvColumns:
    """What was read: the header (lower case), the row count, and each wanted column found —
    integers as a nullable int64 Series, text as a Categorical (a blank field is missing)."""

    header: list[str]
    rows: int
    values: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str) -> Any:
        return self.values.get(key)


def read_columns(
    path: Path,
    wanted: Mapping[str, CsvColumn],
    where: Callable[[int], str],
    memory: MemoryGuard | None = None,
    missing: str = "no {} column",
) -> CsvColumns:
    """``wanted``'s columns of the CSV at ``path`` (plain or gzipped). A required column absent
    from the header is the one-line error ``missing`` (formatted with its ``what``); a value that is not an integer is
    ``integers``' error, placed by ``where(row)``; what is not CSV or not UTF-8 is one line too.
    ``memory`` is told the rows a block at a time, projected over the file."""
    header = _read_header(path)
    if memory is not None:
        memory.expect(_rows_estimate(path))
    lowered = [h.strip().lower() for h in header]
    found: dict[str, str] = {}  # key -> the header name as the file spells it
    for key, column in wanted.items():
        name = next((n for n in column.names if n in lowered), None)
        if name is not None:
            found[key] = header[lowered.index(name)]
        elif column.required:
            raise KprofInputError(path, missing.format(column.what))
    types = {found[k]: pa.string() if wanted[k].integer else _TEXT for k in found}
    chunks: dict[str, list[Any]] = {k: [] for k in found}
    rows = 0
    for batch in _batches(path, types, memory):
        for key, name in found.items():
            values = batch.column(name)
            if wanted[key].integer:
                chunks[key].append(_integer_block(values, path, wanted[key], lambda i, r=rows: where(r + i)))
            else:
                chunks[key].append(values)
        rows += batch.num_rows
        if memory is not None:
            memory.expect_share(rows)
    out = CsvColumns(lowered, rows)
    for key, parts in chunks.items():
        out.values[key] = _integers(parts) if wanted[key].integer else _categorical(parts)
    return out


def _read_header(path: Path) -> list[str]:
    """The header line's names as the file spells them."""
    try:
        with text_stream(path) as f:
            first = f.readline()
    except UnicodeDecodeError as e:
        raise KprofInputError(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    except EOFError:
        raise KprofInputError(path, TRUNCATED_GZIP) from None
    except (gzip.BadGzipFile, zlib.error) as e:
        raise KprofInputError(path, f"gzip data is damaged ({e})") from None
    names = next(csv.reader([first]), [])
    if not any(n.strip() for n in names):
        raise KprofInputError(path, "malformed CSV (no header line)")
    return names


def _rows_estimate(path: Path) -> float:
    """Rows of a plain CSV from its size and the mean length of its first lines (a profiler's rows
    are alike); 0 for a gzipped one, whose rows are projected as it is read instead."""
    if is_gzip(path):
        return 0
    with path.open("rb") as f:
        sample = f.read(_SAMPLE_BYTES)
    lines = sample.count(b"\n")
    if len(sample) < _SAMPLE_BYTES:
        return max(lines - 1, 0)
    return path.stat().st_size / (len(sample) / max(lines, 1))


def _batches(path: Path, types: dict[str, pa.DataType], memory: MemoryGuard | None) -> Any:
    """The wanted columns' record batches; parse, UTF-8 and gzip failures as one line. ``memory``
    is told how far into the (compressed) file the reading stands."""
    check_file(path)
    raw: Any = pa.OSFile(str(path))  # Arrow's own file: a Python one cost ~150 B more a row at peak
    source: Any = gzip.GzipFile(fileobj=raw) if is_gzip(path) else raw
    size = path.stat().st_size
    bad_rows: list[Any] = []

    def refuse(row: Any) -> str:
        bad_rows.append(row)
        return "error"

    try:
        reader = pa_csv.open_csv(
            source,
            # one thread: an allocation Arrow's threads cannot make aborts the process (SIGABRT) where
            # this one raises MemoryError, which is one line; and a 2-core machine parses as fast
            read_options=pa_csv.ReadOptions(block_size=BLOCK_BYTES, use_threads=False),
            parse_options=pa_csv.ParseOptions(invalid_row_handler=refuse),
            convert_options=pa_csv.ConvertOptions(
                include_columns=list(types),
                column_types=types,
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=True,
            ),
        )
        for batch in reader:
            if memory is not None:
                memory.position(raw.tell(), size)
            yield batch
    except pa.ArrowInvalid as e:
        raise KprofInputError(path, _malformed(str(e), bad_rows)) from None
    except EOFError:
        raise KprofInputError(path, TRUNCATED_GZIP) from None
    except (gzip.BadGzipFile, zlib.error) as e:
        raise KprofInputError(path, f"gzip data is damaged ({e})") from None
    finally:
        source.close()
        raw.close()


def _malformed(message: str, bad_rows: list[Any]) -> str:
    if "UTF8" in message:
        return "not UTF-8 text (in a column kprof reads)"
    if bad_rows:
        row = bad_rows[0]
        where = f"line {row.number}" if row.number is not None and row.number > 0 else "a row"
        text = row.text if len(row.text) <= 60 else row.text[:57] + "..."
        return f"malformed CSV ({where} has {row.actual_columns} fields, the header {row.expected_columns}: {text})"
    return f"malformed CSV ({message.splitlines()[0]})"


def _integer_block(values: pa.Array, path: Path, column: CsvColumn, where: Callable[[int], str]) -> pa.Array:
    """One block's text as int64: Arrow's cast when it takes every value, else ``integers``."""
    if not (column.required and values.null_count):
        try:
            return pc.cast(values, pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    text = pd.Series(values.to_pandas(), dtype=object).where(lambda s: s.notna(), "")
    checked = integers(text, path, column.what, where, column.required)
    return pa.array(checked.array, type=pa.int64())


def _integers(parts: list[pa.Array]) -> pd.Series:
    """The blocks joined into one writable nullable int64 column (Arrow's buffers are read-only)."""
    data = np.concatenate([pc.fill_null(p, 0).to_numpy(zero_copy_only=False) for p in parts] or [np.empty(0, np.int64)])
    mask = np.concatenate([p.is_null().to_numpy(zero_copy_only=False) for p in parts] or [np.empty(0, bool)])
    parts.clear()
    return pd.Series(pd.arrays.IntegerArray(data.astype(np.int64, copy=False), mask), copy=False)


def _categorical(parts: list[pa.Array]) -> pd.Categorical:
    whole = pa.chunked_array(parts, _TEXT)
    parts.clear()
    return whole.to_pandas().array
