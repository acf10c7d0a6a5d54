"""SQLite traces read a chunk of rows at a time into columns.

``pd.read_sql_query`` over a whole table holds every cell as a Python object (about 1 KB a kernel
at peak for an RPD); read in chunks, only one chunk is objects at a time and what is kept is
integer columns in narrow blocks and codes into each distinct name.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pandas as pd

CHUNK_ROWS = 1 << 15


def query_chunks(con: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> Iterator[tuple[int, pd.DataFrame]]:
    """The query's rows as frames of at most ``CHUNK_ROWS``, each with the row offset it starts at."""
    offset = 0
    for frame in pd.read_sql_query(sql, con, params=params, chunksize=CHUNK_ROWS, dtype_backend="numpy_nullable"):
        yield offset, frame
        offset += len(frame)
