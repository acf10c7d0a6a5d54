"""`kprof compare` output: A against B per leg, per kernel and per step (effect + = B faster)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from kprof.analysis.compare import CONTROL, MIN_STEADY_STEPS, REPLICATES, Comparison
from kprof.ingest.names import labelled
from kprof.report.effects import EVERY_ROW, View, effect_text, hidden_notes, shown_rows
from kprof.report.table import Column, Document, Table, records, verdict_cell


def _num(v: Any) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.2f}"


def _calls(v: Any) -> str:
    """Counts as integers; a median of per-step counts may fall half-way (2.5)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"


def note(c: Comparison) -> str:
    samples = f"samples: {REPLICATES[c.replicates]}"
    if c.replicates == "none":
        return (
            f"{samples}; the deltas below support no verdict: give each side a folder of repeated traces, "
            f"a trace of at least {MIN_STEADY_STEPS + 1} steps (the first is warm-up), or run folders."
        )
    text = (
        f"effect = 100·(t_A/t_B − 1), positive = B is faster; {samples}; Hodges–Lehmann shift with a "
        "distribution-free 95% interval; verdicts after Benjamini–Hochberg within each table."
    )
    if c.control is not None:
        text += (
            f" Legs relative to the control leg {c.control!r} in the same round: its own shift between the runs "
            "(the CONTROL row, µs) is taken out of every other leg (their A and B columns are ratios to it)."
        )
    if c.replicates == "steps":
        text += (
            " Steps of one process share its clocks, placement and compilation: the interval leaves out "
            "run-to-run variation (repeat the traces to include it)."
        )
    return text


def _tables(c: Comparison, top: int | None, view: View) -> list[Table]:
    out = []
    left = ("case", "leg", "kernel", "kind", "metric")
    if len(c.legs):
        t = Table(
            "per leg (µs, median of rounds)" if c.control is None else f"per leg (ratio to {c.control}; its row µs)",
            [
                Column(h, "left" if h in left else "right", is_name=h in ("case", "leg"), key=h in ("case", "leg"))
                for h in ("case", "leg", "A µs", "B µs", "B vs A", "verdict")
            ],
        )
        for _, r in shown_rows(c.legs, view).iterrows():
            is_control = r.get("role") == CONTROL
            ratio = c.control is not None and not is_control
            t.add(
                r["case"],
                r["leg"] + (" (control)" if is_control else ""),
                f"{r['a']:.4f}" if ratio else _num(r["a"]),
                f"{r['b']:.4f}" if ratio else _num(r["b"]),
                effect_text(r),
                verdict_cell(r["verdict"], r["verdict"]),
            )
        t.notes += hidden_notes(c.legs, view)
        out.append(t)
    if len(c.kernels):
        per = "step" if c.replicates == "steps" else "call"
        headers = ("kernel", "kind", "calls A", "calls B", f"A µs/{per}", f"B µs/{per}", "B vs A", "verdict")
        optional = {"kind", "calls A", "calls B"}  # left out of narrow terminals; the numbers that judge stay
        t = Table(
            f"per kernel (µs per {per}; calls per {'step' if per == 'step' else 'trace'})",
            [
                Column(h, "left" if h in left else "right", is_name=h == "kernel", wide_only=h in optional)
                for h in headers
            ],
        )
        shown = shown_rows(labelled(c.kernels), view)
        for _, r in (shown.head(top) if top else shown).iterrows():
            t.add(
                r["label"],
                r["kind"],
                _calls(r.get("calls_a")),
                _calls(r.get("calls_b")),
                _num(r["a"]),
                _num(r["b"]),
                effect_text(r),
                verdict_cell(r["verdict"], r["verdict"]),
            )
        if top and len(shown) > top:
            t.notes.append(f"… {len(shown) - top} more kernels (--top to show more)")
        t.notes += hidden_notes(c.kernels, view)
        out.append(t)
    if len(c.steps):
        t = Table(
            "per step", [Column(h, "left" if h in left else "right") for h in ("metric", "A", "B", "B vs A", "verdict")]
        )
        for _, r in shown_rows(c.steps, view).iterrows():
            t.add(r["metric"], _num(r["a"]), _num(r["b"]), effect_text(r), verdict_cell(r["verdict"], r["verdict"]))
        t.notes += hidden_notes(c.steps, view)
        out.append(t)
    return out


def compare_document(c: Comparison, top: int | None, view: View = EVERY_ROW) -> Document:
    doc = Document()
    doc.text(f"A = {c.a.label}; B = {c.b.label}. {note(c)}")
    for t in _tables(c, top, view):
        doc.table(t)
    doc.data = {
        "a": c.a.label,
        "b": c.b.label,
        "replicates": c.replicates,
        "control": c.control,
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
