"""`kprof attribute` output: the per-lever table a PR quotes (a Document: terminal, markdown, JSON),
and a self-contained HTML page with plots."""

from __future__ import annotations

import base64
import html
import io
from typing import Any

import numpy as np
import pandas as pd

from kprof.analysis.run_analysis import Attribution
from kprof.analysis.run_effects import CaseSummary
from kprof.analysis.stats import EFFECT_COLUMNS
from kprof.designs import Quantity, sequence
from kprof.errors import KprofInputError
from kprof.report.run_report import (
    aa_records,
    bias_text,
    commits_table,
    effect_cell,
    header,
    revision_json,
    revision_lines,
    sequence_tables,
    status_lines,
)
from kprof.report.table import Cell, Column, Document, Table, records
from kprof.run_model import Run

DESIGN_TITLES = {
    "total": "all levers together vs baseline",
    "add_one": "add-one: baseline + lever, against the baseline",
    "leave_one_out": "leave-one-out: all levers, against all levers − lever (what the lever adds to the others)",
    "shapley": "Shapley value (exact, from every combination; adds up to the total)",
    "interaction": "two-way interactions (±1-coded factorial effect)",
    "unexplained": "total − Σ add-one (what an additive story misses)",
}
# The same designs when the levers are the commits of a range.
REVISION_TITLES = DESIGN_TITLES | {
    "total": "head vs base (every commit)",
    "add_one": "add-one: base + commit, against the base",
    "leave_one_out": "leave-one-out: the head, against the head − commit (reverted: what it adds to all the others)",
}
CONVENTION = (
    "effect = 100·(t_without/t_with − 1): positive = the lever makes it faster; Hodges–Lehmann estimate "
    "[exact 95% interval] over rounds; verdicts after Benjamini–Hochberg within each case's design"
)


def _grids(
    table: pd.DataFrame, order: list[str] | None = None
) -> list[tuple[str, list[str], list[tuple[str, list[pd.Series | None]]]]]:
    """Per design: the levers (in ``order`` where given: a range's commits oldest first; else by
    name), and per case the row of each lever (None where the design has none)."""
    rank = {lever: i for i, lever in enumerate(order or ())}
    out = []
    for design in DESIGN_TITLES:
        sub = table[table["design"] == design]
        if not len(sub):
            continue
        levers = sorted(pd.unique(sub["lever"]), key=lambda lever: (rank.get(lever, len(rank)), lever))
        rows = []
        for case in pd.unique(sub["case"]):
            by_lever = {r["lever"]: r for _, r in sub[sub["case"] == case].iterrows()}
            rows.append((str(case), [by_lever.get(lever) for lever in levers]))
        out.append((design, levers, rows))
    return out


def grid_tables(table: pd.DataFrame, run: Run) -> list[Table]:
    """A table per design (cases × levers); a range's sequence has tables of its own."""
    titles = REVISION_TITLES if run.revisions is not None else DESIGN_TITLES
    tables = []
    shown = table[~table["design"].isin(sequence.QUANTITIES)] if len(table) else table  # in sequence_tables
    for design, levers, rows in _grids(shown, run.lever_names if run.revisions is not None else None):
        t = Table(titles[design], [Column("case", "left", is_name=True), *(Column(lv) for lv in levers)])
        for case, cells in rows:
            t.add(case, *(effect_cell(r, with_verdict=True) if r is not None else "" for r in cells))
        tables.append(t)
    return tables


SWEEP_RESULT_COLUMNS = {"case", "param", "value", "time_us", "trend_p", "bh_significant", "rounds"}
SWEEP_RESULT_COLUMNS |= set(EFFECT_COLUMNS)


def sweep_title(rows: pd.DataFrame) -> str:
    title = f"sweep {rows['param'].iloc[0]}, {rows['case'].iloc[0]} (Page trend p = {rows['trend_p'].iloc[0]:.2g}"
    if "lever_trend_p" in rows and rows["lever_trend_p"].notna().any():
        title += f"; target vs baseline at each value: Page trend p = {rows['lever_trend_p'].iloc[0]:.2g}"
    return title + ")"


