"""AMD rocprofv3 JSON output (``--output-format json``): kernel dispatches with their symbols and
agents, and roctx ranges from the ``marker_api`` records, named through ``strings.marker_api`` (as
rocprofiler-sdk's own tests read them). Timestamps are ns in the profiler's clock; grids are
work-items and become blocks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from kprof.errors import KprofInputError
from kprof.ingest.normalize import cpu_ranges, full_and_short, trace_meta
from kprof.ingest.registry import Probe, TraceFormat
from kprof.ingest.source import stream_chunks
from kprof.trace import Trace, events_table, range_table

CLOCK = "rocprofiler ns (CLOCK_BOOTTIME domain, not Unix epoch)"
TOOL_KEY = b'"rocprofiler-sdk-tool"'


class _Handle(msgspec.Struct, frozen=True):
    handle: int = 0


class _Dim(msgspec.Struct):
    x: int = 1
    y: int = 1
    z: int = 1


class _Correlation(msgspec.Struct, frozen=True):
    internal: int | None = None
    external: int | None = None


class _DispatchInfo(msgspec.Struct):
    agent_id: _Handle = _Handle()
    queue_id: _Handle = _Handle()
    kernel_id: int = -1
    group_segment_size: int | None = None
    workgroup_size: _Dim | None = None
    grid_size: _Dim | None = None


class _Dispatch(msgspec.Struct):
    start_timestamp: int
    end_timestamp: int
    dispatch_info: _DispatchInfo
    thread_id: int | None = None
    correlation_id: _Correlation = _Correlation()
    stream_id: _Handle | None = None


class _Symbol(msgspec.Struct):
    kernel_id: int
    kernel_name: str = ""
    formatted_kernel_name: str | None = None
    arch_vgpr_count: int | None = None
    group_segment_size: int | None = None


class _Agent(msgspec.Struct):
    id: _Handle
    type: int = 0
    gpu_index: int | None = None
    logical_node_id: int | None = None


class _Marker(msgspec.Struct, frozen=True):
    start_timestamp: int
    end_timestamp: int
    kind: int = -1
    thread_id: int = -1
    correlation_id: _Correlation = _Correlation()


class _Buffers(msgspec.Struct, frozen=True):
    kernel_dispatch: tuple[_Dispatch, ...] = ()
    marker_api: tuple[_Marker, ...] = ()


class _KeyValue(msgspec.Struct, frozen=True):
    key: int
    value: str


class _Strings(msgspec.Struct, frozen=True):
    marker_api: tuple[_KeyValue, ...] = ()  # correlation id → roctx message (rocprofiler-sdk's own tests)


class _Metadata(msgspec.Struct, frozen=True):
    pid: int = -1


class _Process(msgspec.Struct):
    agents: list[_Agent] = []
    kernel_symbols: list[_Symbol] = []
    buffer_records: _Buffers = _Buffers()
    strings: _Strings = _Strings()
    metadata: _Metadata = _Metadata()


class _Tool(msgspec.Struct, rename={"processes": "rocprofiler-sdk-tool"}):
    processes: list[_Process]


#: A document read whole: past this many bytes, one that is almost all whitespace is refused
#: before it is held (6.9 MB of gzip once inflated to 1.5 GB of spaces, 3.2 GB at the peak).
WHITESPACE_CHECK_BYTES = 64 << 20
WHITESPACE_SHARE = 0.9


def document_bytes(path: Path) -> bytes:
    """The decompressed file, refused in one line once it is mostly whitespace past
    WHITESPACE_CHECK_BYTES: no rocprofv3 document pads itself like that, a decompression bomb does."""
    chunks, size, blank = [], 0, 0
    for chunk in stream_chunks(path, 1 << 24):
        chunks.append(chunk)
        size += len(chunk)
        blank += len(chunk) - len(chunk.translate(None, b" \t\r\n"))
        if size >= WHITESPACE_CHECK_BYTES and blank > WHITESPACE_SHARE * size:
            raise KprofInputError(
                path, f"is {blank / size:.0%} whitespace in its first {size >> 20} MiB: not a trace kprof reads"
            )
    return b"".join(chunks)


def load_json(path: Path, rank: int) -> Trace:
    data = document_bytes(path)
    try:
        doc = msgspec.json.decode(data, type=_Tool)
    except msgspec.ValidationError as e:
        raise KprofInputError(path, f"unexpected rocprofv3 JSON field: {e}") from None
    except msgspec.DecodeError as e:
        raise KprofInputError(path, f"malformed JSON: {e}") from None
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "device",
            "stream",
            "start_ns",
            "end_ns",
            "dur_ns",
            "name",
            "correlation",
            "grid_x",
            "grid_y",
            "grid_z",
            "block_x",
            "block_y",
            "block_z",
            "registers",
            "shared_mem_bytes",
            "launch_tid",
        )
    }
    for proc in doc.processes:
        symbols = {s.kernel_id: s for s in proc.kernel_symbols}
        gpu_of = {
            a.id.handle: (a.gpu_index if a.gpu_index is not None else a.logical_node_id or 0) for a in proc.agents
        }
        for d in proc.buffer_records.kernel_dispatch:
            info = d.dispatch_info
            sym = symbols.get(info.kernel_id)
            name = (sym.formatted_kernel_name or sym.kernel_name) if sym else f"kernel_id {info.kernel_id}"
            cols["device"].append(gpu_of.get(info.agent_id.handle, -1))
            cols["stream"].append(info.queue_id.handle)
            cols["start_ns"].append(d.start_timestamp)
            cols["end_ns"].append(d.end_timestamp)
            cols["dur_ns"].append(max(d.end_timestamp - d.start_timestamp, 0))
            cols["name"].append(name)
            cols["correlation"].append(d.correlation_id.internal)
            wg, grid = info.workgroup_size, info.grid_size
            for axis in "xyz":
                w = getattr(wg, axis) if wg else None
                g = getattr(grid, axis) if grid else None
                cols[f"block_{axis}"].append(w)
                cols[f"grid_{axis}"].append(-(-g // w) if g is not None and w else None)
            cols["registers"].append(sym.arch_vgpr_count if sym else None)
            cols["shared_mem_bytes"].append(info.group_segment_size)
            cols["launch_tid"].append(d.thread_id)
    table: dict[str, Any] = dict(cols)
    table["name"], table["short_name"] = full_and_short(cols["name"])
    table["kind"] = ["kernel"] * len(cols["name"])
    table["rank"] = [rank] * len(cols["name"])
    meta = trace_meta(path, "rocprofv3-json", rank, CLOCK, processes=len(doc.processes))
    warnings = []
    if doc.processes and any(p.buffer_records.marker_api for p in doc.processes):
        warnings.append(
            "rocprofv3 JSON has no launch times: kernels are matched to marker ranges by their GPU "
            "start time and launching thread"
        )
    return Trace(events=events_table(table), ranges=range_table(_json_marker_ranges(doc)), meta=meta, warnings=warnings)


def _json_marker_ranges(doc: _Tool) -> dict[str, Any]:
    """roctx ranges: marker records with a duration, named through ``strings.marker_api`` (keyed by
    the record's internal correlation id); marks (start == end) are not ranges."""
    kept = [
        (proc, {kv.key: kv.value for kv in proc.strings.marker_api}, m)
        for proc in doc.processes
        for m in proc.buffer_records.marker_api
        if m.end_timestamp > m.start_timestamp
    ]
    return cpu_ranges(
        [names.get(m.correlation_id.internal, f"marker {m.correlation_id.internal}") for _, names, m in kept],
        [m.start_timestamp for _, _, m in kept],
        [m.end_timestamp for _, _, m in kept],
        [proc.metadata.pid for proc, _, _ in kept],
        [m.thread_id for _, _, m in kept],
    )


def _is_rocprofv3_json(p: Probe) -> bool:
    head = p.json_head
    return head is not None and TOOL_KEY in head[:4096]


FORMAT = TraceFormat(
    "rocprofv3-json",
    "rocprofv3 JSON",
    _is_rocprofv3_json,
    lambda p, o: load_json(p.path, o.rank or 0),
    priority=10,
)
