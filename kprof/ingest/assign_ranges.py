"""Attach each kernel event to its step and its innermost annotation.

Steps come from ranges whose name matches the step pattern (default ``ProfilerStep#N``). A kernel
belongs to the CPU step range that holds the API call that launched it (the GPU may run step N's
work after the CPU has left ``ProfilerStep#N``), on whatever stream it runs; one whose launch is
not in the trace to the GPU-side step window (``gpu_user_annotation``) of its device it starts in,
else to the CPU step its start lies in; work launched before the profiling window belongs to no
step. The GPU-side copies are held to the launches, and any device time they would misplace said.
Annotations follow the same rule, innermost range first, and CPU ranges only match launches made on
their own thread.
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


DEVICE_LANE = (("device", "device"),)  # a GPU step window holds the work of every stream of its device


def _numbers(idx: np.ndarray, table: pd.DataFrame, pattern: re.Pattern[str]) -> np.ndarray:
    """Rows of a step table (-1: none) as step numbers (-1: none)."""
    if not len(table):
        return np.full(len(idx), -1, dtype=np.int64)
    numbers = _step_numbers(table, pattern)
    return np.where(idx >= 0, numbers[np.maximum(idx, 0)], -1)


def _steps(trace: Trace, steps: pd.DataFrame, pattern: re.Pattern[str]) -> tuple[np.ndarray, str]:
    """Each event's step number (-1: none) and where it came from. An activity belongs to the step
    whose CPU range launched it (correlation); one without a launch in the trace to the GPU step
    window it starts in, on any stream of its device (else to the CPU step its start lies in).
    Kineto's GPU copies of the steps are checked against the launches, by the device time they
    would leave out or misplace: a copy on one stream once dropped the RCCL kernels of another
    (-48% of a step's busy time), a ROCm copy of 16 µs held 12 of a 16 ms step's kernels."""
    k = trace.events
    has_launch = k["launch_ns"].notna().to_numpy()
    gpu_steps = steps[steps["domain"] == "gpu"].reset_index(drop=True)
    cpu_steps = steps[steps["domain"] == "cpu"].reset_index(drop=True)
    by_window = _numbers(_assign(k, start_points, gpu_steps, DEVICE_LANE), gpu_steps, pattern)
    if not len(cpu_steps):
        return by_window, "GPU step ranges" if len(gpu_steps) else "none"
    _warn_processes_merged(trace, cpu_steps, pattern)
    numbers = _numbers(_assign(k, kernel_points, cpu_steps, ANY_LANE), cpu_steps, pattern)
    placed = ~has_launch & (by_window >= 0)
    numbers[placed] = by_window[placed]  # no launch: the device's step window, where there is one
    early = _launched_before_window(k, has_launch)
    numbers[early] = -1
    if early.any():
        trace.meta["launched_before_window"] = int(early.sum())
        trace.warnings.append(
            f"{int(early.sum()):,} device activities were launched before the profiling window "
            "(their correlation ids precede every recorded launch): they belong to no step"
        )
    if not len(gpu_steps):
        unknown = "" if has_launch.all() else " (kernel start time where the launch is unknown)"
        return numbers, "CPU step range holding the launch" + unknown
    return numbers, _checked_gpu_copies(trace, numbers, has_launch, gpu_steps, pattern)


def _checked_gpu_copies(
    trace: Trace, numbers: np.ndarray, has_launch: np.ndarray, gpu_steps: pd.DataFrame, pattern: re.Pattern[str]
) -> str:
    """Where the steps came from, once the GPU step copies (on their own stream) are held to the
    launches: the copies when they place every launched activity as its launch does; else the
    launches, with one line saying how much device time the copies would have left out or moved."""
    k = trace.events
    on_copy = _numbers(_assign(k, start_points, gpu_steps, GPU_LANE), gpu_steps, pattern)
    differ = has_launch & (numbers >= 0) & (on_copy != numbers)
    if not differ.any():
        return "GPU step ranges"
    dur = k["dur_ns"].to_numpy("int64")
    moved_us = float(dur[differ].sum()) / 1e3
    copied = {int(s) for s in gpu_steps["tid"].dropna().to_numpy("int64")}
    streams = k["stream"].to_numpy("int64", na_value=-1)
    elsewhere = differ & ~np.isin(streams, list(copied))
    if elsewhere[differ].all():
        every = len(set(streams[has_launch & (numbers >= 0)].tolist()))
        how = f"GPU step ranges widened to launches on {every} streams"
        why = f"the GPU step ranges lie on stream {', '.join(map(str, sorted(copied)))} only"
    elif (on_copy[differ] < 0).all():
        how, why = "GPU step ranges truncated", "the GPU step ranges end before the work their steps launched"
    else:
        how, why = "GPU step ranges disagree with the launches", "the GPU step ranges place work in other steps"
    trace.warnings.append(
        f"{why}: {int(differ.sum()):,} activities ({moved_us:,.1f} µs of device time) their CPU steps launched "
        "would be left out or moved; steps follow the launches"
    )
    return f"CPU step range holding the launch ({how})"


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
    numbers, source = _steps(trace, steps, pattern)
    if len(steps):
        missing = numbers < 0
        values = np.where(missing, 0, numbers)
        trace.events["step"] = pd.arrays.IntegerArray(
            values.astype(narrowest(min(0, int(values.min())), int(values.max()))), missing
        )
    trace.meta["step_source"] = source
    trace.meta["step_pattern"] = pattern.pattern
    trace.events["annotation"] = _annotations(k, annotations)
    return trace
