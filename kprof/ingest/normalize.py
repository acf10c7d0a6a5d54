"""What every trace loader shares: names (demangled, short), grids in blocks, empty range columns
and the meta dict every Trace carries."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kprof.errors import KprofInputError
from kprof.ingest.names import demangle_all, short_name

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

#: HIP launch APIs whose grid arguments are work-items, not blocks (hip_ext.h)
WORK_ITEM_LAUNCHES = frozenset({"hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel"})
RANGE_COLUMNS = ("name", "start_ns", "end_ns", "domain", "device", "pid", "tid")


def full_and_short(names: Sequence[str], is_kernel: Iterable[bool] | None = None) -> tuple[list[str], list[str]]:
    """Demangled names, and the short names tables show. Copies and memsets (``is_kernel`` false)
    keep their names as the short form."""
    demangled = demangle_all(names)
    full = [demangled.get(n, n) for n in names]
    kernel = [True] * len(full) if is_kernel is None else list(is_kernel)
    return full, [short_name(f) if k else f for f, k in zip(full, kernel)]


def numbered(what: str, first: int = 1) -> Callable[[int], str]:
    """Where row ``i`` stands, as a message says it: ``numbered("in kernel")(0)`` → ``in kernel 1``."""
    return lambda row: f"{what} {row + first}"


def integers(
    values: pd.Series, path: Path, what: str, where: Callable[[int], str], required: bool = False
) -> pd.Series:
    """``values`` (text from a CSV, or whatever a SQLite column holds) as nullable int64. A value
    that is not a whole number of 64 bits (``x``, ``1.5``, ``2**64``), or a missing one where
    ``required``, is a one-line error naming ``what`` and ``where(i)`` it stands (row ``i``)."""
    import numpy as np
    import pandas as pd

    if values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
        values = values.replace("", None)  # a blank CSV field is missing, not malformed
    # nullable: a column with a missing value stays integer (float64 would round beyond 2**53)
    numbers = pd.to_numeric(values, errors="coerce", dtype_backend="numpy_nullable")
    wrong = numbers.isna().to_numpy(bool) & values.notna().to_numpy(bool)
    if required:
        wrong |= numbers.isna().to_numpy(bool)
    if wrong.any():
        raise KprofInputError(path, f"{what} is not a number {where(int(np.flatnonzero(wrong)[0]))}")
    whole = numbers.isna() | ((numbers.abs() < 2**63) & (numbers == numbers.round()))
    if not whole.all():
        raise KprofInputError(
            path, f"{what} {where(int(np.flatnonzero(~whole.to_numpy(bool))[0]))} is not an integer of 64 bits"
        )
    return numbers.astype("Int64")


def integer_columns(
    frame: pd.DataFrame,
    sources: Mapping[str, str],
    path: Path,
    where: Callable[[int], str],
    required: Collection[str] = ("start", "end"),
) -> None:
    """Each column of ``frame`` named in ``sources`` through ``integers``, in place; ``sources`` says
    what a message calls it (the table and column it was read from)."""
    for column, source in sources.items():
        frame[column] = integers(frame[column], path, source, where, column in required)


def last_matches(keys: Sequence[pd.Series], table_keys: Sequence[pd.Series]) -> np.ndarray:
    """For each row of ``keys`` (one column or several), the position of the last row of
    ``table_keys`` with the same key (a later API record replaces an earlier one); -1 where none
    has it, or where a part of the key is missing. A search in the table's sorted keys (they come
    sorted, as a rule: no sort then), with the parts packed into one int64 where their values allow;
    else an index lookup. Neither is a merge, which copies every column of a trace to add one."""
    import numpy as np

    widths = _key_widths(keys, table_keys)
    if widths is None:
        return _last_matches_by_index(keys, table_keys)
    table_key, table_known = _pack(table_keys, widths, slice(None))
    rows = None if table_known.all() else np.flatnonzero(table_known)
    if rows is not None:
        table_key = table_key[rows]
    order = None if bool((table_key[1:] >= table_key[:-1]).all()) else np.argsort(table_key, kind="stable")
    ordered = table_key if order is None else table_key[order]
    del table_key
    at = np.empty(len(keys[0]), np.int64)
    for start in range(0, len(at), _SLICE_ROWS):  # a slice at a time: its temporaries stay small
        part = slice(start, start + _SLICE_ROWS)
        key, found = _pack(keys, widths, part)
        found_at = np.searchsorted(ordered, key, side="right") - 1  # the last of equal keys: the latest row
        found &= found_at >= 0
        found[found] = ordered[found_at[found]] == key[found]
        if order is not None:
            found_at[found] = order[found_at[found]]
        if rows is not None:
            found_at[found] = rows[found_at[found]]
        found_at[~found] = -1
        at[part] = found_at
    return at


def _key_widths(keys: Sequence[pd.Series], table_keys: Sequence[pd.Series]) -> list[int] | None:
    """The bits each part of a key takes, both sides' values considered; None where a part is
    negative or the parts need more than 63 bits together (they cannot share one int64)."""
    widths = []
    for parts in zip(keys, table_keys):
        lo = min(_known_or_zero(part.min(skipna=True)) for part in parts)
        hi = max(_known_or_zero(part.max(skipna=True)) for part in parts)
        widths.append(max(hi.bit_length(), 1))
        if lo < 0 or sum(widths) > 63:
            return None
    return widths


def _pack(columns: Sequence[pd.Series], widths: list[int], rows: slice) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` of the key columns packed into one int64 a row, and whether every part is known."""
    import numpy as np

    n = len(range(*rows.indices(len(columns[0]))))
    packed, known = np.zeros(n, np.int64), np.ones(n, bool)
    for column, bits in zip(columns, widths):
        part = column.iloc[rows]
        packed <<= bits
        packed |= part.to_numpy(np.int64, na_value=0)
        known &= part.notna().to_numpy(bool)
    return packed, known


