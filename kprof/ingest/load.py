"""Reading any supported trace: the format recognised by its content, loaded into the normalized
tables (one trace per rank the file holds), each kernel given its step and annotation."""

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


def load_traces(
    path: Path,
    rank: int | None = None,
    recover: bool | None = None,
    step_pattern: str | None = None,
    on_progress: Progress | None = None,
) -> list[Trace]:
    """Read any supported trace, one ``Trace`` per rank it holds (most files hold one), and assign
    each rank's kernels to its own steps and annotations.

    ``rank`` overrides the rank of a one-rank file; when None, the file's own rank is used where it
    has one, else 0.
    """
    with probe(path) as (fmt, p):
        try:
            loaded = fmt.load(p, LoadOptions(rank=rank, recover=recover, on_progress=on_progress))
        except (pa.ArrowInvalid, OverflowError) as e:
            raise KprofInputError(path, f"a value does not fit the normalized table ({e})") from None
        except (sqlite3.Error, pd.errors.DatabaseError) as e:  # pandas' SQL reader wraps sqlite3's errors
            cause = e.__cause__ if isinstance(e.__cause__, sqlite3.Error) else e
            raise KprofInputError(path, f"SQLite database could not be read ({cause})") from None
    traces = loaded if isinstance(loaded, list) else [loaded]
    for trace in traces:
        trace.events["file"] = pd.Categorical([str(path)] * len(trace.events))
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
