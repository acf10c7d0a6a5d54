"""Opening trace files: plain or gzipped, with one-line errors for what cannot be read."""

from __future__ import annotations

import gzip
import io
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from kprof.errors import KprofInputError, checked_file

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
SNIFF_BYTES = 1 << 16


def check_file(path: Path) -> None:
    """Fail with one line when ``path`` is not a readable, non-empty regular file."""
    checked_file(path, "trace file")


def is_gzip(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(2) == GZIP_MAGIC


Progress = Callable[[int, int], None]  # (bytes of the file read so far, size of the file)
_RAW_BYTES = 1 << 20


TRUNCATED_GZIP = "gzip stream ends early (truncated file)"


@contextmanager
def _opened(path: Path) -> Iterator[tuple[BinaryIO, bool, int]]:
    """The file, unbuffered and at its start; whether it is gzipped; its size (checked first)."""
    check_file(path)
    with path.open("rb", buffering=0) as raw:
        gzipped = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        yield raw, gzipped, path.stat().st_size


def stream_chunks(
    path: Path,
    size: int,
    allow_truncated: bool = False,
    on_progress: Progress | None = None,
    truncated: str = TRUNCATED_GZIP,
) -> Iterator[bytes]:
    """The file's (decompressed) bytes in chunks of at most ``size``, in bounded memory: the one
    way kprof reads a plain or gzipped file.

    gzip is inflated here, not by ``gzip.open``: a truncated ``.json.gz`` then still gives every
    byte before the cut (``gzip.open`` drops the last block's output when it raises), so
    ``--recover`` works on it as on plain JSON. Without ``allow_truncated`` a cut stream is the
    one-line error ``truncated``.
    """
    with _opened(path) as (raw, gzipped, total):
        if gzipped:
            yield from _inflate(raw, path, size, total, None if allow_truncated else truncated, on_progress)
            return
        while chunk := raw.read(size):
            if on_progress:
                on_progress(raw.tell(), total)
            yield chunk


def stream_into(
    path: Path,
    room: Callable[[int], memoryview],
    size: int,
    allow_truncated: bool = False,
    on_progress: Progress | None = None,
    truncated: str = TRUNCATED_GZIP,
) -> Iterator[int]:
    """As ``stream_chunks``, but each chunk is written into ``room(n)`` (a view of the caller's
    buffer, ``n`` bytes long) and only its length is yielded: a plain file is read straight into
    that buffer (unbuffered ``readinto``), with no copy on the way."""
    with _opened(path) as (raw, gzipped, total):
        if gzipped:
            for chunk in _inflate(raw, path, size, total, None if allow_truncated else truncated, on_progress):
                room(len(chunk))[:] = chunk
                yield len(chunk)
            return
        while n := raw.readinto(room(size)):
            if on_progress:
                on_progress(raw.tell(), total)
            yield n


def _inflate(
    raw: BinaryIO, path: Path, size: int, total: int, truncated: str | None, on_progress: Progress | None
) -> Iterator[bytes]:
    """gzip members inflated as read; a cut stream ends quietly when ``truncated`` is None, else
    fails with that text."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending = b""  # compressed input not yet inflated (max_length keeps each output chunk bounded)
    while True:
        if not pending:
            pending = raw.read(_RAW_BYTES)
            if on_progress:
                on_progress(raw.tell(), total)
        if not pending:  # end of the file: what zlib still holds, then was the member complete?
            try:
                tail = inflater.flush()
            except zlib.error as e:
                raise KprofInputError(path, f"gzip data is damaged ({e})") from None
            if tail:
                yield tail
            if inflater.eof or truncated is None:
                return
            raise KprofInputError(path, truncated)
        try:
            out = inflater.decompress(pending, size)
        except zlib.error as e:
            raise KprofInputError(path, f"gzip data is damaged ({e})") from None
        pending = inflater.unconsumed_tail
        if out:
            yield out
        if inflater.eof:  # end of one gzip member: another may follow (concatenated .gz files)
            rest = inflater.unused_data  # (unconsumed_tail repeats it)
            while not rest.strip(b"\x00"):  # only zero padding so far: is there more?
                more = raw.read(_RAW_BYTES)
                if not more:
                    return
                rest += more
            inflater, pending = zlib.decompressobj(16 + zlib.MAX_WBITS), rest


def head(path: Path) -> bytes:
    """The first bytes of the (decompressed) file, for format detection."""
    return next(stream_chunks(path, SNIFF_BYTES), b"")


@contextmanager
def local_sqlite(path: Path) -> Iterator[Path]:
    """A path to a plain SQLite file: ``path`` itself, or a temporary copy when it is gzipped."""
    if not is_gzip(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="kprof-") as tmp:
        target = Path(tmp) / (path.stem or "trace.db")
        with target.open("wb") as dst:
            for chunk in stream_chunks(path, 1 << 22):
                dst.write(chunk)
        yield target


def text_stream(path: Path) -> io.TextIOBase:
    """A UTF-8 text view of the (decompressed) file, failing on bytes that are not UTF-8."""
    check_file(path)
    raw = gzip.open(path, "rb") if is_gzip(path) else path.open("rb")  # noqa: SIM115 - the wrapper owns it
    return io.TextIOWrapper(raw, encoding="utf-8", errors="strict", newline="")
