"""PyTorch profiler (Kineto) Chrome-trace JSON, CUDA and ROCm builds, plain or gzipped.

Streaming: the ``traceEvents`` array is cut into pieces of about ``PIECE_BYTES`` at event
boundaries and each piece is decoded on its own, so memory stays bounded by the piece size and the
kept rows, not by the file. Only the fields kprof uses are decoded (msgspec skips the rest), and
``ts``/``dur`` are decoded as exact decimals, so the 19-digit epoch timestamps of 2024 exports keep
their nanoseconds. All three ``ts`` generations (epoch µs as integers; epoch µs with 3 decimals;
µs relative to ``baseTimeNanoseconds``) end as absolute integer ns.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from kprof.errors import KprofInputError
from kprof.ingest.names import demangle_all, short_name
from kprof.ingest.normalize import WORK_ITEM_LAUNCHES, trace_meta
from kprof.ingest.registry import Probe, TraceFormat
from kprof.ingest.source import TRUNCATED_GZIP, Progress, stream_chunks
from kprof.trace import Trace, events_table, range_table

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


class _Document(msgspec.Struct):
    traceEvents: list[_Event] = []
    baseTimeNanoseconds: int | None = None
    distributedInfo: msgspec.Raw = _NULL
    deviceProperties: msgspec.Raw = _NULL


class _ExactDocument(_Document):
    traceEvents: list[_ExactEvent] = []


class _DistributedInfo(msgspec.Struct):
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


FAST = _Decoders(msgspec.json.Decoder(list[_Event]).decode, msgspec.json.Decoder(_Document).decode, False)
EXACT = _Decoders(msgspec.json.Decoder(list[_ExactEvent]).decode, msgspec.json.Decoder(_ExactDocument).decode, True)


class _InexactTimes(Exception):
    """float64 timestamps could not be mapped back to their decimal ns: decode again exactly."""


class _TimeOutOfRange(ValueError):
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
    """Microsecond values (as decoded) → int64 ns, exactly; raises _InexactTimes when unsure."""
    if exact:
        if any(not -_MAX_US <= v <= _MAX_US for v in values):
            raise _TimeOutOfRange
        return np.array([us_to_ns(v) for v in values], dtype=np.int64)
    x = np.asarray(values, dtype=np.float64)
    if len(x) and not np.all(np.abs(x) <= _MAX_US):
        raise _TimeOutOfRange
    is_int = np.fromiter((type(v) is int for v in values), dtype=bool, count=len(values))
    out = np.empty(len(values), dtype=np.int64)
    if is_int.all():
        out[:] = np.asarray(values, dtype=np.int64) * 1000
        return out
    frac = x[~is_int]
    if not np.all(np.abs(frac) < _FLOAT_EXACT_LIMIT):
        raise _InexactTimes
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
        raise _InexactTimes
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
class _EventBuffer:
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
    top: _Document | None = None
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
            elif cat in GPU_RANGE_CATEGORIES or cat in CPU_RANGE_CATEGORIES or e.name.startswith("ProfilerStep#"):
                if e.ts is None or e.dur is None:
                    self.skipped += 1
                    continue
                ranges.append(e)
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


def _joined(chunks: list[np.ndarray], dtype: Any = np.int64) -> np.ndarray:
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=dtype)


# A boundary's text (``}``, blanks, ``,``, blanks, ``{``) may straddle two chunks by this much.
_BOUNDARY_REACH = 256
# Bytes without a complete event before kprof gives up: a larger single event is not a trace event.
MAX_EVENT_BYTES = 64 << 20
_EARLIER_CUTS = 8  # cuts tried, last first, when one lands inside a string or a nested object


def _last_boundary(buf: bytes, lo: int, hi: int) -> re.Match[bytes] | None:
    """The last ``}, {`` event boundary starting in ``buf[lo:hi]`` (found from the end, by ``}``)."""
    while hi > lo:
        pos = buf.rfind(b"}", lo, hi)
        if pos < 0:
            return None
        m = _BOUNDARY.match(buf, pos)
        if m is not None:
            return m
        hi = pos
    return None


class _CutInside(Exception):
    """A piece ended inside an event (a ``}, {`` within a string or a nested list): cut earlier."""


def _decode_piece(path: Path, decode: Callable[[bytes], Any], data: bytes) -> Any:
    try:
        return decode(data)
    except msgspec.ValidationError as err:
        raise _field_type_error(path, err) from None
    except msgspec.DecodeError as err:
        if "truncated" in str(err):
            raise _CutInside from None
        raise KprofInputError(path, f"malformed JSON: {err}") from None


@dataclass
class _Pending:
    """Bytes read but not yet decoded, kept as a list of chunks so that a long stretch without a
    boundary costs linear time: only the newest chunk (and a few bytes before it) is searched."""

    parts: list[bytes] = field(default_factory=list)
    size: int = 0
    searched: int = 0  # boundaries before this offset have been looked for already
    events_at: int = -1  # offset of "traceEvents" (object form): no cut may come before it

    def add(self, chunk: bytes) -> None:
        self.parts.append(chunk)
        self.size += len(chunk)

    def window(self) -> tuple[bytes, int]:
        """The unsearched bytes and a little before them, and that window's offset."""
        start = max(self.searched - _BOUNDARY_REACH, 0)
        tail, offset, need = [], self.size, self.size - start
        for part in reversed(self.parts):
            if need <= 0:
                break
            take = part[-need:] if need < len(part) else part
            tail.append(take)
            offset -= len(take)
            need -= len(take)
        return b"".join(reversed(tail)), offset

    def joined(self) -> bytes:
        data = b"".join(self.parts)
        self.parts = [data]
        return data

    def keep_from(self, data: bytes, start: int) -> None:
        rest = data[start:]
        self.parts, self.size, self.searched = [rest], len(rest), 0
        self.events_at = -1  # the document's head is decoded: later cuts have no floor


