"""Kineto JSON decoded into compact columns (numpy and msgspec only, no pandas: a worker process
can decode a trace without paying for pandas' import).

Streaming: the ``traceEvents`` array is cut into pieces of about ``PIECE_BYTES`` at event
boundaries and each piece is decoded on its own, so memory stays bounded by the piece size and the
kept rows, not by the file. Only the fields kprof uses are decoded (msgspec skips the rest), and
``ts``/``dur`` are decoded as exact decimals, so the 19-digit epoch timestamps of 2024 exports keep
their nanoseconds. All three ``ts`` generations (epoch µs as integers; epoch µs with 3 decimals;
µs relative to ``baseTimeNanoseconds``) end as absolute integer ns.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from kprof.errors import KprofInputError
from kprof.ingest.normalize import WORK_ITEM_LAUNCHES
from kprof.ingest.source import TRUNCATED_GZIP, Progress, stream_chunks

PIECE_BYTES = 4 << 20
_NULL = msgspec.Raw(b"null")
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = b'"traceEvents"'

# Category spellings seen across Kineto versions and backends: kernel/Kernel, cuda_runtime/Runtime.
GPU_CATEGORIES = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memcpy": "memcpy",
    "Memset": "memset",
}
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver", "Runtime", "Driver"}
CPU_RANGE_CATEGORIES = {"user_annotation"}
GPU_RANGE_CATEGORIES = {"gpu_user_annotation"}


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str | None = None
    tid: int | str | None = None
    ts: int | float | None = None
    dur: int | float | None = None
    args: msgspec.Raw = _NULL


class _ExactEvent(_Event, gc=False):
    """Used when float64 cannot hold a file's timestamps to the ns (19-digit epoch µs of 2024)."""

    ts: int | Decimal | None = None
    dur: int | Decimal | None = None


class Document(msgspec.Struct):
    traceEvents: list[_Event] = []
    baseTimeNanoseconds: int | None = None
    distributedInfo: msgspec.Raw = _NULL
    deviceProperties: msgspec.Raw = _NULL


class _ExactDocument(Document):
    traceEvents: list[_ExactEvent] = []


class DistributedInfo(msgspec.Struct):
    rank: int | None = None
    world_size: int | None = None


_GPU_ARG_NAMES = {"registers": "registers per thread", "shared": "shared memory"}


class _GpuArgs(msgspec.Struct, rename=_GPU_ARG_NAMES, gc=False):
    device: int | None = None
    stream: int | str | None = None
    correlation: int | None = None
    registers: int | None = None
    shared: int | None = None
    grid: list[int] | None = None
    block: list[int] | None = None


class _LaunchArgs(msgspec.Struct, rename=_GPU_ARG_NAMES, gc=False):
    correlation: int | None = None
    shared: int | None = None


_decode_gpu_args = msgspec.json.Decoder(list[_GpuArgs | None]).decode
_decode_launch_args = msgspec.json.Decoder(list[_LaunchArgs | None]).decode


@dataclass(frozen=True)
class _Decoders:
    events: Callable[[bytes], Any]
    document: Callable[[bytes], Any]
    exact: bool


FAST = _Decoders(msgspec.json.Decoder(list[_Event]).decode, msgspec.json.Decoder(Document).decode, False)
EXACT = _Decoders(msgspec.json.Decoder(list[_ExactEvent]).decode, msgspec.json.Decoder(_ExactDocument).decode, True)


class InexactTimes(Exception):
    """float64 timestamps could not be mapped back to their decimal ns: decode again exactly."""


class TimeOutOfRange(ValueError):
    """A timestamp that int64 ns cannot hold (beyond ±2**63 ns, about the year 2262)."""


_MAX_US = 2**63 // 1000 - 1


def us_to_ns(value: int | Decimal) -> int:
    """Microseconds as written in the file (int or exact decimal) to integer ns."""
    if type(value) is int:
        return value * 1000
    return int((value * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))


# Below 2**43 µs (the range of relative Kineto timestamps) neighbouring ns values stay distinct in
# float64, so the decimal ns a float was parsed from can be recovered and checked exactly.
_FLOAT_EXACT_LIMIT = float(2**43)


