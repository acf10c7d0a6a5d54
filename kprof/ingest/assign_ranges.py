"""Attach each kernel event to its step and its innermost annotation.

Steps come from ranges whose name matches the step pattern (default ``ProfilerStep#N``). GPU-side
ranges (``gpu_user_annotation``) are used when the trace has them: a kernel belongs to the range
of its own device and stream that its start lies in. Otherwise (or when the GPU step ranges are
too short to be the steps) a kernel belongs to the CPU step range that holds the API call that
launched it, because the GPU may run step N's work after the CPU has left ``ProfilerStep#N``; work
launched before the profiling window belongs to no step. Annotations follow the same rule,
innermost range first, and CPU ranges only match launches made on their own thread.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from kprof.errors import checked_regex
from kprof.ingest.names import name_matches
from kprof.intervals import innermost_containing
from kprof.trace import Trace, categorical, narrowed

DEFAULT_STEP_PATTERN = r"^ProfilerStep#(\d+)$"


def compile_step_pattern(pattern: str | None) -> re.Pattern[str]:
    return checked_regex(pattern or DEFAULT_STEP_PATTERN, "--steps")


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
        has_launch, kernels["launch_ns"].to_numpy("int64", na_value=0), kernels["start_ns"].to_numpy("int64")
    )
    return points, has_launch


def _lane_keys(events: pd.DataFrame, gpu_ranges: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """One int key per (device, stream): Kineto writes a ``gpu_user_annotation`` on the stream (its
    ``tid``) whose work it spans, so a GPU range may only hold kernels of its own stream."""
    device = np.concatenate([events["device"].to_numpy("int64"), gpu_ranges["device"].to_numpy("int64")])
    stream = np.concatenate([events["stream"].to_numpy("int64", na_value=-1), gpu_ranges["tid"].to_numpy("int64")])
    streams, stream_codes = np.unique(stream, return_inverse=True)
    _, device_codes = np.unique(device, return_inverse=True)
    codes = device_codes.astype(np.int64) * len(streams) + stream_codes
    return codes[: len(events)], codes[len(events) :]


def _assign(
    points: np.ndarray, groups_k: np.ndarray | None, ranges: pd.DataFrame, groups_r: np.ndarray | None
) -> np.ndarray:
    """For each group (lane or thread), the index of each point's innermost range of that group, or -1."""
    out = np.full(len(points), -1, dtype=np.int64)
    keys = [None] if groups_r is None else np.unique(groups_r)
    for key in keys:
        rsel = np.ones(len(ranges), bool) if key is None else (groups_r == key)
        ksel = np.ones(len(points), bool) if key is None else (groups_k == key)
        if not rsel.any() or not ksel.any():
            continue
        sub = ranges[rsel]
        idx = innermost_containing(points[ksel], sub["start_ns"].to_numpy("int64"), sub["end_ns"].to_numpy("int64"))
        hit = idx >= 0
        out[np.flatnonzero(ksel)[hit]] = np.flatnonzero(rsel)[idx[hit]]
    return out


def _launched_before_window(k: pd.DataFrame, has_launch: np.ndarray) -> np.ndarray:
    """Work whose launch is unknown and whose correlation id precedes every recorded launch: it was
    launched before the profiler started, so no step (by its start time) may claim it."""
    corr = k["correlation"].to_numpy("float64", na_value=np.nan)
    known = corr[has_launch & ~np.isnan(corr)]
    if not len(known):
        return np.zeros(len(k), bool)
    return ~has_launch & (corr < known.min())


# Kineto spans a GPU step range over the device work its CPU step launched, so the two hold the
# same work. GPU step ranges holding less than this share of it are not the steps: ROCm traces have
# been seen with GPU ProfilerStep copies of 16 µs for 16 ms steps (12 of 3,653 activities in steps),
# and with one that ends after 8 of the 16 kernels its step launched.
_GPU_STEP_MIN_SHARE = 0.9


