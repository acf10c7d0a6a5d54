"""`kprof trace` output: rich terminal tables, markdown for a PR, CSV and JSON."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from kprof.analysis.trace_tables import KERNEL_COLUMNS, TraceTables

COMPACT_KERNEL_COLUMNS = {"short_name", "calls", "total_us", "mean_us", "median_us", "p90_us", "pct_busy"}
WIDE_CONSOLE = 150
KERNEL_VIEW = [
    ("short_name", "kernel"),
    ("kind", "kind"),
    ("calls", "calls"),
    ("total_us", "total µs"),
    ("mean_us", "mean"),
    ("median_us", "median"),
    ("p10_us", "p10"),
    ("p90_us", "p90"),
    ("min_us", "min"),
    ("max_us", "max"),
    ("std_us", "std"),
    ("pct_busy", "% busy"),
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


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.2f}"
    return str(value)


def _rows(frame: pd.DataFrame, view: list[tuple[str, str]], top: int | None) -> list[list[str]]:
    shown = frame if top is None else frame.head(top)
    return [[_fmt(row[c]) for c, _ in view] for _, row in shown.iterrows()]


def _steady_row(t: TraceTables) -> list[str] | None:
    if not t.steady:
        return None
    s = t.steady
    return [
        f"steady (median of {s['steps']})",
        _fmt(s["span_us"]),
        _fmt(s["busy_us"]),
        f"{s['kernels']:g}",
        _fmt(s["kernel_us"]),
        _fmt(s["idle_us"]),
    ]


def _title(t: TraceTables) -> str:
    s = t.summary
    return (
        f"rank {t.rank} · {s['file']} · {s['format']} · {s['kernels']} kernels · "
        f"kernel {s['kernel_total_us']:,.1f} µs · GPU busy {s['busy_us']:,.1f} µs"
    )


def render_terminal(results: list[TraceTables], console: Console, top: int | None) -> None:
    for t in results:
        console.rule(f"[bold]{_title(t)}")
        view = (
            KERNEL_VIEW
            if console.width >= WIDE_CONSOLE
            else [(c, h) for c, h in KERNEL_VIEW if c in COMPACT_KERNEL_COLUMNS]
        )
        kt = Table(title="per kernel (µs per call)", title_justify="left")
        for c, h in view:
            if c == "short_name":
                name_width = max(16, min(64, console.width - 10 * (len(view) - 1)))
                kt.add_column(h, no_wrap=True, overflow="ellipsis", max_width=name_width)
            else:
                kt.add_column(h, justify="left" if c == "kind" else "right", no_wrap=True)
        for row in _rows(t.kernels, view, top):
            kt.add_row(*row)
        console.print(kt)
        if top is not None and len(t.kernels) > top:
            console.print(f"  … {len(t.kernels) - top} more kernels (--top to show more)")
        if len(t.steps):
            st = Table(title=f"per step (steps from: {t.summary['step_source']})", title_justify="left")
            for _, h in STEP_VIEW:
                st.add_column(h, justify="right")
            for (_, row), cells in zip(t.steps.iterrows(), _rows(t.steps, STEP_VIEW, None)):
                st.add_row(*cells, style="dim" if row["warmup"] else None)
            steady = _steady_row(t)
            if steady:
                st.add_row(*steady, style="bold")
            console.print(st)
            console.print("  first step (dim) is warm-up and left out of the steady-state median")
        else:
            console.print("  no steps found (no ProfilerStep#N ranges; --steps REGEX picks other ranges)")
        if len(t.annotations):
            at = Table(title="per annotation (device time inside each range)", title_justify="left")
            for c, h in ANNOTATION_VIEW:
                at.add_column(h, justify="left" if c == "name" else "right")
            for row in _rows(t.annotations, ANNOTATION_VIEW, top):
                at.add_row(*row)
            console.print(at)
        for w in t.warnings:
            console.print(f"[yellow]warning:[/yellow] {w}")


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def render_markdown(results: list[TraceTables], top: int | None) -> str:
    out: list[str] = []
    for t in results:
        out.append(f"### {_title(t)}\n")
        out.append(_md_table([h for _, h in KERNEL_VIEW], _rows(t.kernels, KERNEL_VIEW, top)))
        if len(t.steps):
            rows = _rows(t.steps, STEP_VIEW, None)
            for i, warm in enumerate(t.steps["warmup"]):
                if warm:
                    rows[i][0] += " (warm-up)"
            steady = _steady_row(t)
            if steady:
                rows.append([f"**{c}**" for c in steady])
            out.append(f"\nPer step (steps from: {t.summary['step_source']}):\n")
            out.append(_md_table([h for _, h in STEP_VIEW], rows))
        if len(t.annotations):
            out.append("\nPer annotation:\n")
            out.append(_md_table([h for _, h in ANNOTATION_VIEW], _rows(t.annotations, ANNOTATION_VIEW, top)))
        out.extend(f"\n> warning: {w}" for w in t.warnings)
        out.append("")
    return "\n".join(out)


def render_csv(results: list[TraceTables]) -> str:
    frames = [t.kernels.assign(rank=t.rank) for t in results]
    buf = io.StringIO()
    pd.concat(frames, ignore_index=True)[["rank", *KERNEL_COLUMNS]].to_csv(buf, index=False)
    return buf.getvalue()


def _records(frame: pd.DataFrame, rank: int) -> list[dict[str, Any]]:
    records = json.loads(frame.to_json(orient="records"))
    for r in records:
        r["rank"] = rank
    return records


def to_json(results: list[TraceTables]) -> dict[str, Any]:
    """One object: rows of every rank (each row carries ``rank``), and a summary."""
    summaries = [dict(t.summary, steady=t.steady, warnings=t.warnings) for t in results]
    total = {
        "format": ",".join(sorted({str(t.summary["format"]) for t in results})),
        "kernels": sum(t.summary["kernels"] for t in results),
        "kernel_total_us": sum(t.summary["kernel_total_us"] for t in results),
        "busy_us": sum(t.summary["busy_us"] for t in results),
        "ranks": summaries,
    }
    return {
        "kernels": [r for t in results for r in _records(t.kernels[KERNEL_COLUMNS], t.rank)],
        "steps": [r for t in results for r in _records(t.steps, t.rank)],
        "annotations": [r for t in results for r in _records(t.annotations, t.rank)],
        "summary": total,
    }
