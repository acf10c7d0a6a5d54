"""Attach each kernel event to its step and its innermost annotation.

Steps come from ranges whose name matches the step pattern (default ``ProfilerStep#N``). GPU-side
ranges (``gpu_user_annotation``) are used when the trace has them: a kernel belongs to the range
its start lies in. Otherwise a kernel belongs to the CPU step range that holds the API call that
launched it, because the GPU may run step N's work after the CPU has left ``ProfilerStep#N``.
Annotations follow the same rule, innermost range first, and CPU ranges only match launches made
on their own thread.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from kprof.errors import KprofInputError
from kprof.intervals import innermost_containing
from kprof.trace import Trace

DEFAULT_STEP_PATTERN = r"^ProfilerStep#(\d+)$"


def compile_step_pattern(pattern: str | None) -> re.Pattern[str]:
    try:
        return re.compile(pattern or DEFAULT_STEP_PATTERN)
    except re.error as e:
        raise KprofInputError("--steps", f"not a valid regular expression ({e})") from None


def _step_numbers(ranges: pd.DataFrame, pattern: re.Pattern[str]) -> np.ndarray:
    """``ProfilerStep#7`` → 7; ranges without a numeric group are numbered in time order (files may
    list them in any order: one writes them last first)."""
    groups = [m.group(1) if m and m.groups() else None for m in map(pattern.search, ranges["name"])]
    if all(g is not None and g.isdigit() for g in groups):
        return np.array([int(g) for g in groups], dtype=np.int64)
    order = np.argsort(ranges["start_ns"].to_numpy("int64"), kind="stable")
    numbers = np.empty(len(order), dtype=np.int64)
    numbers[order] = np.arange(len(order))
    return numbers


def _kernel_points(kernels: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Launch time where known, else the kernel's own start; and whether it was a launch time."""
    has_launch = kernels["launch_ns"].notna().to_numpy()
    points = np.where(
        has_launch, kernels["launch_ns"].fillna(0).to_numpy("int64"), kernels["start_ns"].to_numpy("int64")
    )
    return points, has_launch


def _assign(
    points: np.ndarray, groups_k: np.ndarray, ranges: pd.DataFrame, group_col: str | None, out: np.ndarray
) -> None:
    """For each group (device or thread), give each point the value of its innermost range."""
    keys = [None] if group_col is None else pd.unique(ranges[group_col])
    for key in keys:
        rsel = np.ones(len(ranges), bool) if key is None else (ranges[group_col] == key).to_numpy()
        ksel = np.ones(len(points), bool) if key is None else (groups_k == key)
        ksel &= out < 0
        if not rsel.any() or not ksel.any():
            continue
        sub = ranges[rsel]
        idx = innermost_containing(points[ksel], sub["start_ns"].to_numpy("int64"), sub["end_ns"].to_numpy("int64"))
        hit = idx >= 0
        target = np.flatnonzero(ksel)[hit]
        out[target] = np.flatnonzero(rsel)[idx[hit]]


def assign_ranges(trace: Trace, step_pattern: str | None = None) -> Trace:
    """Fill ``step`` and ``annotation`` on ``trace.events`` (in place) and return the trace."""
    k, r = trace.events, trace.ranges
    pattern = compile_step_pattern(step_pattern)
    if len(k) == 0:
        trace.meta["step_source"] = "none"
        return trace
    is_step = r["name"].map(lambda n: pattern.search(n) is not None).to_numpy(bool) if len(r) else np.zeros(0, bool)
    steps, annotations = r[is_step].reset_index(drop=True), r[~is_step].reset_index(drop=True)
    device = k["device"].to_numpy("int64")
    starts = k["start_ns"].to_numpy("int64")
    points, has_launch = _kernel_points(k)
    tids = k["launch_tid"].fillna(-(2**62)).to_numpy("int64")

    step_idx = np.full(len(k), -1, dtype=np.int64)
    gpu_steps = steps[steps["domain"] == "gpu"].reset_index(drop=True)
    cpu_steps = steps[steps["domain"] == "cpu"].reset_index(drop=True)
    if len(gpu_steps):
        _assign(starts, device, gpu_steps, "device", step_idx)
        chosen, source = gpu_steps, "GPU step ranges"
    elif len(cpu_steps):
        _assign(points, device, cpu_steps, None, step_idx)
        chosen = cpu_steps
        source = (
            "CPU step range holding the launch"
            if has_launch.all()
            else ("CPU step range holding the launch (kernel start time where the launch is unknown)")
        )
    else:
        chosen, source = steps, "none"
    if len(chosen):
        numbers = _step_numbers(chosen, pattern)
        trace.events["step"] = pd.array(np.where(step_idx >= 0, numbers[np.maximum(step_idx, 0)], 0), dtype="Int64")
        trace.events.loc[step_idx < 0, "step"] = pd.NA
    trace.meta["step_source"] = source
    trace.meta["step_pattern"] = pattern.pattern

    ann_idx = np.full(len(k), -1, dtype=np.int64)
    gpu_ann = annotations[annotations["domain"] == "gpu"].reset_index(drop=True)
    cpu_ann = annotations[annotations["domain"] == "cpu"].reset_index(drop=True)
    names = np.full(len(k), None, dtype=object)
    if len(gpu_ann):
        _assign(starts, device, gpu_ann, "device", ann_idx)
        names[ann_idx >= 0] = gpu_ann["name"].to_numpy(object)[ann_idx[ann_idx >= 0]]
    if len(cpu_ann):
        cpu_idx = np.full(len(k), -1, dtype=np.int64)
        cpu_idx[ann_idx >= 0] = 0  # already annotated on the GPU side: skip
        _assign(points, tids, cpu_ann, "tid", cpu_idx)
        fresh = (ann_idx < 0) & (cpu_idx >= 0)
        names[fresh] = cpu_ann["name"].to_numpy(object)[cpu_idx[fresh]]
    trace.events["annotation"] = pd.array(names, dtype="string")
    return trace