def sweep_tables(sweep: pd.DataFrame) -> list[Table]:
    """Per case: the value, what it means (the workload's columns), time, effect vs the unforced
    target and, when the baseline was forced too, the target's effect at that value."""
    tables = []
    for _, rows in sweep.groupby("case", sort=False):
        extra = [c for c in rows.columns if c not in SWEEP_RESULT_COLUMNS and not c.startswith("lever_")]
        extra = [c for c in extra if rows[c].notna().any()]
        paired = "lever_verdict" in rows and rows["lever_verdict"].notna().any()
        headers = [str(rows["param"].iloc[0]), *extra, "µs", "vs unforced target [95% CI]"]
        headers += ["target vs baseline at this value [95% CI]"] if paired else []
        t = Table(sweep_title(rows), [Column(h) for h in headers])
        for _, r in rows.iterrows():
            line = [str(r["value"]), *(str(r[c]) for c in extra), f"{r['time_us']:,.2f}", effect_cell(r, True)]
            if paired:
                lever = {k[len("lever_") :]: v for k, v in r.items() if k.startswith("lever_")}
                line.append(effect_cell(dict(lever, rounds=r["rounds"]), True) if pd.notna(lever["verdict"]) else "")
            t.add(*line)
        tables.append(t)
    return tables


def aa_line(s: CaseSummary) -> str:
    if s.aa is None:
        return f"{s.case}: no A/A leg"
    gate = bias_text(s) if s.biased else "holds 0"
    return (
        f"{s.case}: A/A {s.aa.effect_pct:+.2f}% [{s.aa.ci_low_pct:+.2f}, {s.aa.ci_high_pct:+.2f}] ({gate}); "
        f"verdict threshold {s.threshold_pct:.2f}%"
    )


def attribution_document(result: Attribution) -> Document:
    run: Run = result.run.run
    doc = Document()
    doc.text(header(run, " per-lever attribution") + "; " + CONVENTION + ".", "bold")
    if (commits := commits_table(run)) is not None:
        doc.table(commits)
    for line in revision_lines(run):
        doc.text(line)
    for t in sequence_tables(result.levers, run) + grid_tables(result.levers, run):
        doc.table(t)
    for t in sweep_tables(result.sweep) if len(result.sweep) else []:
        doc.table(t)
    for s in result.run.summaries.values():
        doc.text(aa_line(s))
    for line, style in status_lines(result.run):
        doc.text(line, style)
    for warning in result.run.warnings:
        doc.text(warning, "warning")
    doc.data = {
        "workload": run.subject.name,
        "timer": run.timer_label,
        "levers": records(result.levers),
        "aa": [
            {k: v for k, v in a.items() if k in ("case", "effect_pct", "ci_low_pct", "ci_high_pct", "verdict")}
            for a in aa_records(result.run.summaries)
        ],
        "sweep": records(result.sweep),
        "kernels": records(result.run.kernel_effects),
        **revision_json(run),
    }
    doc.records = result.levers
    return doc


def html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(c.header)}</th>" for c in t.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c.text if isinstance(c, Cell) else c)}</td>" for c in row) + "</tr>"
        for row in t.rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def _per_round_plot(plt: Any, table: pd.DataFrame, case: str, series: dict[Quantity, Any], keys: list[Quantity]) -> str:
    """Each lever's per-round effects as points, its estimate and interval as a bar."""
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(keys) + 1.2))
    for i, key in enumerate(keys):
        pct = 100 * (np.exp(-series[key].to_numpy()) - 1)
        ax.scatter(pct, np.full(len(pct), i) + np.random.default_rng(i).uniform(-0.15, 0.15, len(pct)), s=10, alpha=0.6)
        design, lever = key
        row = table[
            (table["case"] == case) & (table["design"] == design) & (table["lever"] == (lever or "(all levers)"))
        ]
        if len(row):
            r = row.iloc[0]
            ax.plot([r["ci_low_pct"], r["ci_high_pct"]], [i, i], color="black", lw=2)
            ax.plot([r["effect_pct"]], [i], "k|", ms=14)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(range(len(keys)), [k.label for k in keys])
    ax.set_xlabel("effect % per round (positive = faster); bar = 95% interval")
    ax.set_title(case)
    img = f'<img alt="per-round effects, {html.escape(case)}" src="data:image/png;base64,{_png(fig)}">'
    plt.close(fig)
    return img


