"""RPD (ROCm/rocmProfileData) SQLite traces: ``rocpd_op`` GPU ops, ``rocpd_api`` host calls.

An older schema than rocprofv3's rocpd (same ``rocpd_`` prefix, different tables). GPU ops link to
their launching API call through ``rocpd_api_ops``; ``UserMarker`` API rows are roctx ranges whose
name is in their args string.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd

from kprof.ingest.normalize import (
    WORK_ITEM_LAUNCHES,
    blocks,
    cpu_ranges,
    full_and_short,
    integer_columns,
    numbered,
    texts,
    trace_meta,
)
from kprof.ingest.registry import Probe, TraceFormat
from kprof.trace import Trace, events_table, range_table

CLOCK = "roctracer ns (not Unix epoch)"
RPD_TABLES = frozenset({"rocpd_op", "rocpd_api", "rocpd_string"})

OPS = """
SELECT o.id, o.gpuId AS device, o.queueId AS stream, o.start, o."end",
       d.string AS description, t.string AS op_type,
       a.start AS launch_ns, a.tid AS launch_tid, n.string AS api_name,
       k.gridX, k.gridY, k.gridZ, k.workgroupX, k.workgroupY, k.workgroupZ, k.groupSegmentSize,
       kn.string AS kernel_name
FROM rocpd_op o
JOIN rocpd_string d ON d.id = o.description_id
JOIN rocpd_string t ON t.id = o.opType_id
LEFT JOIN rocpd_api_ops ao ON ao.op_id = o.id
LEFT JOIN rocpd_api a ON a.id = ao.api_id
LEFT JOIN rocpd_string n ON n.id = a.apiName_id
LEFT JOIN rocpd_kernelapi k ON k.api_ptr_id = ao.api_id
LEFT JOIN rocpd_string kn ON kn.id = k.kernelName_id
"""

MARKERS = """
SELECT s.string AS name, a.start, a."end", a.pid, a.tid
FROM rocpd_api a JOIN rocpd_string n ON n.id = a.apiName_id JOIN rocpd_string s ON s.id = a.args_id
WHERE n.string = 'UserMarker' AND a."end" > a.start
"""


def _kind(op_type: str) -> str | None:
    t = op_type.lower()
    if "copy" in t:
        return "memcpy"
    if "fill" in t or "memset" in t:
        return "memset"
    if "kernel" in t or t == "task":
        return "kernel"
    return None


# The columns of OPS that kprof reads as integers, and where each comes from (SQLite lets any column
# hold text)
OP_INTEGERS = {
    "device": "rocpd_op.gpuId",
    "stream": "rocpd_op.queueId",
    "start": "rocpd_op.start",
    "end": "rocpd_op.end",
    "launch_ns": "rocpd_api.start",
    "launch_tid": "rocpd_api.tid",
    "groupSegmentSize": "rocpd_kernelapi.groupSegmentSize",
    **{f"{c}{axis}": f"rocpd_kernelapi.{c}{axis}" for c in ("grid", "workgroup") for axis in "XYZ"},
}
# ... and as text: (where it comes from, whether it must be there)
OP_TEXTS = {
    "op_type": ("rocpd_op.opType", True),
    "description": ("rocpd_op.description", False),
    "kernel_name": ("rocpd_kernelapi.kernelName", False),
    "api_name": ("rocpd_api.apiName", False),
}


def load(con: sqlite3.Connection, path: Path, rank: int) -> Trace:
    ops = pd.read_sql_query(OPS, con, dtype_backend="numpy_nullable").drop_duplicates("id")
    in_op = numbered("in GPU op")
    integer_columns(ops, OP_INTEGERS, path, in_op)
    for column, (source, required) in OP_TEXTS.items():
        ops[column] = texts(ops[column], path, source, in_op, required)
    ops["kind"] = ops["op_type"].map(_kind)
    skipped = int(ops["kind"].isna().sum())
    ops = ops[ops["kind"].notna()].reset_index(drop=True)
    raw_name = ops["kernel_name"].where(ops["kernel_name"] != "", ops["description"])
    raw_name = raw_name.where(raw_name != "", ops["op_type"])
    is_kernel = ops["kind"] == "kernel"
    full, short = full_and_short(raw_name.tolist(), is_kernel.tolist())
    work_items = ops["api_name"].isin(list(WORK_ITEM_LAUNCHES))
    cols: dict[str, Any] = {
        "rank": [rank] * len(ops),
        "device": ops["device"],
        "stream": ops["stream"],
        "start_ns": ops["start"],
        "end_ns": ops["end"],
        "dur_ns": (ops["end"] - ops["start"]).clip(lower=0),
        "name": full,
        "short_name": short,
        "kind": ops["kind"],
        "shared_mem_bytes": ops["groupSegmentSize"],
        "launch_ns": ops["launch_ns"],
        "launch_tid": ops["launch_tid"],
    }
    for axis in "XYZ":
        block = ops[f"workgroup{axis}"]
        grid = ops[f"grid{axis}"]
        cols[f"block_{axis.lower()}"] = block
        cols[f"grid_{axis.lower()}"] = grid.where(~work_items, blocks(grid, block))
    markers = pd.read_sql_query(MARKERS, con, dtype_backend="numpy_nullable")
    in_marker = numbered("in marker")
    integer_columns(markers, {c: f"rocpd_api.{c}" for c in ("start", "end", "pid", "tid")}, path, in_marker)
    ranges = cpu_ranges(
        texts(markers["name"], path, "rocpd_api marker name", in_marker),
        markers["start"].tolist(),
        markers["end"].tolist(),
        markers["pid"].tolist(),
        markers["tid"].tolist(),
    )
    meta_rows = (
        dict(con.execute("SELECT tag, value FROM rocpd_metadata").fetchall()) if _has(con, "rocpd_metadata") else {}
    )
    warnings = (
        [f"{skipped} ops of other types (barriers, markers) were not counted as device activity"] if skipped else []
    )
    if not len(ops):
        calls = con.execute("SELECT COUNT(*) FROM rocpd_api").fetchone()[0]
        warnings.append(
            f"no GPU operations in the trace ({calls:,} API calls, no kernel, copy or fill): every table is empty"
        )
    meta = trace_meta(path, "rpd", rank, CLOCK, rpd_schema_version=meta_rows.get("schema_version"))
    return Trace(events=events_table(cols), ranges=range_table(ranges), meta=meta, warnings=warnings)


def _has(con: sqlite3.Connection, table: str) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None


def _is_rpd(p: Probe) -> bool:
    return p.is_sqlite and p.sqlite_tables >= RPD_TABLES


FORMAT = TraceFormat(
    "rpd", "RPD (rocmProfileData) database", _is_rpd, lambda p, o: load(p.connect(), p.path, o.rank or 0), sqlite=True
)
