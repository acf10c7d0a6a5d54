"""A loaded trace: the normalized tables plus what is known about where they came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
    """Build a DataFrame with exactly ``schema``'s columns; absent ones become nulls.

    Integer columns use pandas' nullable dtypes so that large ns values never pass through float.
    """
    n = max((len(v) for v in columns.values() if v is not None), default=0)
    arrays = []
    for f in schema:
        values = columns.get(f.name)
        arrays.append(pa.nulls(n, f.type) if values is None else pa.array(values, type=f.type))
    table = pa.Table.from_arrays(arrays, schema=schema)
    return table.to_pandas(types_mapper=_NULLABLE.get, self_destruct=True, split_blocks=True)


def events_table(columns: dict[str, Any]) -> pd.DataFrame:
    return table_from_columns(columns, KERNEL_EVENTS)


def range_table(columns: dict[str, Any]) -> pd.DataFrame:
    return table_from_columns(columns, RANGES)
