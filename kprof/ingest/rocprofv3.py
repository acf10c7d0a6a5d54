"""AMD rocprofv3 output: kernel-trace CSV (every column layout), JSON, and the rocpd SQLite database.

Timestamps are ns in the profiler's clock (CLOCK_BOOTTIME for rocprofiler-sdk), not Unix time;
grids are work-items and are divided by the work-group size to give blocks (formats.md §2).
Marker (roctx) ranges come from a ``*_marker_api_trace.csv`` beside a kernel-trace CSV, from the
JSON's ``marker_api`` records (named through ``strings.marker_api``), and from the rocpd ``regions``
view; launch times from a ``*_hip_api_trace.csv`` beside a CSV.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from kprof.errors import KprofInputError
from kprof.ingest.names import demangle_all, short_name
from kprof.ingest.source import open_binary, read_chunks, text_stream
from kprof.trace import Trace, kernel_table, range_table

CLOCK = "rocprofiler ns (CLOCK_BOOTTIME domain, not Unix epoch)"

# Normalized column ← header names seen across rocprofv3 versions, rocpd CSV and legacy rocprof v1.
CSV_COLUMNS: dict[str, tuple[str, ...]] = {
    "name": ("kernel_name", "kernelname"),
    "start": ("start_timestamp", "beginns"),
    "end": ("end_timestamp", "endns"),
    "agent": ("agent_id", "gpu-id", "gpu_id"),
    "queue": ("queue_id", "queue-id"),
    "stream": ("stream_id",),
    "thread": ("thread_id", "tid"),
    "correlation": ("correlation_id",),
    "wg_x": ("workgroup_size_x", "wgr", "workgroup_size"),
    "wg_y": ("workgroup_size_y",),
    "wg_z": ("workgroup_size_z",),
    "grid_x": ("grid_size_x", "grd", "grid_size"),
    "grid_y": ("grid_size_y",),
    "grid_z": ("grid_size_z",),
    "vgpr": ("vgpr_count", "arch_vgpr", "vgpr"),
    "lds": ("lds_block_size", "group_segment_size", "lds"),
}


def is_kernel_csv(header: str) -> bool:
    cols = {c.strip().strip('"').lower() for c in header.split(",")}
    return any(n in cols for n in CSV_COLUMNS["name"]) and any(s in cols for s in CSV_COLUMNS["start"])


def _agent_index(value: Any) -> int:
    """``4``, ``"4"``, ``"Agent 4"`` or ``"GPU 3"`` → the number."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    m = re.search(r"-?\d+", str(value))
    return int(m.group()) if m else -1


