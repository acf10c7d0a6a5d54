"""rocprofv3 counter collection (``rocprofv3 --pmc …``): ``counter_collection.csv``, one row per
(dispatch, counter) with ``Counter_Name`` and ``Counter_Value``. Hardware counters, not a kernel
trace: read as one, each row would be a kernel call (calls ×10 for ten counters, % busy 489).

Counters are usually collected in a run of their own (the profiler replays or serializes kernels
to read them), so they are joined to a kernel trace by kernel name, not by dispatch id. Given alone,
the file is a one-line error that says so.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pandas as pd

from kprof.errors import KprofInputError
from kprof.ingest.formats.rocprofv3_csv import ON_LINE, read_csv_text
from kprof.ingest.normalize import full_and_short, integers
from kprof.ingest.registry import LoadOptions, Probe, TraceFormat
from kprof.ingest.source import head
from kprof.trace import Trace

COUNTER_COLUMNS = {"counter_name", "counter_value"}


def is_counter_csv(p: Probe) -> bool:
    return p.csv_columns >= COUNTER_COLUMNS


def is_counter_file(path: Path) -> bool:
    """Whether ``path`` is a counter collection, judged from its first bytes as format detection does."""
    return path.is_file() and is_counter_csv(Probe(path, head(path), ExitStack()))


def read_counters(path: Path) -> pd.DataFrame:
    """One row per (dispatch, counter): ``dispatch``, ``name`` (demangled), ``short_name``,
    ``counter``, ``value`` (float: rocprofv3 writes ``12904.000000``)."""
    frame = read_csv_text(path)
    for needed in ("dispatch_id", "kernel_name", *COUNTER_COLUMNS):
        if needed not in frame.columns:
            raise KprofInputError(path, f"counter collection without a {needed.title()} column")
    values = pd.to_numeric(frame["counter_value"].replace("", None), errors="coerce")
    bad = values.isna() & frame["counter_value"].ne("")
    if bad.any():
        raise KprofInputError(path, f"Counter_Value is not a number {ON_LINE(int(bad.to_numpy().argmax()))}")
    full, short = full_and_short(frame["kernel_name"].tolist())
    return pd.DataFrame(
        {
            "dispatch": integers(frame["dispatch_id"], path, "Dispatch_Id", ON_LINE, True),
            "name": full,
            "short_name": short,
            "counter": frame["counter_name"].str.strip(),
            "value": values,
        }
    )


def alone(path: Path) -> KprofInputError:
    return KprofInputError(
        path,
        "a rocprofv3 counter collection (hardware counters per dispatch), not a kernel trace: give it with "
        "the kernel trace it describes (kprof trace KERNEL_TRACE.csv COUNTERS.csv)",
    )


def _refuse(p: Probe, options: LoadOptions) -> Trace:
    raise alone(p.path)


FORMAT = TraceFormat(
    "rocprofv3-counters",
    "rocprofv3 counter collection CSV (with a kernel trace)",
    is_counter_csv,
    _refuse,
    priority=5,
)
