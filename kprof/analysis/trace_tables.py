"""Per-kernel, per-step and per-annotation tables of one ingested trace (one rank).

Definitions (documented in docs/trace.md):
* busy: the union of all device activity intervals (kernels, copies, memsets) over all streams,
  per device, summed over devices; overlapping work is counted once.
* step span: first activity start to last activity end among the step's activities.
* idle: span × devices − busy, device time with nothing running (span − busy on one GPU). The
  first step is marked warm-up; the steady-state line is the median of the other steps.
  A step recorded by several processes of one rank is warned about where steps are assigned
  (kprof.ingest.assign_ranges): its numbers add several ranks' work.
* annotation gpu_us: device time of every activity inside a range instance (nested ranges
  included), summed over instances; self_us counts only activities whose innermost range it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kprof.ingest.names import name_matches
from kprof.intervals import union_length_by_group
from kprof.trace import Trace

NS_PER_US = 1000.0
STEP_COLUMNS = ["step", "warmup", "span_us", "devices", "busy_us", "kernels", "kernel_us", "idle_us"]
KERNEL_COLUMNS = [
    "name",
    "short_name",
    "kind",
    "calls",
    "total_us",
    "mean_us",
    "median_us",
    "p10_us",
    "p90_us",
    "min_us",
    "max_us",
    "std_us",
    "pct_busy",
]
ANNOTATION_COLUMNS = ["name", "calls", "gpu_us", "self_us", "kernels"]


@dataclass
class TraceTables:
    """Everything `kprof trace` reports for one rank."""

    rank: int
    kernels: pd.DataFrame
    steps: pd.DataFrame
    steady: dict[str, float] | None
    annotations: pd.DataFrame
    summary: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def busy_ns(events: pd.DataFrame) -> int:
    """Union of activity intervals per device, summed over devices."""
    unions = union_length_by_group(
        events["device"].to_numpy("int64"), events["start_ns"].to_numpy("int64"), events["end_ns"].to_numpy("int64")
    )
    return sum(unions.values())


def per_kernel_table(events: pd.DataFrame, busy: int, name_filter: re.Pattern[str] | None = None) -> pd.DataFrame:
    if name_filter is not None:
        events = events[name_matches(events["name"], name_filter)]
    if len(events) == 0:
        return pd.DataFrame(columns=KERNEL_COLUMNS)
    us = pd.Series(events["dur_ns"].to_numpy("int64") / NS_PER_US, index=events.index, name="us")
    g = us.groupby([events["kind"], events["name"]], sort=False, observed=True)
    table = pd.DataFrame(
        {
            "calls": g.size(),
            "total_us": g.sum(),
            "mean_us": g.mean(),
            "median_us": g.median(),
            "p10_us": g.quantile(0.10),
            "p90_us": g.quantile(0.90),
            "min_us": g.min(),
            "max_us": g.max(),
            "std_us": g.std(ddof=1),  # undefined for one call: left empty
        }
    ).reset_index()
    table["kind"] = table["kind"].astype(str)
    table["name"] = table["name"].astype(str)
    first = events.drop_duplicates("name")
    short_of = dict(zip(first["name"].astype(str), first["short_name"].astype(str)))
    table["short_name"] = table["name"].map(short_of)
    table["pct_busy"] = 100.0 * table["total_us"] / (busy / NS_PER_US) if busy else np.nan
    table = table.sort_values(["total_us", "name"], ascending=[False, True], kind="stable")
    return table[KERNEL_COLUMNS].reset_index(drop=True)


def step_table(events: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, float] | None]:
    """The per-step table and its steady-state medians. Busy is summed over devices, so idle is
    counted in device time too (span × devices − busy): it cannot go below zero."""
    has_step = events["step"].notna().to_numpy(bool)
    if not has_step.any():
        return pd.DataFrame(columns=STEP_COLUMNS), None
    rows = slice(None) if has_step.all() else has_step  # a column at a time: no copy of the whole table

    def column(name: str) -> np.ndarray:
        return events[name].to_numpy("int64", na_value=0)[rows]  # nulls are in rows left out

    step, device, start, end = column("step"), column("device"), column("start_ns"), column("end_ns")
    is_kernel = (events["kind"] == "kernel").to_numpy(bool)[rows]
    # Busy per (step, device), then summed over devices: pack both into one int64 key.
    dev_codes, dev_index = np.unique(device, return_inverse=True)
    unions = union_length_by_group(step * len(dev_codes) + dev_index, start, end)
    busy = pd.Series(unions).groupby(lambda key: key // len(dev_codes)).sum()
    steps, at = np.unique(step, return_inverse=True)
    first_start, last_end = np.full(len(steps), np.iinfo(np.int64).max), np.full(len(steps), np.iinfo(np.int64).min)
    np.minimum.at(first_start, at, start)
    np.maximum.at(last_end, at, end)
    kernel_ns = np.zeros(len(steps), np.int64)
    np.add.at(kernel_ns, at[is_kernel], (end - start)[is_kernel])
    pairs = np.unique(at * len(dev_codes) + dev_index)
    table = pd.DataFrame(
        {
            "span_ns": last_end - first_start,
            "devices": np.bincount(pairs // len(dev_codes), minlength=len(steps)).astype(int),
            "kernels": np.bincount(at[is_kernel], minlength=len(steps)).astype(int),
            "kernel_ns": kernel_ns,
        },
        index=pd.Index(steps, name="step"),
    )
    table["busy_ns"] = busy.reindex(table.index).to_numpy("int64")
    table = table.reset_index()
    table["warmup"] = table.index == 0
    table["span_us"] = table["span_ns"] / NS_PER_US
    table["busy_us"] = table["busy_ns"] / NS_PER_US
    table["kernel_us"] = table["kernel_ns"] / NS_PER_US
    table["idle_us"] = (table["span_ns"] * table["devices"] - table["busy_ns"]) / NS_PER_US
    table = table[STEP_COLUMNS]
    rest = table[~table["warmup"]]
    steady = None
    if len(rest):
        steady = {c: float(rest[c].median()) for c in ("span_us", "busy_us", "kernels", "kernel_us", "idle_us")}
        steady["steps"] = len(rest)
    return table, steady


@dataclass
class StepReplicates:
    """Each activity's device µs and calls in every steady (non-warm-up) step: rows (kind, name),
    one column per step, 0 where it did not run. ``compare`` uses the steps as replicates when a
    side is one trace of a loop."""

    us: pd.DataFrame
    calls: pd.DataFrame
    busy_us: np.ndarray
    short_names: dict[str, str]

    @property
    def steps(self) -> int:
        return len(self.busy_us)


def step_replicates(events: pd.DataFrame, steps: pd.DataFrame) -> StepReplicates:
    steady_rows = steps[~steps["warmup"].astype(bool)]
    steady = steady_rows["step"].to_numpy("int64")
    stepped = events[events["step"].isin(steady)]
    g = stepped.groupby([stepped["kind"].astype(str), stepped["name"].astype(str), "step"], sort=False)["dur_ns"]
    us = (g.sum() / NS_PER_US).unstack("step", fill_value=0.0).reindex(columns=steady, fill_value=0.0)
    calls = g.size().unstack("step", fill_value=0).reindex(columns=steady, fill_value=0)
    first = events.drop_duplicates("name")
    short = dict(zip(first["name"].astype(str), first["short_name"].astype(str)))
    return StepReplicates(us, calls, steady_rows["busy_us"].to_numpy(float), short)


def _inclusive(points: np.ndarray, weights: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Sum of the weights of the points inside each [start, end]: sorted points + prefix sums."""
    order = np.argsort(points, kind="stable")
    p = points[order]
    csum = np.concatenate([[0], np.cumsum(weights[order])])
    lo = np.searchsorted(p, starts, side="left")
    hi = np.searchsorted(p, ends, side="right")
    return csum[hi] - csum[lo]


