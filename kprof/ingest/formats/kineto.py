"""PyTorch profiler (Kineto) Chrome-trace JSON, CUDA and ROCm builds, plain or gzipped: the trace
format. The file is decoded piece by piece into compact columns by kprof.ingest.formats.kineto_stream
(numpy and msgspec only); here those columns become the normalized tables: activities joined to
their launches, names demangled, times on the file's base.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kprof.errors import KprofInputError
from kprof.ingest import integrity
from kprof.ingest.column_blocks import NULL_INT, Chunks
from kprof.ingest.formats.kineto_events import (
    EXACT,
    FAST,
    GPU_KIND_NAMES,
    DistributedInfo,
    Document,
    EventBuffer,
    InexactTimes,
    TimeOutOfRange,
    decode_optional,
)
from kprof.ingest.formats.kineto_stream import collect
from kprof.ingest.memory import MemoryGuard
from kprof.ingest.names import demangle_all, short_name
from kprof.ingest.normalize import trace_meta
from kprof.ingest.ranks import device_of_range_processes, ranks_from_process_names, ranks_of, split_by_rank
from kprof.ingest.registry import Probe, TraceFormat
from kprof.ingest.source import Progress
from kprof.schema import KERNEL_EVENTS
from kprof.trace import Trace, categorical, events_table, narrowed, range_table


def load(
    path: Path,
    rank: int | None = None,
    recover: bool | None = None,
    on_progress: Progress | None = None,
    memory: MemoryGuard | None = None,
    scan_threads: int | None = None,
) -> Trace | list[Trace]:
    """Read one Kineto trace. ``recover`` (default: on for Kineto's unfinished ``.tmp`` files) keeps
    every complete event of a truncated file and records a warning instead of failing. A file
    holding several ranks gives one trace per rank; ``memory`` refuses one that cannot fit."""
    if recover is None:
        recover = path.name.endswith(".tmp")
    progress = _told(on_progress, memory)
    was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived objects: the cyclic GC would only rescan them
    try:
        try:
            return _build(path, collect(path, recover, FAST, progress, memory, scan_threads), rank)
        except InexactTimes:
            return _build(path, collect(path, recover, EXACT, progress, memory, scan_threads), rank)
    except TimeOutOfRange:
        raise KprofInputError(path, "a ts or dur value is out of range (beyond int64 nanoseconds)") from None
    finally:
        if was_enabled:
            gc.enable()


def _told(on_progress: Progress | None, memory: MemoryGuard | None) -> Progress | None:
    """One progress callback for the caller's display and the memory guard's projection."""
    if memory is None:
        return on_progress

    def progress(done: int, total: int) -> None:
        memory.position(done, total)
        if on_progress is not None:
            on_progress(done, total)

    return progress


def _nullable(values: np.ndarray | tuple[np.ndarray, np.ndarray], name: str) -> pd.arrays.IntegerArray:
    """The events table's column ``name`` from int64 values (NULL_INT for missing), or values and
    whether each is missing: null where missing or beyond the schema's width for it, as narrow as its
    values allow."""
    data, missing = values if isinstance(values, tuple) else (values, values == NULL_INT)
    bits = KERNEL_EVENTS.field(name).type.bit_width
    if bits < 64 and data.dtype.itemsize * 8 > bits:
        info = np.iinfo(f"int{bits}")
        missing = missing | (data < info.min) | (data > info.max)  # a value the column cannot hold is unknown
    if missing.any() and data[missing].any():
        data = np.where(missing, 0, data)
    return narrowed(pd.arrays.IntegerArray(data, missing), name)


REUSED = "have a correlation id that names more than one launch call (ids reused)"


def _launch_rows(
    gpu_key: np.ndarray, launch_key: np.ndarray, by_rank: tuple[np.ndarray, np.ndarray, np.ndarray] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each activity's launching API call, by correlation id (the last call wins on reuse): whether
    it has one, its row among the launches, and whether its id names more than one call."""
    if by_rank is not None:  # each rank numbers its own correlation ids
        gpu_key, launch_key = _rank_keyed(gpu_key, by_rank[0]), _rank_keyed(launch_key, by_rank[1])
    keep = None  # the row of each sorted id among the launches, where they are not in order already
    corr_sorted = launch_key
    reused_ids = np.zeros(0, dtype=launch_key.dtype)
    if not np.all(launch_key[1:] > launch_key[:-1]):  # the usual file's ids rise with each launch
        ids, last, calls = np.unique(launch_key[::-1], return_index=True, return_counts=True)
        keep = len(launch_key) - 1 - last
        reused_ids = ids[(calls > 1) & (ids != NULL_INT)]
        del last, ids, calls
        corr_sorted = launch_key[keep]
    pos = np.searchsorted(corr_sorted, gpu_key)
    np.minimum(pos, max(len(corr_sorted) - 1, 0), out=pos)
    found = (gpu_key != NULL_INT) & (len(corr_sorted) > 0)
    if len(corr_sorted):
        found &= corr_sorted[pos] == gpu_key
    reused = found & np.isin(gpu_key, reused_ids) if len(reused_ids) else np.zeros(len(gpu_key), dtype=bool)
    return found, keep[pos] if keep is not None and len(keep) else pos, reused


def _grids_and_blocks(gpu: dict[str, Chunks], work_items: np.ndarray) -> dict[str, pd.arrays.IntegerArray]:
    """Grid and block columns; a grid given in work-items (``work_items``: HIP's extended launches)
    is divided by its block, rounding up."""
    cols = {}
    for axis in "xyz":
        grid, no_grid = gpu.pop("grid_" + axis).take_with_nulls()
        block, no_block = gpu.pop("block_" + axis).take_with_nulls()
        convert = work_items & ~no_grid & ~no_block & (block > 0)
        if convert.any():
            grid = grid.astype(np.int64)  # a grid in work-items can be wider than the grid in blocks
            grid[convert] = -(-grid[convert] // block[convert])
        cols["grid_" + axis] = _nullable((grid, no_grid), "grid_" + axis)
        cols["block_" + axis] = _nullable((block, no_block), "block_" + axis)
    return cols


def _from_launch(values: np.ndarray, found: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """A launch column's value for each activity (NULL_INT where it has no launch)."""
    return np.where(found, values[idx], NULL_INT) if len(values) else np.full(len(found), NULL_INT)


def _names(c: EventBuffer) -> dict[str, pd.Categorical]:
    """Each activity's full (demangled) name, short name and kind. Copies and memsets keep their
    names; kernels get the short C++-less form."""
    codes = c.gpu_name.take()
    raw_names = list(c.names)
    demangled = demangle_all(raw_names)
    full_names = [demangled.get(n, n) for n in raw_names]
    kinds = pd.Categorical.from_codes(c.gpu_kind.take(), categories=list(GPU_KIND_NAMES))
    is_kernel_name = np.zeros(len(raw_names), dtype=bool)
    is_kernel_name[np.unique(codes[np.asarray(kinds.codes == 0)])] = True
    short_names = [short_name(f) if k else f for f, k in zip(full_names, is_kernel_name)]
    return {
        "name": categorical(codes, full_names),
        "short_name": categorical(codes, short_names),
        "kind": kinds,
    }


def _build(path: Path, c: EventBuffer, rank: int | None) -> Trace | list[Trace]:
    top = c.top or Document()
    base = top.baseTimeNanoseconds or 0
    warnings: list[str] = []
    if c.truncated:
        warnings.append("file is truncated: kept every complete event, dropped the unfinished one")
    if c.skipped:
        warnings.append(f"{c.skipped} GPU or range events without ts/dur, or not complete events (ph X), were skipped")
    if not c.gpu_rows:
        warnings.append(_no_device_activity(c))
    dist = decode_optional(DistributedInfo, top.distributedInfo)
    file_rank = dist.rank if dist is not None else None
    if rank is None:
        rank = file_rank if file_rank is not None else 0

    # Each column is joined, converted and placed in the table one at a time, its pieces freed as
    # it goes: at no point are the pieces and the table, or two int64 copies of all columns, held.
    gpu, launch = c.gpu_ints, c.launch
    gpu_pid, range_pid = gpu.pop("pid").take(), np.array([r[2] for r in c.ranges], dtype=np.int64)
    by_rank = _ranks_in_file(c, gpu_pid, launch.pop("pid").take(), range_pid, warnings)
    correlation = gpu.pop("correlation").take()
    found, idx, reused = _launch_rows(correlation, launch.pop("correlation").take(), by_rank)
    cols: dict[str, Any] = {"correlation": _nullable(correlation, "correlation")}
    del correlation
    cols["launch_ns"] = _nullable(_from_launch(launch.pop("ts").take() + base, found, idx), "launch_ns")
    cols["launch_tid"] = _nullable(_from_launch(launch.pop("tid").take(), found, idx), "launch_tid")
    launch_shared = _from_launch(launch.pop("shared").take(), found, idx)
    launch_items = launch.pop("work_items").take()
    work_items = found & (launch_items[idx] if len(launch_items) else False)
    del found, idx, launch_items
    cols.update(_grids_and_blocks(gpu, work_items))
    del work_items
    shared = gpu.pop("shared").take()
    from_launch = shared == NULL_INT
    shared[from_launch] = launch_shared[from_launch]
    del launch_shared, from_launch
    cols["shared_mem_bytes"] = _nullable(shared, "shared_mem_bytes")
    del shared
    cols["registers"] = _nullable(gpu.pop("registers").take_with_nulls(), "registers")
    cols.update(_names(c))
    device = gpu.pop("device").take()
    ranges_device = device_of_range_processes(range_pid, gpu_pid, device)
    del gpu_pid
    cols["device"] = _nullable(device, "device")
    del device
    cols["stream"] = _nullable(gpu.pop("stream").take_with_nulls(), "stream")
    n = len(cols["stream"])
    cols["rank"] = _nullable(by_rank[0] if by_rank is not None else np.full(n, rank, dtype=np.int64), "rank")
    start = gpu.pop("ts").take() + base
    dur = gpu.pop("dur").take()  # a negative one is warned about and counted as 0 (ingest.load)
    cols["start_ns"], cols["end_ns"], cols["dur_ns"] = (
        _nullable(start, "start_ns"),
        _nullable(start + dur, "end_ns"),
        _nullable(dur, "dur_ns"),
    )
    del start, dur
    events = events_table(cols)
    del cols

    times = np.concatenate(c.range_times, axis=1) if c.range_times else np.zeros((2, 0), dtype=np.int64)
    r_start = times[0] + base
    rcols = {
        "name": [r[0] for r in c.ranges],
        "start_ns": r_start,
        "end_ns": r_start + np.maximum(times[1], 0),
        "domain": [r[1] for r in c.ranges],
        "device": np.where(np.array([r[1] == "gpu" for r in c.ranges], dtype=bool), ranges_device, -1),
        "pid": [r[2] for r in c.ranges],
        "tid": [r[3] for r in c.ranges],
    }
    meta = trace_meta(
        path,
        "kineto",
        rank,
        "unix_ns (Kineto: CPU and CUPTI/roctracer timestamps in one epoch domain)",
        ts_generation="relative to baseTimeNanoseconds" if top.baseTimeNanoseconds else "epoch microseconds",
        ts_decoding=_ts_decoding(c),
        world_size=dist.world_size if dist is not None else None,
    )
    if file_rank is not None:
        meta["rank_source"] = "distributedInfo"
    trace = Trace(events=events, ranges=range_table(rcols), meta=meta, warnings=warnings)
    pieces = [trace] if by_rank is None else split_by_rank(trace, by_rank[2], "process names (RANK n)")
    ranks = events["rank"].to_numpy("int64")
    for piece in pieces if reused.any() else []:
        mine = reused[ranks == piece.meta["rank"]] if by_rank is not None else reused
        if mine.any():
            integrity.record(piece, integrity.problem_of(piece.events, mine, REUSED, "each joined to the last"))
    return trace if by_rank is None else pieces


def _ranks_in_file(
    c: EventBuffer, gpu_pid: np.ndarray, launch_pid: np.ndarray, range_pid: np.ndarray, warnings: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The rank of each activity, launch and range, where the file's process names say which rank
    each process is (``RANK n - GPU``); None for a file of one rank. A file that names some of its
    processes only is read as one rank, with a warning."""
    rank_of_pid = ranks_from_process_names(c.process_names)
    if not rank_of_pid:
        return None
    ranks = [ranks_of(pids, rank_of_pid) for pids in (gpu_pid, launch_pid, range_pid)]
    unnamed = sum(int((r < 0).sum()) for r in ranks)
    if unnamed:
        warnings.append(
            f"the file names {len(set(rank_of_pid.values()))} ranks by process (RANK n), but {unnamed:,} "
            "events lie in processes it names no rank for: read as one rank"
        )
        return None
    return ranks[0], ranks[1], ranks[2]


def _rank_keyed(correlation: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """A correlation id made unique across ranks (rank in the high bits; NULL stays NULL)."""
    keyed = (ranks << 40) + (correlation & ((1 << 40) - 1))
    return np.where(correlation != NULL_INT, keyed, NULL_INT)


def _ts_decoding(c: EventBuffer) -> str:
    """How the times were read: msgspec's (exact decimals, or float64 checked exact to the ns) and,
    for the pieces the compiled scanner read, their decimal digits straight to ns."""
    text = "exact decimal" if c.exact else "float64, checked exact to the ns"
    if not c.pieces_scanned:
        return text
    return f"decimal digits to ns (compiled scanner) in {c.pieces_scanned} pieces, {text} in the rest"


# Host-side categories every profiled program has: naming them would not explain an empty trace.
_HOST_CATEGORIES = {"cpu_op", "python_function", "Trace", "fwdbwd", "ac2g", "cpu_instant_event"}


def _no_device_activity(c: EventBuffer) -> str:
    """Why the tables are empty, in the trace's own terms (launches seen, categories not read)."""
    text = "no CUDA or ROCm device activity (kernel, memcpy, memset) in the trace"
    if c.launch_calls:
        text += f", though it holds {c.launch_calls:,} runtime calls"
    others = sorted(((n, cat) for cat, n in c.other_categories.items() if cat not in _HOST_CATEGORIES), reverse=True)
    if others:
        text += "; it holds " + ", ".join(f"{cat} ({n:,})" for n, cat in others[:3])
    return text + ": every table is empty (kernels are recorded with ProfilerActivity.CUDA)"


def _is_kineto(p: Probe) -> bool:
    return p.json_head is not None


FORMAT = TraceFormat(
    "kineto",
    "Kineto JSON(.gz) from the PyTorch profiler",
    _is_kineto,
    lambda p, o: load(p.path, o.rank, o.recover, o.on_progress, o.memory, o.scan_threads),
)
