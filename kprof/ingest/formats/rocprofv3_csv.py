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

from kprof.ingest.csv_columns import CsvColumn, read_columns
from kprof.ingest.memory import MemoryGuard
from kprof.ingest.normalize import (
    blocks,
    cpu_ranges,
    durations,
    empty_ranges,
    full_and_short,
    looked_up,
    numbered,
    trace_meta,
)
from kprof.ingest.registry import Probe, TraceFormat
from kprof.trace import Trace, categorical, events_table, narrowest, range_table

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
    """``4``, ``"4"``, ``"Agent 4"`` or ``"GPU 3"`` → the number; a blank field → -1."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    m = re.search(r"-?\d+", str(value))
    return int(m.group()) if m else -1


ON_LINE = numbered("on line", 2)  # the header is line 1

#: what the kernel trace's loader reads, and what its messages call each column
KERNEL_COLUMNS: dict[str, CsvColumn] = {
    "name": CsvColumn(CSV_COLUMNS["name"], "Kernel_Name", integer=False, required=True),
    "start": CsvColumn(CSV_COLUMNS["start"], "Start_Timestamp", required=True),
    "end": CsvColumn(CSV_COLUMNS["end"], "End_Timestamp", required=True),
    "agent": CsvColumn(CSV_COLUMNS["agent"], "Agent_Id", integer=False),
    "queue": CsvColumn(CSV_COLUMNS["queue"], "Queue_Id"),
    "stream": CsvColumn(CSV_COLUMNS["stream"], "Stream_Id"),
    "thread": CsvColumn(CSV_COLUMNS["thread"], "Thread_Id"),
    "correlation": CsvColumn(CSV_COLUMNS["correlation"], "Correlation_Id"),
    "vgpr": CsvColumn(CSV_COLUMNS["vgpr"], "VGPR_Count"),
    "lds": CsvColumn(CSV_COLUMNS["lds"], "LDS_Block_Size"),
    **{
        f"{kind}_{axis}": CsvColumn(CSV_COLUMNS[f"{kind}_{axis}"], f"{label}_{axis.upper()}")
        for kind, label in (("wg", "Workgroup_Size"), ("grid", "Grid_Size"))
        for axis in "xyz"
    },
}
_LAUNCH_COLUMNS = {
    "correlation": CsvColumn(CSV_COLUMNS["correlation"], "Correlation_Id", required=True),
    "start": CsvColumn(CSV_COLUMNS["start"], "Start_Timestamp", required=True),
}
_MARKER_COLUMNS = {
    "function": CsvColumn(("function",), "Function", integer=False, required=True),
    "start": CsvColumn(("start_timestamp",), "Start_Timestamp", required=True),
    "end": CsvColumn(("end_timestamp",), "End_Timestamp", required=True),
    "pid": CsvColumn(("process_id",), "Process_Id"),
    "tid": CsvColumn(("thread_id",), "Thread_Id"),
}


def _sibling(path: Path, suffix: str) -> Path | None:
    m = re.match(r"(.*)kernel_(trace|stats)\.csv$", path.name)
    if not m:
        return None
    candidate = path.with_name(f"{m.group(1)}{suffix}")
    return candidate if candidate.exists() else None


def load_csv(path: Path, rank: int, memory: MemoryGuard | None = None) -> Trace:
    table = read_columns(path, KERNEL_COLUMNS, ON_LINE, memory)
    n, col = table.rows, table.get
    start, end = col("start"), col("end")
    names: pd.Categorical = col("name")
    full_names, short_names = full_and_short([str(c) for c in names.categories])
    agent: pd.Categorical | None = col("agent")
    device = _agent_devices(agent) if agent is not None else np.zeros(n, np.int8)
    cols: dict[str, Any] = {
        "rank": np.full(n, rank, np.int32),
        "device": device,
        "stream": col("queue") if col("queue") is not None else col("stream"),
        "start_ns": start,
        "end_ns": end,
        "dur_ns": durations(start, end),
        "name": categorical(names.codes, full_names),
        "short_name": categorical(names.codes, short_names),
        "kind": categorical(np.zeros(n, np.int8), ["kernel"]),
        "correlation": col("correlation"),
        "registers": col("vgpr"),
        "shared_mem_bytes": col("lds"),
        "launch_tid": col("thread"),
    }
    for axis in "xyz":
        wg, grid = col(f"wg_{axis}"), col(f"grid_{axis}")
        if wg is not None:
            cols[f"block_{axis}"] = wg
            if grid is not None:
                cols[f"grid_{axis}"] = blocks(grid, wg)
    warnings: list[str] = []  # kernels that end before they start: kprof.ingest.integrity
    hip = _sibling(path, "hip_api_trace.csv")
    if hip is not None and cols["correlation"] is not None:
        api = read_columns(hip, _LAUNCH_COLUMNS, ON_LINE)
        cols["launch_ns"] = looked_up([cols["correlation"]], [api.get("correlation")], api.get("start"))
    ranges = _marker_ranges(_sibling(path, "marker_api_trace.csv"))
    if len(ranges["name"]) and hip is None:
        warnings.append(
            "no hip_api_trace.csv beside the kernel trace: kernels are matched to marker ranges "
            "by their GPU start time and launching thread"
        )
    meta = trace_meta(path, "rocprofv3-csv", rank, CLOCK, columns=table.header)
    return Trace(events=events_table(cols), ranges=range_table(ranges), meta=meta, warnings=warnings)


def _agent_devices(agent: pd.Categorical) -> np.ndarray:
    """Each row's device index from its agent's name (-1 where none is given), in the narrowest
    width the indices allow."""
    lookup = np.append(np.array([_agent_index(a) for a in agent.categories], np.int64), -1)
    return lookup.astype(narrowest(int(lookup.min()), int(lookup.max())))[agent.codes]


def _marker_ranges(path: Path | None) -> dict[str, Any]:
    if path is None:
        return empty_ranges()
    table = read_columns(path, _MARKER_COLUMNS, ON_LINE)
    start = table.get("start").to_numpy(np.int64)
    end = table.get("end").to_numpy(np.int64)
    keep = np.flatnonzero(end > start)  # marks have start == end
    functions: pd.Categorical = table.get("function")

    def ids(key: str) -> list[int]:
        values = table.get(key)
        return values.fillna(-1).to_numpy(np.int64)[keep].tolist() if values is not None else [-1] * len(keep)

    return cpu_ranges(
        pd.Series(functions).astype(object).fillna("").to_numpy()[keep].tolist(),
        start[keep].tolist(),
        end[keep].tolist(),
        ids("pid"),
        ids("tid"),
    )


def _is_kernel_csv(p: Probe) -> bool:
    return is_kernel_csv(p.csv_columns)


FORMAT = TraceFormat(
    "rocprofv3-csv",
    "rocprofv3 kernel-trace CSV",
    _is_kernel_csv,
    lambda p, o: load_csv(p.path, o.rank or 0, o.memory),
)
