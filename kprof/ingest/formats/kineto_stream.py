"""Kineto JSON read as a stream of pieces, in bounded memory.

The ``traceEvents`` array is cut into pieces of about ``PIECE_BYTES`` at event boundaries and each
piece is read on its own (by the compiled scanner, in worker threads, or by msgspec), so memory
stays bounded by the piece size and the kept rows, not by the file. The file is read straight into
one buffer and each piece is handed over in place; the columns are kept by
kprof.ingest.formats.kineto_events.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from kprof.errors import KprofInputError
from kprof.ingest.formats import kineto_scan as ks
from kprof.ingest.formats.kineto_events import Decoders, Document, Event, EventBuffer
from kprof.ingest.memory import MemoryGuard
from kprof.ingest.source import TRUNCATED_GZIP, Progress, stream_into

PIECE_BYTES = 4 << 20
SCAN_WORKERS = min(2, os.cpu_count() or 1)  # threads scanning pieces ahead; 1: a piece at a time
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = b'"traceEvents"'

# A boundary's text (``}``, blanks, ``,``, blanks, ``{``) may straddle two chunks by this much.
_BOUNDARY_REACH = 256
_REST_ROOM = 64 << 10
# Bytes without a complete event before kprof gives up: a larger single event is not a trace event.
MAX_EVENT_BYTES = 64 << 20
_EARLIER_CUTS = 8  # cuts tried, last first, when one lands inside a string or a nested object


def _last_boundary(buf: bytes | bytearray, lo: int, hi: int, end: int) -> re.Match[bytes] | None:
    """The last ``}, {`` event boundary starting in ``buf[lo:hi]`` and ending by ``end`` (found from
    the end, by ``}``)."""
    while hi > lo:
        pos = buf.rfind(b"}", lo, hi)
        if pos < 0:
            return None
        m = _BOUNDARY.match(buf, pos, end)
        if m is not None:
            return m
        hi = pos
    return None


class _CutInside(Exception):
    """A piece ended inside an event (a ``}, {`` within a string or a nested list): cut earlier."""


def _decode_piece(path: Path, decode: Callable[[Any], Any], data: Any) -> Any:
    try:
        return decode(data)
    except msgspec.ValidationError as err:
        raise _field_type_error(path, err) from None
    except msgspec.DecodeError as err:
        if "truncated" in str(err):
            raise _CutInside from None
        raise KprofInputError(path, f"malformed JSON: {err}") from None


_OPEN_ARRAY = ord("[")


class _Pending:
    """Bytes read but not yet decoded, in one buffer that is reused piece after piece.

    The reader fills the buffer in place (``room``). Byte 0 is spare: it becomes the ``[`` that
    opens a piece of events, and the piece's closing bracket is written over the byte after its
    last event (and put back after), so every piece is read in place through a memoryview. When
    pieces are scanned ahead, a piece keeps the whole buffer (``hand_off``) and the rest moves to a
    spare one. The buffer is never resized in place (decoded ``args`` still point into it while
    their piece is taken); a larger one replaces it. ``searched`` keeps a long stretch without a
    boundary linear: only bytes added since the last search (and a few before them) are searched
    again.
    """

    def __init__(self) -> None:
        # One read of PIECE_BYTES lands after the rest of the last piece (most often a part of one
        # event); a longer rest grows the buffer. Every byte of it is zeroed and touched once.
        self.buf = bytearray(PIECE_BYTES + _REST_ROOM)
        self.size = 1  # the bytes held are buf[1:size]
        self.searched = 1  # boundaries before this offset have been looked for already
        self.events_at = -1  # offset of "traceEvents" (object form): no cut may come before it

    @property
    def held(self) -> int:
        return self.size - 1

    def room(self, n: int) -> memoryview:
        """The ``n`` bytes after the held ones, for the reader to fill in place (then ``size += n``)."""
        need = self.size + n + 2  # room for a closing "]}" after the last byte
        if need > len(self.buf):
            grown = bytearray(max(need, 2 * len(self.buf)))
            grown[: self.size] = memoryview(self.buf)[: self.size]
            self.buf = grown
        return memoryview(self.buf)[self.size : self.size + n]

    def drop_leading_blanks(self) -> bool:
        """Drop whitespace before the document; whether any other byte is held."""
        held = memoryview(self.buf)[1 : self.size]
        kept = bytes(held).lstrip() if held[:1].tobytes().isspace() else None
        if kept is not None:
            self.buf[1 : 1 + len(kept)] = kept
            self.size = 1 + len(kept)
        return self.size > 1

    def search_from(self) -> int:
        """Where a search of the bytes added since the last one starts (a boundary or key may
        straddle the two)."""
        return max(self.searched - _BOUNDARY_REACH, 1)

    @contextmanager
    def piece(self, start: int, end: int, closing: bytes) -> Iterator[memoryview]:
        """``buf[start:end]`` with ``closing`` written after it (and put back after), as a view in place."""
        buf, stop = self.buf, end + len(closing)
        saved = bytes(buf[end:stop])
        buf[end:stop] = closing
        try:
            yield memoryview(buf)[start:stop]
        finally:
            buf[end:stop] = saved

    def decode(self, path: Path, decode: Callable[[Any], Any], start: int, end: int, closing: bytes) -> Any:
        with self.piece(start, end, closing) as view:
            return _decode_piece(path, decode, view)

    def take_events(self, path: Path, collector: EventBuffer, dec: Decoders, start: int, end: int, rest: int) -> None:
        """The events in ``buf[start + 1:end]`` (``buf[start]`` is the ``[`` opening them) into
        ``collector``, then keep the bytes from ``rest`` (the next event). By the compiled scanner
        when it reads them (in a worker thread when ``collector.ahead`` is set), else by msgspec."""
        if collector.ahead is not None:
            collector.take_process_names(self.buf, start, end)
            for scanned in collector.ahead.submit(self.hand_off(start, end, rest, collector.ahead)):
                collector.take_scanned(scanned)
            return
        if not (ks.enabled() and self.scan_in_place(collector, start, end)):
            collector.take(self.decode(path, dec.events, start, end, b"]"))
            collector.pieces_decoded += 1
        self.keep_from(rest)

    def scan_in_place(self, collector: EventBuffer, start: int, end: int) -> bool:
        """The events in ``buf[start + 1:end]`` into ``collector`` by the scanner, in this thread;
        False (nothing taken) when only msgspec can read them."""
        collector.take_process_names(self.buf, start, end)
        with self.piece(start, end, b"]") as view:
            scanned = ks.scan(view)
            if scanned is not None:
                collector.take_scanned(scanned)
        return scanned is not None

    def hand_off(self, start: int, end: int, rest: int, ahead: ks.ScanAhead) -> tuple[bytearray, memoryview]:
        """The piece ``buf[start:end]`` + ``]`` given away whole (to be scanned by a worker) rather
        than copied: the bytes from ``rest`` move to a spare buffer, which becomes this one."""
        given = self.buf
        self.keep_from(rest, into=ahead.spare(len(given)))
        given[end] = ord("]")  # a blank or the "," after the last event: the rest has moved
        return given, memoryview(given)[start : end + 1]

    def rest(self) -> bytes:
        return bytes(memoryview(self.buf)[1 : self.size])

    def keep_from(self, start: int, into: bytearray | None = None) -> None:
        """Move the bytes from ``start`` (the next event's ``{``) to the front of this buffer, or of
        ``into`` (at least as large), which then becomes this one."""
        rest = self.buf[start : self.size]
        if into is not None:
            self.buf = into
        self.buf[1 : 1 + len(rest)] = rest
        self.size, self.searched = 1 + len(rest), 1
        self.events_at = -1  # the document's head is decoded: later cuts have no floor


def _stream(
    path: Path,
    collector: EventBuffer,
    recover: bool,
    dec: Decoders,
    on_progress: Progress | None,
    memory: MemoryGuard | None,
) -> None:
    """Decode the file piece by piece into ``collector``; see the module docstring. ``memory`` is
    told the activities kept after each piece (and, through ``on_progress``, how far the file is read)."""
    pending = _Pending()
    array_form: bool | None = None
    first = True
    truncated = f"{TRUNCATED_GZIP}; --recover keeps every complete event"
    reads = stream_into(path, pending.room, PIECE_BYTES, recover, on_progress, truncated)
    for n in reads:
        pending.size += n
        if array_form is None:  # leading blanks are dropped as they come
            if not pending.drop_leading_blanks():
                continue
            opening = pending.buf[1:2]
            if opening not in (b"{", b"["):
                raise KprofInputError(path, "not JSON (expected a Kineto trace object)")
            array_form = opening == b"["
        lo = pending.search_from()
        pending.searched = pending.size
        if first and not array_form and pending.events_at < 0:
            found = pending.buf.find(_EVENTS_KEY, lo, pending.size)
            if found < 0:
                _check_size(path, pending)
                continue
            pending.events_at = found
        floor = pending.events_at if first and not array_form else 0
        cut = _last_boundary(pending.buf, max(lo, floor), pending.size, pending.size)
        if cut is None:
            _check_size(path, pending)
            continue
        first = _take_piece(path, collector, cut.start(), array_form, first, dec, pending)
        if memory is not None:
            memory.expect_share(collector.gpu_rows)
    if array_form is None:
        raise KprofInputError(path, "holds only whitespace")
    data = pending.rest()
    if first and not array_form and _EVENTS_KEY not in data:
        raise KprofInputError(path, "a JSON object without traceEvents: not a Kineto trace")
    opening = b"" if first else (b"[" if array_form else b'{"traceEvents":[')
    if collector.ahead is not None:
        for scanned in collector.ahead.drain():
            collector.take_scanned(scanned)
    _finish(path, collector, opening + data, array_form, recover, dec)
    if memory is not None:  # every activity is in: the table is still to build, the peak to come
        memory.expect(collector.gpu_rows)


def _take_piece(
    path: Path,
    collector: EventBuffer,
    cut: int,
    array_form: bool,
    first: bool,
    dec: Decoders,
    pending: _Pending,
) -> bool:
    """Decode the held bytes up to the boundary at ``cut`` (or an earlier one, when that cut lies
    inside an event) and keep the rest pending; returns whether the document's head is still to come."""
    floor = max(pending.events_at, 1)
    for _ in range(_EARLIER_CUTS):
        end = cut + 1  # just after the "}" that closes the last whole event
        boundary = _BOUNDARY.match(pending.buf, cut, pending.size)
        assert boundary is not None
        rest = boundary.end() - 1  # the next event's "{"
        try:
            if not first:
                pending.buf[0] = _OPEN_ARRAY
                pending.take_events(path, collector, dec, 0, end, rest)
            elif array_form or not _take_head_apart(path, collector, dec, pending, end, rest):
                closing = b"]" if array_form else b"]}"
                _take_document(collector, pending.decode(path, _decoder_for(dec, array_form), 1, end, closing))
                pending.keep_from(rest)
        except _CutInside:
            earlier = _last_boundary(pending.buf, floor, cut, pending.size)
            if earlier is None:
                break
            cut = earlier.start()
            continue
        return False
    _check_size(path, pending)  # no cut decodes yet: wait for the next boundary
    return first


_EVENTS_OPEN = re.compile(rb'"traceEvents"\s*:\s*\[')


def _take_head_apart(path: Path, collector: EventBuffer, dec: Decoders, pending: _Pending, end: int, rest: int) -> bool:
    """The first piece as the document's keys before ``traceEvents`` (by msgspec) and its events
    (as any other piece, so the scanner reads them too); False: decode the piece whole instead."""
    if not ks.enabled():
        return False
    opened = _EVENTS_OPEN.match(pending.buf, pending.events_at, end)
    if opened is None:
        return False
    try:
        head = pending.decode(path, dec.document, 1, opened.end(), b"]}")
    except (KprofInputError, _CutInside):  # "traceEvents" inside a string of an earlier key
        return False
    start = opened.end() - 1
    if collector.ahead is not None:
        pending.take_events(path, collector, dec, start, end, rest)
    elif pending.scan_in_place(collector, start, end):
        pending.keep_from(rest)
    else:
        return False  # msgspec reads the piece whole, as without the scanner (its errors say where)
    _take_document(collector, head)
    return True


def _check_size(path: Path, pending: _Pending) -> None:
    if pending.held > MAX_EVENT_BYTES:
        raise KprofInputError(
            path,
            f"no complete event within {MAX_EVENT_BYTES >> 20} MiB (a single event that large, or not a Kineto trace)",
        )


def _decoder_for(dec: Decoders, array_form: bool) -> Callable[[bytes], Any]:
    return dec.events if array_form else dec.document


def _take_document(collector: EventBuffer, doc: Document | list[Event]) -> None:
    if isinstance(doc, list):
        collector.take(doc)
        return
    collector.take(doc.traceEvents)
    doc.traceEvents = []
    for name in ("distributedInfo", "deviceProperties"):  # kept: let go of the piece's buffer
        value = getattr(doc, name)
        if isinstance(value, msgspec.Raw):
            setattr(doc, name, value.copy())
    if collector.top is None:
        collector.top = doc
    else:  # keys after the events array (older Kineto writes baseTimeNanoseconds last)
        for name in ("baseTimeNanoseconds", "distributedInfo", "deviceProperties"):
            value = getattr(doc, name)
            if not _is_null(value):
                setattr(collector.top, name, value)


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, msgspec.Raw) and bytes(value) in (b"", b"null"))


