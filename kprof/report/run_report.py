"""`kprof run` / `kprof report` output: per case and leg, time, effect with interval, verdict."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from kprof.analysis.run_effects import CaseSummary

VERDICT_STYLE = {
    "FASTER": "green",
    "SLOWER": "red",
    "SAME": "cyan",
    "UNRESOLVED": "yellow",
    "BIASED": "magenta",
    "REFERENCE": "dim",
    "MEASURED": "dim",
}


def effect_text(row: pd.Series) -> str:
    """``+2.31% [+1.90, +2.70]``: estimate and 95% interval, positive = faster."""
    if row["verdict"] == "REFERENCE":
        return "reference"
    if row["verdict"] == "MEASURED":
        return "planted delay, timed alone"
    if row["verdict"] == "BIASED":
        return "– (A/A biased)"
    lo, hi = row["ci_low_pct"], row["ci_high_pct"]
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{row['effect_pct']:+.2f}% [no 95% interval at {row['rounds']} rounds]"
    return f"{row['effect_pct']:+.2f}% [{lo:+.2f}, {hi:+.2f}]"


def _time_text(us: float) -> str:
    return f"{us:,.1f}" if us >= 100 else f"{us:.3f}"


def _summary_line(s: CaseSummary) -> str:
    aa = s.aa
    aa_text = "–" if aa is None else f"{aa.effect_pct:+.2f}% [{aa.ci_low_pct:+.2f}, {aa.ci_high_pct:+.2f}]"
    gate = "BIASED: nothing quoted" if s.biased else "A/A interval holds 0"
    quantum = f", timer quantum {s.quantum_ns:.0f} ns" if s.quantum_ns and s.quantum_ns < 1000 else ""
    return (
        f"A/A {aa_text} ({gate}); {s.rounds} rounds; noise floor ±{s.noise_floor_pct:.2f}%, "
        f"resolvable effect {s.mde_pct:.2f}%, verdict threshold {s.threshold_pct:.2f}%{quantum}; "
        f"rounds needed to resolve the practical threshold: {s.rounds_for_threshold}"
    )


def device_timed(meta: dict[str, Any]) -> bool:
    return meta["device"] != "cpu"


def _columns(table: pd.DataFrame, meta: dict[str, Any]) -> list[str]:
    """Bandwidth columns: only for device time (interpreter bandwidth would be meaningless)."""
    return [c for c in table.columns if c.startswith("gbps_")] if device_timed(meta) else []


def _copy_gbps(meta: dict[str, Any]) -> float | None:
    return (meta.get("timer_info") or {}).get("copy_gbps")


def _pct_copy(row: pd.Series, meta: dict[str, Any]) -> str:
    copy = _copy_gbps(meta)
    if not copy or "gbps_unique" not in row or not device_timed(meta):
        return "–"
    return f"{100 * row['gbps_unique'] / copy:.0f}%"


def render_terminal(
    table: pd.DataFrame, summaries: dict[str, CaseSummary], meta: dict[str, Any], console: Console
) -> None:
    console.print(
        f"[bold]{meta['workload_name']}[/bold] · preset {meta['preset']} · {meta['device']} "
        f"{meta['dtype']} · timer: [bold]{timer_label(meta)}[/bold]"
    )
    bw = _columns(table, meta)
    copy = _copy_gbps(meta)
    if copy and device_timed(meta):
        console.print(f"measured device-to-device copy: {copy:,.0f} GB/s (bytes read + written) = 100%")
    for case, rows in table.groupby("case", sort=False):
        t = Table(title=f"{case}", title_justify="left")
        t.add_column("leg", no_wrap=True)
        t.add_column("µs (median)", justify="right")
        for c in bw:
            t.add_column(f"GB/s {c.removeprefix('gbps_')}", justify="right")
        if bw:
            t.add_column("% copy (unique)", justify="right")
        t.add_column("effect vs baseline, 95% CI (+ = faster)", justify="right")
        t.add_column("verdict")
        for _, r in rows.iterrows():
            style = VERDICT_STYLE.get(r["verdict"], "")
            pct = [_pct_copy(r, meta)] if bw else []
            t.add_row(
                r["leg"],
                _time_text(r["time_us"]),
                *[f"{r[c]:,.0f}" for c in bw],
                *pct,
                effect_text(r),
                f"[{style}]{r['verdict']}[/{style}]",
            )
        console.print(t)
        if case in summaries:
            console.print("  " + _summary_line(summaries[case]))
    for case, status in meta.get("case_status", {}).items():
        if status.get("status") == "failed":
            console.print(f"[red]case {case} failed:[/red] {status.get('reason')}")
        for leg, reason in (status.get("failed") or {}).items():
            console.print(f"[red]{case} · {leg} not timed:[/red] {reason}")


def render_kernel_breakdown(kernel_effects: pd.DataFrame, markdown: bool) -> str:
    """Per-kernel device time per leg from the torch collector (e.g. stage 1 vs stage 2)."""
    if not len(kernel_effects):
        return ""
    lines = [
        "",
        "Per kernel, from the torch profiler (µs per leg call; effect vs baseline, 95% CI):",
        "",
        "| case · kernel | leg | µs | effect [95% CI] | verdict |",
        "|---|---|---|---|---|",
    ]
    for _, r in kernel_effects.iterrows():
        lines.append(f"| {r['case']} | {r['leg']} | {_time_text(r['time_us'])} | {effect_text(r)} | {r['verdict']} |")
    text = "\n".join(lines) + "\n"
    return text if markdown else text.replace("| ", "").replace(" |", "  ").replace("|---", "")


def timer_label(meta: dict[str, Any]) -> str:
    return meta.get("timer") or (
        "host-clock (CPU, Triton interpreter: not device time)"
        if meta["device"] == "cpu"
        else "cuda-events (device time)"
    )


def render_markdown(table: pd.DataFrame, summaries: dict[str, CaseSummary], meta: dict[str, Any]) -> str:
    bw = _columns(table, meta)
    lines = [
        f"**{meta['workload_name']}**, preset `{meta['preset']}`, {meta['device']} {meta['dtype']}; "
        f"timer: {timer_label(meta)}; effect = 100·(t_baseline/t_leg − 1), positive = faster, "
        f"Hodges–Lehmann estimate with exact 95% interval over rounds.",
        "",
    ]
    for case, rows in table.groupby("case", sort=False):
        extra = ["% copy (unique)"] if bw else []
        lines += [
            f"#### {case}",
            "",
            "| leg | µs | "
            + "".join(f"GB/s {c[5:]} | " for c in bw)
            + "".join(f"{e} | " for e in extra)
            + "effect [95% CI] | verdict |",
            "|---|---|" + "---|" * (len(bw) + len(extra)) + "---|---|",
        ]
        for _, r in rows.iterrows():
            pct = f"{_pct_copy(r, meta)} | " if bw else ""
            lines.append(
                f"| {r['leg']} | {_time_text(r['time_us'])} | "
                + "".join(f"{r[c]:,.0f} | " for c in bw)
                + pct
                + f"{effect_text(r)} | {r['verdict']} |"
            )
        if case in summaries:
            lines += ["", _summary_line(summaries[case]), ""]
    return "\n".join(lines) + "\n"


def to_json(table: pd.DataFrame, summaries: dict[str, CaseSummary], meta: dict[str, Any]) -> dict[str, Any]:
    legs = json.loads(table.to_json(orient="records"))
    aa = []
    for s in summaries.values():
        if s.aa is not None:
            aa.append(
                {
                    "case": s.case,
                    "effect_pct": s.aa.effect_pct,
                    "ci_low_pct": s.aa.ci_low_pct,
                    "ci_high_pct": s.aa.ci_high_pct,
                    "verdict": "BIASED" if s.biased else s.aa.verdict,
                    "noise_floor_pct": s.noise_floor_pct,
                    "mde_pct": s.mde_pct,
                    "rounds": s.rounds,
                }
            )
    return {
        "timer": timer_label(meta),
        "workload": meta["workload_name"],
        "device": meta["device"],
        "legs": legs,
        "aa": aa,
        "case_status": meta.get("case_status", {}),
    }


def render_calibration(
    calibration: pd.DataFrame, sign_rule: pd.DataFrame, effects: pd.DataFrame, markdown: bool
) -> str:
    """Planted vs recovered, and what each protocol says about identical (A/A) legs."""
    lines = ["", "Planted delays (effect convention: negative = slower; planted = the spin timed alone):", ""]
    lines += [
        "| case | planted | planted effect | recovered [95% CI] | inside | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for _, r in calibration.iterrows():
        lines.append(
            f"| {r['case']} | +{r['requested_pct']:g}% ({r['spin_us']:.2f} µs) | "
            f"{r['planted_effect_pct']:+.2f}% | {r['recovered_pct']:+.2f}% "
            f"[{r['ci_low_pct']:+.2f}, {r['ci_high_pct']:+.2f}] | {'yes' if r['inside'] else 'NO'} | "
            f"{r['verdict']} |"
        )
    aa_kprof = effects[effects["roles"].map(lambda roles: "aa" in roles)]
    aa_pr = sign_rule[sign_rule["roles"].map(lambda roles: "aa" in roles)] if len(sign_rule) else sign_rule
    called = int(aa_kprof["verdict"].isin(["FASTER", "SLOWER"]).sum())
    quoted = int(aa_pr["quoted"].sum()) if len(aa_pr) else 0
    lines += [
        "",
        f"Identical legs (A/A): kprof called {called} of {len(aa_kprof)} different (FASTER/SLOWER); "
        f"the PR method's 5-rounds-same-sign rule on the same samples quoted {quoted} of {len(aa_pr)}.",
        "",
    ]
    text = "\n".join(lines) + "\n"
    return text if markdown else text.replace("| ", "").replace(" |", "  ").replace("|---", "")
