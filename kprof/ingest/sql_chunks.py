"""SQLite traces read a chunk of rows at a time into columns.

``pd.read_sql_query`` over a whole table holds every cell as a Python object (about 1 KB a kernel
at peak for an RPD); read in chunks, only one chunk is objects at a time and what is kept is
int64 columns and codes into each distinct name.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from kprof.ingest.normalize import full_and_short
from kprof.trace import categorical, narrowed

CHUNK_ROWS = 1 << 15


def query_chunks(con: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> Iterator[tuple[int, pd.DataFrame]]:
    """The query's rows as frames of at most ``CHUNK_ROWS``, each with the row offset it starts at."""
    offset = 0
    for frame in pd.read_sql_query(sql, con, params=params, chunksize=CHUNK_ROWS, dtype_backend="numpy_nullable"):
        yield offset, frame
        offset += len(frame)


class Labels:
    """Distinct values (names, or (name, kind) pairs), each kept once, and codes into them."""

    def __init__(self) -> None:
        self._index: dict[Hashable, int] = {}

    def codes(self, values: Iterable[Hashable]) -> np.ndarray:
        index = self._index
        return np.fromiter((index.setdefault(v, len(index)) for v in values), np.int32)

    def codes_of(self, keys: pd.Series, label_of: Callable[[Any], Hashable]) -> np.ndarray:
        """Codes of ``label_of(key)`` for each row of ``keys`` (a missing key too), computed once per
        distinct key: a million rows of a few names cost one lookup per name."""
        at, distinct = pd.factorize(keys, use_na_sentinel=False)
        return self.codes(label_of(k) for k in distinct)[at] if len(at) else np.zeros(0, np.int32)

    @property
    def values(self) -> list[Any]:
        return list(self._index)

    def activity_names(self, codes: np.ndarray) -> tuple[pd.Categorical, pd.Categorical]:
        """The full and short names of activities whose codes point at (raw name, kind) labels:
        demangled, and kernels shortened (copies and memsets keep their names)."""
        pairs = self.values
        full, short = full_and_short([raw for raw, _ in pairs], [kind == "kernel" for _, kind in pairs])
        return categorical(codes, full), categorical(codes, short)


class Gathered:
    """Columns built a chunk at a time (nullable Series or numpy arrays), joined once at the end.
    ``wide`` names the columns kept int64 whatever their values: times under a database's own names
    (``start``, ``end``) and any column a reader does arithmetic on, which must not wrap."""

    def __init__(self, wide: tuple[str, ...] = ("start", "end")) -> None:
        self._parts: dict[str, list[Any]] = defaultdict(list)
        self._wide = wide

    def add(self, **columns: Any) -> None:
        """Each chunk's integer columns are kept as narrow as their values allow (``narrowed``; times
        stay int64), so that what is held until the join is about what the table will hold."""
        for key, values in columns.items():
            if isinstance(values, pd.Series) and key not in self._wide:
                values = pd.Series(narrowed(values.array, key), copy=False)
            self._parts[key].append(values)

    def column(self, key: str, empty: Any) -> Any:
        """The chunks of ``key`` joined (their memory freed as they go), or ``empty`` if none came."""
        parts = self._parts.pop(key, [])
        if not parts:
            return empty
        if isinstance(parts[0], pd.Series):
            return pd.concat(parts, ignore_index=True)
        return np.concatenate(parts)
