"""RPD (ROCm/rocmProfileData) SQLite traces: ``rocpd_op`` GPU ops, ``rocpd_api`` host calls.

An older schema than rocprofv3's rocpd (same ``rocpd_`` prefix, different tables). GPU ops link to
their launching API call through ``rocpd_api_ops``; ``UserMarker`` API rows are roctx ranges whose
name is in their args string.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kprof.ingest.gathered import Gathered, Labels
from kprof.ingest.normalize import (
    WORK_ITEM_LAUNCHES,
    blocks,
    cpu_ranges,
    durations,
    integer_columns,
    numbered,
    texts,
    trace_meta,
)
from kprof.ingest.registry import LoadOptions, Probe, TraceFormat
from kprof.ingest.sql_chunks import query_chunks
from kprof.trace import Trace, categorical, events_table, range_table

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


def _ops(con: sqlite3.Connection, path: Path) -> tuple[dict[str, Any], int]:
    """The device activities among the GPU ops, read a chunk at a time: integers checked, names
    and kinds as codes, the API call that launched each; an op met twice (through two API links)
    kept once, as first met. With the count of ops of other types (barriers, markers), left out."""
    gathered, names, kinds = Gathered(), Labels(), Labels()
    for offset, ops in query_chunks(con, OPS):
        in_op = numbered("in GPU op", offset + 1)
        integer_columns(ops, OP_INTEGERS, path, in_op)
        text = {c: texts(ops[c], path, source, in_op, required) for c, (source, required) in OP_TEXTS.items()}
        kind = [_kind(t) for t in text["op_type"]]
        raw = [k or d or t for k, d, t in zip(text["kernel_name"], text["description"], text["op_type"])]
        work_items = pd.Series([a in WORK_ITEM_LAUNCHES for a in text["api_name"]], index=ops.index)
        grids = {
            f"grid_{axis.lower()}": ops[f"grid{axis}"].where(
                ~work_items, blocks(ops[f"grid{axis}"], ops[f"workgroup{axis}"])
            )
            for axis in "XYZ"
        }
        gathered.add(
            id=ops["id"].fillna(-1).to_numpy(np.int64),
            name=names.codes(zip(raw, kind)),
            kind=kinds.codes(kind),
            **{c: ops[c] for c in ("device", "stream", "start", "end", "launch_ns", "launch_tid", "groupSegmentSize")},
            **{f"block_{axis.lower()}": ops[f"workgroup{axis}"] for axis in "XYZ"},
            **grids,
        )
    first = _first_met(gathered.column("id", np.zeros(0, np.int64)))
    kind_codes = gathered.column("kind", np.zeros(0, np.int32))
    counted = np.array([k is not None for k in kinds.values], bool)[kind_codes]
    keep = first & counted
    kept = slice(None) if keep.all() else np.flatnonzero(keep)  # all, as a rule: no copy of every column

    def kept_rows(key: str) -> pd.Series:
        values = gathered.column(key, pd.Series([], dtype="Int64"))
        return values if isinstance(kept, slice) else values.iloc[kept].reset_index(drop=True)

    columns = {key: kept_rows(key) for key in _OP_COLUMNS}
    columns["name"], columns["short_name"] = names.activity_names(gathered.column("name", np.zeros(0, np.int32))[kept])
    columns["kind"] = categorical(kind_codes[kept], [k or "" for k in kinds.values])
    return columns, int((first & ~counted).sum())


def _first_met(ids: np.ndarray) -> np.ndarray:
    """Whether each op is the first row of its id. Ids that rise, as the join gives them, are all
    first, found without the hash table a search for duplicates builds (~40 B an op)."""
    if bool((ids[1:] > ids[:-1]).all()):
        return np.ones(len(ids), dtype=bool)
    return ~pd.Series(ids).duplicated().to_numpy()


_OP_COLUMNS = (
    "device",
    "stream",
    "start",
    "end",
    "launch_ns",
    "launch_tid",
    "groupSegmentSize",
    *(f"{c}_{axis}" for c in ("grid", "block") for axis in "xyz"),
)


def load(con: sqlite3.Connection, path: Path, rank: int) -> Trace:
    ops, skipped = _ops(con, path)
    n = len(ops["start"])
    cols: dict[str, Any] = {
        "rank": np.full(n, rank, np.int32),
        "device": ops["device"],
        "stream": ops["stream"],
        "start_ns": ops["start"],
        "end_ns": ops["end"],
        "dur_ns": durations(ops["start"], ops["end"]),
        "name": ops["name"],
        "short_name": ops["short_name"],
        "kind": ops["kind"],
        "shared_mem_bytes": ops["groupSegmentSize"],
        "launch_ns": ops["launch_ns"],
        "launch_tid": ops["launch_tid"],
        **{f"{c}_{axis}": ops[f"{c}_{axis}"] for c in ("grid", "block") for axis in "xyz"},
    }
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
    if not n:
        calls = con.execute("SELECT COUNT(*) FROM rocpd_api").fetchone()[0]
        warnings.append(
            f"no GPU operations in the trace ({calls:,} API calls, no kernel, copy or fill): every table is empty"
        )
    meta = trace_meta(path, "rpd", rank, CLOCK, rpd_schema_version=meta_rows.get("schema_version"))
    return Trace(events=events_table(cols), ranges=range_table(ranges), meta=meta, warnings=warnings)


def _has(con: sqlite3.Connection, table: str) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None


def _load(p: Probe, options: LoadOptions) -> Trace:
    con = p.connect()
    if options.memory is not None:
        options.memory.expect(con.execute("SELECT COUNT(*) FROM rocpd_op").fetchone()[0])
    return load(con, p.path, options.rank or 0)


def _is_rpd(p: Probe) -> bool:
    return p.is_sqlite and p.sqlite_tables >= RPD_TABLES


FORMAT = TraceFormat("rpd", "RPD (rocmProfileData) database", _is_rpd, _load, sqlite=True)
