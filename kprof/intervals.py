"""Interval arithmetic over integer-ns arrays (numpy only; knows nothing of traces)."""

from __future__ import annotations

import numpy as np


def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length covered by the union of [start, end) intervals (overlaps counted once)."""
    if len(starts) == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    s = np.asarray(starts, dtype=np.int64)[order]
    e = np.asarray(ends, dtype=np.int64)[order]
    reach = np.maximum.accumulate(e)
    # A new merged segment begins where a start lies beyond everything reached so far.
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    seg_start = s[new]
    seg_idx = np.flatnonzero(new)
    seg_end = np.append(reach[seg_idx[1:] - 1], reach[-1])
    return int((seg_end - seg_start).sum())


def innermost_containing(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each point, the index of the shortest range [start, end] holding it, or -1.

    Ranges are visited longest first, so a nested (shorter) range overwrites its parent.
    """
    points = np.asarray(points, dtype=np.int64)
    out = np.full(len(points), -1, dtype=np.int64)
    if len(points) == 0 or len(starts) == 0:
        return out
    order = np.argsort(points, kind="stable")
    sorted_points = points[order]
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    lo = np.searchsorted(sorted_points, starts, side="left")
    hi = np.searchsorted(sorted_points, ends, side="right")
    longest_first = np.argsort(-(ends - starts), kind="stable")
    for r in longest_first[hi[longest_first] > lo[longest_first]].tolist():
        out[order[lo[r] : hi[r]]] = r
    return out


def union_length_by_group(groups: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> dict[int, int]:
    """``union_length`` for every group at once: {group: covered length}. Groups are int64 keys.

    Intervals sorted by (group, start) each add what they reach beyond every earlier interval of
    their group: ``max(0, end − max(start, reach so far))``. That sum needs only the reach carried
    from one slice to the next, so the work is done a slice at a time: beside the sort order, memory
    stays a slice's, not several int64 copies of a 10-million-kernel trace."""
    if len(starts) == 0:
        return {}
    groups, starts, ends = (np.asarray(a, dtype=np.int64) for a in (groups, starts, ends))
    order = np.lexsort((starts, groups))
    totals: dict[int, int] = {}
    carried: tuple[int, int] | None = None  # the last group of the previous slice and its reach
    for at in range(0, len(order), _SLICE):
        rows = order[at : at + _SLICE]
        g, s, e = groups[rows], starts[rows], ends[rows]
        before = _reach_before(g, e, carried)
        gained = np.maximum(e - np.maximum(s, before), 0)
        first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        for key, total in zip(g[first].tolist(), np.add.reduceat(gained, first).tolist()):
            totals[key] = totals.get(key, 0) + total
        carried = (int(g[-1]), int(max(before[-1], e[-1])))
    return totals


#: Intervals worked on at a time by ``union_length_by_group``.
_SLICE = 1 << 16
_NOTHING = np.iinfo(np.int64).min


def _reach_before(g: np.ndarray, e: np.ndarray, carried: tuple[int, int] | None) -> np.ndarray:
    """For each interval of a slice sorted by (group, start), the furthest end of the earlier
    intervals of its group (``carried`` continues a group from the previous slice); int64's minimum
    for a group's first interval. One running maximum over the slice, each group lifted above the
    one before so that it restarts; group by group where the lift would not fit in int64."""
    starts_group = np.r_[True, g[1:] != g[:-1]]
    group = np.cumsum(starts_group) - 1
    low, span = int(e.min()), int(e.max()) - int(e.min()) + 1
    running = np.empty(len(e), np.int64)
    if span * (int(group[-1]) + 1) < 1 << 62:
        lift = group * span
        running[:] = np.maximum.accumulate(e - low + lift) - lift + low
    else:
        for first, last in zip(*_runs(starts_group)):
            running[first:last] = np.maximum.accumulate(e[first:last])
    reach = np.empty(len(e), np.int64)
    reach[1:] = running[:-1]
    reach[starts_group] = _NOTHING
    if carried is not None and carried[0] == g[0]:
        same = group == 0
        reach[same] = np.maximum(reach[same], carried[1])
    return reach


def _runs(starts_run: np.ndarray) -> tuple[list[int], list[int]]:
    """Where each run begins and ends (exclusive), given where runs start."""
    first = np.flatnonzero(starts_run)
    return first.tolist(), [*first[1:].tolist(), len(starts_run)]
