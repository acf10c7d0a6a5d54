"""Column blocks: integer columns gathered a piece at a time, held narrow, given back exactly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kprof.ingest import column_blocks

_INT64 = st.one_of(st.just(column_blocks.NULL_INT), st.integers(-(2**63) + 1, 2**63 - 1), st.integers(-300, 300))


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(st.lists(_INT64, max_size=6), max_size=8), block=st.integers(1, 7))
def test_chunks_give_back_every_value_and_null_across_narrowed_blocks(pieces: list[list[int]], block: int) -> None:
    """Blocks are stored in the narrowest type whose minimum stands for a null: whatever the mix of
    small values, extremes and nulls, and wherever the block boundaries fall, ``take`` returns the
    int64 column it was given, and leaves the chunks empty."""
    original = column_blocks.BLOCK_ROWS
    column_blocks.BLOCK_ROWS = block
    try:
        chunks = column_blocks.Chunks()
        for piece in pieces:
            chunks.append(np.array(piece, dtype=np.int64))
        assert len(chunks) == sum(map(len, pieces))
        taken = chunks.take()
    finally:
        column_blocks.BLOCK_ROWS = original
    assert taken.dtype == np.int64 and taken.tolist() == [v for p in pieces for v in p]
    assert len(chunks) == 0 and len(chunks.take()) == 0


def test_chunks_keep_blocks_narrow_and_other_dtypes_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(column_blocks, "BLOCK_ROWS", 4)
    ids = column_blocks.Chunks()
    for piece in ([1, 2], [3, column_blocks.NULL_INT], [70_000, 5]):
        ids.append(np.array(piece, dtype=np.int64))
    assert [b.dtype for b in ids._blocks] == [np.int8]  # the first four rows, one null among them
    kinds = column_blocks.Chunks()
    kinds.append(np.array([0, 2], dtype=np.int8))
    flags = column_blocks.Chunks()
    flags.append(np.array([True, False]))
    assert ids.take().tolist() == [1, 2, 3, column_blocks.NULL_INT, 70_000, 5]
    assert kinds.take().dtype == np.int8 and flags.take().dtype == bool


_AXIS = st.one_of(st.none(), st.integers(0, 2**40), st.integers(0, 300))


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(_AXIS, _AXIS), max_size=12))
def test_grids_in_blocks_are_ceil_divisions_with_nulls_and_narrow(rows: list[tuple[int | None, int | None]]) -> None:
    """A work-item grid in blocks: ceil(grid / block), null where either is unknown or the block
    size is 0, whatever width the answer is held in."""
    import pandas as pd

    from kprof.ingest.normalize import blocks

    grid = pd.Series([g for g, _ in rows], dtype="Int64")
    block = pd.Series([b for _, b in rows], dtype="Int64")
    got = blocks(grid, block).astype(object).where(lambda s: s.notna(), None).tolist()
    expected = [None if g is None or not b else -(-g // b) for g, b in rows]
    assert got == expected


_KEY = st.one_of(st.none(), st.integers(0, 5), st.integers(-3, 2**40))


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(_KEY, _KEY), max_size=10),
    table=st.lists(st.tuples(_KEY, _KEY), max_size=10),
    parts=st.sampled_from([1, 2]),
    sort_table=st.booleans(),
)
def test_launch_lookup_finds_the_last_row_with_the_whole_key(
    rows: list[tuple[int | None, int | None]],
    table: list[tuple[int | None, int | None]],
    parts: int,
    sort_table: bool,
) -> None:
    """Each row's last table row with an equal key, -1 where none or where a part is missing: by the
    packed sorted search (small non-negative parts, sorted or not) and by the index lookup it falls
    back to (negative or wide parts) alike."""
    import pandas as pd

    from kprof.ingest.normalize import last_matches

    if sort_table:
        table = sorted(table, key=lambda r: tuple(-1 if v is None else v for v in r))
    keys = [pd.Series([r[i] for r in rows], dtype="Int64") for i in range(parts)]
    table_keys = [pd.Series([r[i] for r in table], dtype="Int64") for i in range(parts)]
    expected = []
    for row in rows:
        key = row[:parts]
        hits = [j for j, t in enumerate(table) if None not in key and t[:parts] == key]
        expected.append(hits[-1] if hits else -1)
    assert last_matches(keys, table_keys).tolist() == expected
