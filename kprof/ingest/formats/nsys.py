"""Nsight Systems reports exported to SQLite (``nsys export --type sqlite``).

Device activity comes from ``CUPTI_ACTIVITY_KIND_KERNEL`` / ``_MEMCPY`` / ``_MEMSET`` (names are
``StringIds`` references), each joined to the CUDA API call that launched it in
``CUPTI_ACTIVITY_KIND_RUNTIME`` by its process and ``correlationId``: a graph's kernels carry the
id of their ``cudaGraphLaunch``, so replays are placed by that call, and work launched before the
capture has no call. ``NVTX_EVENTS`` push/pop and start/end ranges are the annotations (``text``,
or ``textId`` for registered strings; a range of a named NVTX domain is ``domain:name``), and
``--steps`` matches their names.

Times are integer ns on the session's timeline (nsys puts CPU and GPU timestamps on one clock,
counted from the capture's start; ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` anchors it in UTC).
Process and thread ids are serialized GlobalIds: pid = (id >> 24) & 0xFFFFFF, tid = id & 0xFFFFFF.

Column sets drift between nsys versions (tables are created only when they have rows, columns are
added over releases), so every column is read only where the table has it. A report of several
processes that each ran kernels is one rank per process, in pid order.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kprof.ingest.gathered import Gathered, Labels
from kprof.ingest.normalize import durations, integer_columns, integers, last_matches, numbered, taken, trace_meta
from kprof.ingest.ranks import ranks_of, split_by_rank
from kprof.ingest.registry import LoadOptions, Probe, TraceFormat
from kprof.ingest.sql_chunks import query_chunks
from kprof.trace import Trace, categorical, events_table, narrowed, range_table

CLOCK = "nsys session ns (CPU and GPU on one timeline from the capture's start; not Unix epoch)"
KERNELS, MEMCPY, MEMSET, RUNTIME = (f"CUPTI_ACTIVITY_KIND_{t}" for t in ("KERNEL", "MEMCPY", "MEMSET", "RUNTIME"))
NVTX = "NVTX_EVENTS"

# CUpti_ActivityMemcpyKind, as the ENUM_CUDA_MEMCPY_OPER table of an export lists it
_COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH"}
_COPY_KINDS |= {10: "PtoP", 11: "HtoD (unified)", 12: "DtoH (unified)", 13: "DtoD (unified)"}
# ENUM_NSYS_EVENT_TYPE ids, used where an export lacks the table
_NVTX_TYPES = {"NvtxPushPopRange": 59, "NvtxStartEndRange": 60, "NvtxDomainCreate": 75}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f'PRAGMA table_info("{table}")')}


def _select(
    con: sqlite3.Connection,
    table: str,
    wanted: dict[str, str],
    path: Path,
    required: tuple[str, ...] = ("start", "end"),
) -> dict[str, pd.Series]:
    """``wanted`` (output name → integer column) from ``table`` as nullable integer Series (each as
    narrow as its values allow, ``_WIDE`` int64), read a chunk at a time, NULL for the columns this
    export lacks; empty when the table is absent (nsys creates tables only when they have rows). A
    value that is not an integer is one line naming its row. A serialized id (``global_pid``,
    ``global_tid``) comes back as ``pid`` (and ``tid``), split a chunk at a time. A dict, not a
    frame: a frame's constructor and every filter of it copy all its columns at once."""
    have = _columns(con, table)
    gathered = Gathered(wide=_WIDE)
    if have:
        parts = [f'"{col}" AS "{name}"' if col in have else f'NULL AS "{name}"' for name, col in wanted.items()]
        sources = {name: f"{table}.{col}" for name, col in wanted.items()}
        for offset, chunk in query_chunks(con, f'SELECT {", ".join(parts)} FROM "{table}"'):
            integer_columns(chunk, sources, path, numbered(f"in {table} row", offset + 1), required)
            gathered.add(**_split_ids({name: chunk[name] for name in wanted}))
    names = list(_split_ids({name: pd.Series([], dtype="Int64") for name in wanted}))  # as _split_ids renames
    return {name: gathered.column(name, pd.Series([], dtype="Int64")) for name in names}


