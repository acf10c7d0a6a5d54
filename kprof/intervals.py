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
    """``union_length`` for every group at once: {group: covered length}. Groups are int64 keys."""
    if len(starts) == 0:
        return {}
    g = np.asarray(groups, dtype=np.int64)
    order = np.lexsort((np.asarray(starts), g))
    g, s, e = g[order], np.asarray(starts, dtype=np.int64)[order], np.asarray(ends, dtype=np.int64)[order]
    boundary = np.empty(len(g), dtype=bool)
    boundary[0] = True
    boundary[1:] = g[1:] != g[:-1]
    # Running maximum of ends that restarts at each group: offset each group above the previous one.
    group_id = np.cumsum(boundary) - 1
    lift = (e.max() - s.min() + 1) * group_id
    reach = np.maximum.accumulate(e - s.min() + lift) + s.min() - lift
    new = boundary.copy()
    new[1:] |= s[1:] > reach[:-1]
    seg_idx = np.flatnonzero(new)
    seg_end = np.append(reach[seg_idx[1:] - 1], reach[-1])
    lengths = seg_end - s[seg_idx]
    keys, inverse = np.unique(g[seg_idx], return_inverse=True)
    totals = np.bincount(inverse, weights=lengths).astype(np.int64)
    return dict(zip(keys.tolist(), totals.tolist()))