def _stream(path: Path, collector: _EventBuffer, recover: bool, dec: _Decoders, on_progress: Progress | None) -> None:
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
        window, offset = pending.window()
        if first and not array_form and pending.events_at < 0:
            found = window.find(_EVENTS_KEY)
            if found >= 0:
                pending.events_at = offset + found
        pending.searched = pending.size
        if first and not array_form and pending.events_at < 0:
            _check_size(path, pending)
            continue
        lo = max(pending.events_at - offset, 0) if first and not array_form else 0
        cut = _last_boundary(window, lo, len(window))
        if cut is None:
            _check_size(path, pending)
            continue
        data = pending.joined()
        first = _take_piece(path, collector, data, offset + cut.start(), array_form, first, dec, pending)
    if array_form is None:
        raise KprofInputError(path, "holds only whitespace")
    data = pending.joined()
    if first and not array_form and _EVENTS_KEY not in data:
        raise KprofInputError(path, "a JSON object without traceEvents: not a Kineto trace")
    opening = b"" if first else (b"[" if array_form else b'{"traceEvents":[')
    _finish(path, collector, opening + data, array_form, recover, dec)


def _take_piece(
    path: Path,
    collector: _EventBuffer,
    data: bytes,
    cut: int,
    array_form: bool,
    first: bool,
    dec: _Decoders,
    pending: _Pending,
) -> bool:
    """Decode ``data`` up to the boundary at ``cut`` (or an earlier one, when that cut lies inside an
    event) and keep the rest pending; returns whether the document's head is still to come."""
    floor = max(pending.events_at, 0)
    for _ in range(_EARLIER_CUTS):
        end = cut + 1  # just after the "}" that closes the last whole event
        try:
            if first:
                closing = b"]" if array_form else b"]}"
                _take_document(collector, _decode_piece(path, _decoder_for(dec, array_form), data[:end] + closing))
            else:
                collector.take(_decode_piece(path, dec.events, b"[" + data[:end] + b"]"))
        except _CutInside:
            earlier = _last_boundary(data, floor, cut)
            if earlier is None:
                break
            cut = earlier.start()
            continue
        rest = _BOUNDARY.match(data, cut)
        assert rest is not None
        pending.keep_from(data, rest.end() - 1)
        return False
    _check_size(path, pending)  # no cut decodes yet: wait for the next boundary
    return first


def _check_size(path: Path, pending: _Pending) -> None:
    if pending.size > MAX_EVENT_BYTES:
        raise KprofInputError(
            path,
            f"no complete event within {MAX_EVENT_BYTES >> 20} MiB (a single event that large, or not a Kineto trace)",
        )


def _decoder_for(dec: _Decoders, array_form: bool) -> Callable[[bytes], Any]:
    return dec.events if array_form else dec.document


def _take_document(collector: _EventBuffer, doc: _Document | list[_Event]) -> None:
    if isinstance(doc, list):
        collector.take(doc)
        return
    collector.take(doc.traceEvents)
    doc.traceEvents = []
    if collector.top is None:
        collector.top = doc
    else:  # keys after the events array (older Kineto writes baseTimeNanoseconds last)
        for name in ("baseTimeNanoseconds", "distributedInfo", "deviceProperties"):
            value = getattr(doc, name)
            if not _is_null(value):
                setattr(collector.top, name, value)


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, msgspec.Raw) and bytes(value) in (b"", b"null"))


