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

import numpy as np
import pandas as pd

from kprof.errors import KprofInputError
from kprof.ingest.csv_columns import CsvColumn, read_columns
from kprof.ingest.formats.rocprofv3_csv import ON_LINE
from kprof.ingest.normalize import full_and_short
from kprof.ingest.registry import LoadOptions, Probe, TraceFormat
from kprof.ingest.source import head
from kprof.trace import Trace, categorical

COUNTER_COLUMNS = {"counter_name", "counter_value"}


def is_counter_csv(p: Probe) -> bool:
    return p.csv_columns >= COUNTER_COLUMNS


def is_counter_file(path: Path) -> bool:
    """Whether ``path`` is a counter collection, judged from its first bytes as format detection does."""
    return path.is_file() and is_counter_csv(Probe(path, head(path), ExitStack()))


_COLUMNS = {
    key: CsvColumn((key,), key.title(), integer=key == "dispatch_id", required=True)
    for key in ("dispatch_id", "kernel_name", *sorted(COUNTER_COLUMNS))
}


def read_counters(path: Path) -> pd.DataFrame:
    """One row per (dispatch, counter): ``dispatch``, ``name`` (demangled), ``short_name``,
    ``counter``, ``value`` (float: rocprofv3 writes ``12904.000000``)."""
    table = read_columns(path, _COLUMNS, ON_LINE, missing="counter collection without a {} column")
    texts: pd.Categorical = table.get("counter_value")
    parsed = pd.to_numeric(pd.Series(texts.categories, dtype=object), errors="coerce").to_numpy(float)
    values = np.append(parsed, np.nan)[texts.codes]
    bad = np.isnan(values) & (texts.codes >= 0)
    if bad.any():
        raise KprofInputError(path, f"Counter_Value is not a number {ON_LINE(int(bad.argmax()))}")
    kernels: pd.Categorical = table.get("kernel_name")
    full, short = full_and_short([str(c) for c in kernels.categories])
    counters: pd.Categorical = table.get("counter_name")
    return pd.DataFrame(
        {
            "dispatch": table.get("dispatch_id"),
            "name": categorical(kernels.codes, full).astype(object),
            "short_name": categorical(kernels.codes, short).astype(object),
            "counter": categorical(counters.codes, [str(c).strip() for c in counters.categories]).astype(object),
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
