"""`kprof trace` output: per kernel, per step and per annotation, one document per run of the command."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from kprof.analysis.counters import COUNTER_KEYS
from kprof.analysis.cross_rank import CrossRank
from kprof.analysis.trace_tables import KERNEL_COLUMNS, TraceTables
from kprof.ingest.assign_ranges import DEFAULT_STEP_PATTERN
from kprof.ingest.names import labelled
from kprof.report.numbers import MISSING, column_decimals, number_column, with_decimals
from kprof.report.table import Column, Document, Table, records

# (column of the per-kernel table, header, shown in narrow terminals too); "label" is the short
# name, told apart from other rows' where kernels share it
KERNEL_VIEW = [
    ("label", "kernel", True),
    ("kind", "kind", False),
    ("calls", "calls", True),
    ("total_us", "total µs", True),
    ("mean_us", "mean", True),
    ("median_us", "median", True),
    ("p10_us", "p10", False),
    ("p90_us", "p90", True),
    ("min_us", "min", False),
    ("max_us", "max", False),
    ("std_us", "std", False),
    ("pct_busy", "% busy", True),
]
STEP_VIEW = [
    ("step", "step"),
    ("span_us", "span µs"),
    ("busy_us", "GPU busy µs"),
    ("kernels", "kernels"),
    ("kernel_us", "kernel µs"),
    ("idle_us", "idle µs"),
]
ANNOTATION_VIEW = [
    ("name", "annotation"),
    ("calls", "calls"),
    ("gpu_us", "GPU µs"),
    ("self_us", "self µs"),
    ("kernels", "kernels"),
]
LEFT = {"label", "short_name", "kind", "name"}


def fmt(value: Any) -> str:
    """A cell that is not a float column's (those share their column's decimals: kprof.report.numbers)."""
    if isinstance(value, bool):
        return "yes" if value else ""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return str(value)


def frame_rows(frame: pd.DataFrame, keys: list[str] | None = None) -> list[list[str]]:
    """The frame's cells as text: a float column with one count of decimals, the rest as they are."""
    # by position when no keys are given: a query's result may name two columns alike
    series = [frame.iloc[:, i] for i in range(frame.shape[1])] if keys is None else [frame[k] for k in keys]
    columns = [
        number_column(s.tolist(), 3 if "pct" in str(s.name) else 4)
        if pd.api.types.is_float_dtype(s)
        else [fmt(v) for v in s]
        for s in series
    ]
    return [list(row) for row in zip(*columns, strict=True)]


def _rows(frame: pd.DataFrame, keys: list[str], top: int | None) -> list[list[str]]:
    return frame_rows(frame if top is None else frame.head(top), keys)


def _title(t: TraceTables) -> str:
    s = t.summary
    return (
        f"rank {t.rank} · {s['file']} · {s['format']} · {s['kernels']} kernels · "
        f"kernel {s['kernel_total_us']:,.1f} µs · GPU busy {s['busy_us']:,.1f} µs"
    )


def _kernel_table(t: TraceTables, top: int | None) -> Table:
    columns = [
        Column(h, "left" if c in LEFT else "right", is_name=c == "label", wide_only=not narrow)
        for c, h, narrow in KERNEL_VIEW
    ]
    table = Table("per kernel (µs per call)", columns)
    for row in _rows(labelled(t.kernels), [c for c, _, _ in KERNEL_VIEW], top):
        table.add(*row)
    if top is not None and len(t.kernels) > top:
        table.notes.append(f"… {len(t.kernels) - top} more kernels (--top to show more)")
    return table


def _step_table(t: TraceTables) -> Table:
    # busy and idle are device time, summed over devices: where a rank drives several GPUs, the
    # table says how many, or busy beyond the span would read as impossible
    several = bool(len(t.steps)) and int(t.steps["devices"].max()) > 1
    view = [*STEP_VIEW[:2], ("devices", "GPUs"), *STEP_VIEW[2:]] if several else STEP_VIEW
    table = Table(f"per step (steps from: {t.summary['step_source']})", [Column(h) for _, h in view])
    for warm, row in zip(t.steps["warmup"], _rows(t.steps, [c for c, _ in view], None)):
        if warm:
            row[0] += " (warm-up)"
        table.add(*row, style="dim" if warm else "")
    if t.steady:
        s = t.steady

        def steady(c: str) -> str:  # with the decimals of the column above it
            return with_decimals(s[c], column_decimals([*t.steps[c], s[c]])) if c != "kernels" else f"{s[c]:g}"

        table.add(
            f"steady (median of {s['steps']})",
            *("" if c == "devices" else steady(c) for c, _ in view[1:]),
            style="bold",
        )
    table.notes.append("the first step is warm-up and left out of the steady-state median")
    if several:
        table.notes.append("GPU busy and idle are device time summed over the step's GPUs (idle = span × GPUs − busy)")
    return table


def _annotation_table(t: TraceTables, top: int | None) -> Table:
    columns = [Column(h, "left" if c in LEFT else "right", is_name=c == "name") for c, h in ANNOTATION_VIEW]
    table = Table("per annotation (device time inside each range)", columns)
    for row in _rows(t.annotations, [c for c, _ in ANNOTATION_VIEW], top):
        table.add(*row)
    return table