def _finish(path: Path, collector: EventBuffer, text: bytes, array_form: bool, recover: bool, dec: Decoders) -> None:
    """Decode the last piece; on a truncated file keep every complete event if asked to."""
    decode = _decoder_for(dec, array_form)
    try:
        _take_document(collector, decode(text))
        return
    except msgspec.ValidationError as err:
        raise _field_type_error(path, err) from None
    except msgspec.DecodeError as err:
        if "truncated" not in str(err):
            raise KprofInputError(path, f"malformed JSON: {err}") from None
        if not recover:
            raise KprofInputError(
                path, "JSON ends before the trace is complete (truncated); --recover keeps every complete event"
            ) from None
    closing = b"]" if array_form else b"]}"
    start = max(text.find(_EVENTS_KEY), 0)
    for m in reversed(list(_BOUNDARY.finditer(text, start))):
        try:
            doc = decode(text[: m.start() + 1] + closing)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        _take_document(collector, doc)
        break
    collector.truncated = True


_STRING_TIMES = re.compile(r"got `str` - at `\$(?:\.traceEvents)?\[\d+\]\.(?:ts|dur)`")


def _field_type_error(path: Path, err: msgspec.ValidationError) -> KprofInputError:
    """Timestamps written as strings are the Chrome JSON of rpd2tracing or of legacy rocprof (v1),
    not Kineto: point to the file each was made from, which kprof reads."""
    if _STRING_TIMES.search(str(err)):
        return KprofInputError(
            path,
            "not a Kineto trace: ts/dur are strings, as in the Chrome JSON of rpd2tracing and of legacy rocprof "
            "(v1); give kprof the .rpd it was converted from, or rocprof v1's results.csv (rocprof --timestamp on)",
        )
    return KprofInputError(path, f"unexpected field type: {err}")


def collect(
    path: Path,
    recover: bool,
    dec: Decoders,
    on_progress: Progress | None,
    memory: MemoryGuard | None = None,
    scan_threads: int | None = None,
) -> EventBuffer:
    """The file's kept events as columns: pieces scanned ahead in worker threads (SCAN_WORKERS, at
    most ``scan_threads``) when the compiled scanner reads them all, else a piece at a time."""
    threads = min(SCAN_WORKERS, scan_threads or SCAN_WORKERS)
    if ks.enabled() and threads > 1:
        try:
            with ks.ScanAhead(threads) as ahead:
                collector = EventBuffer(path, dec.exact, ahead=ahead)
                _stream(path, collector, recover, dec, on_progress, memory)
            collector.ahead = None
            return collector
        except ks.Unscanned:
            pass
    collector = EventBuffer(path, dec.exact)
    _stream(path, collector, recover, dec, on_progress, memory)
    return collector