def _known_or_zero(value: Any) -> int:
    """A Series' minimum or maximum as an int; 0 where it has none (empty, or every value missing)."""
    import pandas as pd

    return 0 if value is None or value is pd.NA or value != value else int(value)


def _last_matches_by_index(keys: Sequence[pd.Series], table_keys: Sequence[pd.Series]) -> np.ndarray:
    """``last_matches`` through a pandas index, for keys that do not pack into one int64."""
    import numpy as np
    import pandas as pd

    table = pd.DataFrame({i: k.reset_index(drop=True) for i, k in enumerate(table_keys)})
    known = table.notna().all(axis=1).to_numpy(bool)
    last = ~table.duplicated(keep="last").to_numpy(bool) & known
    if len(table_keys) == 1:
        at = pd.Index(table[0][last]).get_indexer(keys[0])
    else:
        at = pd.MultiIndex.from_frame(table[last]).get_indexer(pd.MultiIndex.from_arrays(keys))
    at[pd.concat([k.reset_index(drop=True) for k in keys], axis=1).isna().any(axis=1).to_numpy(bool)] = -1
    rows = np.flatnonzero(last)
    return np.where(at >= 0, rows[np.maximum(at, 0)], -1) if len(rows) else np.full(len(at), -1)


def taken(values: pd.Series, at: np.ndarray) -> pd.Series:
    """``values`` (integers) at positions ``at`` as a nullable column of their own width (int64
    where they are not nullable yet); null where ``at`` is -1."""
    import pandas as pd

    array = values.array if isinstance(values.dtype, pd.api.extensions.ExtensionDtype) else values.astype("Int64").array
    return pd.Series(array.take(at, allow_fill=True), copy=False)


def looked_up(keys: Sequence[pd.Series], table_keys: Sequence[pd.Series], values: pd.Series) -> pd.Series:
    """For each row of ``keys``, ``values`` at the last row of ``table_keys`` with the same key;
    null where none has it (``last_matches``)."""
    return taken(values, last_matches(keys, table_keys))


def texts(values: pd.Series, path: Path, what: str, where: Callable[[int], str], required: bool = True) -> list[str]:
    """``values`` (whatever a SQLite column holds) as text: a number as it prints, bytes as UTF-8.
    NULL is a one-line error naming ``what`` and ``where(i)`` where ``required``, else ``""``."""
    import pandas as pd

    out = []
    for i, v in enumerate(values.tolist()):
        if pd.isna(v):  # NULL, as None, NaN or NA
            if required:
                raise KprofInputError(path, f"{what} is empty {where(i)}")
            out.append("")
        else:
            out.append(v if isinstance(v, str) else v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v))
    return out


def blocks(grid: pd.Series, block: pd.Series) -> pd.Series:
    """A work-item grid (a nullable integer Series) in blocks, ceil division; unknown or zero block
    sizes give null. Worked in int64 numpy a slice at a time and given back in the narrowest width:
    pandas' nullable arithmetic made five int64 copies of a whole trace's column."""
    import numpy as np  # here, not at import: the Kineto decoder imports this module without pandas
    import pandas as pd

    from kprof.trace import narrowed

    items = grid.to_numpy(grid.dtype.numpy_dtype, na_value=0)
    size = block.to_numpy(block.dtype.numpy_dtype, na_value=0)
    missing = grid.isna().to_numpy(bool) | block.isna().to_numpy(bool) | (size == 0)
    counts = np.zeros(len(items), np.int64)
    for at in range(0, len(items), _SLICE_ROWS):
        rows = slice(at, at + _SLICE_ROWS)
        counts[rows] = -((-items[rows].astype(np.int64)) // np.where(missing[rows], 1, size[rows]))
    counts[missing] = 0
    return pd.Series(narrowed(pd.arrays.IntegerArray(counts, missing), "grid"), index=grid.index, copy=False)


#: Rows worked on at a time where a whole column's int64 temporaries would cost more than the column.
_SLICE_ROWS = 1 << 16


def durations(start: pd.Series, end: pd.Series) -> pd.Series:
    """``end − start`` as nullable int64, 0 where an activity ends before it starts (the loader
    warns of those), null where either is; in numpy, without pandas' whole-column temporaries."""
    import numpy as np
    import pandas as pd

    length = end.to_numpy(np.int64, na_value=0) - start.to_numpy(np.int64, na_value=0)
    np.maximum(length, 0, out=length)
    unknown = start.isna().to_numpy(bool) | end.isna().to_numpy(bool)  # a new array: a Series' is read-only
    return pd.Series(pd.arrays.IntegerArray(length, unknown), copy=False)


def empty_ranges() -> dict[str, list[Any]]:
    return {k: [] for k in RANGE_COLUMNS}


def cpu_ranges(
    names: Sequence[str], start: Sequence[int], end: Sequence[int], pid: Sequence[int], tid: Sequence[int]
) -> dict[str, Any]:
    """Host-side ranges (roctx markers, ``record_function``): matched to launches on their thread."""
    n = len(names)
    return {
        "name": list(names),
        "start_ns": list(start),
        "end_ns": list(end),
        "domain": ["cpu"] * n,
        "device": [-1] * n,
        "pid": list(pid),
        "tid": list(tid),
    }


def trace_meta(path: Path, fmt: str, rank: int, clock: str, **extra: Any) -> dict[str, Any]:
    """The keys every Trace's meta holds; ``rank_source`` says whether the file named its rank."""
    return {"file": str(path), "format": fmt, "rank": rank, "rank_source": "argument order", "clock": clock, **extra}
