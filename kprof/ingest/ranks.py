"""Several ranks in one file: which rank each process is, and the file cut into one trace per rank.

Tools that merge a distributed job's traces into one file (TraceLens writes processes named
``RANK n - GPU`` / ``RANK n - CPU``), and profilers that follow several processes at once (an
Nsight Systems report of ``nsys profile mpirun …``), give kprof one file holding several ranks. Read
as one rank, their steps add four GPUs' work into one span (busy 102 ms in a 47 ms step). Each rank
is cut out here and then read as a file of its own would be: its own steps, annotations and
cross-rank rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from kprof.trace import Trace

_RANK_PROCESS = re.compile(r"^\s*RANK\s+(\d+)\b", re.IGNORECASE)


def ranks_from_process_names(names: Mapping[int, str]) -> dict[int, int]:
    """pid → rank for the processes named ``RANK n …``; empty unless two ranks or more are named."""
    found = {pid: int(m.group(1)) for pid, name in names.items() if (m := _RANK_PROCESS.match(name))}
    return found if len(set(found.values())) > 1 else {}


def ranks_of(pids: np.ndarray, rank_of_pid: Mapping[int, int]) -> np.ndarray:
    """Each pid's rank, -1 where the pid names none."""
    if not len(pids):
        return np.zeros(0, dtype=np.int64)
    keys = np.fromiter(rank_of_pid.keys(), dtype=np.int64, count=len(rank_of_pid))
    values = np.fromiter(rank_of_pid.values(), dtype=np.int64, count=len(rank_of_pid))
    order = np.argsort(keys)
    keys, values = keys[order], values[order]
    pos = np.minimum(np.searchsorted(keys, pids), len(keys) - 1)
    return np.where(keys[pos] == pids, values[pos], -1)


def split_by_rank(trace: Trace, range_ranks: np.ndarray, source: str) -> list[Trace]:
    """One trace per rank of ``trace.events["rank"]``; ``range_ranks`` gives each range's rank.
    Each piece keeps the file's warnings and says in its meta how many ranks the file held."""
    event_ranks = trace.events["rank"].to_numpy("int64")
    ranks = np.unique(np.concatenate([event_ranks, range_ranks]))
    pieces = []
    for rank in ranks.tolist():
        meta = dict(trace.meta, rank=rank, rank_source=source, ranks_in_file=len(ranks))
        events = trace.events[event_ranks == rank].reset_index(drop=True)
        ranges = trace.ranges[range_ranks == rank].reset_index(drop=True)
        pieces.append(Trace(events=events, ranges=ranges, meta=meta, warnings=list(trace.warnings)))
    return pieces


_BLOCK = 1 << 16


def device_of_range_processes(range_pids: np.ndarray, row_pids: np.ndarray, row_devices: np.ndarray) -> np.ndarray:
    """The device a GPU range lies on: its process's devices when those rows name one device only
    (a merged file's GPU process ``100000003`` runs device 3), else the pid, as Kineto writes it."""
    out = range_pids.copy()
    if not len(range_pids) or not len(row_pids):
        return out
    pairs = pd.concat(  # a block at a time: a frame of every row would cost more than the table
        pd.DataFrame({"pid": row_pids[at : at + _BLOCK], "device": row_devices[at : at + _BLOCK]}).drop_duplicates()
        for at in range(0, len(row_pids), _BLOCK)
    ).drop_duplicates()
    single = pairs.groupby("pid")["device"].agg(["first", "size"])
    single = single[single["size"] == 1]["first"]
    mapped = pd.Series(range_pids).map(single)
    known = mapped.notna().to_numpy()
    out[known] = mapped[known].to_numpy("int64")
    return out
