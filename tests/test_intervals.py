from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kprof.intervals import innermost_containing, union_length, union_length_by_group

intervals = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 50)), max_size=40)


@given(intervals)
def test_union_length_equals_covered_unit_cells(spans: list[tuple[int, int]]) -> None:
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    ends = starts + np.array([d for _, d in spans], dtype=np.int64)
    covered = set()
    for s, e in zip(starts, ends):
        covered.update(range(int(s), int(e)))
    assert union_length(starts, ends) == len(covered)


@given(intervals, st.lists(st.integers(0, 260), max_size=30))
def test_innermost_is_the_shortest_holding_range(spans: list[tuple[int, int]], points: list[int]) -> None:
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    ends = starts + np.array([d for _, d in spans], dtype=np.int64)
    got = innermost_containing(np.array(points, dtype=np.int64), starts, ends)
    for p, idx in zip(points, got):
        holding = [i for i in range(len(spans)) if starts[i] <= p <= ends[i]]
        if not holding:
            assert idx == -1
        else:
            assert idx in holding
            assert ends[idx] - starts[idx] == min(ends[i] - starts[i] for i in holding)


@given(intervals, st.lists(st.integers(0, 3), max_size=40))
def test_grouped_union_equals_union_per_group(spans: list[tuple[int, int]], group_choice: list[int]) -> None:
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    ends = starts + np.array([d for _, d in spans], dtype=np.int64)
    groups = np.array([group_choice[i % len(group_choice)] if group_choice else 0 for i in range(len(spans))])
    got = union_length_by_group(groups, starts, ends)
    for key in set(groups.tolist()):
        sel = groups == key
        assert got[key] == union_length(starts[sel], ends[sel])
    assert set(got) == set(groups.tolist())


_WIDE_SPANS = st.lists(
    st.tuples(st.one_of(st.integers(0, 50), st.integers(0, 2**61)), st.integers(0, 30)), min_size=1, max_size=40
)


@settings(max_examples=300, deadline=None)
@given(_WIDE_SPANS, st.lists(st.integers(0, 3), min_size=1, max_size=40), st.integers(1, 7))
def test_grouped_union_is_the_same_a_slice_at_a_time(
    spans: list[tuple[int, int]], group_choice: list[int], slice_rows: int
) -> None:
    """Worked a few intervals at a time, the reach carried from slice to slice; with times far
    apart too, where one running maximum over lifted groups would overflow int64."""
    import kprof.intervals as intervals

    starts = np.array([s for s, _ in spans], dtype=np.int64)
    ends = starts + np.array([d for _, d in spans], dtype=np.int64)
    groups = np.array([group_choice[i % len(group_choice)] for i in range(len(spans))])
    original = intervals._SLICE
    intervals._SLICE = slice_rows
    try:
        got = union_length_by_group(groups, starts, ends)
    finally:
        intervals._SLICE = original
    assert got == {key: union_length(starts[groups == key], ends[groups == key]) for key in set(groups.tolist())}