def annotation_table(trace: Trace, step_pattern: re.Pattern[str]) -> pd.DataFrame:
    r, k = trace.ranges, trace.events
    if len(r) == 0 or len(k) == 0:
        return pd.DataFrame(columns=ANNOTATION_COLUMNS)
    r = r[~name_matches(r["name"], step_pattern)]
    # Kineto writes each record_function twice (CPU and GPU); count the GPU copy where it exists.
    gpu_names = set(r.loc[r["domain"] == "gpu", "name"])
    r = r[(r["domain"] == "gpu") | ~r["name"].isin(gpu_names)]
    starts_k = k["start_ns"].to_numpy("int64")
    launch = k["launch_ns"]
    points_cpu = np.where(launch.notna().to_numpy(bool), launch.to_numpy("int64", na_value=0), starts_k)
    tids = k["launch_tid"].to_numpy("int64", na_value=-(2**62))
    device = k["device"].to_numpy("int64")
    stream = k["stream"].to_numpy("int64", na_value=-1)
    dur = k["dur_ns"].to_numpy("int64")
    is_kernel = (k["kind"] == "kernel").to_numpy(np.int64)
    gpu_ns = np.zeros(len(r), dtype=np.int64)
    count = np.zeros(len(r), dtype=np.int64)
    # A GPU range holds the work of its own device and stream (its tid); a CPU range the launches
    # made on its own thread.
    is_gpu = (r["domain"] == "gpu").to_numpy(bool)
    lane = np.where(is_gpu, r["device"].to_numpy("int64"), -1)
    keys = [pd.Series(v, index=r.index) for v in (is_gpu, lane, r["tid"].to_numpy("int64"))]  # not arrays: a
    # bare array as a key is first looked up as a column, and the failed look-up prints it
    for (gpu, dev, tid), sub in r.groupby(keys, sort=False):
        sel = ((device == dev) & (stream == tid)) if gpu else (tids == tid)
        pts = starts_k[sel] if gpu else points_cpu[sel]
        pos = r.index.get_indexer(sub.index)
        s, e = sub["start_ns"].to_numpy("int64"), sub["end_ns"].to_numpy("int64")
        gpu_ns[pos] = _inclusive(pts, dur[sel], s, e)
        count[pos] = _inclusive(pts, is_kernel[sel], s, e)
    frame = pd.DataFrame({"name": r["name"].to_numpy(object), "gpu_ns": gpu_ns, "kernels": count})
    g = frame.groupby("name", sort=False)
    table = pd.DataFrame(
        {"calls": g.size(), "gpu_us": g["gpu_ns"].sum() / NS_PER_US, "kernels": g["kernels"].sum()}
    ).reset_index()
    own = k.groupby("annotation", sort=False, observed=True)["dur_ns"].sum() / NS_PER_US
    table["self_us"] = table["name"].map(own).fillna(0.0).astype(float)
    table = table.sort_values(["gpu_us", "name"], ascending=[False, True], kind="stable")
    return table[ANNOTATION_COLUMNS].reset_index(drop=True)


