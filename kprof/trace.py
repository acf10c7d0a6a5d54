"""A loaded trace: the normalized tables plus what is known about where they came from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from kprof.schema import KERNEL_EVENTS, RANGES

_NULLABLE = {pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype()}


@dataclass
class Trace:
    """One ingested file (one rank): device activities (kernels, copies, memsets), annotated ranges,
    and metadata.

    ``meta`` always holds ``file``, ``format``, ``rank`` and ``clock``; ``warnings`` lists what the
    parser had to guess or skip, so reports can say so instead of hiding it.
    """

    events: pd.DataFrame  # the kernel_events table: every device activity, ``kind`` says which
    ranges: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def table_from_columns(columns: dict[str, Any], schema: pa.Schema) -> pd.DataFrame:
    """Build a DataFrame with exactly ``schema``'s columns; absent ones become nulls. ``columns`` is
    emptied of them as it goes: each given column is let go once its table column exists, so the
    table is built beside one column, not beside a second copy of all of them.

    Integer columns use pandas' nullable dtypes so that large ns values never pass through float.
    A column already in the pandas form the schema maps to (an ``IntegerArray`` of its width, a
    ``Categorical`` for a dictionary column) is used as it is: the Arrow round trip would copy it
    twice (a 500 MB Kineto trace's table was built at three times its size).
    """
    n = max((len(v) for v in columns.values() if v is not None), default=0)
    built: dict[str, Any] = {}
    rest: list[pa.Field] = []
    for f in schema:
        values = columns.pop(f.name, None)
        values = _absent(n, f) if values is None else _pandas_form(values)
        if _in_pandas_form(values, f.type):
            built[f.name] = narrowed(values, f.name)
        else:
            built[f.name] = None
            rest.append(f)
            columns[f.name] = values  # converted below, with the others Arrow must convert
        del values
    if rest:
        arrays = [pa.nulls(n, f.type) if columns[f.name] is None else _arrow(columns.pop(f.name), f.type) for f in rest]
        frame = pa.Table.from_arrays(arrays, schema=pa.schema(rest)).to_pandas(
            types_mapper=_NULLABLE.get, self_destruct=True, split_blocks=True
        )
        del arrays
        for f in rest:
            built[f.name] = narrowed(frame.pop(f.name).array, f.name)
    return pd.DataFrame(built, copy=False)


#: Signed widths an integer column may take in memory, narrowest first.
_WIDTHS = (np.int8, np.int16, np.int32, np.int64)


def narrowest(lo: int, hi: int) -> type[np.signedinteger]:
    """The narrowest signed integer type that holds every value from ``lo`` to ``hi``."""
    return next(t for t in _WIDTHS if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max)


def is_time(name: str) -> bool:
    """Times (``*_ns``) are int64 in every table, whatever their values: arithmetic on them (sums,
    differences, offsets to a base) must never wrap."""
    return name.endswith("_ns")


def narrowed(values: Any, name: str) -> Any:
    """An integer column in the narrowest signed type that holds its values (nulls kept); times stay
    int64 (``is_time``). Ids, sizes and counts take a byte or two a row where they fit: most of a
    table of tiny kernels is otherwise their upper zeros."""
    if not isinstance(values, pd.arrays.IntegerArray) or is_time(name):
        return values
    lo, hi = values.min(skipna=True), values.max(skipna=True)
    if lo is pd.NA:  # empty, or every value missing
        return values.astype(pd.Int8Dtype(), copy=False)
    width = narrowest(int(lo), int(hi))
    return values.astype(pd.api.types.pandas_dtype(f"Int{np.iinfo(width).bits}"), copy=False)


def _absent(n: int, column: pa.Field) -> Any:
    """A column none of whose ``n`` values is known, in its pandas form (through Arrow, its buffers
    would stay in Arrow's memory pool after the conversion). None where that form is Arrow's own."""
    if pa.types.is_dictionary(column.type):
        return pd.Categorical.from_codes(np.full(n, -1, dtype=np.int8), categories=pd.Index([], dtype=str))
    if column.type in _NULLABLE:
        width = np.int64 if is_time(column.name) else np.int8
        return pd.arrays.IntegerArray(np.zeros(n, dtype=width), np.ones(n, dtype=bool))
    return None


def _arrow(values: Any, arrow_type: pa.DataType) -> pa.Array:
    """``values`` as ``arrow_type``; a dictionary column is encoded from plain strings (Arrow cannot
    convert a numpy object array, such as an empty one, to a dictionary type directly)."""
    if not pa.types.is_dictionary(arrow_type):
        return pa.array(values, type=arrow_type)
    encoded = pa.array(values, type=arrow_type.value_type, from_pandas=True).dictionary_encode()
    return encoded.cast(arrow_type)


def _pandas_form(values: Any) -> Any:
    """A Series' array; a numpy integer column as a nullable one with nothing missing, without a
    copy: through Arrow it would be copied twice, the second time into Arrow's pool, which keeps
    what it frees."""
    if isinstance(values, pd.Series):
        return values.array
    if isinstance(values, np.ndarray) and values.dtype.kind == "i":
        return pd.arrays.IntegerArray(values, np.zeros(len(values), dtype=bool))
    return values


def _in_pandas_form(values: Any, arrow_type: pa.DataType) -> bool:
    if isinstance(values, pd.Categorical):
        return pa.types.is_dictionary(arrow_type) and pd.api.types.is_string_dtype(values.categories)
    nullable = _NULLABLE.get(arrow_type)
    return (
        nullable is not None
        and isinstance(values, pd.arrays.IntegerArray)
        and values.dtype.numpy_dtype.kind == "i"
        and values.dtype.numpy_dtype.itemsize <= nullable.numpy_dtype.itemsize
    )


def categorical(codes: np.ndarray, labels: Sequence[str]) -> pd.Categorical:
    """Codes into ``labels``, which may repeat (two mangled names can demangle alike, two ranges
    share a name); a code of -1 is a missing value. Each label is stored once, never per row."""
    if not len(labels):
        return pd.Categorical.from_codes(codes, categories=pd.Index([], dtype=object))
    unique, remap = np.unique(np.array(labels, dtype=object), return_inverse=True)
    mapped = remap.astype(narrowest(-1, len(unique)))[np.maximum(codes, 0)]
    mapped[codes < 0] = -1
    return pd.Categorical.from_codes(mapped, categories=unique.tolist())


def events_table(columns: dict[str, Any]) -> pd.DataFrame:
    return table_from_columns(columns, KERNEL_EVENTS)


def range_table(columns: dict[str, Any]) -> pd.DataFrame:
    """Ranges are few beside activities: built from a copy of ``columns``, which readers use after."""
    return table_from_columns(dict(columns), RANGES)
