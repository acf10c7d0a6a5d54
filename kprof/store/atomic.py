"""Atomic writes: a file appears complete or not at all (write a ``.partial`` sibling, then rename)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def _partial(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


def write_parquet(table: pa.Table, path: Path, compression: str = "snappy") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _partial(path)
    pq.write_table(table, tmp, compression=compression)
    os.replace(tmp, path)


def write_text(text: str, path: Path) -> None:
    write_bytes(text.encode(), path)


def write_bytes(data: bytes, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _partial(path)
    tmp.write_bytes(data)
    os.replace(tmp, path)
