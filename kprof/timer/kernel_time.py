"""Device time from CUPTI activity records: per graph replay, the busy time of its kernels (and
copies, memsets), read through the PyTorch profiler (Kineto).

Why: CUDA events around ``graph.replay()`` also time the graph's launch on the device (2.2–3.8 µs
on an H200), and that part differs between two captures of the same work: on a 16 µs kernel two
captures came out 0.3% apart in 5 of 8 repetitions, where the activity records of the same replays
held 0 in 8 of 8. The gaps between the kernels of one replay differ between captures as well (a
copy followed by a one-cycle kernel: 1.4% on 7 µs, in both timers), so they are not counted: the
time is the union of the replay's activity intervals, what nsys and HTA call kernel time. A lever
whose gain is a launch gap it removes shows under ``--timer events`` only
(docs/benchmarks.md, "Where the A/A difference of small kernels comes from"). Kernel times of two
captures still differ, by less (SD 0.3% over 12 captures of a 6 µs copy): the timer recaptures
every round (kprof.timer.cuda) so that this is noise between rounds, not a bias of a leg.

The round is enqueued as with events — flush, replay, flush, replay … — under the profiler; every
activity carries the correlation id of the launch that issued it (all of a graph's kernels share
the replay's), so the launches' groups, ordered by start, alternate flush and replay.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kprof.timer.protocol import Item

KERNEL_TIME_LABEL = "cuda-kernel-time (CUPTI activity records: busy time of each replay, cold L2)"
EVENT_OVERHEAD_SHARE = 0.01  # kernel times are used where the event overhead exceeds 1% of the time
TIMER_MODES = ("auto", "events", "kernel-time")


class MissingActivity(RuntimeError):
    """The profiler returned a different number of launches than were enqueued (records dropped)."""


def busy_ns(intervals: list[tuple[int, int]]) -> int:
    """Length of the union of [start, end) intervals: overlapping activities count once."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start >= reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def replay_busy(activities: Iterable[tuple[int, int, int]], launches: int) -> list[float]:
    """(correlation id, start ns, end ns) of every device activity of a round → the busy time (ns)
    of each replay, in enqueue order. ``launches`` flush/replay pairs were enqueued."""
    groups: dict[int, list[tuple[int, int]]] = {}
    for corr, start, end in activities:
        groups.setdefault(corr, []).append((start, end))
    ordered = sorted(groups.values(), key=min)
    if len(ordered) != 2 * launches:
        raise MissingActivity(f"{len(ordered)} launches in the activity records, {2 * launches} enqueued")
    return [float(busy_ns(g)) for g in ordered[1::2]]


def device_activities(prof: Any) -> list[tuple[int, int, int]]:
    """Kernels, copies and memsets of a finished profiler, without user-annotation ranges."""
    out = []
    for e in prof.profiler.kineto_results.events():
        if e.device_type().name == "CUDA" and not e.is_user_annotation():
            out.append((e.correlation_id(), e.start_ns(), e.start_ns() + e.duration_ns()))
    return out


def time_round_kernels(
    replays: dict[Item, Callable[[], None]], flush: Callable[[], None], items: Sequence[Item], samples: int
) -> dict[Item, list[float]]:
    """``samples`` cold replays of each item, in order, under the profiler: each replay's kernel time (ns)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for item in items:
            for _ in range(samples):
                flush()
                replays[item]()
        torch.cuda.synchronize()
    busy = replay_busy(device_activities(prof), len(items) * samples)
    out: dict[Item, list[float]] = {}
    for i, item in enumerate(items):
        out.setdefault(item, []).extend(busy[i * samples : (i + 1) * samples])
    return out


def kernel_time_below_ns(event_overhead_ns: float) -> float:
    """The size under which kernel times are used: where the event overhead is over 1% of the time."""
    return max(event_overhead_ns, 0.0) / EVENT_OVERHEAD_SHARE


def _kernel_time_below(timer_info: dict[str, Any]) -> float | None:
    """The size rule the start-of-run self-check stored (None when it did not measure one)."""
    return ((timer_info.get("self_checks") or {}).get("event_overhead") or {}).get("kernel_time_below_ns")


def run_timer_label(mode: str, events_label: str, timer_info: dict[str, Any]) -> str:
    """What a run's header says: its one timer, or the size rule that splits its cases between two."""
    if mode == "events" or not events_label.startswith("cuda"):
        return events_label
    if mode == "kernel-time":
        return KERNEL_TIME_LABEL
    below = _kernel_time_below(timer_info)
    if below is None:
        return f"{events_label}; no kernel times (the event overhead was not measured)"
    return _split_label(f"{below / 1e3:.0f}", events_label)


def _split_label(threshold_us: str, events_label: str) -> str:
    return f"{KERNEL_TIME_LABEL} for cases under {threshold_us} µs, {events_label} above"


_SPLIT_LABEL = re.compile(rf"{re.escape(KERNEL_TIME_LABEL)} for cases under (\d+) µs, (.+) above")


def merged_timer_labels(labels: Iterable[str]) -> list[str]:
    """The distinct timer labels of several runs, those that differ only in the size rule's threshold
    (each run measures its own event overhead at start) told once with the thresholds' range: ten
    fresh runs a side would otherwise repeat one sentence ten times."""
    merged: dict[tuple[str, bool], list[int]] = {}  # (label, or a size rule's events label; a rule?) → thresholds
    for label in labels:
        rule = _SPLIT_LABEL.fullmatch(label)
        thresholds = merged.setdefault((label, False) if rule is None else (rule[2], True), [])
        if rule is not None:
            thresholds.append(int(rule[1]))
    return [
        _split_label(f"{min(t)}–{max(t)}" if min(t) < max(t) else f"{t[0]}", key) if rule else key
        for (key, rule), t in merged.items()
    ]


def wants_kernel_time(
    mode: str, t_event_ns: float, timer_info: dict[str, Any], device: str, graphs: bool = True
) -> bool:
    """Whether a case whose baseline takes ``t_event_ns`` under events is timed by kernel times.
    ``auto`` needs the start-of-run measurement of the event overhead; without it (a failed
    self-check, an AMD GPU where it is not run) events stay. Eager calls (``graphs`` False) stay on
    events: their activity records cannot be told apart call by call (a call's own syncs and copies
    are among them)."""
    if device == "cpu" or mode == "events" or not graphs:
        return False
    if mode == "kernel-time":
        return True
    below = _kernel_time_below(timer_info)
    return below is not None and t_event_ns < below
