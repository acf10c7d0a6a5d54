"""Reading any supported trace: the format recognised by its content, loaded into the normalized
tables, each kernel given its step and annotation."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pyarrow as pa

from kprof.errors import KprofInputError
from kprof.ingest.assign_ranges import assign_ranges
from kprof.ingest.registry import LoadOptions, probe
from kprof.ingest.source import Progress
from kprof.trace import Trace


def load_trace(
    path: Path,
    rank: int | None = None,
    recover: bool | None = None,
    step_pattern: str | None = None,
    on_progress: Progress | None = None,
) -> Trace:
    """Read any supported trace and assign its kernels to steps and annotations.

    ``rank`` overrides the rank; when None, the file's own rank is used where it has one, else 0.
    """
    with probe(path) as (fmt, p):
        try:
            trace = fmt.load(p, LoadOptions(rank=rank, recover=recover, on_progress=on_progress))
        except (pa.ArrowInvalid, OverflowError) as e:
            raise KprofInputError(path, f"a value does not fit the normalized table ({e})") from None
        except (sqlite3.Error, pd.errors.DatabaseError) as e:  # pandas' SQL reader wraps sqlite3's errors
            cause = e.__cause__ if isinstance(e.__cause__, sqlite3.Error) else e
            raise KprofInputError(path, f"SQLite database could not be read ({cause})") from None
    trace.events["file"] = pd.Categorical([str(path)] * len(trace.events))
    return assign_ranges(trace, step_pattern)
