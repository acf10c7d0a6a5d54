"""Reading any supported trace: the format recognised by its content, loaded into the normalized
tables (one trace per rank the file holds), each kernel given its step and annotation."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from kprof.errors import KprofInputError
from kprof.ingest import integrity
from kprof.ingest.assign_ranges import assign_ranges
from kprof.ingest.memory import PEAK_BYTES_PER_ACTIVITY, MemoryGuard, release_freed_memory, return_freed_columns
from kprof.ingest.registry import SQLITE_SECONDS, SQLITE_STOPPED, LoadOptions, probe, sqlite_seconds
from kprof.ingest.source import Progress
from kprof.trace import Trace

# What reading a trace costs, as measured by benchmarks/ingest_memory.py (docs/benchmarks.md).
OUT_OF_MEMORY = (
    f"ran out of memory while reading it: kprof needs up to about {PEAK_BYTES_PER_ACTIVITY} B per device activity "
    "at its peak; read it on a machine with more memory, or profile fewer steps"
)


def load_traces(
    path: Path,
    rank: int | None = None,
    recover: bool | None = None,
    step_pattern: str | None = None,
    on_progress: Progress | None = None,
    scan_threads: int | None = None,
) -> list[Trace]:
    """Read any supported trace, one ``Trace`` per rank it holds (most files hold one), and assign
    each rank's kernels to its own steps and annotations.

    ``rank`` overrides the rank of a one-rank file; when None, the file's own rank is used where it
    has one, else 0. ``scan_threads`` caps the threads a stream is scanned with (files read side by
    side share the cores).
    """
    return_freed_columns()
    try:
        memory = MemoryGuard.for_file(path)
        options = LoadOptions(rank, recover, on_progress, memory, scan_threads)
        return _read(path, options, step_pattern)
    except MemoryError:  # an allocation refused (an address-space or cgroup limit): say so, no traceback
        raise KprofInputError(path, OUT_OF_MEMORY) from None


def _read(path: Path, options: LoadOptions, step_pattern: str | None) -> list[Trace]:
    """The file through its format's reader, each of its ranks given steps and annotations; what the
    reader cannot take (a value too large, bytes for text, a damaged database) is one line."""
    with probe(path) as (fmt, p):
        try:
            loaded = fmt.load(p, options)
        except (pa.ArrowInvalid, OverflowError) as e:
            raise KprofInputError(path, f"a value does not fit the normalized table ({e})") from None
        except UnicodeDecodeError as e:  # an SQLite column holding bytes (a BLOB) where text or numbers belong
            raise KprofInputError(path, f"holds a value that is neither a number nor UTF-8 text ({e.reason})") from None
        except RecursionError:
            raise KprofInputError(path, "nests values deeper than kprof's decoder reads") from None
        except (sqlite3.Error, pd.errors.DatabaseError) as e:  # pandas' SQL reader wraps sqlite3's errors
            cause = e.__cause__ if isinstance(e.__cause__, sqlite3.Error) else e
            if SQLITE_STOPPED in str(cause):
                limit = f"{sqlite_seconds():g} s ({SQLITE_SECONDS})"
                raise KprofInputError(path, f"reading the database took longer than {limit}: stopped") from None
            raise KprofInputError(path, f"SQLite database could not be read ({cause})") from None
    traces = loaded if isinstance(loaded, list) else [loaded]
    release_freed_memory()
    for trace in traces:
        integrity.checked(trace)
        known_devices(trace)
        trace.events["file"] = pd.Categorical.from_codes(np.zeros(len(trace.events), dtype=np.int8), [str(path)])
        assign_ranges(trace, step_pattern)
    return traces


def load_trace(
    path: Path,
    rank: int | None = None,
    recover: bool | None = None,
    step_pattern: str | None = None,
    on_progress: Progress | None = None,
    purpose: str = "kprof reads one rank per file here",
) -> Trace:
    """As ``load_traces`` for a file of one rank; a file holding several is a one-line error that
    says ``purpose``."""
    traces = load_traces(path, rank, recover, step_pattern, on_progress)
    if len(traces) > 1:
        ranks = ", ".join(str(t.meta["rank"]) for t in traces)
        raise KprofInputError(path, f"holds {len(traces)} ranks ({ranks}) in one file: {purpose}")
    return traces[0]


def known_devices(trace: Trace) -> None:
    """Every activity on a device: one whose record names none (a NULL in a database, a blank CSV
    field) is put on device -1, and said, so that busy time still counts it once."""
    missing = trace.events["device"].isna().to_numpy(bool)
    if missing.any():
        trace.warnings.append(f"{int(missing.sum())} activities name no device: counted on device -1")
        trace.events.loc[missing, "device"] = -1
