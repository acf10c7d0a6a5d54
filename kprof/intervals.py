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
    for r in np.argsort(-(ends - starts), kind="stable"):
        if hi[r] > lo[r]:
            out[order[lo[r] : hi[r]]] = r
    return out
