"""CSV traces read a block at a time, only the columns a loader asks for, straight into columns.

A profiler's CSV holds a row per kernel (or per API call), so it is as long as the trace. Read
whole as text it cost about 900 bytes a kernel at peak (a Python string per field); here Arrow's
streaming reader parses a few MB at a time, integers are cast per block and kept in narrow blocks,
names dictionary encoded, so only the finished columns grow with the file. Integers that Arrow will
not cast are given, a block at a time, to ``normalize.integers``: its reading and its one-line
messages are the definition, Arrow's cast is only the fast way to the same numbers.
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
from kprof.ingest.column_blocks import NULL_INT
from kprof.ingest.gathered import Gathered, Labels
from kprof.ingest.memory import MemoryGuard, release_freed_memory
from kprof.ingest.normalize import integers
from kprof.ingest.source import TRUNCATED_GZIP, check_file, is_gzip, text_stream

#: Bytes parsed at a time: Arrow's reader holds several blocks at once, so a small block keeps the
#: memory of reading, not only its columns, small (4 MiB blocks cost ~11 B more a row on 1M kernels).
BLOCK_BYTES = 1 << 20
#: Arrow's buffers come from the C library's allocator: freed, they go back to the system (kprof
#: sets glibc's mmap threshold), where Arrow's default pool kept ~110 B a row of freed parse buffers.
_POOL = pa.system_memory_pool()
_NULL_SCALAR = pa.scalar(NULL_INT, pa.int64())
_NO_CODE = pa.scalar(-1, pa.int32())
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
    integers as a nullable Series (the narrowest width that holds them; ``start`` and ``end`` int64),
    text as a Categorical (a blank field is missing)."""

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
    parts = Gathered()
    labels = {k: Labels() for k in found if not wanted[k].integer}
    rows = 0
    for batch in _batches(path, types, memory):
        for key, name in found.items():
            values = batch.column(name)
            if wanted[key].integer:
                block = _integer_block(values, path, wanted[key], lambda i, r=rows: where(r + i))
                filled = pc.coalesce(block, _NULL_SCALAR, memory_pool=_POOL)
                parts.add_integers(key, filled.to_numpy(zero_copy_only=False))
            else:
                parts.add(**{key: _codes(values, labels[key])})
        rows += batch.num_rows
        if memory is not None:
            memory.expect_share(rows)
    out = CsvColumns(lowered, rows)
    for key in found:
        if wanted[key].integer:
            out.values[key] = parts.column(key, pd.Series(np.empty(0, np.int64), dtype="Int64"))
        else:
            codes = parts.column(key, np.empty(0, np.int32))
            out.values[key] = pd.Categorical.from_codes(codes, categories=pd.Index(labels[key].values, dtype=object))
    release_freed_memory()  # the parser's buffers, before the caller builds its table
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
            memory_pool=_POOL,
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
            pa.default_memory_pool().release_unused()  # the reader's own buffers come from this pool
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
            return pc.cast(values, pa.int64(), memory_pool=_POOL)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    text = pd.Series(values.to_pandas(), dtype=object).where(lambda s: s.notna(), "")
    checked = integers(text, path, column.what, where, column.required)
    return pa.array(checked.array, type=pa.int64())


def _codes(values: pa.DictionaryArray, labels: Labels) -> np.ndarray:
    """A block's dictionary-encoded text as int32 codes into ``labels`` (-1 where missing): each
    block's own dictionary is looked up once, and nothing of Arrow's is kept past the block."""
    lookup = np.append(labels.codes(values.dictionary.to_pylist()), np.int32(-1))
    indices = pc.coalesce(values.indices, _NO_CODE, memory_pool=_POOL).to_numpy(zero_copy_only=False)
    return lookup[indices]
