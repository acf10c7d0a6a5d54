"""kprof's cache folder, ``$KPROF_CACHE`` (default ``~/.cache/kprof``): revision trees
(kprof.revisions.trees) and arrays that are slow to compute and never change (seeded draws of
kprof.analysis.stats). Everything here can be deleted; it is made again when needed."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kprof.errors import KprofInputError
from kprof.store.atomic import write_bytes


def cache_root() -> Path:
    return Path(os.environ.get("KPROF_CACHE") or Path.home() / ".cache" / "kprof")


def cached_array(name: str, shape: tuple[int, ...], compute: Callable[[], np.ndarray]) -> np.ndarray:
    """``compute()``, kept as ``arrays/NAME.npy`` in the cache: read back when it is there with this
    shape, else computed and written atomically (an unwritable cache only costs the time)."""
    path = cache_root() / "arrays" / f"{name}.npy"
    with contextlib.suppress(OSError, ValueError, EOFError):
        stored = np.load(path, allow_pickle=False)
        if stored.shape == shape and stored.dtype == np.float64:
            return stored
    value = compute()
    buffer = io.BytesIO()
    np.save(buffer, value, allow_pickle=False)
    with contextlib.suppress(KprofInputError):
        write_bytes(buffer.getvalue(), path)
    return value
