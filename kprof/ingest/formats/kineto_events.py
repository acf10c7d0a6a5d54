"""Kineto events as kprof keeps them: the msgspec types of the fields it reads, exact times, and
``EventBuffer``, which turns each decoded piece (msgspec's structs, or the compiled scanner's
records) into compact int64 columns and drops everything else. numpy and msgspec only, no pandas:
a worker process can decode a trace without paying for pandas' import.

``ts``/``dur`` are kept exact: the 19-digit epoch timestamps of 2024 exports keep their
nanoseconds. All three ``ts`` generations (epoch µs as integers; epoch µs with 3 decimals; µs
relative to ``baseTimeNanoseconds``) end as absolute integer ns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from kprof.errors import KprofInputError
from kprof.ingest.column_blocks import NULL_INT, Chunks
from kprof.ingest.formats import kineto_scan as ks
from kprof.ingest.normalize import WORK_ITEM_LAUNCHES

_NULL = msgspec.Raw(b"null")

# Category spellings seen across Kineto versions and backends: kernel/Kernel, cuda_runtime/Runtime.
GPU_KIND_NAMES = ("kernel", "memcpy", "memset")  # codes 0, 1, 2 (the scanner's kinds 1, 2, 3)
GPU_CATEGORIES = {"kernel": 0, "Kernel": 0, "gpu_memcpy": 1, "gpu_memset": 2, "Memcpy": 1, "Memset": 2}
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver", "Runtime", "Driver"}
CPU_RANGE_CATEGORIES = {"user_annotation"}
GPU_RANGE_CATEGORIES = {"gpu_user_annotation"}


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str | None = None
    tid: int | str | None = None
    ts: int | float | None = None
    dur: int | float | None = None
    args: msgspec.Raw = _NULL


class _ExactEvent(Event, gc=False):
    """Used when float64 cannot hold a file's timestamps to the ns (19-digit epoch µs of 2024)."""

    ts: int | Decimal | None = None
    dur: int | Decimal | None = None


class Document(msgspec.Struct):
    traceEvents: list[Event] = []
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
class Decoders:
    events: Callable[[bytes], Any]
    document: Callable[[bytes], Any]
    exact: bool


FAST = Decoders(msgspec.json.Decoder(list[Event]).decode, msgspec.json.Decoder(Document).decode, False)
EXACT = Decoders(msgspec.json.Decoder(list[_ExactEvent]).decode, msgspec.json.Decoder(_ExactDocument).decode, True)


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
    "pid",  # the row's process: which rank it belongs to, where one file holds several
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


def _scanned_id(piece: ks.Scanned, row: np.ndarray, flags: int, field: int, string: int, null: int) -> int | str | None:
    """A scanned pid or tid as the msgspec path decodes it: int, str or None."""
    if flags & null:
        return None
    if flags & string:
        return piece.text(int(row[field]), int(row[field + 1]), False)
    return int(row[field])


def _pid_device(pid: int | str | None) -> int:
    return pid if type(pid) is int else 0


