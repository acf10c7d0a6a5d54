"""Each kernel's hardware counters (a rocprofv3 counter collection) beside its calls in the traces:
the mean over the kernel's dispatches of each counter, matched to the trace's kernels by name."""

from __future__ import annotations

import pandas as pd

COUNTER_KEYS = ["name", "short_name", "dispatches", "calls_in_trace"]


def kernel_counters(counters: pd.DataFrame, trace_kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel of ``counters`` (``read_counters`` rows): its dispatches there, its calls
    in ``trace_kernels`` (the per-kernel tables of every rank; 0 when the traces never ran it), and
    one column per counter, the mean per dispatch."""
    if not len(counters):
        return pd.DataFrame(columns=COUNTER_KEYS)
    means = counters.pivot_table(index="name", columns="counter", values="value", aggfunc="mean", sort=False)
    means.columns = [str(c) for c in means.columns]
    first = counters.drop_duplicates("name").set_index("name")
    table = pd.DataFrame(
        {
            "short_name": first["short_name"],
            "dispatches": counters.groupby("name", sort=False)["dispatch"].nunique(),
        }
    ).join(means)
    calls = trace_kernels.groupby(trace_kernels["name"].astype(str))["calls"].sum()
    table.insert(2, "calls_in_trace", table.index.map(calls).fillna(0).astype(int))
    table = table.reset_index().sort_values(
        ["calls_in_trace", "dispatches", "name"], ascending=[False, False, True], kind="stable"
    )
    return table.reset_index(drop=True)