def times_to_ns(values: list[Any], exact: bool) -> np.ndarray:
    """Microsecond values (as decoded) → int64 ns, exactly; raises InexactTimes when unsure."""
    if exact:
        if any(not -_MAX_US <= v <= _MAX_US for v in values):
            raise TimeOutOfRange
        return np.array([us_to_ns(v) for v in values], dtype=np.int64)
    x = np.asarray(values, dtype=np.float64)
    if len(x) and not np.all(np.abs(x) <= _MAX_US):
        raise TimeOutOfRange
    is_int = np.fromiter((type(v) is int for v in values), dtype=bool, count=len(values))
    out = np.empty(len(values), dtype=np.int64)
    if is_int.all():
        out[:] = np.asarray(values, dtype=np.int64) * 1000
        return out
    frac = x[~is_int]
    if not np.all(np.abs(frac) < _FLOAT_EXACT_LIMIT):
        raise InexactTimes
    out[is_int] = np.asarray([v for v, i in zip(values, is_int) if i], dtype=np.int64) * 1000
    guess = np.rint(frac * 1000.0)
    found = np.zeros(len(frac), dtype=bool)
    result = np.zeros(len(frac), dtype=np.int64)
    for delta in (0.0, -1.0, 1.0):
        candidate = guess + delta
        hit = ~found & (candidate / 1000.0 == frac)
        result[hit] = candidate[hit].astype(np.int64)
        found |= hit
    if not found.all():  # more than 3 decimals: not a Kineto ns timestamp we can pin down
        raise InexactTimes
    out[~is_int] = result
    return out


def _as_int(value: int | str | None, ids: dict[str, int]) -> int:
    """Kineto pids/tids are ints, or strings such as ``"Spans"``: give strings stable negative ids."""
    if type(value) is int:
        return value
    key = str(value)
    return ids.setdefault(key, -1 - len(ids))


def _batch_args(path: Path, raws: list[msgspec.Raw], decode: Callable[[bytes], list[Any]]) -> list[Any]:
    """Decode many ``args`` objects in one call (and drop the views into the piece buffer)."""
    if not raws:
        return []
    try:
        return decode(b"[" + b",".join(raws) + b"]")
    except (msgspec.ValidationError, msgspec.DecodeError) as err:
        raise KprofInputError(path, f"malformed event args: {err}") from None


NULL_INT = np.iinfo(np.int64).min  # marks a missing integer inside int64 column chunks
_GPU_INT_FIELDS = (
    "device",
    "stream",
    "correlation",
    "registers",
    "shared",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
)


def _int_or_null(v: Any) -> int:
    return v if type(v) is int and -(2**63) < v < 2**63 else NULL_INT


def _axis(values: list[int] | None, i: int) -> int:
    return _int_or_null(values[i]) if values and len(values) > i else NULL_INT


def _int_column(values: list[Any]) -> np.ndarray:
    """Decoded ints (None where absent) → int64, NULL_INT for what int64 cannot hold; one numpy
    call for the usual column, element by element only when a value is out of range."""
    try:
        return np.array([NULL_INT if v is None else v for v in values], dtype=np.int64)
    except (OverflowError, TypeError, ValueError):
        return np.array([_int_or_null(v) for v in values], dtype=np.int64)


_NO_AXES = [NULL_INT] * 3


def _axes_columns(values: list[list[int] | None]) -> np.ndarray:
    """``grid``/``block`` lists → an (n, 3) int64 array, NULL_INT where an axis is missing."""
    try:
        return np.array([v if v is not None and len(v) == 3 else _NO_AXES for v in values], dtype=np.int64).reshape(
            -1, 3
        )
    except (OverflowError, TypeError, ValueError):
        return np.array([[_axis(v, i) for i in range(3)] for v in values], dtype=np.int64).reshape(-1, 3)


def _pid_device(pid: int | str | None) -> int:
    return pid if type(pid) is int else 0


