"""`kprof trace`: ingest files, build the per-kernel/step/annotation tables, optionally save them."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from kprof.analysis.trace_tables import TraceTables, trace_tables
from kprof.ingest import load_traces
from kprof.ingest.assign_ranges import compile_step_pattern
from kprof.store.trace_folder import save_frames
from kprof.trace import Trace


@dataclass
class TraceResult:
    traces: list[Trace]
    tables: list[TraceTables]
    saved: list[Path] = field(default_factory=list)


def run_trace(
    files: list[Path],
    step_pattern: str | None = None,
    kernel_filter: re.Pattern[str] | None = None,
    recover: bool | None = None,
    save: Path | None = None,
    on_progress: Callable[[Path, int, int], None] | None = None,
) -> TraceResult:
    pattern = compile_step_pattern(step_pattern)
    traces = load_traces(files, recover=recover, step_pattern=step_pattern, on_progress=on_progress)
    tables = [trace_tables(t, pattern, kernel_filter) for t in traces]
    result = TraceResult(traces=traces, tables=tables)
    if save is not None:
        frames = {
            "kernel_events": pd.concat([t.events for t in traces], ignore_index=True),
            "ranges": pd.concat([t.ranges for t in traces], ignore_index=True),
            "kernels": pd.concat([t.kernels.assign(rank=t.rank) for t in tables], ignore_index=True),
            "steps": pd.concat([t.steps.assign(rank=t.rank) for t in tables], ignore_index=True),
            "annotations": pd.concat([t.annotations.assign(rank=t.rank) for t in tables], ignore_index=True),
        }
        meta = {
            "command": "trace",
            "files": [str(f) for f in files],
            "step_pattern": pattern.pattern,
            "traces": [t.meta for t in traces],
            "warnings": [w for t in traces for w in t.warnings],
        }
        result.saved = save_frames(save, frames, meta)
    return result
