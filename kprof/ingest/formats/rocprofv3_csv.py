"""AMD rocprofv3 kernel-trace CSV, in every column layout seen: rocprofv3 of 2024 and now,
rocpd-convert's CSV, and legacy rocprof v1 ``results.csv``.

Timestamps are ns in the profiler's clock (CLOCK_BOOTTIME for rocprofiler-sdk), not Unix time;
grids are work-items and are divided by the work-group size to give blocks. Marker (roctx) ranges
come from a ``*_marker_api_trace.csv`` beside the kernel trace, launch times from a
``*_hip_api_trace.csv`` beside it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kprof.errors import KprofInputError
from kprof.ingest.normalize import blocks, cpu_ranges, empty_ranges, full_and_short, integers, numbered, trace_meta
from kprof.ingest.registry import Probe, TraceFormat
from kprof.ingest.source import text_stream
from kprof.trace import Trace, events_table, range_table

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


def is_kernel_csv(cols: frozenset[str]) -> bool:
    return any(n in cols for n in CSV_COLUMNS["name"]) and any(s in cols for s in CSV_COLUMNS["start"])


def _agent_index(value: Any) -> int:
    """``4``, ``"4"``, ``"Agent 4"`` or ``"GPU 3"`` → the number."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    m = re.search(r"-?\d+", str(value))
    return int(m.group()) if m else -1


def read_csv_text(path: Path) -> pd.DataFrame:
    """Every field as text, headers lower-cased; one-line errors for what is not CSV or not UTF-8."""
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


ON_LINE = numbered("on line", 2)  # the header is line 1


def _ints(series: pd.Series | None, path: Path, what: str, required: bool = False) -> pd.Series | None:
    if series is None:
        if required:
            raise KprofInputError(path, f"no {what} column")
        return None
    return integers(series, path, what, ON_LINE, required)


def _sibling(path: Path, suffix: str) -> Path | None:
    m = re.match(r"(.*)kernel_(trace|stats)\.csv$", path.name)
    if not m:
        return None
    candidate = path.with_name(f"{m.group(1)}{suffix}")
    return candidate if candidate.exists() else None


def load_csv(path: Path, rank: int) -> Trace:
    frame = read_csv_text(path)
    name = _column(frame, "name")
    if name is None:
        raise KprofInputError(path, "no Kernel_Name column")
    start = _ints(_column(frame, "start"), path, "Start_Timestamp", required=True)
    end = _ints(_column(frame, "end"), path, "End_Timestamp", required=True)
    assert start is not None and end is not None
    full_names, short_names = full_and_short(name.tolist())
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
        "name": full_names,
        "short_name": short_names,
        "kind": ["kernel"] * len(frame),
        "correlation": _ints(_column(frame, "correlation"), path, "Correlation_Id"),
        "registers": _ints(_column(frame, "vgpr"), path, "VGPR_Count"),
        "shared_mem_bytes": _ints(_column(frame, "lds"), path, "LDS_Block_Size"),
        "launch_tid": _ints(_column(frame, "thread"), path, "Thread_Id"),
    }
    for axis in "xyz":
        wg = _ints(_column(frame, f"wg_{axis}"), path, f"Workgroup_Size_{axis.upper()}")
        grid = _ints(_column(frame, f"grid_{axis}"), path, f"Grid_Size_{axis.upper()}")
        if wg is not None:
            cols[f"block_{axis}"] = wg
            if grid is not None:
                cols[f"grid_{axis}"] = blocks(grid, wg)
    warnings: list[str] = []  # kernels that end before they start: kprof.ingest.load.keep_possible_times
    hip = _sibling(path, "hip_api_trace.csv")
    if hip is not None and cols["correlation"] is not None:
        api = read_csv_text(hip)
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
    meta = trace_meta(path, "rocprofv3-csv", rank, CLOCK, columns=list(frame.columns))
    return Trace(events=events_table(cols), ranges=range_table(ranges), meta=meta, warnings=warnings)


def _marker_ranges(path: Path | None) -> dict[str, Any]:
    if path is None:
        return empty_ranges()
    frame = read_csv_text(path)
    needed = ("function", "start_timestamp", "end_timestamp")
    if any(c not in frame.columns for c in needed):
        raise KprofInputError(path, "marker trace without Function/Start_Timestamp/End_Timestamp columns")
    start = _ints(frame["start_timestamp"], path, "Start_Timestamp", True)
    end = _ints(frame["end_timestamp"], path, "End_Timestamp", True)
    pid = _ints(frame.get("process_id"), path, "Process_Id")
    tid = _ints(frame.get("thread_id"), path, "Thread_Id")
    keep = np.flatnonzero((end > start).to_numpy(bool))  # marks have start == end
    return cpu_ranges(
        frame["function"].iloc[keep].tolist(),
        [int(start.iat[i]) for i in keep],
        [int(end.iat[i]) for i in keep],
        [int(pid.iat[i]) if pid is not None else -1 for i in keep],
        [int(tid.iat[i]) if tid is not None else -1 for i in keep],
    )


def _is_kernel_csv(p: Probe) -> bool:
    return is_kernel_csv(p.csv_columns)


FORMAT = TraceFormat(
    "rocprofv3-csv",
    "rocprofv3 kernel-trace CSV",
    _is_kernel_csv,
    lambda p, o: load_csv(p.path, o.rank or 0),
)