def _finish(path: Path, collector: _EventBuffer, text: bytes, array_form: bool, recover: bool, dec: _Decoders) -> None:
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


def _collect(path: Path, recover: bool, dec: _Decoders, on_progress: Progress | None) -> _EventBuffer:
    collector = _EventBuffer(path, dec.exact)
    _stream(path, collector, recover, dec, on_progress)
    return collector


def load(
    path: Path, rank: int | None = None, recover: bool | None = None, on_progress: Progress | None = None
) -> Trace:
    """Read one Kineto trace. ``recover`` (default: on for Kineto's unfinished ``.tmp`` files) keeps
    every complete event of a truncated file and records a warning instead of failing."""
    if recover is None:
        recover = path.name.endswith(".tmp")
    was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived objects: the cyclic GC would only rescan them
    try:
        try:
            return _build(path, _collect(path, recover, FAST, on_progress), rank)
        except _InexactTimes:
            return _build(path, _collect(path, recover, EXACT, on_progress), rank)
    except _TimeOutOfRange:
        raise KprofInputError(path, "a ts or dur value is out of range (beyond int64 nanoseconds)") from None
    finally:
        if was_enabled:
            gc.enable()


def _categorical(codes: np.ndarray, labels: list[str]) -> pd.Categorical:
    """Codes into ``labels``, which may repeat (two mangled names can demangle alike)."""
    unique, remap = np.unique(np.array(labels, dtype=object), return_inverse=True)
    return pd.Categorical.from_codes(remap[codes], categories=unique.tolist())


def _nullable(values: np.ndarray, dtype: Any = np.int64) -> pd.arrays.IntegerArray:
    missing = values == NULL_INT
    if dtype is not np.int64:
        info = np.iinfo(dtype)
        missing |= (values < info.min) | (values > info.max)  # a value the column cannot hold is unknown
        values = np.where(missing, 0, values)
    return pd.arrays.IntegerArray(values.astype(dtype, copy=False), missing)