def _split_ids(columns: dict[str, pd.Series]) -> dict[str, pd.Series]:
    """``global_pid`` as ``pid``, ``global_tid`` as ``pid`` and ``tid``; other columns as they are."""
    if "global_pid" in columns:
        columns["pid"] = _pid(columns.pop("global_pid"))
    if "global_tid" in columns:
        global_tid = columns.pop("global_tid")
        columns["pid"], columns["tid"] = _pid(global_tid), _tid(global_tid)
    return columns


def _strings(con: sqlite3.Connection) -> dict[int, str]:
    if not _columns(con, "StringIds"):
        return {}
    return {int(i): v for i, v in con.execute("SELECT id, value FROM StringIds")}


def _pid(global_id: Any) -> Any:
    """The process of a serialized GlobalId (an int, a numpy array or a Series of them)."""
    return (global_id // (1 << 24)) % (1 << 24)


def _tid(global_id: Any) -> Any:
    return global_id % (1 << 24)


# held int64 whatever their values: times
_WIDE = ("start", "end")

_ACTIVITY = {
    "start": "start",
    "end": "end",
    "device": "deviceId",
    "stream": "streamId",
    "correlation": "correlationId",
    "global_pid": "globalPid",
}
_KERNEL = {
    **_ACTIVITY,
    "demangled": "demangledName",
    "short": "shortName",
    "mangled": "mangledName",
    "registers": "registersPerThread",
    "static_shared": "staticSharedMemory",
    "dynamic_shared": "dynamicSharedMemory",
    **{f"grid_{a}": f"grid{a.upper()}" for a in "xyz"},
    **{f"block_{a}": f"block{a.upper()}" for a in "xyz"},
}


def _kernels(con: sqlite3.Connection, path: Path, strings: dict[int, str], labels: Labels) -> dict[str, pd.Series]:
    k = _select(con, KERNELS, _KERNEL, path)
    # The mangled name, demangled by kprof as for every other format (nsys's own demangler writes
    # ``<unnamed>`` and ``(int)4`` where the PyTorch profiler writes ``(anonymous namespace)`` and
    # ``4``: the same kernel would get two names); else nsys's demangled name, else its short one.
    name_id = _first_known([k.pop("mangled"), k.pop("demangled"), k.pop("short")])

    def label(i: Any) -> tuple[str, str]:
        name = strings.get(int(i), f"kernel (name id {i})") if pd.notna(i) else "kernel"
        return name.replace("<unnamed>", "(anonymous namespace)"), "kernel"

    k["raw"] = pd.Series(labels.codes_of(name_id, label), copy=False)
    static, dynamic = k.pop("static_shared"), k.pop("dynamic_shared")
    total = static.to_numpy(np.int64, na_value=0) + dynamic.to_numpy(np.int64, na_value=0)  # int64: no wrap
    neither = static.isna().to_numpy(bool) & dynamic.isna().to_numpy(bool)  # new, writable (a Series' is not)
    k["shared"] = pd.Series(narrowed(pd.arrays.IntegerArray(total, neither), "shared"), copy=False)
    return k


def _first_known(columns: list[pd.Series]) -> pd.Series:
    """Row by row, the first of ``columns`` that holds a value (null where none does), as int64."""
    values = np.zeros(len(columns[0]), np.int64)
    known = np.zeros(len(columns[0]), bool)
    for column in columns:
        fill = column.notna().to_numpy(bool) & ~known
        values[fill] = column.to_numpy(np.int64, na_value=0)[fill]
        known |= fill
    return pd.Series(pd.arrays.IntegerArray(values, ~known), copy=False)


def _copies(con: sqlite3.Connection, path: Path, labels: Labels) -> list[dict[str, pd.Series]]:
    m = _select(con, MEMCPY, {**_ACTIVITY, "copy_kind": "copyKind"}, path)
    m["raw"] = pd.Series(
        labels.codes_of(
            m.pop("copy_kind"),
            lambda c: (f"Memcpy {_COPY_KINDS.get(int(c), 'Unknown') if pd.notna(c) else 'Unknown'}", "memcpy"),
        ),
        copy=False,
    )
    s = _select(con, MEMSET, _ACTIVITY, path)
    s["raw"] = pd.Series(labels.codes_of(pd.Series(0, index=s["start"].index), lambda _: ("Memset", "memset")))
    return [m, s]


def _stacked(parts: list[dict[str, pd.Series]]) -> dict[str, pd.Series]:
    """The activity tables one under the other, a column at a time (each part's column let go as it
    is copied); a column a part lacks is null there. A lone non-empty part is used as it is."""
    parts = [p for p in parts if len(p["start"])] or parts[:1]
    if len(parts) == 1:
        return parts[0]
    lengths = [len(p["start"]) for p in parts]
    stacked = {}
    for key in dict.fromkeys(key for part in parts for key in part):
        pieces = [p.pop(key, None) for p in parts]
        missing = [pd.Series(pd.NA, index=range(n), dtype="Int8") for n in lengths]
        stacked[key] = pd.concat([m if c is None else c for c, m in zip(pieces, missing)], ignore_index=True)
    return stacked


def _rows(columns: dict[str, pd.Series], keep: np.ndarray) -> dict[str, pd.Series]:
    """Only the rows ``keep`` marks, column by column; the columns as they are where it marks all."""
    if keep.all():
        return columns
    at = np.flatnonzero(keep)
    return {key: columns.pop(key).iloc[at].reset_index(drop=True) for key in list(columns)}


def _launches(con: sqlite3.Connection, path: Path) -> dict[str, pd.Series]:
    """CUDA API calls that carry a correlation id: the launches, with their process and thread."""
    r = _select(con, RUNTIME, {"start": "start", "global_tid": "globalTid", "correlation": "correlationId"}, path, ())
    return _rows(r, (r["correlation"].notna() & r["pid"].notna()).to_numpy(bool))


_CHUNK_ROWS = 1 << 18


def _nvtx(con: sqlite3.Connection, path: Path) -> pd.DataFrame:
    """NVTX push/pop and start/end ranges on their starting thread, a named domain's as
    ``domain:name``; marks (instants) and unfinished ranges are left out.

    An export may hold tens of millions of NVTX rows (every ``record_function`` of a long run):
    ranges are chosen and names resolved in SQL, rows fetched a chunk at a time into int64 columns,
    and each distinct name kept once (as a code), so memory stays near 50 bytes per range.
    """
    have = _columns(con, NVTX)
    if not have:
        return pd.DataFrame(columns=["start", "end", "name", "pid", "tid"])
    types = _event_types(con)

    def col(c: str, default: str = "NULL") -> str:
        return f'n."{c}"' if c in have else default

    registered = "textId" in have and bool(_columns(con, "StringIds"))
    join = "LEFT JOIN StringIds s ON s.id = n.textId" if registered else ""
    name = f"CAST(COALESCE({col('text')}, {'s.value' if registered else 'NULL'}, '') AS TEXT)"
    where = f"{col('eventType')} IN (?, ?)"
    ranges = f"""SELECT n.start, {col("end")}, {col("globalTid", "0")}, {col("domainId", "0")}, {name}
        FROM {NVTX} n {join} WHERE {where} AND {col("end")} >= n.start"""
    kinds = (types["NvtxPushPopRange"], types["NvtxStartEndRange"])
    ints: list[list[np.ndarray]] = [[], [], [], []]
    codes: list[np.ndarray] = []
    names: dict[str, int] = {}
    cursor = con.execute(ranges, kinds)
    offset = 0
    while rows := cursor.fetchmany(_CHUNK_ROWS):
        columns = list(zip(*rows))
        for i in range(4):
            ints[i].append(_int64(columns[i], path, f"{NVTX}.{('start', 'end', 'globalTid', 'domainId')[i]}", offset))
        codes.append(np.fromiter((names.setdefault(str(v), len(names)) for v in columns[4]), np.int64, len(rows)))
        offset += len(rows)
    start, end, gtid, domain = (np.concatenate(c) if c else np.zeros(0, np.int64) for c in ints)
    pid, tid = _pid(gtid), _tid(gtid)
    created = f"SELECT {col('globalTid', '0')}, {col('domainId', '0')}, {name} FROM {NVTX} n {join} WHERE "
    created += f"{col('eventType')} = ?"
    domains = {
        (_pid(int(g or 0)), int(d or 0)): str(t) for g, d, t in con.execute(created, (types["NvtxDomainCreate"],))
    }
    code = np.concatenate(codes) if codes else np.zeros(0, np.int64)
    if domains:  # a named domain's ranges are "domain:name"
        labels = list(names)
        for i in np.flatnonzero([(p, d) in domains for p, d in zip(pid.tolist(), domain.tolist())]).tolist():
            code[i] = names.setdefault(f"{domains[int(pid[i]), int(domain[i])]}:{labels[code[i]]}", len(names))
    name_column = pd.Categorical.from_codes(code, categories=list(names))
    return pd.DataFrame({"start": start, "end": end, "name": name_column, "pid": pid, "tid": tid})


def _int64(values: tuple, path: Path, what: str, offset: int) -> np.ndarray:
    """A fetched column as int64; a value that is not a whole number of 64 bits is one line naming
    the column and the range it stands in."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        series = integers(pd.Series(values, dtype=object), path, what, numbered(f"in {NVTX} range", offset + 1))
        return series.fillna(0).to_numpy("int64")


def _event_types(con: sqlite3.Connection) -> dict[str, int]:
    if not _columns(con, "ENUM_NSYS_EVENT_TYPE"):
        return dict(_NVTX_TYPES)
    found = dict(con.execute("SELECT name, id FROM ENUM_NSYS_EVENT_TYPE"))
    return {name: int(found.get(name, default)) for name, default in _NVTX_TYPES.items()}


def _meta_rows(con: sqlite3.Connection, table: str) -> dict[str, str]:
    if not {"name", "value"} <= _columns(con, table):
        return {}
    return {str(k): str(v) for k, v in con.execute(f'SELECT name, value FROM "{table}"')}


def load(con: sqlite3.Connection, path: Path, rank: int | None) -> Trace | list[Trace]:
    strings, labels = _strings(con), Labels()
    acts = _stacked([_kernels(con, path, strings, labels), *_copies(con, path, labels)])
    start = acts["start"]
    timed = (start.notna() & acts["end"].notna() & (start > 0)).to_numpy(bool)  # CUPTI writes 0/0 without times
    del start
    untimed = int((~timed).sum())
    acts = _rows(acts, timed)
    pid = acts.pop("pid")
    launches = _launches(con, path)
    if len(pid) and pid.isna().all():  # an older export: activities name no process
        keys, launch_keys = [acts["correlation"]], [launches["correlation"]]
    else:
        keys, launch_keys = [pid, acts["correlation"]], [launches["pid"], launches["correlation"]]
    launch_at = last_matches(keys, launch_keys)
    del keys, launch_keys
    launch_ns, launch_tid = taken(launches.pop("start"), launch_at), taken(launches.pop("tid"), launch_at)
    del launches, launch_at
    codes = acts.pop("raw").to_numpy(np.int32)
    full, short = labels.activity_names(codes)
    cols: dict[str, Any] = {
        "device": acts.pop("device"),
        "stream": acts.pop("stream"),
        "start_ns": acts["start"],
        "end_ns": acts["end"],
        "dur_ns": durations(acts["start"], acts["end"]),
        "name": full,
        "short_name": short,
        "kind": categorical(codes, [kind for _, kind in labels.values]),
        "correlation": acts.pop("correlation"),
        "registers": acts.pop("registers", None),
        "shared_mem_bytes": acts.pop("shared", None),
        "launch_ns": launch_ns,
        "launch_tid": launch_tid,
        **{f"{c}_{a}": acts.pop(f"{c}_{a}", None) for c in ("grid", "block") for a in "xyz"},
    }
    n_activities = len(codes)
    del acts, codes, full, short, launch_ns, launch_tid  # the table's columns are held by ``cols`` alone
    nvtx = _nvtx(con, path)
    n = len(nvtx)
    ranges = {
        "name": np.asarray(nvtx["name"], dtype=object),  # each distinct name one object, shared
        "start_ns": nvtx["start"].to_numpy(),
        "end_ns": nvtx["end"].to_numpy(),
        "domain": np.full(n, "cpu", dtype=object),
        "device": np.full(n, -1, dtype=np.int32),
        "pid": nvtx["pid"].to_numpy(),
        "tid": nvtx["tid"].to_numpy(),
    }
    export = _meta_rows(con, "META_DATA_EXPORT")
    meta = trace_meta(
        path,
        "nsys",
        rank or 0,
        CLOCK,
        nsys_version=export.get("EXPORT_PRODUCT_VERSION"),
        nsys_export_schema=export.get("EXPORT_SCHEMA_VERSION"),
        session_start_utc_ns=_session_start(con),
        gpus=_gpu_names(con),
    )
    warnings = [] if n_activities else [_no_activity(con)]
    if untimed:
        warnings.append(f"{untimed:,} device activities without timestamps (CUPTI's 0/0) were left out")
    processes = sorted(set(pid.dropna().astype("int64").tolist()))
    if len(processes) < 2 or rank is not None:
        cols["rank"] = np.full(n_activities, rank or 0, dtype=np.int32)
        return Trace(events_table(cols), range_table(ranges), meta, warnings)
    # several processes ran kernels: one rank each, in pid order (ranges go with their process)
    rank_of_pid = {pid: r for r, pid in enumerate(processes)}
    cols["rank"] = ranks_of(pid.fillna(-1).to_numpy("int64"), rank_of_pid)
    trace = Trace(events_table(cols), range_table(ranges), meta, warnings)
    range_ranks = ranks_of(np.asarray(ranges["pid"], dtype=np.int64), rank_of_pid)
    trace.meta["processes"] = processes
    return split_by_rank(trace, range_ranks, "process order in the report (one rank per process with GPU work)")


def _session_start(con: sqlite3.Connection) -> int | None:
    if "utcEpochNs" not in _columns(con, "TARGET_INFO_SESSION_START_TIME"):
        return None
    row = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    return int(row[0]) if row and row[0] is not None else None


def _gpu_names(con: sqlite3.Connection) -> list[str]:
    if not {"id", "name"} <= _columns(con, "TARGET_INFO_GPU"):
        return []
    return [f"{i}: {n}" for i, n in con.execute("SELECT id, name FROM TARGET_INFO_GPU ORDER BY id")]


def _no_activity(con: sqlite3.Connection) -> str:
    api = _columns(con, RUNTIME)
    calls = con.execute(f'SELECT COUNT(*) FROM "{RUNTIME}"').fetchone()[0] if api else 0
    text = "no CUDA device activity (kernel, memcpy, memset) in the report"
    if calls:
        text += f", though it holds {calls:,} CUDA API calls"
    return text + ": every table is empty (kernels are recorded with nsys profile --trace=cuda)"


def _load(p: Probe, options: LoadOptions) -> Trace | list[Trace]:
    con = p.connect()
    if options.memory is not None:
        present = [t for t in (KERNELS, MEMCPY, MEMSET) if _columns(con, t)]
        options.memory.expect(sum(con.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in present))
    return load(con, p.path, options.rank)


def _is_nsys(p: Probe) -> bool:
    if not p.is_sqlite:
        return False
    tables = p.sqlite_tables
    return "StringIds" in tables and (
        "META_DATA_EXPORT" in tables
        or any(t.startswith(("CUPTI_ACTIVITY_KIND_", "TARGET_INFO_", NVTX)) for t in tables)
    )


FORMAT = TraceFormat(
    "nsys",
    "Nsight Systems SQLite export (nsys export --type sqlite)",
    _is_nsys,
    _load,
    sqlite=True,
)
