"""The rocpd SQLite database, rocprofv3's default output since ROCm 7: the ``kernels`` view and
roctx ranges from the ``regions`` view (category ``MARKER…``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kprof.ingest.gathered import Gathered, Labels
from kprof.ingest.normalize import (
    blocks,
    cpu_ranges,
    durations,
    full_and_short,
    integer_columns,
    numbered,
    texts,
    trace_meta,
)
from kprof.ingest.registry import LoadOptions, Probe, TraceFormat
from kprof.ingest.sql_chunks import query_chunks
from kprof.trace import Trace, categorical, events_table, range_table

CLOCK = "rocprofiler ns (CLOCK_BOOTTIME domain, not Unix epoch)"

ROCPD_KERNELS = """
SELECT name, agent_abs_index, agent_log_index, queue_id, stream_id, tid, start, "end", corr_id,
       grid_x, grid_y, grid_z, workgroup_x, workgroup_y, workgroup_z, lds_size, vgpr_count
FROM kernels
"""


# the columns of the kernels view read as integers (SQLite lets any column hold text)
KERNEL_INTEGERS = (
    "agent_abs_index",
    "agent_log_index",
    "queue_id",
    "tid",
    "start",
    "end",
    "corr_id",
    "lds_size",
    "vgpr_count",
    *(f"{c}_{axis}" for c in ("grid", "workgroup") for axis in "xyz"),
)


_KEPT = ("queue_id", "start", "end", "corr_id", "vgpr_count", "lds_size", "tid", *(f"workgroup_{a}" for a in "xyz"))


def load_rocpd(con: sqlite3.Connection, path: Path, rank: int) -> Trace:
    gathered, names = Gathered(), Labels()
    for offset, k in query_chunks(con, ROCPD_KERNELS):
        in_kernel = numbered("in kernel", offset + 1)
        integer_columns(k, {c: f"kernels.{c}" for c in KERNEL_INTEGERS}, path, in_kernel)
        gathered.add(
            name=names.codes(texts(k["name"], path, "kernels.name", in_kernel)),
            device=k["agent_log_index"].where(k["agent_log_index"].notna(), k["agent_abs_index"]),
            **{c: k[c] for c in _KEPT},
            **{f"grid_{a}": blocks(k[f"grid_{a}"], k[f"workgroup_{a}"]) for a in "xyz"},
        )
    k = {c: gathered.column(c, pd.Series([], dtype="Int64")) for c in ("device", *_KEPT, "grid_x", "grid_y", "grid_z")}
    codes = gathered.column("name", np.zeros(0, np.int32))
    full, short = full_and_short(names.values)
    n = len(codes)
    cols: dict[str, Any] = {
        "rank": np.full(n, rank, np.int32),
        "device": k["device"],
        "stream": k["queue_id"],
        "start_ns": k["start"],
        "end_ns": k["end"],
        "dur_ns": durations(k["start"], k["end"]),
        "name": categorical(codes, full),
        "short_name": categorical(codes, short),
        "kind": categorical(np.zeros(n, np.int8), ["kernel"]),
        "correlation": k["corr_id"],
        "registers": k["vgpr_count"],
        "shared_mem_bytes": k["lds_size"],
        "launch_tid": k["tid"],
        **{f"block_{a}": k[f"workgroup_{a}"] for a in "xyz"},
        **{f"grid_{a}": k[f"grid_{a}"] for a in "xyz"},
    }
    regions = pd.read_sql_query(
        "SELECT name, start, \"end\", pid, tid, category FROM regions WHERE category LIKE 'MARKER%'",
        con,
        dtype_backend="numpy_nullable",
    )
    in_region = numbered("in region")
    integer_columns(regions, {c: f"regions.{c}" for c in ("start", "end", "pid", "tid")}, path, in_region)
    regions = regions[regions["end"] > regions["start"]]
    ranges = cpu_ranges(
        texts(regions["name"], path, "regions.name", in_region),
        regions["start"].tolist(),
        regions["end"].tolist(),
        regions["pid"].tolist(),
        regions["tid"].tolist(),
    )
    version = dict(con.execute("SELECT tag, value FROM rocpd_metadata").fetchall()).get("schema_version")
    meta = trace_meta(path, "rocpd", rank, CLOCK, rocpd_schema_version=version)
    return Trace(events=events_table(cols), ranges=range_table(ranges), meta=meta)


def _load(p: Probe, options: LoadOptions) -> Trace:
    con = p.connect()
    if options.memory is not None:
        options.memory.expect(con.execute("SELECT COUNT(*) FROM kernels").fetchone()[0])
    return load_rocpd(con, p.path, options.rank or 0)


def _is_rocpd(p: Probe) -> bool:
    return p.is_sqlite and {"kernels", "rocpd_metadata"} <= p.sqlite_tables


FORMAT = TraceFormat(
    "rocpd",
    "rocprofv3 rocpd database",
    _is_rocpd,
    _load,
    priority=10,
    sqlite=True,
)
