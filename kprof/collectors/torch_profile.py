"""The PyTorch profiler as a collector.

Inside a `kprof run` (``--collector torch``), the timed rounds are replayed once more under the
profiler, each (leg, round) inside a ``record_function`` range named ``kprof|LEG|ROUND``; the trace
is ingested like any other and each kernel is attributed to its leg and round through that range,
so per-kernel device time (stage 1 vs stage 2 of a split-K kernel) comes out per leg.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

RANGE = re.compile(r"^kprof\|(?P<leg>.+)\|(?P<round>\d+)$")


def profile_rounds(
    path: Path, rounds: Sequence[Sequence[tuple[str, int, Callable[[], None]]]], before_each: Callable[[], None]
) -> Path:
    """Run ``rounds`` (lists of (leg name, round, replay)) under the profiler; write a Kineto trace."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        for items in rounds:
            for leg, r, replay in items:
                before_each()  # the cold-cache flush stays outside the leg's range
                with record_function(f"kprof|{leg}|{r}"):
                    replay()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    path.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(path))
    return path


def kernel_times(trace_path: Path, case: str) -> pd.DataFrame:
    """Per (leg, round, kernel): calls and device µs, from the annotated trace; a kernel is its full
    name, so instantiations of one template stay apart (reports label them)."""
    from kprof.ingest.load import load_trace

    trace = load_trace(trace_path)
    k = trace.events
    k = k[(k["kind"] == "kernel") & k["annotation"].notna()]
    parsed = k["annotation"].astype(str).str.extract(RANGE)
    k = k.assign(leg=parsed["leg"], round=pd.to_numeric(parsed["round"]), us=k["dur_ns"].astype("int64") / 1e3)
    k = k[k["leg"].notna()]
    out = (
        k.groupby(["leg", "round", "name"], observed=True)["us"]
        .agg(["size", "sum"])
        .reset_index()
        .rename(columns={"size": "calls", "sum": "total_us", "name": "kernel"})
    )
    out.insert(0, "case", case)
    out["kernel"] = out["kernel"].astype(str)  # plain strings in the stored table, not a dictionary
    return out
