"""The compiled Kineto scanner (``_kineto_scan``, C) and its records as numpy columns.

msgspec turns every event of a piece into Python objects, though kprof keeps about one in four
(GPU activities, launches, ranges) and drops CPU ops and flows; making and freeing those objects is
most of the ingest's time. The scanner validates and skips dropped events in C and writes each kept
one as a row of int64 fields (offsets of its strings in the piece, times already exact integer ns).
It answers ``None`` for anything it does not read exactly as the msgspec path would (malformed or
cut JSON, an unexpected type, escapes in a key or category, a time finer than 1 ns): that piece is
then decoded by msgspec, which keeps or reports it as it always has.

The extension is optional: without a C compiler at install time, or with ``KPROF_NO_SCANNER=1``,
every piece goes through msgspec (same tables, slower).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import msgspec
import numpy as np

try:
    from kprof.ingest.formats import _kineto_scan
except ImportError:  # built without a C compiler: the msgspec path does all pieces
    _kineto_scan = None

AVAILABLE = _kineto_scan is not None

# Record fields, in the order of the C enum R_*.
(
    KIND,
    NAME,
    FLAGS,
    PID,
    PID_LEN,
    TID,
    TID_LEN,
    TS,
    DUR,
    DEVICE,
    STREAM,
    STREAM_LEN,
    CORRELATION,
    REGISTERS,
    SHARED,
    GRID_X,
    GRID_Y,
    GRID_Z,
    BLOCK_X,
    BLOCK_Y,
    BLOCK_Z,
    FIELDS,
) = range(22)
LAUNCH, CPU_RANGE, GPU_RANGE = 4, 5, 6  # 1, 2, 3: kernel, memcpy, memset
PID_STRING, TID_STRING, STREAM_STRING, PID_NULL, TID_NULL = 2, 4, 8, 16, 32

if _kineto_scan is not None and _kineto_scan.FIELDS != FIELDS:  # a stale build of the extension
    _kineto_scan = None
    AVAILABLE = False


def enabled() -> bool:
    return AVAILABLE and os.environ.get("KPROF_NO_SCANNER", "") in ("", "0")


@dataclass
class Scanned:
    """One piece's kept events: ``rows`` (n, FIELDS) int64 (``NAME``: an index into ``names``, the
    piece's distinct names), the piece's bytes their other strings point into, the counts of the
    categories kprof does not read, and kept-kind events without ts/dur."""

    rows: np.ndarray
    names: list[str]
    data: bytes | memoryview  # valid while the piece is taken
    other_categories: list[tuple[str, int]]
    skipped: int

    def text(self, off: int, length: int, escaped: bool = False) -> str:
        return _text(self.data, off, length, escaped)


def _text(data: bytes | memoryview, off: int, length: int, escaped: bool) -> str:
    """A string field as Python text (escapes decoded by msgspec, as the other path does)."""
    raw = bytes(data[off : off + length])
    return msgspec.json.decode(b'"' + raw + b'"') if escaped else raw.decode()


def scan(piece: bytes | memoryview) -> Scanned | None:
    """Scan one ``[`` events ``]`` piece; None: decode it with msgspec instead. The result points
    into ``piece``: take it before the piece's buffer changes."""
    assert _kineto_scan is not None
    found = _kineto_scan.scan(piece)
    if found is None:
        return None
    records, names, categories, skipped = found
    data = piece if isinstance(piece, bytes) else memoryview(piece)
    spans = np.frombuffer(names, dtype=np.int64).reshape(-1, 3).tolist()
    counts = np.frombuffer(categories, dtype=np.int64).reshape(-1, 3).tolist()
    try:
        texts = [_text(data, off, n, bool(escaped)) for off, n, escaped in spans]
        other = [(_text(data, off, n, False), count) for off, n, count in counts]
    except (UnicodeDecodeError, msgspec.DecodeError):
        return None
    return Scanned(np.frombuffer(records, dtype=np.int64).reshape(-1, FIELDS), texts, data, other, skipped)


class Unscanned(Exception):
    """A piece scanned ahead that only msgspec can read: the file is read again a piece at a time
    (msgspec may need to cut that piece earlier, which pieces cut after it cannot follow)."""


class ScanAhead:
    """Scans pieces in worker threads while the caller reads and cuts the next ones: the scan
    releases the GIL, so on two cores reading, cutting and scanning overlap. Each piece stays in
    the buffer it was read into (handed over, not copied); results come back in file order, and
    at most ``depth`` pieces wait at a time, so memory stays bounded by a few buffers."""

    def __init__(self, workers: int = 2, depth: int = 3) -> None:
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="kprof-scan")
        self.waiting: deque[tuple[Future[Scanned | None], bytearray]] = deque()
        self.free: list[bytearray] = []
        self.depth = depth

    def spare(self, size: int) -> bytearray:
        """A buffer of at least ``size`` bytes whose piece has been taken."""
        while self.free:
            buf = self.free.pop()
            if len(buf) >= size:
                return buf
        return bytearray(size)

    def submit(self, piece: tuple[bytearray, memoryview]) -> Iterator[Scanned]:
        """Queue one piece (its buffer and its view); yields the scanned pieces that are due,
        oldest first (each valid until the caller asks for the next)."""
        buf, view = piece
        self.waiting.append((self.pool.submit(scan, view), buf))
        while len(self.waiting) > self.depth:
            yield from self._next()

    def drain(self) -> Iterator[Scanned]:
        while self.waiting:
            yield from self._next()

    def _next(self) -> Iterator[Scanned]:
        future, buf = self.waiting.popleft()
        found = future.result()
        if found is None:
            raise Unscanned
        yield found
        del found
        self.free.append(buf)

    def __enter__(self) -> ScanAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
