"""`kprof trace`: ingest files (one per rank), build each rank's per-kernel/step/annotation tables
and the cross-rank tables, optionally save them.

Each file is read by itself and reduced to its small tables before the next one is held (its
events go straight to the saved dataset when there is one), so memory does not grow with the
number of ranks; with ``jobs > 1`` the files are read by a pool of processes.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd

from kprof.analysis.counters import kernel_counters
from kprof.analysis.cross_rank import CrossRank, collective_calls, cross_rank_tables
from kprof.analysis.trace_tables import TraceTables, trace_tables
from kprof.errors import KprofInputError
from kprof.ingest.assign_ranges import compile_step_pattern
from kprof.ingest.formats import rocprofv3_counters
from kprof.ingest.load import load_traces
from kprof.ingest.source import head

TRACE_SUFFIXES = (".json", ".gz", ".tmp", ".csv", ".db", ".rpd", ".sqlite", ".nsys-rep", ".qdrep")


@dataclass
class RankResult:
    """What one file leaves behind: its tables, its meta and its collective calls (all small)."""

    tables: TraceTables
    meta: dict[str, Any]
    collectives: pd.DataFrame


@dataclass
class TraceResult:
    ranks: list[RankResult]
    cross: CrossRank | None
    saved: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)  # JSON files of a folder that are not traces
    counters: pd.DataFrame | None = None  # each kernel's hardware counters, where counter files were given

    @property
    def tables(self) -> list[TraceTables]:
        return [r.tables for r in self.ranks]


@dataclass(frozen=True)
class _FileJob:
    path: Path
    position: int
    files: int
    step_pattern: str | None
    kernel_filter: str | None
    recover: bool | None
    save: Path | None
    scan_threads: int | None = None  # files read side by side share the cores


def _looks_like_trace(path: Path) -> bool:
    """In a folder, a JSON file is taken for a trace only if its head has ``traceEvents`` (or it is
    an array of events): a job's folder often holds other JSON (configs, provenance)."""
    if not path.name.endswith((".json", ".json.gz", ".tmp")):
        return True
    start = head(path)
    return b'"traceEvents"' in start or start.lstrip()[:1] == b"["


