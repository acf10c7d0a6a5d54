"""Small Nsight Systems SQLite exports built from the documented export schema, for tests: the
tables kprof reads, in the column sets of two nsys generations (2025: META_DATA_EXPORT, the event
type enum, globalPid and mangled names on kernels; older: none of those, NVTX names only through
textId)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path


def global_id(pid: int, tid: int = 0) -> int:
    """A serialized GlobalId as nsys writes it (pid in bits 24-47, tid in the low 24)."""
    return (1 << 48) | (pid << 24) | tid


@dataclass
class Kernel:
    name: str
    start: int
    end: int
    correlation: int | None
    pid: int = 100
    device: int = 0
    stream: int = 7
    grid: tuple[int, int, int] = (4, 1, 1)
    block: tuple[int, int, int] = (128, 1, 1)
    registers: int = 32
    static_shared: int = 0
    dynamic_shared: int = 1024
    mangled: str | None = None


@dataclass
class Call:
    """A CUDA API call: a launch when kernels carry its correlation id."""

    name: str
    start: int
    end: int
    correlation: int
    pid: int = 100
    tid: int = 100


@dataclass
class Range:
    text: str
    start: int
    end: int | None
    pid: int = 100
    tid: int = 100
    push_pop: bool = True
    registered: bool = False  # the name only through textId, as registered NVTX strings are
    domain: int = 0  # an nvtxDomainCreate id (0: the default domain)


@dataclass
class Export:
    kernels: list[Kernel] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    ranges: list[Range] = field(default_factory=list)
    copies: list[tuple[int, int, int, int]] = field(default_factory=list)  # start, end, copyKind, correlation
    memsets: list[tuple[int, int, int]] = field(default_factory=list)  # start, end, correlation
    marks: int = 0  # NVTX marks (instants), which are not ranges
    domains: list[tuple[int, int, str]] = field(default_factory=list)  # pid, domain id, name
    modern: bool = True  # the 2025 column set; False: an older export's


def write_export(path: Path, export: Export) -> Path:
    con = sqlite3.connect(path)
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        return strings.setdefault(text, len(strings))

    modern = export.modern
    con.execute("CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)")
    kernel_cols = [
        "start INTEGER NOT NULL",
        "end INTEGER NOT NULL",
        "deviceId INTEGER NOT NULL",
        "contextId INTEGER NOT NULL",
        "streamId INTEGER NOT NULL",
        "correlationId INTEGER",
        *(["globalPid INTEGER"] if modern else []),
        "demangledName INTEGER NOT NULL",
        "shortName INTEGER NOT NULL",
        *(["mangledName INTEGER"] if modern else []),
        "registersPerThread INTEGER NOT NULL",
        *[f"grid{a} INTEGER NOT NULL" for a in "XYZ"],
        *[f"block{a} INTEGER NOT NULL" for a in "XYZ"],
        "staticSharedMemory INTEGER NOT NULL",
        "dynamicSharedMemory INTEGER NOT NULL",
    ]
    con.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL ({', '.join(kernel_cols)})")
    for k in export.kernels:
        row = [k.start, k.end, k.device, 1, k.stream, k.correlation]
        if modern:
            row.append(global_id(k.pid))
        row += [sid(k.name), sid(k.name.split("<")[0].split("(")[0])]
        if modern:
            row.append(sid(k.mangled) if k.mangled else None)
        row += [k.registers, *k.grid, *k.block, k.static_shared, k.dynamic_shared]
        con.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({', '.join('?' * len(row))})", row)
    pid_col = ", globalPid INTEGER" if modern else ""
    if export.copies:
        con.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, "
            "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, "
            f"correlationId INTEGER{pid_col}, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL)"
        )
        for start, end, kind, corr in export.copies:
            row = [start, end, 0, 1, 7, corr, *([global_id(100)] if modern else []), 4096, kind]
            con.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES ({', '.join('?' * len(row))})", row)
    if export.memsets:
        con.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, "
            "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, "
            f"correlationId INTEGER{pid_col}, value INTEGER NOT NULL, bytes INTEGER NOT NULL)"
        )
        for start, end, corr in export.memsets:
            row = [start, end, 0, 1, 7, corr, *([global_id(100)] if modern else []), 0, 64]
            con.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES ({', '.join('?' * len(row))})", row)
    con.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, "
        "eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, "
        "returnValue INTEGER NOT NULL)"
    )
    for c in export.calls:
        con.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, ?, ?, ?, 0)",
            (c.start, c.end, global_id(c.pid, c.tid), c.correlation, sid(c.name)),
        )
    con.execute(
        "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, "
        "rangeId INTEGER, text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER)"
    )
    for r in export.ranges:
        text, text_id = (None, sid(r.text)) if r.registered or not modern else (r.text, None)
        con.execute(
            "INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, NULL, ?, ?, ?, ?)",
            (r.start, r.end, 59 if r.push_pop else 60, text, global_id(r.pid, r.tid), text_id, r.domain),
        )
    for pid, domain, name in export.domains:
        con.execute("INSERT INTO NVTX_EVENTS VALUES (1, NULL, 75, NULL, ?, ?, NULL, ?)", (name, global_id(pid), domain))
    for i in range(export.marks):
        con.execute("INSERT INTO NVTX_EVENTS VALUES (?, NULL, 34, NULL, 'mark', ?, NULL, 0)", (10 + i, global_id(100)))
    if modern:
        con.execute("CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT)")
        for i, name in (
            (34, "NvtxMark"),
            (59, "NvtxPushPopRange"),
            (60, "NvtxStartEndRange"),
            (75, "NvtxDomainCreate"),
        ):
            con.execute("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?, ?, ?)", (i, name, name))
        con.execute("CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT)")
        for k, v in (("EXPORT_PRODUCT_VERSION", "2025.1.1.110"), ("EXPORT_SCHEMA_VERSION", "3.17.1")):
            con.execute("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", (k, v))
        con.execute("CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT)")
        con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1741793819042497997, '', '')")
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in strings.items()])
    con.commit()
    con.close()
    return path
