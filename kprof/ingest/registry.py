"""Trace formats as a registry. Each module of ``kprof.ingest.formats`` that defines
``FORMAT = TraceFormat(...)`` is one format: how to recognise a file from its first bytes (or, for
SQLite files, its tables) and how to load it. Adding a format is adding a module."""

from __future__ import annotations

import importlib
import pkgutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

from kprof.errors import KprofInputError
from kprof.ingest.memory import MemoryGuard
from kprof.ingest.source import SQLITE_MAGIC, Progress, head, local_sqlite
from kprof.limits import seconds
from kprof.trace import Trace

ROCPROF_V1_TABLES = frozenset({"KERN", "OPS", "HIP", "HSA", "COPY", "rocTX"})  # rocprof v1's tblextr.py writes these
SQLITE_SECONDS = "KPROF_SQLITE_SECONDS"  # how long reading one database may take (default 600 s)
SQLITE_STOPPED = "interrupted"  # sqlite3's word for a query its progress handler stopped


def read_only_sqlite(path: Path) -> sqlite3.Connection:
    """A read-only connection whose queries stop once reading has taken longer than the limit
    (``KPROF_SQLITE_SECONDS``, 600 s by default): a database with a view that recurses without end
    once read for minutes with nothing said."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    deadline = time.monotonic() + sqlite_seconds()
    con.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    return con


def sqlite_seconds() -> float:
    return seconds(SQLITE_SECONDS, 600.0)


@dataclass
class Probe:
    """What format detection looks at: the first decompressed bytes, and the tables of an SQLite file."""

    path: Path
    head: bytes
    stack: ExitStack

    @property
    def is_sqlite(self) -> bool:
        return self.head.startswith(SQLITE_MAGIC)

    @cached_property
    def sqlite_path(self) -> Path:
        """A plain SQLite file (a temporary copy when the trace is gzipped), alive with the probe."""
        return self.stack.enter_context(local_sqlite(self.path))

    def connect(self) -> sqlite3.Connection:
        try:
            con = read_only_sqlite(self.sqlite_path)
        except sqlite3.Error as e:
            raise KprofInputError(self.path, f"SQLite database could not be read ({e})") from None
        self.stack.callback(con.close)
        return con

    @cached_property
    def sqlite_tables(self) -> frozenset[str]:
        if not self.is_sqlite:
            return frozenset()
        try:
            return frozenset(r[0] for r in self.connect().execute("SELECT name FROM sqlite_master"))
        except sqlite3.Error as e:
            raise KprofInputError(self.path, f"SQLite database could not be read ({e})") from None
        except UnicodeDecodeError:  # SQLite's message quotes the damaged schema, which sqlite3 decodes as UTF-8
            problem = "SQLite database could not be read (malformed schema, with bytes that are not UTF-8)"
            raise KprofInputError(self.path, problem) from None

    @property
    def json_head(self) -> bytes | None:
        """The head without leading whitespace when the file starts like JSON, else None."""
        stripped = self.head.lstrip()
        return stripped if stripped[:1] in (b"{", b"[") else None

    @cached_property
    def csv_columns(self) -> frozenset[str]:
        """The first line's comma-separated names, lower-cased and unquoted, when the file may be a
        CSV (neither SQLite nor JSON); empty otherwise. Every CSV format is told apart by them."""
        if self.is_sqlite or self.json_head is not None:
            return frozenset()
        return frozenset(c.strip().strip('"').lower() for c in self.first_line.split(","))

    @property
    def first_line(self) -> str:
        return self.head.lstrip().split(b"\n", 1)[0].decode("utf-8", errors="replace")


@dataclass(frozen=True)
class LoadOptions:
    rank: int | None = None  # None: the file's own rank where it has one, else 0
    recover: bool | None = None  # keep every complete event of a truncated file
    on_progress: Progress | None = None  # (bytes read, file size), for formats read as a stream
    memory: MemoryGuard | None = None  # told how many activities the file holds, refuses what cannot fit
    scan_threads: int | None = None  # threads scanning a stream ahead (None: the reader's own choice)


@dataclass(frozen=True)
class TraceFormat:
    name: str
    description: str
    detect: Callable[[Probe], bool]
    load: Callable[[Probe, LoadOptions], Trace | list[Trace]]  # a list: one trace per rank the file holds
    priority: int = 0  # checked in descending order: a specific JSON flavour before generic Kineto
    sqlite: bool = False  # an SQLite database: named when an unknown database is refused


@cache
def formats() -> list[TraceFormat]:
    from kprof.ingest import formats as package

    found = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        fmt = getattr(module, "FORMAT", None)
        if isinstance(fmt, TraceFormat):
            found.append(fmt)
    return sorted(found, key=lambda f: (-f.priority, f.name))


def described() -> str:
    return ", ".join(f.description for f in formats())


@contextmanager
def probe(path: Path) -> Iterator[tuple[TraceFormat, Probe]]:
    """The format of ``path`` and the probe its loader reads through."""
    with ExitStack() as stack:
        p = Probe(path, head(path), stack)
        for fmt in formats():
            if fmt.detect(p):
                yield fmt, p
                return
        if p.is_sqlite and len(p.sqlite_tables & ROCPROF_V1_TABLES) >= 2:
            raise KprofInputError(
                path,
                "is rocprof v1's SQLite database (results.db), which kprof does not read: give the kernel CSV "
                "rocprof wrote beside it (results.csv, from rocprof --hip-trace or --stats)",
            )
        if p.is_sqlite:
            readers = ", ".join(f.description for f in formats() if f.sqlite)
            raise KprofInputError(path, f"SQLite database of no trace format kprof reads (it reads: {readers})")
        raise KprofInputError(path, f"not a trace kprof can read (expected {described()})")