@dataclass
class EventBuffer:
    """Keeps the fields kprof needs from each decoded piece, as compact int64 chunks, and drops the rest.

    Times are converted to ns relative to the file's base time piece by piece (the base itself may be
    written after the events); a GPU activity's name and kind are kept as codes (into ``names`` and
    ``GPU_KIND_NAMES``), so that a kernel name is stored once.
    """

    path: Path
    exact: bool
    strings: dict[str, str] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    name_ids: dict[str, int] = field(default_factory=dict)
    string_ids: dict[str, int] = field(default_factory=dict)
    gpu_kind: Chunks = field(default_factory=Chunks)  # int8 codes into GPU_KIND_NAMES
    gpu_name: Chunks = field(default_factory=Chunks)  # codes into names
    gpu_ints: dict[str, Chunks] = field(default_factory=lambda: {k: Chunks() for k in (*_GPU_INT_FIELDS, "ts", "dur")})
    launch: dict[str, Chunks] = field(
        default_factory=lambda: {k: Chunks() for k in ("correlation", "ts", "pid", "tid", "work_items", "shared")}
    )
    process_names: dict[int, str] = field(default_factory=dict)  # from the ``process_name`` metadata events
    ranges: list[tuple[str, str, int, int]] = field(default_factory=list)
    range_times: list[np.ndarray] = field(default_factory=list)
    skipped: int = 0
    launch_calls: int = 0
    other_categories: dict[str, int] = field(default_factory=dict)
    top: Document | None = None
    truncated: bool = False
    pieces_scanned: int = 0  # pieces read by the compiled scanner (the others by msgspec)
    pieces_decoded: int = 0
    ahead: ks.ScanAhead | None = None  # scans pieces in worker threads, when set

    def _intern(self, text: str) -> str:
        return self.strings.setdefault(text, text)

    def _name_id(self, text: str) -> int:
        found = self.name_ids.get(text)
        if found is None:
            found = self.name_ids[text] = len(self.names)
            self.names.append(text)
        return found

    @property
    def gpu_rows(self) -> int:
        return len(self.gpu_name)

    def take(self, events: list[Event]) -> None:
        gpu_kinds, launch_cats, intern, other = GPU_CATEGORIES, LAUNCH_CATEGORIES, self._intern, self.other_categories
        gpu: list[Event] = []
        gpu_kind: list[int] = []
        gpu_name: list[int] = []
        name_id = self._name_id
        launches: list[Event] = []
        ranges: list[Event] = []
        for e in events:
            if e.ph != "X":
                if e.cat in gpu_kinds:  # a kernel as B/E or instant: kprof reads complete events only
                    self.skipped += 1
                self._take_process_name(e)
                continue
            cat = e.cat
            kind = gpu_kinds.get(cat)
            if kind is not None:
                if e.ts is None or e.dur is None:
                    self.skipped += 1
                    continue
                gpu_kind.append(kind)
                gpu_name.append(name_id(e.name))
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
        if gpu:
            self.gpu_kind.append(np.array(gpu_kind, dtype=np.int8))
            self.gpu_name.append(np.array(gpu_name, dtype=np.int64))
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

    def _take_process_name(self, e: Event) -> None:
        """Keep ``e``'s process name when it is a ``process_name`` metadata event of an int pid."""
        if e.ph != "M" or e.name != "process_name" or type(e.pid) is not int:
            return
        named = decode_optional(_NameArgs, e.args)
        if named is not None and named.name is not None:
            self.process_names[e.pid] = named.name

    def take_process_names(self, data: bytes | bytearray, lo: int, hi: int) -> None:
        """The ``process_name`` metadata events in ``data[lo:hi]``, a piece the compiled scanner
        reads (it keeps only activities, launches and ranges): found by their name, each decoded by
        itself. A few per process, so one search of the piece is all they cost."""
        at = data.find(_PROCESS_NAME, lo, hi)
        while at >= 0:
            event = _enclosing_object(data, at, lo, hi)
            if event is not None:
                e = decode_optional(Event, msgspec.Raw(event))
                if e is not None:
                    self._take_process_name(e)
            at = data.find(_PROCESS_NAME, at + 1, hi)

    def take_scanned(self, piece: ks.Scanned) -> None:
        """The same columns as ``take``, from the compiled scanner's records (file order kept)."""
        rows = piece.rows
        kind = rows[:, ks.KIND]
        flags = rows[:, ks.FLAGS]
        self.pieces_scanned += 1
        self.skipped += piece.skipped
        for cat, n in piece.other_categories:
            self.other_categories[cat] = self.other_categories.get(cat, 0) + n
        ids = self._scanned_ids(piece, kind, flags)
        gpu = np.flatnonzero(kind <= 3)
        if len(gpu):
            self._take_scanned_gpu(piece, rows[gpu])
        launch = np.flatnonzero(kind == ks.LAUNCH)
        self.launch_calls += len(launch)
        keep = launch[rows[launch, ks.CORRELATION] != NULL_INT]
        if len(keep):
            work_items = np.array([name in WORK_ITEM_LAUNCHES for name in piece.names], dtype=bool)
            self.launch["correlation"].append(rows[keep, ks.CORRELATION])
            self.launch["ts"].append(rows[keep, ks.TS])
            pid_is_int = (flags[keep] & (ks.PID_STRING | ks.PID_NULL)) == 0
            self.launch["pid"].append(np.where(pid_is_int, rows[keep, ks.PID], NULL_INT))
            self.launch["tid"].append(ids[1][keep])
            self.launch["work_items"].append(work_items[rows[keep, ks.NAME]])
            self.launch["shared"].append(rows[keep, ks.SHARED])
        ranges = np.flatnonzero(kind >= ks.CPU_RANGE)
        for name, k, pid, tid in zip(
            rows[ranges, ks.NAME].tolist(), kind[ranges].tolist(), ids[0][ranges].tolist(), ids[1][ranges].tolist()
        ):
            self.ranges.append((self._intern(piece.names[name]), "gpu" if k == ks.GPU_RANGE else "cpu", pid, tid))
        if len(ranges):
            self.range_times.append(np.stack([rows[ranges, ks.TS], rows[ranges, ks.DUR]]))

    def _scanned_ids(self, piece: ks.Scanned, kind: np.ndarray, flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """pid and tid columns as ``_as_int`` gives them: string (or absent) ids numbered in file
        order, as ``take`` numbers them (launch tids, then each range's pid and tid)."""
        rows = piece.rows
        pid, tid = rows[:, ks.PID].copy(), rows[:, ks.TID].copy()
        odd = (flags & (ks.PID_STRING | ks.PID_NULL | ks.TID_STRING | ks.TID_NULL)) != 0
        for i in np.flatnonzero(odd & (kind >= ks.LAUNCH)).tolist():
            f = int(flags[i])
            if kind[i] != ks.LAUNCH:
                pid[i] = _as_int(_scanned_id(piece, rows[i], f, ks.PID, ks.PID_STRING, ks.PID_NULL), self.string_ids)
            tid[i] = _as_int(_scanned_id(piece, rows[i], f, ks.TID, ks.TID_STRING, ks.TID_NULL), self.string_ids)
        return pid, tid

    def _take_scanned_gpu(self, piece: ks.Scanned, rows: np.ndarray) -> None:
        flags = rows[:, ks.FLAGS]
        self.gpu_kind.append((rows[:, ks.KIND] - 1).astype(np.int8))
        used, local = np.unique(rows[:, ks.NAME], return_inverse=True)  # only the names GPU rows use
        global_ids = np.array([self._name_id(piece.names[i]) for i in used.tolist()], dtype=np.int64)
        self.gpu_name.append(global_ids[local.reshape(-1)])
        pid_is_int = (flags & (ks.PID_STRING | ks.PID_NULL)) == 0
        tid_is_int = (flags & (ks.TID_STRING | ks.TID_NULL)) == 0
        device = rows[:, ks.DEVICE]
        device = np.where(device != NULL_INT, device, np.where(pid_is_int, rows[:, ks.PID], 0))
        stream = rows[:, ks.STREAM].copy()
        absent = (stream == NULL_INT) & ((flags & ks.STREAM_STRING) == 0)
        stream[absent] = np.where(tid_is_int[absent], rows[absent, ks.TID], -1)
        for i in np.flatnonzero(flags & ks.STREAM_STRING).tolist():
            row = rows[i]
            text = piece.text(int(row[ks.STREAM]), int(row[ks.STREAM_LEN]), False)
            tid = _scanned_id(piece, row, int(flags[i]), ks.TID, ks.TID_STRING, ks.TID_NULL)
            stream[i] = _stream_id(text, tid)
        ints = self.gpu_ints
        ints["device"].append(device)
        ints["stream"].append(stream)
        ints["pid"].append(np.where(pid_is_int, rows[:, ks.PID], NULL_INT))
        for name, column in (
            ("correlation", ks.CORRELATION),
            ("registers", ks.REGISTERS),
            ("shared", ks.SHARED),
            ("grid_x", ks.GRID_X),
            ("grid_y", ks.GRID_Y),
            ("grid_z", ks.GRID_Z),
            ("block_x", ks.BLOCK_X),
            ("block_y", ks.BLOCK_Y),
            ("block_z", ks.BLOCK_Z),
            ("ts", ks.TS),
            ("dur", ks.DUR),
        ):
            ints[name].append(np.ascontiguousarray(rows[:, column]))  # not views: the rows can go

    def _take_gpu(self, gpu: list[Event]) -> None:
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
        ints["pid"].append(_int_column([e.pid if type(e.pid) is int else None for e in gpu]))
        ints["correlation"].append(_int_column([a.correlation for a in args]))
        ints["registers"].append(_int_column([a.registers for a in args]))
        ints["shared"].append(_int_column([a.shared for a in args]))
        for name in ("grid", "block"):
            axes = _axes_columns([getattr(a, name) for a in args])
            for i, axis in enumerate("xyz"):
                ints[f"{name}_{axis}"].append(axes[:, i])
        self.gpu_ints["ts"].append(times_to_ns([e.ts for e in gpu], self.exact))
        self.gpu_ints["dur"].append(times_to_ns([e.dur for e in gpu], self.exact))

    def _take_launches(self, launches: list[Event]) -> None:
        args = _batch_args(self.path, [e.args for e in launches], _decode_launch_args)
        keep = [(e, a) for e, a in zip(launches, args) if a is not None and type(a.correlation) is int]
        if not keep:
            return
        self.launch["correlation"].append(np.array([_int_or_null(a.correlation) for _, a in keep], dtype=np.int64))
        self.launch["ts"].append(times_to_ns([e.ts for e, _ in keep], self.exact))
        self.launch["pid"].append(_int_column([e.pid if type(e.pid) is int else None for e, _ in keep]))
        self.launch["tid"].append(np.array([_as_int(e.tid, self.string_ids) for e, _ in keep], dtype=np.int64))
        self.launch["work_items"].append(np.array([e.name in WORK_ITEM_LAUNCHES for e, _ in keep], dtype=bool))
        self.launch["shared"].append(np.array([_int_or_null(a.shared) for _, a in keep], dtype=np.int64))


_EMPTY_GPU_ARGS = _GpuArgs()
_PROCESS_NAME = b'"process_name"'


class _NameArgs(msgspec.Struct):
    name: str | None = None


def _enclosing_object(data: bytes | bytearray, at: int, lo: int, hi: int) -> bytes | None:
    """The JSON object around offset ``at``: back to its unmatched ``{``, on to its matching ``}``
    (a metadata event nests one ``args`` object; braces inside its strings are not expected)."""
    depth, start = 0, at
    while start > lo:
        start -= 1
        c = data[start]
        if c == 0x7D:  # }
            depth += 1
        elif c == 0x7B:  # {
            if depth == 0:
                break
            depth -= 1
    else:
        return None
    depth, end = 0, start
    while end < hi:
        c = data[end]
        if c == 0x7B:
            depth += 1
        elif c == 0x7D:
            depth -= 1
            if depth == 0:
                return bytes(data[start : end + 1])
        end += 1
    return None


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
