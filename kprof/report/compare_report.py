"""`kprof compare` output: A against B per leg, per kernel and per step (effect + = B faster)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from kprof.analysis.compare import NO_VERDICT, Comparison
from kprof.report.table import Column, Document, Table, records, verdict_cell


def effect_text(r: pd.Series) -> str:
    if "effect_pct" not in r or pd.isna(r.get("effect_pct")):
        return "–"
    if r["verdict"] == NO_VERDICT or not math.isfinite(r.get("ci_low_pct", math.nan)):
        suffix = "" if r["verdict"] == NO_VERDICT else " [too few repetitions for a 95% interval]"
        return f"{r['effect_pct']:+.2f}%{suffix}"
    return f"{r['effect_pct']:+.2f}% [{r['ci_low_pct']:+.2f}, {r['ci_high_pct']:+.2f}]"


def _num(v: Any) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.2f}"


def _calls(v: Any) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.0f}"


def note(c: Comparison) -> str:
    if c.repeated:
        return (
            "effect = 100·(t_A/t_B − 1), positive = B is faster; Hodges–Lehmann shift with a distribution-free "
            "95% interval over the repetitions; verdicts after Benjamini–Hochberg."
        )
    return (
        "one trace per side: the deltas below are single samples and support no verdict; give each side a "
        "folder of repeated traces (or compare run folders) for intervals and verdicts."
    )


def _tables(c: Comparison, top: int | None) -> list[Table]:
    out = []
    left = ("case", "leg", "kernel", "kind", "metric")
    if len(c.legs):
        t = Table(
            "per leg (µs, median of rounds)",
            [Column(h, "left" if h in left else "right") for h in ("case", "leg", "A µs", "B µs", "B vs A", "verdict")],
        )
        for _, r in c.legs.iterrows():
            t.add(
                r["case"],
                r["leg"],
                _num(r["a"]),
                _num(r["b"]),
                effect_text(r),
                verdict_cell(r["verdict"], r["verdict"]),
            )
        out.append(t)
    if len(c.kernels):
        headers = ("kernel", "kind", "calls A", "calls B", "A µs/call", "B µs/call", "B vs A", "verdict")
        t = Table(
            "per kernel (µs per call)",
            [Column(h, "left" if h in left else "right", is_name=h == "kernel") for h in headers],
        )
        shown = c.kernels.head(top) if top else c.kernels
        for _, r in shown.iterrows():
            t.add(
                r["short_name"],
                r["kind"],
                _calls(r.get("calls_a")),
                _calls(r.get("calls_b")),
                _num(r["a"]),
                _num(r["b"]),
                effect_text(r),
                verdict_cell(r["verdict"], r["verdict"]),
            )
        if top and len(c.kernels) > top:
            t.notes.append(f"… {len(c.kernels) - top} more kernels (--top to show more)")
        out.append(t)
    if len(c.steps):
        t = Table(
            "per step", [Column(h, "left" if h in left else "right") for h in ("metric", "A", "B", "B vs A", "verdict")]
        )
        for _, r in c.steps.iterrows():
            t.add(r["metric"], _num(r["a"]), _num(r["b"]), effect_text(r), verdict_cell(r["verdict"], r["verdict"]))
        out.append(t)
    return out


def compare_document(c: Comparison, top: int | None) -> Document:
    doc = Document()
    doc.text(f"A = {c.a.label}; B = {c.b.label}. {note(c)}")
    for t in _tables(c, top):
        doc.table(t)
    doc.data = {
        "a": c.a.label,
        "b": c.b.label,
        "repeated": c.repeated,
        "note": note(c),
        "legs": records(c.legs),
        "kernels": records(c.kernels),
        "steps": records(c.steps),
    }
    frames = [
        f.assign(table=name) for name, f in (("legs", c.legs), ("kernels", c.kernels), ("steps", c.steps)) if len(f)
    ]
    doc.records = pd.concat(frames, ignore_index=True) if frames else None
    return doc
