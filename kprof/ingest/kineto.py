"""PyTorch profiler (Kineto) Chrome-trace JSON, CUDA and ROCm builds, plain or gzipped.

Streaming: the ``traceEvents`` array is cut into pieces of about ``PIECE_BYTES`` at event
boundaries and each piece is decoded on its own, so memory stays bounded by the piece size and the
kept rows, not by the file. Only the fields kprof uses are decoded (msgspec skips the rest), and
``ts``/``dur`` are decoded as exact decimals, so the 19-digit epoch timestamps of 2024 exports keep
their nanoseconds. All three ``ts`` generations (formats.md §1.3) end as absolute integer ns.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import msgspec

from kprof.errors import KprofInputError
from kprof.ingest.names import demangle_all, short_name
from kprof.ingest.source import open_binary, read_chunks
from kprof.trace import Trace, kernel_table, range_table

PIECE_BYTES = 32 << 20
_NULL = msgspec.Raw(b"null")
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = b'"traceEvents"'

GPU_CATEGORIES = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "memcpy": "memcpy",
    "memset": "memset",
}
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
CPU_RANGE_CATEGORIES = {"user_annotation"}
GPU_RANGE_CATEGORIES = {"gpu_user_annotation"}
# Launch APIs whose grid arguments are work-items, not blocks (HIP hip_ext.h).
WORK_ITEM_LAUNCHES = {"hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel"}

Number = int | Decimal | None


class _Event(msgspec.Struct):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str | None = None
    tid: int | str | None = None
    ts: Number = None
    dur: Number = None
    args: msgspec.Raw = _NULL


class _Document(msgspec.Struct):
    traceEvents: list[_Event] = []
    baseTimeNanoseconds: int | None = None
    distributedInfo: msgspec.Raw = _NULL
    deviceProperties: msgspec.Raw = _NULL


class _DistributedInfo(msgspec.Struct):
    rank: int | None = None
    world_size: int | None = None


_GPU_ARG_NAMES = {"registers": "registers per thread", "shared": "shared memory"}


class _GpuArgs(msgspec.Struct, rename=_GPU_ARG_NAMES):
    device: int | None = None
    stream: int | str | None = None
    correlation: int | None = None
    registers: int | None = None
    shared: int | None = None
    grid: list[int] | None = None
    block: list[int] | None = None


class _LaunchArgs(msgspec.Struct, rename=_GPU_ARG_NAMES):
    correlation: int | None = None
    shared: int | None = None


_decode_gpu_args = msgspec.json.Decoder(_GpuArgs | None).decode
_decode_launch_args = msgspec.json.Decoder(_LaunchArgs | None).decode
_decode_events = msgspec.json.Decoder(list[_Event]).decode
_decode_document = msgspec.json.Decoder(_Document).decode


def us_to_ns(value: int | Decimal) -> int:
    """Microseconds as written in the file (int or exact decimal) to integer ns."""
    if type(value) is int:
        return value * 1000
    return int((value * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))


def _as_int(value: int | str | None, ids: dict[str, int]) -> int:
    """Kineto pids/tids are ints, or strings such as ``"Spans"``: give strings stable negative ids."""
    if type(value) is int:
        return value
    key = str(value)
    return ids.setdefault(key, -1 - len(ids))


@dataclass
class _Collector:
    """Keeps the rows kprof needs from each decoded piece and drops everything else."""

    path: Path
    gpu: list[tuple[Any, ...]] = field(default_factory=list)
    launches: dict[int, tuple[Number, int, str, int | None]] = field(default_factory=dict)
    ranges: list[tuple[Any, ...]] = field(default_factory=list)
    string_ids: dict[str, int] = field(default_factory=dict)
    skipped: int = 0
    top: _Document | None = None

    def take(self, events: list[_Event]) -> None:
        gpu_kinds, launch_cats = GPU_CATEGORIES, LAUNCH_CATEGORIES
        for e in events:
            if e.ph != "X":
                continue
            cat = e.cat
            kind = gpu_kinds.get(cat) or gpu_kinds.get(cat.lower())
            if kind is not None:
                if e.ts is None or e.dur is None:
                    self.skipped += 1
                    continue
                self.gpu.append((kind, e.name, e.pid, e.tid, e.ts, e.dur, self._args(e, _decode_gpu_args)))
            elif cat in launch_cats or cat.lower() in launch_cats:
                args = self._args(e, _decode_launch_args)
                if args is not None and args.correlation is not None and e.ts is not None:
                    self.launches[args.correlation] = (
                        e.ts,
                        _as_int(e.tid, self.string_ids),
                        e.name,
                        args.shared,
                    )
            elif cat in GPU_RANGE_CATEGORIES or cat in CPU_RANGE_CATEGORIES or e.name.startswith("ProfilerStep#"):
                if e.ts is None or e.dur is None:
                    self.skipped += 1
                    continue
                domain = "gpu" if cat in GPU_RANGE_CATEGORIES else "cpu"
                pid = _as_int(e.pid, self.string_ids)
                tid = _as_int(e.tid, self.string_ids)
                self.ranges.append((e.name, e.ts, e.dur, domain, pid, tid))

    def _args(self, e: _Event, decode: Callable[[Any], Any]) -> Any:
        try:
            return decode(e.args)
        except msgspec.ValidationError as err:
            raise KprofInputError(self.path, f"event {e.name!r} has malformed args: {err}") from None


def _last_boundary(buf: bytes, start: int) -> re.Match[bytes] | None:
    """The last ``}, {`` event boundary at or after ``start``, searching backwards in windows."""
    window = 1 << 20
    lo = max(start, len(buf) - window)
    while True:
        last = None
        for last in _BOUNDARY.finditer(buf, lo):  # noqa: B007 - only the last match is wanted
            pass
        if last is not None or lo == start:
            return last
        lo = max(start, lo - 4 * window)


class _SplitFailed(Exception):
    """A piece cut at a boundary did not decode: the cut was not between two events."""


def _decode_piece(decode: Callable[[bytes], Any], data: bytes) -> Any:
    try:
        return decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise _SplitFailed(str(err)) from None


def _stream(path: Path, collector: _Collector, recover: bool) -> None:
    """Decode the file piece by piece into ``collector``; see the module docstring."""
    with open_binary(path) as f:
        buf = b""
        array_form: bool | None = None
        first = True
        for chunk in read_chunks(f, path, PIECE_BYTES):
            buf += chunk
            if array_form is None:
                stripped = buf.lstrip()
                if not stripped:
                    continue
                if stripped[:1] not in (b"{", b"["):
                    raise KprofInputError(path, "not JSON (expected a Kineto trace object)")
                array_form = stripped[:1] == b"["
            start = 0
            if first and not array_form:
                start = buf.find(_EVENTS_KEY)
                if start < 0:
                    continue
            cut = _last_boundary(buf, start)
            if cut is None:
                continue
            piece, buf = buf[: cut.start() + 1], buf[cut.end() - 1 :]
            if first:
                closing = b"]" if array_form else b"]}"
                _take_document(collector, _decode_piece(_decoder_for(array_form), piece + closing))
                first = False
            else:
                collector.take(_decode_piece(_decode_events, b"[" + piece + b"]"))
        if array_form is None:
            raise KprofInputError(path, "holds only whitespace")
        opening = b"" if first else (b"[" if array_form else b'{"traceEvents":[')
        _finish(path, collector, opening + buf, array_form, recover)


def _decoder_for(array_form: bool) -> Callable[[bytes], Any]:
    return _decode_events if array_form else _decode_document


def _take_document(collector: _Collector, doc: _Document | list[_Event]) -> None:
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


def _finish(path: Path, collector: _Collector, text: bytes, array_form: bool, recover: bool) -> None:
    """Decode the last piece; on a truncated file keep every complete event if asked to."""
    decode = _decoder_for(array_form)
    try:
        _take_document(collector, decode(text))
        return
    except msgspec.ValidationError as err:
        raise KprofInputError(path, f"unexpected field type: {err}") from None
    except msgspec.DecodeError as err:
        truncated = "truncated" in str(err)
        if not recover:
            if truncated:
                raise KprofInputError(
                    path,
                    "JSON ends before the trace is complete (truncated); --recover keeps every complete event",
                ) from None
            raise _SplitFailed(str(err)) from None
    closing = b"]" if array_form else b"]}"
    start = max(text.find(_EVENTS_KEY), 0)
    kept = 0
    for m in reversed(list(_BOUNDARY.finditer(text, start))):
        try:
            doc = decode(text[: m.start() + 1] + closing)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        kept = len(doc) if isinstance(doc, list) else len(doc.traceEvents)
        _take_document(collector, doc)
        break
    collector.recovered_tail = kept  # type: ignore[attr-defined]


def _whole_file(path: Path, collector: _Collector) -> None:
    """Fallback when a cut landed inside an event: decode the file in one piece."""
    with open_binary(path) as f:
        data = b"".join(read_chunks(f, path, PIECE_BYTES))
    stripped = data.lstrip()
    try:
        _take_document(collector, _decoder_for(stripped[:1] == b"[")(stripped))
    except msgspec.ValidationError as err:
        raise KprofInputError(path, f"unexpected field type: {err}") from None
    except msgspec.DecodeError as err:
        raise KprofInputError(path, f"malformed JSON: {err}") from None


def load(path: Path, rank: int | None = None, recover: bool | None = None) -> Trace:
    """Read one Kineto trace. ``recover`` (default: on for Kineto's unfinished ``.tmp`` files) keeps
    every complete event of a truncated file and records a warning instead of failing."""
    if recover is None:
        recover = path.name.endswith(".tmp")
    collector = _Collector(path)
    try:
        _stream(path, collector, recover)
    except _SplitFailed:
        collector = _Collector(path)
        _whole_file(path, collector)
    return _build(path, collector, rank)


def _build(path: Path, c: _Collector, rank: int | None) -> Trace:
    top = c.top or _Document()
    base = top.baseTimeNanoseconds
    warnings: list[str] = []
    if hasattr(c, "recovered_tail"):
        warnings.append("file is truncated: kept every complete event, dropped the unfinished one")
    if c.skipped:
        warnings.append(f"{c.skipped} GPU or range events without ts/dur were skipped")
    dist = _decode_optional(_DistributedInfo, top.distributedInfo)
    file_rank = dist.rank if dist is not None else None
    if rank is None:
        rank = file_rank if file_rank is not None else 0

    def to_abs(ts: int | Decimal) -> int:
        ns = us_to_ns(ts)
        return ns + base if base is not None else ns

    names = demangle_all(row[1] for row in c.gpu)
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "device",
            "stream",
            "start_ns",
            "end_ns",
            "dur_ns",
            "name",
            "short_name",
            "kind",
            "correlation",
            "grid_x",
            "grid_y",
            "grid_z",
            "block_x",
            "block_y",
            "block_z",
            "registers",
            "shared_mem_bytes",
            "launch_ns",
            "launch_tid",
        )
    }
    for kind, name, pid, tid, ts, dur, args in c.gpu:
        args = args or _GpuArgs()
        start = to_abs(ts)
        d = max(us_to_ns(dur), 0)
        full = names.get(name, name)
        launch = c.launches.get(args.correlation) if args.correlation is not None else None
        grid, block = args.grid, args.block
        if launch is not None and launch[2] in WORK_ITEM_LAUNCHES and grid and block and len(grid) == len(block):
            grid = [-(-g // max(b, 1)) for g, b in zip(grid, block)]
        cols["device"].append(args.device if args.device is not None else (pid if type(pid) is int else 0))
        cols["stream"].append(_stream_id(args.stream, tid))
        cols["start_ns"].append(start)
        cols["end_ns"].append(start + d)
        cols["dur_ns"].append(d)
        cols["name"].append(full)
        cols["short_name"].append(short_name(full) if kind == "kernel" else full)
        cols["kind"].append(kind)
        cols["correlation"].append(args.correlation)
        for axis, i in (("x", 0), ("y", 1), ("z", 2)):
            cols[f"grid_{axis}"].append(grid[i] if grid and len(grid) > i else None)
            cols[f"block_{axis}"].append(block[i] if block and len(block) > i else None)
        cols["registers"].append(args.registers)
        shared = args.shared if args.shared is not None else (launch[3] if launch is not None else None)
        cols["shared_mem_bytes"].append(shared)
        cols["launch_ns"].append(to_abs(launch[0]) if launch is not None else None)
        cols["launch_tid"].append(launch[1] if launch is not None else None)
    cols_any: dict[str, Any] = cols
    cols_any["rank"] = [rank] * len(c.gpu)
    kernels = kernel_table(cols_any)

    rcols: dict[str, list[Any]] = {k: [] for k in ("name", "start_ns", "end_ns", "domain", "device", "pid", "tid")}
    for name, ts, dur, domain, pid, tid in c.ranges:
        start = to_abs(ts)
        rcols["name"].append(name)
        rcols["start_ns"].append(start)
        rcols["end_ns"].append(start + max(us_to_ns(dur), 0))
        rcols["domain"].append(domain)
        rcols["device"].append(pid if domain == "gpu" else -1)
        rcols["pid"].append(pid)
        rcols["tid"].append(tid)
    meta = {
        "file": str(path),
        "format": "kineto",
        "rank": rank,
        "rank_source": "distributedInfo" if file_rank is not None else "argument order",
        "clock": "unix_ns (Kineto: CPU and CUPTI/roctracer timestamps in one epoch domain)",
        "ts_generation": "relative to baseTimeNanoseconds" if base is not None else "epoch microseconds",
        "world_size": dist.world_size if dist is not None else None,
    }
    return Trace(kernels=kernels, ranges=range_table(rcols), meta=meta, warnings=warnings)


def _stream_id(stream: int | str | None, tid: int | str | None) -> int:
    if type(stream) is int:
        return stream
    if isinstance(stream, str):
        try:
            return int(stream, 0)
        except ValueError:
            pass
    return tid if type(tid) is int else -1


def _decode_optional(kind: type, raw: msgspec.Raw) -> Any:
    try:
        return msgspec.json.decode(raw, type=kind | None)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