@dataclass
class EventBuffer:
    """Keeps the fields kprof needs from each decoded piece, as compact int64 chunks, and drops the rest.

    Times are converted to ns relative to the file's base time piece by piece (the base itself may be
    written after the events); strings are interned so that a kernel name is stored once.
    """

    path: Path
    exact: bool
    strings: dict[str, str] = field(default_factory=dict)
    string_ids: dict[str, int] = field(default_factory=dict)
    gpu_kind: list[str] = field(default_factory=list)
    gpu_name: list[str] = field(default_factory=list)
    gpu_ints: dict[str, list[np.ndarray]] = field(
        default_factory=lambda: {k: [] for k in (*_GPU_INT_FIELDS, "ts", "dur")}
    )
    launch: dict[str, list[np.ndarray]] = field(
        default_factory=lambda: {k: [] for k in ("correlation", "ts", "tid", "work_items", "shared")}
    )
    ranges: list[tuple[str, str, int, int]] = field(default_factory=list)
    range_times: list[np.ndarray] = field(default_factory=list)
    skipped: int = 0
    launch_calls: int = 0
    other_categories: dict[str, int] = field(default_factory=dict)
    top: Document | None = None
    truncated: bool = False

    def _intern(self, text: str) -> str:
        return self.strings.setdefault(text, text)

    def take(self, events: list[_Event]) -> None:
        gpu_kinds, launch_cats, intern, other = GPU_CATEGORIES, LAUNCH_CATEGORIES, self._intern, self.other_categories
        gpu: list[_Event] = []
        launches: list[_Event] = []
        ranges: list[_Event] = []
        for e in events:
            if e.ph != "X":
                continue
            cat = e.cat
            kind = gpu_kinds.get(cat)
            if kind is not None:
                if e.ts is None or e.dur is None:
                    self.skipped += 1
                    continue
                self.gpu_kind.append(kind)
                self.gpu_name.append(intern(e.name))
                gpu.append(e)
            elif cat in launch_cats:
                if e.ts is not None:
                    launches.append(e)
                    if type(e.tid) is not int:  # string ids in file order, wherever the pieces were cut
                        _as_int(e.tid, self.string_ids)
            elif cat in GPU_RANGE_CATEGORIES or cat in CPU_RANGE_CATEGORIES or e.name.startswith("ProfilerStep#"):
                if e.ts is None or e.dur is None:
                    self.skipped += 1
                    continue
                ranges.append(e)
                if type(e.pid) is not int:
                    _as_int(e.pid, self.string_ids)
                if type(e.tid) is not int:
                    _as_int(e.tid, self.string_ids)
            else:
                other[cat] = other.get(cat, 0) + 1
        self.launch_calls += len(launches)
        self._take_gpu(gpu)
        self._take_launches(launches)
        for e in ranges:
            domain = "gpu" if e.cat in GPU_RANGE_CATEGORIES else "cpu"
            self.ranges.append(
                (intern(e.name), domain, _as_int(e.pid, self.string_ids), _as_int(e.tid, self.string_ids))
            )
        if ranges:
            self.range_times.append(
                np.stack(
                    [times_to_ns([e.ts for e in ranges], self.exact), times_to_ns([e.dur for e in ranges], self.exact)]
                )
            )

    def _take_gpu(self, gpu: list[_Event]) -> None:
        if not gpu:
            return
        args = [a or _EMPTY_GPU_ARGS for a in _batch_args(self.path, [e.args for e in gpu], _decode_gpu_args)]
        ints = self.gpu_ints
        ints["device"].append(
            _int_column([a.device if a.device is not None else _pid_device(e.pid) for e, a in zip(gpu, args)])
        )
        ints["stream"].append(
            _int_column([a.stream if type(a.stream) is int else _stream_id(a.stream, e.tid) for e, a in zip(gpu, args)])
        )
        ints["correlation"].append(_int_column([a.correlation for a in args]))
        ints["registers"].append(_int_column([a.registers for a in args]))
        ints["shared"].append(_int_column([a.shared for a in args]))
        for name in ("grid", "block"):
            axes = _axes_columns([getattr(a, name) for a in args])
            for i, axis in enumerate("xyz"):
                ints[f"{name}_{axis}"].append(axes[:, i])
        self.gpu_ints["ts"].append(times_to_ns([e.ts for e in gpu], self.exact))
        self.gpu_ints["dur"].append(times_to_ns([e.dur for e in gpu], self.exact))

    def _take_launches(self, launches: list[_Event]) -> None:
        args = _batch_args(self.path, [e.args for e in launches], _decode_launch_args)
        keep = [(e, a) for e, a in zip(launches, args) if a is not None and type(a.correlation) is int]
        if not keep:
            return
        self.launch["correlation"].append(np.array([_int_or_null(a.correlation) for _, a in keep], dtype=np.int64))
        self.launch["ts"].append(times_to_ns([e.ts for e, _ in keep], self.exact))
        self.launch["tid"].append(np.array([_as_int(e.tid, self.string_ids) for e, _ in keep], dtype=np.int64))
        self.launch["work_items"].append(np.array([e.name in WORK_ITEM_LAUNCHES for e, _ in keep], dtype=bool))
        self.launch["shared"].append(np.array([_int_or_null(a.shared) for _, a in keep], dtype=np.int64))


