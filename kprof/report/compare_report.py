"""`kprof compare` output: A against B per leg, per kernel and per step (effect + = B faster)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from kprof.analysis.compare import (
    CONTROL,
    MIN_RUNS,
    MIN_STEADY_STEPS,
    REPLICATES,
    Comparison,
    Side,
    effect_spread_between_runs,
)
from kprof.ingest.names import labelled
from kprof.report.effects import EVERY_ROW, View, effect_text, hidden_notes, shown_rows
from kprof.report.numbers import column_decimals, with_decimals
from kprof.report.table import Column, Document, Table, records, verdict_cell
from kprof.timer.kernel_time import merged_timer_labels


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
    method = (
        f"Welch's 95% interval over the runs (each run one value; a side needs {MIN_RUNS} runs for an interval)"
        if c.replicates == "runs"
        else "Hodges–Lehmann shift with a distribution-free 95% interval"
    )
    text = (
        f"effect = 100·(t_A/t_B − 1), positive = B is faster; {samples}; {method}; verdicts after "
        "Benjamini–Hochberg within each table."
    )
    if timers := merged_timer_labels([*c.a.timers, *c.b.timers]):  # host-clock runs say so
        text += f" Timer: {'; '.join(timers)}."
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
    if c.replicates == "rounds":
        text += (
            f" A spread between fresh runs of ±{c.between_runs_pct:.2f}% SD per leg's effect (--between-runs) is in "
            "every interval."
            if c.between_runs_pct > 0
            else " The rounds of two runs do not show how fresh runs differ: give each side a folder of fresh runs, "
            "or the spread measured on them (--between-runs)."
        )
    return text


def spread_between_runs(side: Side) -> dict[str, Any] | None:
    """A side of fresh runs: the SD of a leg's effect between them beyond their rounds, pooled over
    legs (kprof.analysis.compare.effect_spread_between_runs), or None where it cannot be measured."""
    measured = effect_spread_between_runs(side.effects) if side.kind == "runs" else None
    if measured is None:
        return None
    sd, legs = measured
    return {"side": side.label, "runs": len(side.runs), "legs": legs, "sd_pct": sd}


def spread_line(spread: dict[str, Any]) -> str:
    where = f"between the {spread['runs']} fresh runs of {spread['side']}"
    if round(spread["sd_pct"], 2) == 0:  # what --between-runs 0.00 would add: nothing
        return (
            f"{where}: a leg's effect against its baseline varies no more than each run's interval allows for "
            f"(pooled over {spread['legs']} legs); one run's intervals need no --between-runs"
        )
    return (
        f"{where}: a leg's effect against its baseline varies by ±{spread['sd_pct']:.2f}% SD beyond what each "
        f"run's interval allows for (pooled over {spread['legs']} legs); --between-runs {spread['sd_pct']:.2f} "
        "carries it into one run's intervals"
    )


def _tables(c: Comparison, top: int | None, view: View) -> list[Table]:
    out = []
    if len(c.legs):
        out.append(_leg_table(c, view))
    if len(c.kernels):
        out.append(_kernel_table(c, top, view))
    if len(c.steps):
        t = Table(
            "per step", [Column(h, "left" if h in LEFT else "right") for h in ("metric", "A", "B", "B vs A", "verdict")]
        )
        for _, r in shown_rows(c.steps, view).iterrows():
            a, b = _side_by_side([r["a"]], [r["b"]])  # each row its own metric, with its own decimals
            t.add(r["metric"], a[0], b[0], effect_text(r), verdict_cell(r["verdict"], r["verdict"]))
        t.notes += hidden_notes(c.steps, view)
        out.append(t)
    return out


LEFT = ("case", "leg", "kernel", "kind", "metric")


def _side_by_side(a: list[Any], b: list[Any]) -> tuple[list[str], list[str]]:
    """The A and B columns with one count of decimals: they are read against each other."""
    decimals = column_decimals([*a, *b])
    return [with_decimals(v, decimals) for v in a], [with_decimals(v, decimals) for v in b]


def _leg_table(c: Comparison, view: View) -> Table:
    t = Table(
        (f"per leg (µs, {'geometric mean of the runs' if c.replicates == 'runs' else 'median of rounds'})")
        if c.control is None
        else f"per leg (ratio to {c.control}; its row µs)",
        [
            Column(h, "left" if h in LEFT else "right", is_name=h in ("case", "leg"), key=h in ("case", "leg"))
            for h in ("case", "leg", "A µs", "B µs", "B vs A", "verdict")
        ],
    )
    rows = shown_rows(c.legs, view)
    is_control = (rows["role"] == CONTROL).to_numpy(bool) if "role" in rows else np.zeros(len(rows), bool)
    own = rows[is_control] if c.control is not None else rows  # with a control, only its row is in µs
    decimals = column_decimals([*own["a"], *own["b"]])
    a, b = ([with_decimals(v, decimals) for v in rows[side]] for side in ("a", "b"))
    if c.control is not None:  # ratios to the control leg in 4 decimals; its own row µs
        a = [x if control else f"{v:.4f}" for x, v, control in zip(a, rows["a"], is_control, strict=True)]
        b = [x if control else f"{v:.4f}" for x, v, control in zip(b, rows["b"], is_control, strict=True)]
    for (_, r), control, a_text, b_text in zip(rows.iterrows(), is_control, a, b, strict=True):
        leg = r["leg"] + (" (control)" if control else "")
        t.add(r["case"], leg, a_text, b_text, effect_text(r), verdict_cell(r["verdict"], r["verdict"]))
    t.notes += hidden_notes(c.legs, view)
    return t


def _kernel_table(c: Comparison, top: int | None, view: View) -> Table:
    per = "step" if c.replicates == "steps" else "call"
    headers = ("kernel", "kind", "calls A", "calls B", f"A µs/{per}", f"B µs/{per}", "B vs A", "verdict")
    optional = {"kind", "calls A", "calls B"}  # left out of narrow terminals; the numbers that judge stay
    t = Table(
        f"per kernel (µs per {per}; calls per {'step' if per == 'step' else 'trace'})",
        [Column(h, "left" if h in LEFT else "right", is_name=h == "kernel", wide_only=h in optional) for h in headers],
    )
    shown = shown_rows(labelled(c.kernels), view)
    rows = shown.head(top) if top else shown
    a, b = _side_by_side(rows["a"].tolist(), rows["b"].tolist())
    for (_, r), a_text, b_text in zip(rows.iterrows(), a, b, strict=True):
        calls = _calls(r.get("calls_a")), _calls(r.get("calls_b"))
        t.add(r["label"], r["kind"], *calls, a_text, b_text, effect_text(r), verdict_cell(r["verdict"], r["verdict"]))
    if top and len(shown) > top:
        t.notes.append(f"… {len(shown) - top} more kernels (--top to show more)")
    t.notes += hidden_notes(c.kernels, view)
    return t


def compare_document(c: Comparison, top: int | None, view: View = EVERY_ROW) -> Document:
    doc = Document()
    doc.text(f"A = {c.a.label}; B = {c.b.label}. {note(c)}")
    for t in _tables(c, top, view):
        doc.table(t)
    spreads = [s for s in (spread_between_runs(c.a), spread_between_runs(c.b)) if s is not None]
    for spread in spreads:
        doc.text(spread_line(spread))
    doc.data = {
        "a": c.a.label,
        "b": c.b.label,
        "replicates": c.replicates,
        "control": c.control,
        "between_runs_pct": c.between_runs_pct,
        "spread_between_runs": spreads,
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
