"""`kprof attribute` output: the per-lever table a PR quotes, in terminal, markdown, JSON and HTML."""

from __future__ import annotations

import base64
import html
import io
import json
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from kprof.analysis.run_effects import CaseSummary
from kprof.errors import KprofInputError
from kprof.report.run_report import VERDICT_STYLE, effect_text, timer_label

DESIGN_TITLES = {
    "total": "all levers together vs baseline",
    "add_one": "add-one: baseline + lever",
    "leave_one_out": "leave-one-out: all levers − lever (revert one commit)",
    "shapley": "Shapley value (exact, from every combination; adds up to the total)",
    "interaction": "two-way interactions (±1-coded factorial effect)",
    "unexplained": "total − Σ add-one (what an additive story misses)",
}


def cell(row: pd.Series) -> str:
    """One grid cell: the run table's effect text, then the verdict (a biased case has none)."""
    text = effect_text(row)
    return text if row["verdict"] == "BIASED" else f"{text} {row['verdict']}"


def _grids(table: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    out = []
    for design in DESIGN_TITLES:
        sub = table[table["design"] == design]
        if len(sub):
            grid = sub.assign(text=sub.apply(cell, axis=1)).pivot(index="case", columns="lever", values="text")
            grid = grid.reindex(pd.unique(sub["case"]))
            out.append((design, grid.fillna("")))
    return out


SWEEP_RESULT_COLUMNS = {"case", "param", "value", "time_us", "trend_p", "bh_significant", "rounds"}
SWEEP_RESULT_COLUMNS |= {"effect_pct", "ci_low_pct", "ci_high_pct", "p", "verdict"}


def sweep_title(rows: pd.DataFrame) -> str:
    title = f"sweep {rows['param'].iloc[0]}, {rows['case'].iloc[0]} (Page trend p = {rows['trend_p'].iloc[0]:.2g}"
    if "lever_trend_p" in rows and rows["lever_trend_p"].notna().any():
        title += f"; target vs baseline at each value: Page trend p = {rows['lever_trend_p'].iloc[0]:.2g}"
    return title + ")"


def sweep_cells(rows: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """One case's sweep table: the value, what it means (the workload's columns), time, effect vs
    the unforced target and, when the baseline was forced too, the target's effect at that value."""
    extra = [c for c in rows.columns if c not in SWEEP_RESULT_COLUMNS and not c.startswith("lever_")]
    extra = [c for c in extra if rows[c].notna().any()]
    paired = "lever_verdict" in rows and rows["lever_verdict"].notna().any()
    headers = [str(rows["param"].iloc[0]), *extra, "µs", "vs unforced target [95% CI]"]
    headers += ["target vs baseline at this value [95% CI]"] if paired else []
    body = []
    for _, r in rows.iterrows():
        line = [str(r["value"]), *(str(r[c]) for c in extra), f"{r['time_us']:,.2f}", cell(r)]
        if paired:
            lever = pd.Series({k[len("lever_") :]: v for k, v in r.items() if k.startswith("lever_")})
            line.append(cell(pd.concat([lever, r[["rounds"]]])) if pd.notna(lever["verdict"]) else "")
        body.append(line)
    return headers, body


def _aa_line(s: CaseSummary) -> str:
    if s.aa is None:
        return f"{s.case}: no A/A leg"
    gate = "BIASED — nothing quoted" if s.biased else "holds 0"
    return (
        f"{s.case}: A/A {s.aa.effect_pct:+.2f}% [{s.aa.ci_low_pct:+.2f}, {s.aa.ci_high_pct:+.2f}] ({gate}); "
        f"verdict threshold {s.threshold_pct:.2f}%"
    )


def render_terminal(
    table: pd.DataFrame, sweep: pd.DataFrame, summaries: dict[str, CaseSummary], meta: dict[str, Any], console: Console
) -> None:
    console.print(
        f"[bold]{meta['workload_name']}[/bold] attribution · {meta['device']} {meta['dtype']} · timer: "
        f"{timer_label(meta)} · effect = 100·(t_without/t_with − 1), + = the lever makes it faster"
    )
    for design, grid in _grids(table):
        t = Table(title=DESIGN_TITLES[design], title_justify="left")
        t.add_column("case", no_wrap=True)
        for lever in grid.columns:
            t.add_column(lever, justify="right")
        for case, row in grid.iterrows():
            cells = []
            for v in row:
                verdict = v.rsplit(" ", 1)[-1] if v else ""
                style = VERDICT_STYLE.get(verdict, "")
                cells.append(f"[{style}]{v}[/{style}]" if style else v)
            t.add_row(str(case), *cells)
        console.print(t)
    if len(sweep):
        _sweep_terminal(sweep, console)
    for s in summaries.values():
        console.print("  " + _aa_line(s))


def _sweep_terminal(sweep: pd.DataFrame, console: Console) -> None:
    for _, rows in sweep.groupby("case", sort=False):
        headers, body = sweep_cells(rows)
        t = Table(title=sweep_title(rows), title_justify="left")
        for h in headers:
            t.add_column(h, justify="right")
        for line in body:
            t.add_row(*line)
        console.print(t)


def render_markdown(
    table: pd.DataFrame, sweep: pd.DataFrame, summaries: dict[str, CaseSummary], meta: dict[str, Any]
) -> str:
    lines = [
        f"**{meta['workload_name']}** per-lever attribution, {meta['device']} {meta['dtype']}, timer: "
        f"{timer_label(meta)}. Effect = 100·(t_without/t_with − 1): positive = the lever makes it faster; "
        "Hodges–Lehmann estimate [exact 95% interval] over rounds; verdicts after Benjamini–Hochberg.",
        "",
    ]
    for design, grid in _grids(table):
        lines += [
            f"**{DESIGN_TITLES[design]}**",
            "",
            "| case | " + " | ".join(grid.columns) + " |",
            "|---|" + "---|" * len(grid.columns),
        ]
        lines += [f"| {case} | " + " | ".join(row) + " |" for case, row in grid.iterrows()]
        lines.append("")
    if len(sweep):
        for _, rows in sweep.groupby("case", sort=False):
            headers, body = sweep_cells(rows)
            lines += [f"**{sweep_title(rows)}**", "", "| " + " | ".join(headers) + " |", "|---" * len(headers) + "|"]
            lines += ["| " + " | ".join(line) + " |" for line in body]
            lines.append("")
    lines += [_aa_line(s) for s in summaries.values()]
    return "\n".join(lines) + "\n"


def to_json(
    table: pd.DataFrame, sweep: pd.DataFrame, summaries: dict[str, CaseSummary], meta: dict[str, Any]
) -> dict[str, Any]:
    aa = [
        {
            "case": s.case,
            "effect_pct": s.aa.effect_pct,
            "ci_low_pct": s.aa.ci_low_pct,
            "ci_high_pct": s.aa.ci_high_pct,
            "verdict": "BIASED" if s.biased else s.aa.verdict,
        }
        for s in summaries.values()
        if s.aa is not None
    ]
    return {
        "workload": meta["workload_name"],
        "timer": timer_label(meta),
        "levers": json.loads(table.to_json(orient="records")),
        "aa": aa,
        "sweep": json.loads(sweep.to_json(orient="records")) if len(sweep) else [],
    }


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def render_html(
    table: pd.DataFrame,
    sweep: pd.DataFrame,
    per_round: dict[str, dict[str, pd.Series]],
    summaries: dict[str, CaseSummary],
    meta: dict[str, Any],
) -> str:
    """One self-contained page: the tables, per-round points with intervals per lever, the sweep curve."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise KprofInputError("--format html", "needs matplotlib (pip install 'kprof[html]')") from None
    parts = [
        f"<h1>{html.escape(meta['workload_name'])}: per-lever attribution</h1>",
        f"<p>{html.escape(timer_label(meta))}; effect = 100·(t_without/t_with − 1), positive = faster; "
        "Hodges–Lehmann estimate with exact 95% interval; verdicts after Benjamini–Hochberg.</p>",
    ]
    for design, grid in _grids(table):
        parts.append(f"<h2>{html.escape(DESIGN_TITLES[design])}</h2>")
        parts.append(grid.to_html(escape=True))
    for case, series in per_round.items():
        keys = [k for k in series if k.split("|")[0] in ("shapley", "add_one", "leave_one_out")]
        if not keys:
            continue
        fig, ax = plt.subplots(figsize=(8, 0.45 * len(keys) + 1.2))
        for i, key in enumerate(keys):
            pct = 100 * (np.exp(-series[key].to_numpy()) - 1)
            ax.scatter(
                pct, np.full(len(pct), i) + np.random.default_rng(i).uniform(-0.15, 0.15, len(pct)), s=10, alpha=0.6
            )
            design, lever = key.split("|")
            row = table[
                (table["case"] == case) & (table["design"] == design) & (table["lever"] == (lever or "(all levers)"))
            ]
            if len(row):
                r = row.iloc[0]
                ax.plot([r["ci_low_pct"], r["ci_high_pct"]], [i, i], color="black", lw=2)
                ax.plot([r["effect_pct"]], [i], "k|", ms=14)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(range(len(keys)), [k.replace("|", ": ") for k in keys])
        ax.set_xlabel("effect % per round (positive = faster); bar = 95% interval")
        ax.set_title(case)
        parts.append(f'<img alt="per-round effects, {html.escape(case)}" src="data:image/png;base64,{_png(fig)}">')
        plt.close(fig)
    if len(sweep):
        for case, rows in sweep.groupby("case", sort=False):
            headers, body = sweep_cells(rows)
            parts.append(f"<h2>{html.escape(sweep_title(rows))}</h2>")
            parts.append(pd.DataFrame(body, columns=headers).to_html(index=False, escape=True))
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
            parts.append(f'<img alt="sweep {html.escape(case)}" src="data:image/png;base64,{_png(fig)}">')
            plt.close(fig)
    parts += [f"<p>{html.escape(_aa_line(s))}</p>" for s in summaries.values()]
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>kprof attribution</title>"
        "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}</style></head><body>"
        + "\n".join(parts)
        + "</body></html>\n"
    )