def trace_tables(
    trace: Trace, step_pattern: re.Pattern[str], name_filter: re.Pattern[str] | None = None
) -> TraceTables:
    k = trace.events
    busy = busy_ns(k) if len(k) else 0
    is_kernel = (k["kind"] == "kernel").to_numpy(bool)
    steps, steady = step_table(k)
    span = int(k["end_ns"].max() - k["start_ns"].min()) if len(k) else 0
    summary = {
        "format": trace.meta.get("format"),
        "file": trace.meta.get("file"),
        "rank": trace.meta.get("rank"),
        "clock": trace.meta.get("clock"),
        "devices": sorted(int(d) for d in pd.unique(k["device"])) if len(k) else [],
        "kernels": int(is_kernel.sum()),
        "activities": len(k),
        "kernel_total_us": float(k["dur_ns"].to_numpy("int64")[is_kernel].sum() / NS_PER_US),
        "busy_us": busy / NS_PER_US,
        "span_us": span / NS_PER_US,
        "steps": len(steps),
        "step_source": trace.meta.get("step_source"),
        "step_pattern": step_pattern.pattern,
        "launched_before_window": int(trace.meta.get("launched_before_window", 0)),
        "integrity": list(trace.meta.get("integrity", [])),  # impossible records, counted and kept out
    }
    return TraceTables(
        rank=int(trace.meta.get("rank", 0)),
        kernels=per_kernel_table(k, busy, name_filter),
        steps=steps,
        steady=steady,
        annotations=annotation_table(trace, step_pattern),
        summary=summary,
        warnings=list(trace.warnings),
    )
