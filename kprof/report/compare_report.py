"""`kprof compare` output: A against B per kernel, per step and per leg (effect + = B faster)."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from kprof.commands.compare import NO_VERDICT, Comparison
from kprof.report.run_report import VERDICT_STYLE


def _effect(r: pd.Series) -> str:
    if "effect_pct" not in r or pd.isna(r.get("effect_pct")):
        return "–"
    if r["verdict"] == NO_VERDICT or not math.isfinite(r.get("ci_low_pct", math.nan)):
        suffix = "" if r["verdict"] == NO_VERDICT else " [too few repetitions for a 95% interval]"
        return f"{r['effect_pct']:+.2f}%{suffix}"
    return f"{r['effect_pct']:+.2f}% [{r['ci_low_pct']:+.2f}, {r['ci_high_pct']:+.2f}]"


def _num(v: Any) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.2f}"


def _sections(c: Comparison) -> list[tuple[str, list[str], list[list[str]]]]:
    out = []
    if len(c.legs):
        rows = [
            [r["case"], r["leg"], _num(r["a"]), _num(r["b"]), _effect(r), r["verdict"]] for _, r in c.legs.iterrows()
        ]
        out.append(("per leg (µs, median of rounds)", ["case", "leg", "A µs", "B µs", "B vs A", "verdict"], rows))
    if len(c.kernels):
        rows = [
            [
                r["short_name"],
                r["kind"],
                _num(r.get("calls_a")),
                _num(r.get("calls_b")),
                _num(r["a"]),
                _num(r["b"]),
                _effect(r),
                r["verdict"],
            ]
            for _, r in c.kernels.iterrows()
        ]
        out.append(
            (
                "per kernel (µs per call)",
                ["kernel", "kind", "calls A", "calls B", "A µs/call", "B µs/call", "B vs A", "verdict"],
                rows,
            )
        )
    if len(c.steps):
        rows = [[r["metric"], _num(r["a"]), _num(r["b"]), _effect(r), r["verdict"]] for _, r in c.steps.iterrows()]
        out.append(("per step", ["metric", "A", "B", "B vs A", "verdict"], rows))
    return out


def _note(c: Comparison) -> str:
    if c.repeated:
        return (
            "effect = 100·(t_A/t_B − 1), positive = B is faster; Hodges–Lehmann shift with a distribution-free "
            "95% interval over the repetitions; verdicts after Benjamini–Hochberg."
        )
    return (
        "one trace per side: the deltas below are single samples and support no verdict; give each side a "
        "folder of repeated traces (or compare run folders) for intervals and verdicts."
    )


def render_terminal(c: Comparison, console: Console, top: int | None) -> None:
    console.print(f"A = {c.a.label}\nB = {c.b.label}\n{_note(c)}")
    for title, headers, rows in _sections(c):
        t = Table(title=title, title_justify="left")
        for h in headers:
            t.add_column(
                h,
                justify="left" if h in ("kernel", "case", "leg", "metric", "kind") else "right",
                no_wrap=h == "kernel",
                max_width=48 if h == "kernel" else None,
                overflow="ellipsis",
            )
        for row in rows[:top] if top else rows:
            style = VERDICT_STYLE.get(row[-1], "")
            t.add_row(*row[:-1], f"[{style}]{row[-1]}[/{style}]" if style else row[-1])
        console.print(t)


def render_markdown(c: Comparison, top: int | None) -> str:
    lines = [f"A = `{c.a.label}`, B = `{c.b.label}`. {_note(c)}", ""]
    for title, headers, rows in _sections(c):
        lines += [f"**{title}**", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(x.replace("|", "\\|") for x in row) + " |" for row in (rows[:top] if top else rows)]
        lines.append("")
    return "\n".join(lines)


def to_json(c: Comparison) -> dict[str, Any]:
    def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
        return json.loads(frame.to_json(orient="records")) if len(frame) else []

    return {
        "a": c.a.label,
        "b": c.b.label,
        "repeated": c.repeated,
        "note": _note(c),
        "legs": records(c.legs),
        "kernels": records(c.kernels),
        "steps": records(c.steps),
    }


def render_csv(c: Comparison) -> str:
    frames = [
        f.assign(table=name) for name, f in (("legs", c.legs), ("kernels", c.kernels), ("steps", c.steps)) if len(f)
    ]
    buf = io.StringIO()
    if frames:
        pd.concat(frames, ignore_index=True).to_csv(buf, index=False)
    return buf.getvalue()
