"""Trace ingest: detect a file's format by its content and normalize it (see kprof.schema)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow as pa

from kprof.errors import KprofInputError
from kprof.ingest import kineto, rocprofv3, rpd
from kprof.ingest.attribute import attribute
from kprof.ingest.source import SQLITE_MAGIC, head, local_sqlite
from kprof.trace import Trace

FORMATS = "Kineto JSON(.gz), rocprofv3 kernel-trace CSV / JSON / rocpd database, or RPD"


def detect(path: Path) -> str:
    """Name the format from the first bytes: ``kineto``, ``rocprofv3-json``, ``rocprofv3-csv`` or ``sqlite``."""
    start = head(path)
    if start.startswith(SQLITE_MAGIC):
        return "sqlite"
    stripped = start.lstrip()
    if stripped[:1] in (b"{", b"["):
        return "rocprofv3-json" if b'"rocprofiler-sdk-tool"' in stripped[:4096] else "kineto"
    first_line = stripped.split(b"\n", 1)[0].decode("utf-8", errors="replace")
    if rocprofv3.is_kernel_csv(first_line):
        return "rocprofv3-csv"
    raise KprofInputError(path, f"not a trace kprof can read (expected {FORMATS})")


def _load_sqlite(path: Path, rank: int) -> Trace:
    with local_sqlite(path) as db:
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                if rocprofv3.is_rocpd(con):
                    return rocprofv3.load_rocpd(con, path, rank)
                if rpd.is_rpd(con):
                    return rpd.load(con, path, rank)
            finally:
                con.close()
        except sqlite3.Error as e:
            raise KprofInputError(path, f"SQLite database could not be read ({e})") from None
    raise KprofInputError(path, "SQLite database is neither a rocprofv3 rocpd file nor an RPD trace")


def load_trace(
    path: Path, rank: int | None = None, recover: bool | None = None, step_pattern: str | None = None
) -> Trace:
    """Read any supported trace and attribute its kernels to steps and annotations.

    ``rank`` overrides the rank; when None, the file's own rank is used where it has one, else 0.
    """
    fmt = detect(path)
    try:
        if fmt == "kineto":
            trace = kineto.load(path, rank=rank, recover=recover)
        elif fmt == "rocprofv3-json":
            trace = rocprofv3.load_json(path, rank or 0)
        elif fmt == "rocprofv3-csv":
            trace = rocprofv3.load_csv(path, rank or 0)
        else:
            trace = _load_sqlite(path, rank or 0)
    except (pa.ArrowInvalid, OverflowError) as e:
        raise KprofInputError(path, f"a value does not fit the normalized table ({e})") from None
    return attribute(trace, step_pattern)


def load_traces(paths: list[Path], recover: bool | None = None, step_pattern: str | None = None) -> list[Trace]:
    """Several files of one job: each file's own rank where known, else its place on the command line."""
    traces = []
    for i, p in enumerate(paths):
        t = load_trace(p, recover=recover, step_pattern=step_pattern)
        if t.meta.get("rank_source") != "distributedInfo" and len(paths) > 1:
            t.meta["rank"] = i
            t.kernels["rank"] = i
        traces.append(t)
    return sorted(traces, key=lambda t: int(t.meta["rank"]))