def _sweep_plot(plt: Any, case: str, rows: pd.DataFrame) -> str:
    """The target's time at each swept value and, for a mechanism sweep, its effect with intervals."""
    paired = "lever_effect_pct" in rows and rows["lever_effect_pct"].notna().any()
    fig, axes = plt.subplots(1, 2 if paired else 1, figsize=(11 if paired else 6, 3.5), squeeze=False)
    axes[0][0].plot(rows["value"], rows["time_us"], "o-")
    axes[0][0].set_ylabel("µs (median of rounds)")
    axes[0][0].set_title(f"{case}: target at each value")
    if paired:
        lever = rows[rows["lever_effect_pct"].notna()]
        err = [
            lever["lever_effect_pct"] - lever["lever_ci_low_pct"],
            lever["lever_ci_high_pct"] - lever["lever_effect_pct"],
        ]
        axes[0][1].errorbar(lever["value"], lever["lever_effect_pct"], yerr=err, fmt="o-", capsize=3)
        axes[0][1].axhline(0, color="grey", lw=0.8)
        axes[0][1].set_ylabel("target vs baseline, % (positive = faster)")
        axes[0][1].set_title(f"{case}: effect at each value, 95% intervals")
    for ax in axes[0]:
        ax.set_xscale("log", base=2)
        ax.set_xlabel(rows["param"].iloc[0])
    img = f'<img alt="sweep {html.escape(case)}" src="data:image/png;base64,{_png(fig)}">'
    plt.close(fig)
    return img


def render_html(result: Attribution) -> str:
    """One self-contained page: the tables, per-round points with intervals per lever, the sweep curve."""
    table, sweep, per_round = result.levers, result.sweep, result.per_round
    summaries, run = result.run.summaries, result.run.run
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise KprofInputError("--format html", "needs matplotlib (pip install 'kprof[html]')") from None
    parts = [
        f"<h1>{html.escape(run.subject.name)}: per-lever attribution</h1>",
        f"<p>{html.escape(run.timer_label)}; {html.escape(CONVENTION)}.</p>",
    ]
    if (commits := commits_table(run)) is not None:  # a revision run: its commits and what --paths kept
        parts += [f"<h2>{html.escape(commits.title)}</h2>", html_table(commits)]
    parts += [f"<p>{html.escape(line)}</p>" for line in revision_lines(run)]
    for t in sequence_tables(table, run) + grid_tables(table, run):
        parts.append(f"<h2>{html.escape(t.title)}</h2>")
        parts.append(html_table(t))
    for case, series in per_round.items():
        keys = [k for k in series if k.design in ("shapley", "add_one", "leave_one_out", "sequence")]
        if keys:
            parts.append(_per_round_plot(plt, table, case, series, keys))
    if len(sweep):
        for (case, rows), t in zip(sweep.groupby("case", sort=False), sweep_tables(sweep)):
            parts.append(f"<h2>{html.escape(t.title)}</h2>")
            parts.append(html_table(t))
            parts.append(_sweep_plot(plt, case, rows))
    parts += [f"<p>{html.escape(aa_line(s))}</p>" for s in summaries.values()]
    said = [*status_lines(result.run), *((w, "warning") for w in result.run.warnings)]  # refusals, failures
    parts += [f"<p class='{style}'>{html.escape(line)}</p>" for line, style in said]
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>kprof attribution</title>"
        "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}.error{color:#b00}.warning{color:#a60}"
        "</style></head><body>" + "\n".join(parts) + "</body></html>\n"
    )