def _blocks(grid: pd.Series, wg: pd.Series) -> pd.Series:
    """Work-item grid → grid in blocks (ceil division); unknown stays null."""
    g = pd.to_numeric(grid, errors="coerce").astype("Int64")
    w = pd.to_numeric(wg, errors="coerce").astype("Int64").replace(0, pd.NA)
    return -((-g) // w)


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        with text_stream(path) as f:
            frame = pd.read_csv(f, dtype=str, keep_default_na=False)
    except UnicodeDecodeError as e:
        raise KprofInputError(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise KprofInputError(path, f"malformed CSV ({str(e).splitlines()[0]})") from None
    frame.columns = [c.strip().lower() for c in frame.columns]
    return frame


def _column(frame: pd.DataFrame, key: str) -> pd.Series | None:
    for candidate in CSV_COLUMNS[key]:
        if candidate in frame.columns:
            return frame[candidate]
    return None


def _ints(series: pd.Series | None, path: Path, what: str, required: bool = False) -> pd.Series | None:
    if series is None:
        if required:
            raise KprofInputError(path, f"no {what} column")
        return None
    values = pd.to_numeric(series, errors="coerce")
    if required and values.isna().any():
        row = int(np.flatnonzero(values.isna().to_numpy())[0]) + 2
        raise KprofInputError(path, f"{what} is not a number on line {row}")
    return values.astype("Int64")


def _sibling(path: Path, suffix: str) -> Path | None:
    m = re.match(r"(.*)kernel_(trace|stats)\.csv$", path.name)
    if not m:
        return None
    candidate = path.with_name(f"{m.group(1)}{suffix}")
    return candidate if candidate.exists() else None


def load_csv(path: Path, rank: int) -> Trace:
    frame = _read_csv(path)
    name = _column(frame, "name")
    if name is None:
        raise KprofInputError(path, "no Kernel_Name column")
    start = _ints(_column(frame, "start"), path, "Start_Timestamp", required=True)
    end = _ints(_column(frame, "end"), path, "End_Timestamp", required=True)
    assert start is not None and end is not None
    names = demangle_all(name)
    full = name.map(lambda n: names.get(n, n))
    queue = _ints(_column(frame, "queue"), path, "Queue_Id")
    stream = _ints(_column(frame, "stream"), path, "Stream_Id")
    agent = _column(frame, "agent")
    cols: dict[str, Any] = {
        "rank": [rank] * len(frame),
        "device": agent.map(_agent_index) if agent is not None else [0] * len(frame),
        "stream": (queue if queue is not None else stream),
        "start_ns": start,
        "end_ns": end,
        "dur_ns": (end - start).clip(lower=0),
        "name": full,
        "short_name": full.map(short_name),
        "kind": ["kernel"] * len(frame),
        "correlation": _ints(_column(frame, "correlation"), path, "Correlation_Id"),
        "registers": _ints(_column(frame, "vgpr"), path, "VGPR_Count"),
        "shared_mem_bytes": _ints(_column(frame, "lds"), path, "LDS_Block_Size"),
        "launch_tid": _ints(_column(frame, "thread"), path, "Thread_Id"),
    }
    for axis in "xyz":
        wg, grid = _column(frame, f"wg_{axis}"), _column(frame, f"grid_{axis}")
        if wg is not None:
            cols[f"block_{axis}"] = pd.to_numeric(wg, errors="coerce").astype("Int64")
            if grid is not None:
                cols[f"grid_{axis}"] = _blocks(grid, wg)
    warnings: list[str] = []
    hip = _sibling(path, "hip_api_trace.csv")
    if hip is not None and cols["correlation"] is not None:
        api = _read_csv(hip)
        launch = dict(
            zip(
                _ints(_column(api, "correlation"), hip, "Correlation_Id", True),
                _ints(_column(api, "start"), hip, "Start_Timestamp", True),
            )
        )
        cols["launch_ns"] = cols["correlation"].map(launch).astype("Int64")
    ranges = _marker_ranges(_sibling(path, "marker_api_trace.csv"))
    if len(ranges["name"]) and hip is None:
        warnings.append(
            "no hip_api_trace.csv beside the kernel trace: kernels are matched to marker ranges "
            "by their GPU start time and launching thread"
        )
    meta = {
        "file": str(path),
        "format": "rocprofv3-csv",
        "rank": rank,
        "rank_source": "argument order",
        "clock": CLOCK,
        "columns": list(frame.columns),
    }
    return Trace(kernels=kernel_table(cols), ranges=range_table(ranges), meta=meta, warnings=warnings)


def _marker_ranges(path: Path | None) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {k: [] for k in ("name", "start_ns", "end_ns", "domain", "device", "pid", "tid")}
    if path is None:
        return out
    frame = _read_csv(path)
    needed = ("function", "start_timestamp", "end_timestamp")
    if any(c not in frame.columns for c in needed):
        raise KprofInputError(path, "marker trace without Function/Start_Timestamp/End_Timestamp columns")
    start = _ints(frame["start_timestamp"], path, "Start_Timestamp", True)
    end = _ints(frame["end_timestamp"], path, "End_Timestamp", True)
    pid = _ints(frame.get("process_id"), path, "Process_Id")
    tid = _ints(frame.get("thread_id"), path, "Thread_Id")
    for i in np.flatnonzero((end > start).to_numpy(bool)):  # marks have start == end
        out["name"].append(frame["function"].iat[i])
        out["start_ns"].append(int(start.iat[i]))
        out["end_ns"].append(int(end.iat[i]))
        out["domain"].append("cpu")
        out["device"].append(-1)
        out["pid"].append(int(pid.iat[i]) if pid is not None else -1)
        out["tid"].append(int(tid.iat[i]) if tid is not None else -1)
    return out


# --- JSON (--output-format json) -------------------------------------------------------------


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


def load_json(path: Path, rank: int) -> Trace:
    with open_binary(path) as f:
        data = b"".join(read_chunks(f, path, 1 << 24))
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
    names = demangle_all(cols["name"])
    cols["name"] = [names.get(n, n) for n in cols["name"]]
    table: dict[str, Any] = dict(cols)
    table["short_name"] = [short_name(n) for n in cols["name"]]
    table["kind"] = ["kernel"] * len(cols["name"])
    table["rank"] = [rank] * len(cols["name"])
    meta = {
        "file": str(path),
        "format": "rocprofv3-json",
        "rank": rank,
        "rank_source": "argument order",
        "clock": CLOCK,
        "processes": len(doc.processes),
    }
    warnings = []
    if doc.processes and any(p.buffer_records.marker_api for p in doc.processes):
        warnings.append(
            "rocprofv3 JSON has no launch times: kernels are matched to marker ranges by their GPU "
            "start time and launching thread"
        )
    return Trace(
        kernels=kernel_table(table), ranges=range_table(_json_marker_ranges(doc)), meta=meta, warnings=warnings
    )


def _json_marker_ranges(doc: _Tool) -> dict[str, list[Any]]:
    """roctx ranges: marker records with a duration, named through ``strings.marker_api`` (keyed by
    the record's internal correlation id); marks (start == end) are not ranges."""
    out: dict[str, list[Any]] = {k: [] for k in ("name", "start_ns", "end_ns", "domain", "device", "pid", "tid")}
    for proc in doc.processes:
        names = {kv.key: kv.value for kv in proc.strings.marker_api}
        for m in proc.buffer_records.marker_api:
            if m.end_timestamp <= m.start_timestamp:
                continue
            corr = m.correlation_id.internal
            out["name"].append(names.get(corr, f"marker {corr}"))
            out["start_ns"].append(m.start_timestamp)
            out["end_ns"].append(m.end_timestamp)
            out["domain"].append("cpu")
            out["device"].append(-1)
            out["pid"].append(proc.metadata.pid)
            out["tid"].append(m.thread_id)
    return out


# --- rocpd SQLite (default output of ROCm 7) ----------------------------------------------------

ROCPD_KERNELS = """
SELECT name, agent_abs_index, agent_log_index, queue_id, stream_id, tid, start, "end", corr_id,
       grid_x, grid_y, grid_z, workgroup_x, workgroup_y, workgroup_z, lds_size, vgpr_count
FROM kernels
"""


def is_rocpd(con: sqlite3.Connection) -> bool:
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    return "kernels" in names and "rocpd_metadata" in names


def load_rocpd(con: sqlite3.Connection, path: Path, rank: int) -> Trace:
    k = pd.read_sql_query(ROCPD_KERNELS, con)
    names = demangle_all(k["name"].astype(str))
    full = k["name"].astype(str).map(lambda n: names.get(n, n))
    device = k["agent_log_index"].where(k["agent_log_index"].notna(), k["agent_abs_index"])
    cols: dict[str, Any] = {
        "rank": [rank] * len(k),
        "device": device,
        "stream": k["queue_id"],
        "start_ns": k["start"],
        "end_ns": k["end"],
        "dur_ns": (k["end"] - k["start"]).clip(lower=0),
        "name": full,
        "short_name": full.map(short_name),
        "kind": ["kernel"] * len(k),
        "correlation": k["corr_id"],
        "registers": k["vgpr_count"],
        "shared_mem_bytes": k["lds_size"],
        "launch_tid": k["tid"],
    }
    for axis in "xyz":
        cols[f"block_{axis}"] = k[f"workgroup_{axis}"]
        cols[f"grid_{axis}"] = _blocks(k[f"grid_{axis}"], k[f"workgroup_{axis}"])
    regions = pd.read_sql_query(
        "SELECT name, start, \"end\", pid, tid, category FROM regions WHERE category LIKE 'MARKER%'", con
    )
    regions = regions[regions["end"] > regions["start"]]
    ranges = {
        "name": regions["name"].tolist(),
        "start_ns": regions["start"].tolist(),
        "end_ns": regions["end"].tolist(),
        "domain": ["cpu"] * len(regions),
        "device": [-1] * len(regions),
        "pid": regions["pid"].tolist(),
        "tid": regions["tid"].tolist(),
    }
    version = dict(con.execute("SELECT tag, value FROM rocpd_metadata").fetchall()).get("schema_version")
    meta = {
        "file": str(path),
        "format": "rocpd",
        "rank": rank,
        "rank_source": "argument order",
        "clock": CLOCK,
        "rocpd_schema_version": version,
    }
    return Trace(kernels=kernel_table(cols), ranges=range_table(ranges), meta=meta)