def _no_steps(t: TraceTables) -> str:
    if t.summary.get("step_pattern") == DEFAULT_STEP_PATTERN:
        return "no steps found (no ProfilerStep#N ranges; --steps REGEX picks other ranges)"
    return f"no steps found: --steps {t.summary['step_pattern']!r} matches no range that holds device work"


RANK_STEP_VIEW = [
    ("step", "step"),
    ("ranks", "ranks"),
    ("slowest_rank", "slowest rank"),
    ("slowest_busy_us", "its busy µs"),
    ("median_busy_us", "median µs"),
    ("fastest_busy_us", "fastest µs"),
    ("spread_pct", "spread %"),
]
RANK_KERNEL_VIEW = [
    ("label", "kernel"),
    ("ranks", "ranks"),
    ("min_us", "min µs"),
    ("median_us", "median µs"),
    ("max_us", "max µs"),
    ("slowest_rank", "slowest rank"),
    ("spread_pct", "spread %"),
]
RANK_COLLECTIVE_VIEW = [
    ("rank", "rank"),
    ("collective_us", "collective µs"),
    ("wait_us", "waiting µs"),
    ("wait_pct", "waiting %"),
]


def _view_table(title: str, frame: pd.DataFrame, view: list[tuple[str, str]], top: int | None) -> Table:
    table = Table(title, [Column(h, "left" if c in LEFT else "right", is_name=c in LEFT) for c, h in view])
    for row in _rows(frame, [c for c, _ in view], top):
        table.add(*row)
    if top is not None and len(frame) > top:
        table.notes.append(f"… {len(frame) - top} more rows (--top to show more)")
    return table


def _cross_rank(doc: Document, cross: CrossRank, top: int | None) -> None:
    doc.text("across ranks", "rule")
    if len(cross.steps):
        doc.table(_view_table("slowest rank per steady step (GPU busy µs)", cross.steps, RANK_STEP_VIEW, top))
    doc.table(_view_table("each kernel's total µs across ranks", labelled(cross.kernels), RANK_KERNEL_VIEW, top))
    if len(cross.collectives):
        t = _view_table("collectives (NCCL/RCCL) per rank", cross.collectives, RANK_COLLECTIVE_VIEW, None)
        t.notes.append("waiting: each call's time beyond its shortest on any rank (the straggler waits least)")
        doc.table(t)
    for note in cross.notes:
        doc.text(note, "warning")


def _counter_table(counters: pd.DataFrame, top: int | None) -> Table:
    names = [c for c in counters.columns if c not in COUNTER_KEYS]
    view = [("label", "kernel"), ("dispatches", "dispatches"), ("calls_in_trace", "calls in trace")]
    table = _view_table(
        "hardware counters per kernel (mean per dispatch)", labelled(counters), view + [(c, c) for c in names], top
    )
    missing = int((counters["calls_in_trace"] == 0).sum())
    if missing:
        table.notes.append(f"{missing} counted kernels do not run in the traces given (0 calls in trace)")
    return table


def trace_document(
    results: list[TraceTables],
    top: int | None,
    cross: CrossRank | None = None,
    skipped: Sequence[Path] = (),
    counters: pd.DataFrame | None = None,
) -> Document:
    doc = Document()
    if skipped:
        names = ", ".join(p.name for p in skipped)
        doc.text(f"left out {len(skipped)} JSON file(s) that are not traces (no traceEvents): {names}", "warning")
    for t in results:
        doc.text(_title(t), "rule")
        doc.table(_kernel_table(t, top))
        if len(t.steps):
            doc.table(_step_table(t))
        else:
            doc.text(_no_steps(t))
        if len(t.annotations):
            doc.table(_annotation_table(t, top))
        for w in t.warnings:
            doc.text(w, "warning")
    if cross is not None:
        _cross_rank(doc, cross, top)
    if counters is not None:
        doc.table(_counter_table(counters, top))
    doc.data = to_json(results, cross)
    if counters is not None:
        doc.data["counters"] = records(counters)
    doc.records = pd.concat([t.kernels.assign(rank=t.rank) for t in results], ignore_index=True)[
        ["rank", *KERNEL_COLUMNS]
    ]
    return doc


def _ranked(frame: pd.DataFrame, rank: int) -> list[dict[str, Any]]:
    return [dict(r, rank=rank) for r in records(frame)]


def to_json(results: list[TraceTables], cross: CrossRank | None = None) -> dict[str, Any]:
    """One object: rows of every rank (each row carries ``rank``), the cross-rank tables where there
    are several ranks, and a summary."""
    summaries = [dict(t.summary, steady=t.steady, warnings=t.warnings) for t in results]
    total = {
        "format": ",".join(sorted({str(t.summary["format"]) for t in results})),
        "kernels": sum(t.summary["kernels"] for t in results),
        "kernel_total_us": sum(t.summary["kernel_total_us"] for t in results),
        "busy_us": sum(t.summary["busy_us"] for t in results),
        "ranks": summaries,
    }
    return {
        "kernels": [r for t in results for r in _ranked(t.kernels[KERNEL_COLUMNS], t.rank)],
        "steps": [r for t in results for r in _ranked(t.steps, t.rank)],
        "annotations": [r for t in results for r in _ranked(t.annotations, t.rank)],
        "summary": total,
        **({name: records(frame) for name, frame in cross.frames().items()} if cross is not None else {}),
    }
