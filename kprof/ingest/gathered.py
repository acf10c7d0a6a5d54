"""Columns of a trace gathered a chunk at a time (a database's rows, a CSV's blocks) into narrow
blocks, and given back once, joined, as the nullable columns a table is built from; names gathered
as codes into the distinct values (``Labels``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from kprof.ingest.column_blocks import NULL_INT, Chunks
from kprof.ingest.normalize import full_and_short
from kprof.trace import categorical


class Gathered:
    """Columns built a chunk at a time (nullable Series, int64 arrays with NULL_INT for missing, or
    plain arrays), kept in narrow blocks (``Chunks``) and joined once at the end. ``wide`` names the
    columns given back as int64 whatever their values: times under a source's own names (``start``,
    ``end``) and any column a reader does arithmetic on, which must not wrap."""

    def __init__(self, wide: tuple[str, ...] = ("start", "end")) -> None:
        self._chunks: dict[str, Chunks] = defaultdict(Chunks)
        self._nullable: set[str] = set()
        self._wide = wide

    def add(self, **columns: Any) -> None:
        """A chunk's columns: a nullable Series is kept with its nulls, an array as it is."""
        for key, values in columns.items():
            if isinstance(values, pd.Series):
                self.add_integers(key, values.to_numpy(np.int64, na_value=NULL_INT))
            else:
                self._chunks[key].append(values)

    def add_integers(self, key: str, values: np.ndarray) -> None:
        """A chunk of a nullable integer column as int64, NULL_INT where a value is missing."""
        self._nullable.add(key)
        self._chunks[key].append(values)

    def column(self, key: str, empty: Any) -> Any:
        """The chunks of ``key`` joined (their blocks freed as they go), or ``empty`` if none came: a
        nullable column as a Series of the narrowest width its values allow, else the array."""
        chunks = self._chunks.pop(key, None)
        if chunks is None:
            return empty
        if key not in self._nullable:
            return chunks.take()
        values, missing = chunks.take_with_nulls()
        if key in self._wide:
            values = values.astype(np.int64, copy=False)
        return pd.Series(pd.arrays.IntegerArray(values, missing), copy=False)


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