def _steps(trace: Trace, steps: pd.DataFrame, pattern: re.Pattern[str]) -> tuple[np.ndarray, pd.DataFrame, str]:
    """Each event's row in the chosen step table (-1: none), that table, and where it came from."""
    k = trace.events
    points, has_launch = _kernel_points(k)
    gpu_steps = steps[steps["domain"] == "gpu"].reset_index(drop=True)
    cpu_steps = steps[steps["domain"] == "cpu"].reset_index(drop=True)
    by_launch = np.full(len(k), -1, dtype=np.int64)
    if len(cpu_steps):
        _warn_processes_merged(trace, cpu_steps, pattern)
        by_launch = _assign(points, None, cpu_steps, None)
        early = _launched_before_window(k, has_launch)
        by_launch[early] = -1
        if early.any():
            trace.meta["launched_before_window"] = int(early.sum())
            trace.warnings.append(
                f"{int(early.sum()):,} device activities were launched before the profiling window "
                "(their correlation ids precede every recorded launch): they belong to no step"
            )
    if len(gpu_steps):
        lanes_k, lanes_r = _lane_keys(k, gpu_steps)
        by_gpu = _assign(k["start_ns"].to_numpy("int64"), lanes_k, gpu_steps, lanes_r)
        n_gpu, n_cpu = int((by_gpu >= 0).sum()), int((by_launch >= 0).sum())
        if not len(cpu_steps) or n_gpu >= _GPU_STEP_MIN_SHARE * n_cpu:
            return by_gpu, gpu_steps, "GPU step ranges"
        gpu_us = (gpu_steps["end_ns"] - gpu_steps["start_ns"]).median() / 1e3
        cpu_us = (cpu_steps["end_ns"] - cpu_steps["start_ns"]).median() / 1e3
        trace.warnings.append(
            f"GPU step ranges cannot be the steps (they hold {n_gpu:,} device activities where the CPU "
            f"step ranges launch {n_cpu:,}; median {gpu_us:,.1f} µs against {cpu_us:,.1f} µs on the CPU): "
            "steps assigned by the launching call instead"
        )
        return by_launch, cpu_steps, "CPU step range holding the launch (GPU step ranges truncated)"
    if len(cpu_steps):
        source = "CPU step range holding the launch"
        if not has_launch.all():
            source += " (kernel start time where the launch is unknown)"
        return by_launch, cpu_steps, source
    return by_launch, steps, "none"


def _warn_processes_merged(trace: Trace, cpu_steps: pd.DataFrame, pattern: re.Pattern[str]) -> None:
    """A step number that several processes record is several ranks' steps read as one: each row
    would add their work into one span. Said, since the file does not tell kprof which is which."""
    numbers = _step_numbers(cpu_steps, pattern)
    per_step = pd.Series(cpu_steps["pid"].to_numpy("int64")).groupby(numbers).nunique()
    merged = per_step[per_step > 1]
    if len(merged):
        trace.warnings.append(
            f"{len(merged)} steps are recorded by several processes each (up to {int(merged.max())}; step "
            f"{int(merged.index[0])}): the file holds several ranks it does not name, so each step row adds "
            "their work; give one trace per rank"
        )


def _annotations(k: pd.DataFrame, annotations: pd.DataFrame) -> pd.Categorical:
    """Each event's innermost annotation: its own stream's GPU range, else the CPU range (on the
    launching thread) that holds its launch. Codes into the range names, never a string per event
    (an object column cost 8 bytes a row and a copy at the end)."""
    gpu_ann = annotations[annotations["domain"] == "gpu"].reset_index(drop=True)
    cpu_ann = annotations[annotations["domain"] == "cpu"].reset_index(drop=True)
    code = np.full(len(k), -1, dtype=np.int64)  # into gpu_ann's names, then cpu_ann's
    if len(gpu_ann):
        lanes_k, lanes_r = _lane_keys(k, gpu_ann)
        code = _assign(k["start_ns"].to_numpy("int64"), lanes_k, gpu_ann, lanes_r)
    if len(cpu_ann):
        points, _ = _kernel_points(k)
        tids = k["launch_tid"].to_numpy("int64", na_value=-(2**62))
        idx = _assign(points, tids, cpu_ann, cpu_ann["tid"].to_numpy("int64"))
        fresh = (code < 0) & (idx >= 0)
        code[fresh] = len(gpu_ann) + idx[fresh]
    return categorical(code, [*gpu_ann["name"].astype(str), *cpu_ann["name"].astype(str)])


def assign_ranges(trace: Trace, step_pattern: str | None = None) -> Trace:
    """Fill ``step`` and ``annotation`` on ``trace.events`` (in place) and return the trace."""
    k, r = trace.events, trace.ranges
    pattern = compile_step_pattern(step_pattern)
    if len(k) == 0:
        trace.meta["step_source"] = "none"
        return trace
    is_step = name_matches(r["name"], pattern) if len(r) else np.zeros(0, bool)
    steps, annotations = r[is_step].reset_index(drop=True), r[~is_step].reset_index(drop=True)
    step_idx, chosen, source = _steps(trace, steps, pattern)
    if len(chosen):
        numbers = _step_numbers(chosen, pattern)
        values = pd.arrays.IntegerArray(np.where(step_idx >= 0, numbers[np.maximum(step_idx, 0)], 0), step_idx < 0)
        trace.events["step"] = narrowed(values, "step")
    trace.meta["step_source"] = source
    trace.meta["step_pattern"] = pattern.pattern
    trace.events["annotation"] = _annotations(k, annotations)
    return trace