def _build(path: Path, c: _EventBuffer, rank: int | None) -> Trace:
    top = c.top or _Document()
    base = top.baseTimeNanoseconds or 0
    warnings: list[str] = []
    if c.truncated:
        warnings.append("file is truncated: kept every complete event, dropped the unfinished one")
    if c.skipped:
        warnings.append(f"{c.skipped} GPU or range events without ts/dur were skipped")
    if not c.gpu_name:
        warnings.append(_no_device_activity(c))
    dist = _decode_optional(_DistributedInfo, top.distributedInfo)
    file_rank = dist.rank if dist is not None else None
    if rank is None:
        rank = file_rank if file_rank is not None else 0

    g = {k: _joined(v) for k, v in c.gpu_ints.items()}
    c.gpu_ints.clear()  # the chunks are joined: let them go before the table is built
    start = g["ts"] + base
    dur = np.maximum(g["dur"], 0)
    # Join each activity to its launching API call by correlation id (the last call wins on reuse).
    lc = {k: _joined(v, bool if k == "work_items" else np.int64) for k, v in c.launch.items()}
    _, last = np.unique(lc["correlation"][::-1], return_index=True)
    keep = len(lc["correlation"]) - 1 - last
    corr_sorted = lc["correlation"][keep]
    pos = np.searchsorted(corr_sorted, g["correlation"])
    pos = np.minimum(pos, max(len(corr_sorted) - 1, 0))
    found = (g["correlation"] != NULL_INT) & (len(corr_sorted) > 0)
    if len(corr_sorted):
        found &= corr_sorted[pos] == g["correlation"]
    idx = keep[pos] if len(keep) else pos

    def from_launch(values: np.ndarray) -> np.ndarray:
        return np.where(found, values[idx], NULL_INT) if len(values) else np.full(len(found), NULL_INT)

    launch_ns = from_launch(lc["ts"] + base)
    work_items = found & (lc["work_items"][idx] if len(keep) else False)
    grids = {}
    for axis in "xyz":
        grid, block = g["grid_" + axis], g["block_" + axis]
        convert = work_items & (grid != NULL_INT) & (block != NULL_INT) & (block > 0)
        grids[axis] = np.where(convert, -(-grid // np.where(convert, block, 1)), grid)
    shared = np.where(g["shared"] != NULL_INT, g["shared"], from_launch(lc["shared"]))

    raw_names, name_codes = np.unique(np.array(c.gpu_name, dtype=object), return_inverse=True)
    demangled = demangle_all(raw_names.tolist())
    full_names = [demangled.get(n, n) for n in raw_names.tolist()]
    full = _categorical(name_codes, full_names)
    kinds = pd.Categorical(c.gpu_kind)
    # Copies and memsets keep their names; kernels get the short C++-less form.
    is_kernel_name = np.zeros(len(raw_names), dtype=bool)
    is_kernel_name[np.unique(name_codes[np.asarray(kinds == "kernel")])] = True
    short_names = [short_name(f) if k else f for f, k in zip(full_names, is_kernel_name)]
    c.gpu_name.clear()
    c.gpu_kind.clear()
    cols: dict[str, Any] = {
        "rank": np.full(len(start), rank, dtype=np.int32),
        "device": g["device"].astype(np.int32),
        "stream": g["stream"],
        "start_ns": start,
        "end_ns": start + dur,
        "dur_ns": dur,
        "name": full,
        "short_name": _categorical(name_codes, short_names),
        "kind": kinds,
        "correlation": _nullable(g["correlation"]),
        "registers": _nullable(g.pop("registers"), np.int32),
        "shared_mem_bytes": _nullable(shared, np.int32),
        "launch_ns": _nullable(launch_ns),
        "launch_tid": _nullable(from_launch(lc["tid"])),
    }
    for axis in "xyz":
        cols["grid_" + axis] = _nullable(grids.pop(axis), np.int32)
        cols["block_" + axis] = _nullable(g.pop("block_" + axis), np.int32)
    events = events_table(cols)

    times = np.concatenate(c.range_times, axis=1) if c.range_times else np.zeros((2, 0), dtype=np.int64)
    r_start = times[0] + base
    rcols = {
        "name": [r[0] for r in c.ranges],
        "start_ns": r_start,
        "end_ns": r_start + np.maximum(times[1], 0),
        "domain": [r[1] for r in c.ranges],
        "device": [r[2] if r[1] == "gpu" else -1 for r in c.ranges],
        "pid": [r[2] for r in c.ranges],
        "tid": [r[3] for r in c.ranges],
    }
    meta = trace_meta(
        path,
        "kineto",
        rank,
        "unix_ns (Kineto: CPU and CUPTI/roctracer timestamps in one epoch domain)",
        ts_generation="relative to baseTimeNanoseconds" if top.baseTimeNanoseconds else "epoch microseconds",
        ts_decoding="exact decimal" if c.exact else "float64, checked exact to the ns",
        world_size=dist.world_size if dist is not None else None,
    )
    if file_rank is not None:
        meta["rank_source"] = "distributedInfo"
    return Trace(events=events, ranges=range_table(rcols), meta=meta, warnings=warnings)


# Host-side categories every profiled program has: naming them would not explain an empty trace.
_HOST_CATEGORIES = {"cpu_op", "python_function", "Trace", "fwdbwd", "ac2g", "cpu_instant_event"}


def _no_device_activity(c: _EventBuffer) -> str:
    """Why the tables are empty, in the trace's own terms (launches seen, categories not read)."""
    text = "no CUDA or ROCm device activity (kernel, memcpy, memset) in the trace"
    if c.launch_calls:
        text += f", though it holds {c.launch_calls:,} runtime calls"
    others = sorted(((n, cat) for cat, n in c.other_categories.items() if cat not in _HOST_CATEGORIES), reverse=True)
    if others:
        text += "; it holds " + ", ".join(f"{cat} ({n:,})" for n, cat in others[:3])
    return text + ": every table is empty (kernels are recorded with ProfilerActivity.CUDA)"


def _stream_id(stream: int | str | None, tid: int | str | None) -> int:
    if type(stream) is int:
        return _int_or_null(stream)
    if isinstance(stream, str):
        try:
            return _int_or_null(int(stream, 0))
        except ValueError:
            pass
    return _int_or_null(tid) if type(tid) is int else -1


def _decode_optional(kind: type, raw: msgspec.Raw) -> Any:
    try:
        return msgspec.json.decode(raw, type=kind | None)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _is_kineto(p: Probe) -> bool:
    return p.json_head is not None


FORMAT = TraceFormat(
    "kineto",
    "Kineto JSON(.gz) from the PyTorch profiler",
    _is_kineto,
    lambda p, o: load(p.path, rank=o.rank, recover=o.recover, on_progress=o.on_progress),
)