_EMPTY_GPU_ARGS = _GpuArgs()


def joined(chunks: list[np.ndarray], dtype: Any = np.int64) -> np.ndarray:
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=dtype)


# A boundary's text (``}``, blanks, ``,``, blanks, ``{``) may straddle two chunks by this much.
_BOUNDARY_REACH = 256
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

    Byte 0 is spare: it becomes the ``[`` that opens a piece of events, and the piece's closing
    bracket is written over the byte after its last event (and put back after), so every piece is
    decoded in place through a memoryview: a file is copied once, into this buffer, not once per
    step. The buffer is never resized in place (decoded ``args`` still point into it while their
    piece is taken); a larger one replaces it. ``searched`` keeps a long stretch without a boundary
    linear: only bytes added since the last search (and a few before them) are searched again.
    """

    def __init__(self) -> None:
        self.buf = bytearray(2 * PIECE_BYTES + _BOUNDARY_REACH)
        self.size = 1  # the bytes held are buf[1:size]
        self.searched = 1  # boundaries before this offset have been looked for already
        self.events_at = -1  # offset of "traceEvents" (object form): no cut may come before it

    @property
    def held(self) -> int:
        return self.size - 1

    def add(self, chunk: bytes) -> None:
        need = self.size + len(chunk) + 2  # room for a closing "]}" after the last byte
        if need > len(self.buf):
            grown = bytearray(max(need, 2 * len(self.buf)))
            grown[: self.size] = memoryview(self.buf)[: self.size]
            self.buf = grown
        self.buf[self.size : self.size + len(chunk)] = chunk
        self.size += len(chunk)

    def search_from(self) -> int:
        """Where a search of the bytes added since the last one starts (a boundary or key may
        straddle the two)."""
        return max(self.searched - _BOUNDARY_REACH, 1)

    def decode(self, path: Path, decode: Callable[[Any], Any], end: int, closing: bytes, events: bool) -> Any:
        """Decode the held bytes up to ``end`` with ``closing`` after them, opened by ``[`` when
        ``events`` (a piece of the events array) or as they are (the document's head)."""
        buf, stop = self.buf, end + len(closing)
        saved = bytes(buf[end:stop])
        buf[end:stop] = closing
        if events:
            buf[0] = _OPEN_ARRAY
        try:
            return _decode_piece(path, decode, memoryview(buf)[0 if events else 1 : stop])
        finally:
            buf[end:stop] = saved

    def rest(self) -> bytes:
        return bytes(memoryview(self.buf)[1 : self.size])

    def keep_from(self, start: int) -> None:
        """Move the bytes from ``start`` (the next event's ``{``) to the front."""
        rest = self.buf[start : self.size]
        self.buf[1 : 1 + len(rest)] = rest
        self.size, self.searched = 1 + len(rest), 1
        self.events_at = -1  # the document's head is decoded: later cuts have no floor


def _stream(path: Path, collector: EventBuffer, recover: bool, dec: _Decoders, on_progress: Progress | None) -> None:
    """Decode the file piece by piece into ``collector``; see the module docstring."""
    pending = _Pending()
    array_form: bool | None = None
    first = True
    truncated = f"{TRUNCATED_GZIP}; --recover keeps every complete event"
    chunks = stream_chunks(path, PIECE_BYTES, allow_truncated=recover, on_progress=on_progress, truncated=truncated)
    for chunk in chunks:
        if array_form is None:  # leading blanks are dropped as they come
            chunk = chunk.lstrip()
            if not chunk:
                continue
            if chunk[:1] not in (b"{", b"["):
                raise KprofInputError(path, "not JSON (expected a Kineto trace object)")
            array_form = chunk[:1] == b"["
        pending.add(chunk)
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
    if array_form is None:
        raise KprofInputError(path, "holds only whitespace")
    data = pending.rest()
    if first and not array_form and _EVENTS_KEY not in data:
        raise KprofInputError(path, "a JSON object without traceEvents: not a Kineto trace")
    opening = b"" if first else (b"[" if array_form else b'{"traceEvents":[')
    _finish(path, collector, opening + data, array_form, recover, dec)


def _take_piece(
    path: Path,
    collector: EventBuffer,
    cut: int,
    array_form: bool,
    first: bool,
    dec: _Decoders,
    pending: _Pending,
) -> bool:
    """Decode the held bytes up to the boundary at ``cut`` (or an earlier one, when that cut lies
    inside an event) and keep the rest pending; returns whether the document's head is still to come."""
    floor = max(pending.events_at, 1)
    for _ in range(_EARLIER_CUTS):
        end = cut + 1  # just after the "}" that closes the last whole event
        try:
            if first:
                closing = b"]" if array_form else b"]}"
                head = pending.decode(path, _decoder_for(dec, array_form), end, closing, events=False)
                _take_document(collector, head)
            else:
                collector.take(pending.decode(path, dec.events, end, b"]", events=True))
        except _CutInside:
            earlier = _last_boundary(pending.buf, floor, cut, pending.size)
            if earlier is None:
                break
            cut = earlier.start()
            continue
        rest = _BOUNDARY.match(pending.buf, cut, pending.size)
        assert rest is not None
        pending.keep_from(rest.end() - 1)
        return False
    _check_size(path, pending)  # no cut decodes yet: wait for the next boundary
    return first


def _check_size(path: Path, pending: _Pending) -> None:
    if pending.held > MAX_EVENT_BYTES:
        raise KprofInputError(
            path,
            f"no complete event within {MAX_EVENT_BYTES >> 20} MiB (a single event that large, or not a Kineto trace)",
        )


def _decoder_for(dec: _Decoders, array_form: bool) -> Callable[[bytes], Any]:
    return dec.events if array_form else dec.document


def _take_document(collector: EventBuffer, doc: Document | list[_Event]) -> None:
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


def _finish(path: Path, collector: EventBuffer, text: bytes, array_form: bool, recover: bool, dec: _Decoders) -> None:
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
    """Timestamps written as strings are rpd2tracing's Chrome JSON, not Kineto: point to the .rpd."""
    if _STRING_TIMES.search(str(err)):
        return KprofInputError(
            path,
            "not a Kineto trace (ts/dur written as strings, as rpd2tracing's Chrome JSON does); give kprof the .rpd",
        )
    return KprofInputError(path, f"unexpected field type: {err}")


def collect(path: Path, recover: bool, dec: _Decoders, on_progress: Progress | None) -> EventBuffer:
    collector = EventBuffer(path, dec.exact)
    _stream(path, collector, recover, dec, on_progress)
    return collector


def _stream_id(stream: int | str | None, tid: int | str | None) -> int:
    if type(stream) is int:
        return _int_or_null(stream)
    if isinstance(stream, str):
        try:
            return _int_or_null(int(stream, 0))
        except ValueError:
            pass
    return _int_or_null(tid) if type(tid) is int else -1


def decode_optional(kind: type, raw: msgspec.Raw) -> Any:
    try:
        return msgspec.json.decode(raw, type=kind | None)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
