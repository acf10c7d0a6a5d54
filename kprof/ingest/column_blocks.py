"""Integer columns gathered a piece at a time and kept in compact blocks until the table is built.

Readers meet a trace a piece at a time (a decoded buffer, a database chunk); holding each piece's
columns as int64 beside a mask costs 9 bytes a value where ids, sizes and counts need one or two.
``Chunks`` keeps a column in blocks of the narrowest width its values allow, each block big enough to
have its own mapping, so that it goes back to the system the moment it is copied into the table.
numpy only: the Kineto decoder imports this module in workers that never load pandas.
"""

from __future__ import annotations

import numpy as np

#: Marks a missing integer in an int64 piece (int64's own minimum, which no trace field holds).
NULL_INT = np.iinfo(np.int64).min

_NARROW = (np.int8, np.int16, np.int32)


def _compact(values: np.ndarray) -> np.ndarray:
    """An int64 piece (NULL_INT for missing) in the narrowest type whose minimum lies below every
    value it holds: that minimum then stands for NULL_INT. Other dtypes are kept as they are."""
    if values.dtype != np.int64 or not len(values):
        return values
    present = values != NULL_INT
    if not present.any():
        return np.full(len(values), np.iinfo(np.int8).min, dtype=np.int8)
    lo, hi = int(values.min(where=present, initial=np.iinfo(np.int64).max)), int(values.max())
    for width in _NARROW:
        info = np.iinfo(width)
        if info.min < lo and hi <= info.max:
            return np.where(present, values, info.min).astype(width)
    return values


#: Rows per kept block: 128 KiB and more in any width, so that each block has a mapping of its own
#: (``memory.return_freed_columns``) and goes back to the system the moment it is freed. Pieces of a
#: few thousand rows freed into the heap stayed in the process beside the table built from them.
BLOCK_ROWS = 1 << 17


class Chunks:
    """One column kept a block at a time. An int64 column (NULL_INT for missing) is kept in each block
    as narrow as its values allow: ids, sizes and durations of a trace of tiny kernels take a byte or
    two, not eight. Pieces are copied into one staging buffer, reused, until they fill a block: pieces
    of a few thousand rows kept until then would each take the heap's memory, and leave it in holes."""

    def __init__(self) -> None:
        self._blocks: list[np.ndarray] = []
        self._buffer: np.ndarray | None = None
        self._filled = 0
        self._dtype: np.dtype | None = None

    def append(self, values: np.ndarray) -> None:
        if self._dtype is None:
            self._dtype = values.dtype
        elif values.dtype != self._dtype:  # a copy into the buffer would cast, and could wrap
            raise TypeError(f"a {values.dtype} piece in a column of {self._dtype}")
        at = 0
        while at < len(values):
            if self._buffer is None:
                self._buffer = np.empty(BLOCK_ROWS, dtype=self._dtype)
            rows = min(len(values) - at, len(self._buffer) - self._filled)
            self._buffer[self._filled : self._filled + rows] = values[at : at + rows]
            self._filled += rows
            at += rows
            if self._filled == len(self._buffer):
                self._flush()

    def _flush(self) -> None:
        if self._buffer is None or not self._filled:
            return
        block = _compact(self._buffer[: self._filled])
        self._blocks.append(block.copy() if np.shares_memory(block, self._buffer) else block)
        self._filled = 0

    def __len__(self) -> int:
        return sum(len(p) for p in self._blocks) + self._filled

    def take_with_nulls(self) -> tuple[np.ndarray, np.ndarray]:
        """The whole int64 column as values in the widest of its blocks' types (0 where missing) and
        whether each is missing: never widened to int64 where its values are small. The chunks are
        empty afterwards."""
        self._flush()
        self._buffer = None
        blocks, self._blocks = self._blocks, []
        dtype = max((b.dtype for b in blocks), key=lambda t: t.itemsize, default=np.dtype(np.int8))
        n = sum(len(b) for b in blocks)
        values, missing = np.empty(n, dtype=dtype), np.empty(n, dtype=bool)
        at = 0
        while blocks:
            block = blocks.pop(0)
            rows = slice(at, at + len(block))
            np.equal(block, np.iinfo(block.dtype).min, out=missing[rows])  # NULL_INT, or the block's null
            values[rows] = block
            at += len(block)
        values[missing] = 0
        return values, missing

    def take(self) -> np.ndarray:
        """The whole column in the dtype it was given (int64 with NULL_INT restored), each block
        freed as it is copied in: the chunks are empty afterwards."""
        self._flush()
        self._buffer = None
        blocks, self._blocks = self._blocks, []
        dtype = self._dtype or np.dtype(np.int64)
        out = np.empty(sum(len(p) for p in blocks), dtype=dtype)
        at = 0
        while blocks:
            block = blocks.pop(0)
            piece = out[at : at + len(block)]
            piece[:] = block
            if dtype == np.int64 and block.dtype != np.int64:
                piece[block == np.iinfo(block.dtype).min] = NULL_INT
            at += len(block)
        return out