def expand_inputs(items: list[Path]) -> tuple[list[Path], list[Path]]:
    """Files as given; a folder gives its trace files; a glob (``ranks/*.json.gz``) its matches; one
    file named twice is a one-line error. Also returns the JSON files of folders that were left out
    as not traces."""
    files: list[Path] = []
    skipped: list[Path] = []
    for item in items:
        if item.is_dir():
            candidates = sorted(p for p in item.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
            found = [p for p in candidates if _looks_like_trace(p)]
            skipped += [p for p in candidates if p not in found]
            if not found:
                raise KprofInputError(item, "holds no trace files")
            files += found
        elif not item.exists() and glob.has_magic(str(item)):
            found = sorted(Path(p) for p in glob.glob(str(item)) if Path(p).is_file())
            if not found:
                raise KprofInputError(item, "matches no file")
            files += found
        else:
            files.append(item)
    seen: dict[Path, Path] = {}
    for file in files:  # one file twice is one rank, not two
        first = seen.setdefault(Path(os.path.realpath(file)), file)  # a symlink loop: said when read
        if first is not file:
            raise KprofInputError(file, f"is given twice (also as {first}): each file is one rank's trace")
    return files, skipped


def _store() -> ModuleType:
    """The trace folder writer, imported on the first ``--save`` (pyarrow's parquet and dataset
    modules: 12 MB and 0.07 s that a plain ``kprof trace`` does not need)."""
    from kprof.store import trace_folder

    return trace_folder


def _read_one(job: _FileJob, on_progress: Callable[[Path, int, int], None] | None = None) -> list[RankResult]:
    """Load one file, give each rank it holds its rank, reduce each to its tables (and save its events)."""
    progress = None if on_progress is None else (lambda done, total: on_progress(job.path, done, total))
    traces = load_traces(job.path, None, job.recover, job.step_pattern, progress, job.scan_threads)
    pattern = compile_step_pattern(job.step_pattern)
    name_filter = re.compile(job.kernel_filter) if job.kernel_filter else None
    results = []
    for part, trace in enumerate(traces):
        if trace.meta.get("rank_source") == "argument order" and job.files > 1:
            trace.meta["rank"] = job.position
            trace.events["rank"] = job.position
        elif (local := trace.meta.get("local_devices")) and job.files > 1:  # one host's devices: hosts in order
            trace.meta["rank"] = job.position * int(local) + int(trace.meta["rank"])
            trace.events["rank"] = trace.meta["rank"]
        tables = trace_tables(trace, pattern, name_filter)
        if job.save is not None:
            rank = int(trace.meta["rank"])
            _store().write_rank_partition(job.save, rank, job.position * 1000 + part, trace.events, trace.ranges)
        results.append(RankResult(tables, trace.meta, collective_calls(trace.events)))
    return results


def _check_ranks(results: list[RankResult]) -> None:
    """Two files that claim one rank: merging them would count that rank's work twice."""
    claimed: dict[int, str] = {}
    for r in results:
        rank = r.tables.rank
        if rank in claimed:
            problem = f"claims rank {rank}, as {claimed[rank]} does: give the files of one job, one per rank"
            raise KprofInputError(r.meta["file"], problem)
        claimed[rank] = r.meta["file"]


def _read_all(
    jobs_: list[_FileJob], jobs: int, on_progress: Callable[[Path, int, int], None] | None
) -> list[RankResult]:
    if jobs <= 1 or len(jobs_) <= 1:
        return [r for j in jobs_ for r in _read_one(j, on_progress)]
    workers = min(jobs, len(jobs_))
    # spawn: a fresh interpreter per worker (no fork of a process that may hold threads); the cores
    # are shared out, so each worker scans its file with fewer threads
    shared = [replace(job, scan_threads=max(1, (os.cpu_count() or 1) // workers)) for job in jobs_]
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        return [r for results in pool.map(_read_one, shared) for r in results]


def run_trace(
    files: list[Path],
    step_pattern: str | None = None,
    kernel_filter: re.Pattern[str] | None = None,
    recover: bool | None = None,
    save: Path | None = None,
    on_progress: Callable[[Path, int, int], None] | None = None,
    jobs: int = 1,
    strict: bool = False,
) -> TraceResult:
    """The tables of ``files``; ``strict``: a trace with an impossible record (kprof.ingest.integrity)
    is a one-line error instead of a warning."""
    pattern = compile_step_pattern(step_pattern)
    files, skipped = expand_inputs(files)
    reading = (files, skipped, pattern, step_pattern, kernel_filter, recover)
    if save is None:
        return _run_trace(*reading, None, on_progress, jobs, strict)
    with _store().claimed(save) as staging:
        result = _run_trace(*reading, staging, on_progress, jobs, strict)
        written = sorted(p.name for p in staging.iterdir())  # the datasets, the tables and meta.json
    result.saved = [save / name for name in written]
    return result


def _run_trace(
    files: list[Path],
    skipped: list[Path],
    pattern: re.Pattern[str],
    step_pattern: str | None,
    kernel_filter: re.Pattern[str] | None,
    recover: bool | None,
    save: Path | None,
    on_progress: Callable[[Path, int, int], None] | None,
    jobs: int,
    strict: bool = False,
) -> TraceResult:
    """``run_trace`` once the inputs are expanded; ``save``: the folder the save is written into
    (kprof.store.trace_folder.claimed puts it in place once complete)."""
    counter_files = [f for f in files if rocprofv3_counters.is_counter_file(f)]
    files = [f for f in files if f not in counter_files]
    if counter_files and not files:
        raise rocprofv3_counters.alone(counter_files[0])
    work = [
        _FileJob(f, i, len(files), step_pattern, kernel_filter.pattern if kernel_filter else None, recover, save)
        for i, f in enumerate(files)
    ]
    ranks = sorted(_read_all(work, jobs, on_progress), key=lambda r: r.tables.rank)
    _check_ranks(ranks)
    if strict:
        _refuse_impossible(ranks)
    cross = cross_rank_tables([r.tables for r in ranks], [r.collectives for r in ranks]) if len(ranks) > 1 else None
    result = TraceResult(ranks, cross, skipped=skipped)
    if counter_files:
        counters = pd.concat([rocprofv3_counters.read_counters(f) for f in counter_files], ignore_index=True)
        result.counters = kernel_counters(counters, pd.concat([t.kernels for t in result.tables], ignore_index=True))
    if save is not None:
        frames = {
            "kernels": pd.concat([t.kernels.assign(rank=t.rank) for t in result.tables], ignore_index=True),
            "steps": pd.concat([t.steps.assign(rank=t.rank) for t in result.tables], ignore_index=True),
            "annotations": pd.concat([t.annotations.assign(rank=t.rank) for t in result.tables], ignore_index=True),
            **(cross.frames() if cross is not None else {}),
            **({"counters": result.counters} if result.counters is not None else {}),
        }
        meta = {
            "command": "trace",
            "files": [str(f) for f in files],
            "counter_files": [str(f) for f in counter_files],
            "step_pattern": pattern.pattern,
            "traces": [r.meta for r in ranks],
            "warnings": [w for t in result.tables for w in t.warnings],
        }
        result.saved = _store().save_frames(save, frames, meta)
    return result


def _refuse_impossible(ranks: list[RankResult]) -> None:
    """--strict: the first impossible record of any rank, as the one-line error."""
    for r in ranks:
        for problem in r.meta.get("integrity", []):
            found = f"{problem['activities']:,} activities {problem['problem']}"
            raise KprofInputError(r.meta["file"], f"{found} (--strict: a trace with impossible records is refused)")


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))
