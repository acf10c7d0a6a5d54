"""What every trace loader shares: names (demangled, short), grids in blocks, empty range columns
and the meta dict every Trace carries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kprof.ingest.names import demangle_all, short_name

if TYPE_CHECKING:
    import pandas as pd

#: HIP launch APIs whose grid arguments are work-items, not blocks (hip_ext.h)
WORK_ITEM_LAUNCHES = frozenset({"hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel"})
RANGE_COLUMNS = ("name", "start_ns", "end_ns", "domain", "device", "pid", "tid")


def full_and_short(names: Sequence[str], is_kernel: Iterable[bool] | None = None) -> tuple[list[str], list[str]]:
    """Demangled names, and the short names tables show. Copies and memsets (``is_kernel`` false)
    keep their names as the short form."""
    demangled = demangle_all(names)
    full = [demangled.get(n, n) for n in names]
    kernel = [True] * len(full) if is_kernel is None else list(is_kernel)
    return full, [short_name(f) if k else f for f, k in zip(full, kernel)]


def blocks(grid: pd.Series, block: pd.Series) -> pd.Series:
    """A work-item grid in blocks (ceil division); unknown or zero block sizes give null."""
    import pandas as pd  # here, not at import: the Kineto decoder imports this module without pandas

    g = pd.to_numeric(grid, errors="coerce").astype("Int64")
    b = pd.to_numeric(block, errors="coerce").astype("Int64").replace(0, pd.NA)
    return -((-g) // b)


def empty_ranges() -> dict[str, list[Any]]:
    return {k: [] for k in RANGE_COLUMNS}


def cpu_ranges(
    names: Sequence[str], start: Sequence[int], end: Sequence[int], pid: Sequence[int], tid: Sequence[int]
) -> dict[str, Any]:
    """Host-side ranges (roctx markers, ``record_function``): matched to launches on their thread."""
    n = len(names)
    return {
        "name": list(names),
        "start_ns": list(start),
        "end_ns": list(end),
        "domain": ["cpu"] * n,
        "device": [-1] * n,
        "pid": list(pid),
        "tid": list(tid),
    }


def trace_meta(path: Path, fmt: str, rank: int, clock: str, **extra: Any) -> dict[str, Any]:
    """The keys every Trace's meta holds; ``rank_source`` says whether the file named its rank."""
    return {"file": str(path), "format": fmt, "rank": rank, "rank_source": "argument order", "clock": clock, **extra}
