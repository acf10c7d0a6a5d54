"""Atomic writes: a file appears complete or not at all (write a ``.partial`` sibling, then rename).
A write that fails (a full disk, a name too long) leaves no ``.partial`` behind and is a one-line
error naming the file; whatever was there before is untouched."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kprof.errors import KprofInputError


def _partial(path: Path) -> Path:
    """A sibling short enough for any legal name (a 255-character one had no room for a suffix)."""
    return path.with_name(f".{path.name[:64]}.{os.getpid()}.partial")


def _atomic(path: Path, write: Callable[[Path], None]) -> None:
    tmp = _partial(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):  # a name too long cannot be removed either: it was never made
            tmp.unlink(missing_ok=True)
        raise KprofInputError(path, f"cannot be written ({e.strerror or e}); what was there before is kept") from None


def write_parquet(table: pa.Table, path: Path, compression: str = "snappy") -> None:
    _atomic(path, lambda tmp: pq.write_table(table, tmp, compression=compression))


def write_text(text: str, path: Path) -> None:
    write_bytes(text.encode(), path)


def write_bytes(data: bytes, path: Path) -> None:
    _atomic(path, lambda tmp: tmp.write_bytes(data))
