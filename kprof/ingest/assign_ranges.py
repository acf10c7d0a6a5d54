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
from collections.abc import Callable

import numpy as np
import pandas as pd

from kprof.errors import checked_regex
from kprof.ingest.names import name_matches
from kprof.intervals import innermost_containing
from kprof.trace import Trace, categorical, narrowest

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


_BLOCK = 1 << 18  # events matched at a time: beside the table, matching holds its answer (4 B an event)
_MISSING = -(2**62)  # a missing lane value, which no range's lane equals
GPU_LANE = (("device", "device"), ("stream", "tid"))  # Kineto writes a GPU range on the stream it spans
THREAD_LANE = (("launch_tid", "tid"),)  # a CPU range holds launches made on its own thread
ANY_LANE: tuple[tuple[str, str], ...] = ()


def kernel_points(kernels: pd.DataFrame) -> np.ndarray:
    """Launch time where known, else the kernel's own start."""
    points = kernels["start_ns"].to_numpy("int64", copy=True)  # without copy=True, the table's own array
    launch = kernels["launch_ns"]
    has_launch = launch.notna().to_numpy()
    points[has_launch] = launch[has_launch].to_numpy("int64")
    return points


def start_points(kernels: pd.DataFrame) -> np.ndarray:
    return kernels["start_ns"].to_numpy("int64")


def _range_lanes(ranges: pd.DataFrame, lane: tuple[tuple[str, str], ...]) -> list[tuple[tuple[int, ...], np.ndarray]]:
    """The ranges' rows grouped by their lane values; a range whose lane is unknown holds nothing."""
    if not lane:
        return [((), np.arange(len(ranges)))]
    keys = np.stack([ranges[r].to_numpy("int64", na_value=_MISSING) for _, r in lane], axis=1)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    return [(tuple(u.tolist()), np.flatnonzero(inverse == i)) for i, u in enumerate(unique) if _MISSING not in u]


def _assign(
    events: pd.DataFrame,
    points_of: Callable[[pd.DataFrame], np.ndarray],
    ranges: pd.DataFrame,
    lane: tuple[tuple[str, str], ...],
) -> np.ndarray:
    """Each event's innermost range among those of its own lane (event column = range column for
    each pair of ``lane``) that holds its point, as a row of ``ranges``, or -1. Events are read a
    block at a time, so that the transient arrays of matching stay a few MB whatever the trace."""
    out = np.full(len(events), -1, dtype=np.int32)
    if not len(ranges):
        return out
    starts, ends = ranges["start_ns"].to_numpy("int64"), ranges["end_ns"].to_numpy("int64")
    lanes = _range_lanes(ranges, lane)
    for lo in range(0, len(events), _BLOCK):
        block = events.iloc[lo : lo + _BLOCK]
        points = points_of(block)
        values = [block[e].to_numpy("int64", na_value=_MISSING) for e, _ in lane]
        answer = out[lo : lo + _BLOCK]
        for key, rows in lanes:
            chosen = np.ones(len(block), bool)
            for column, value in zip(values, key):
                chosen &= column == value
            where = np.flatnonzero(chosen)
            if not len(where):
                continue
            idx = innermost_containing(points[where], starts[rows], ends[rows])
            hit = idx >= 0
            answer[where[hit]] = rows[idx[hit]]
    return out


def _launched_before_window(k: pd.DataFrame, has_launch: np.ndarray) -> np.ndarray:
    """Work whose launch is unknown and whose correlation id precedes every recorded launch: it was
    launched before the profiler started, so no step (by its start time) may claim it."""
    corr = k["correlation"].array  # not the Series: its boolean selection would copy the index too
    first = corr[has_launch].min()
    if pd.isna(first):
        return np.zeros(len(k), bool)
    return ~has_launch & (corr < first).to_numpy(bool, na_value=False)


# Kineto spans a GPU step range over the device work its CPU step launched, so the two hold the
# same work. GPU step ranges holding less than this share of it are not the steps: ROCm traces have
# been seen with GPU ProfilerStep copies of 16 µs for 16 ms steps (12 of 3,653 activities in steps),
# and with one that ends after 8 of the 16 kernels its step launched.
_GPU_STEP_MIN_SHARE = 0.9


def _steps(trace: Trace, steps: pd.DataFrame, pattern: re.Pattern[str]) -> tuple[np.ndarray, pd.DataFrame, str]:
    """Each event's row in the chosen step table (-1: none), that table, and where it came from."""
    k = trace.events
    has_launch = k["launch_ns"].notna().to_numpy()
    gpu_steps = steps[steps["domain"] == "gpu"].reset_index(drop=True)
    cpu_steps = steps[steps["domain"] == "cpu"].reset_index(drop=True)
    by_launch = np.full(len(k), -1, dtype=np.int32)
    if len(cpu_steps):
        _warn_processes_merged(trace, cpu_steps, pattern)
        by_launch = _assign(k, kernel_points, cpu_steps, ANY_LANE)
        early = _launched_before_window(k, has_launch)
        by_launch[early] = -1
        if early.any():
            trace.meta["launched_before_window"] = int(early.sum())
            trace.warnings.append(
                f"{int(early.sum()):,} device activities were launched before the profiling window "
                "(their correlation ids precede every recorded launch): they belong to no step"
            )
    if len(gpu_steps):
        by_gpu = _assign(k, start_points, gpu_steps, GPU_LANE)
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
    code = _assign(k, start_points, gpu_ann, GPU_LANE)  # into gpu_ann's names, then cpu_ann's
    if len(cpu_ann):
        idx = _assign(k, kernel_points, cpu_ann, THREAD_LANE)
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
        missing = step_idx < 0
        numbers = numbers.astype(narrowest(min(0, int(numbers.min())), int(numbers.max())))
        values = numbers[np.maximum(step_idx, 0)]
        values[missing] = 0
        trace.events["step"] = pd.arrays.IntegerArray(values, missing)
    trace.meta["step_source"] = source
    trace.meta["step_pattern"] = pattern.pattern
    trace.events["annotation"] = _annotations(k, annotations)
    return trace
