"""`kprof run` / `kprof report` output: per case and leg, time, effect with interval, verdict; the
per-kernel breakdown of the torch collector; planted vs recovered for calibration runs."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import pandas as pd

from kprof.analysis.run_analysis import RunReport
from kprof.analysis.run_effects import CaseSummary
from kprof.designs import sequence
from kprof.events import RESTARTED, death_sentence
from kprof.report.effects import EVERY_ROW, View, best_leg_line, effect_text, hidden_notes, rerun_text, shown_rows
from kprof.report.numbers import column_decimals, number_column, with_decimals
from kprof.report.refusals import refusal_lines
from kprof.report.table import Cell, Column, Document, Table, records, verdict_cell
from kprof.report.text import cut_words
from kprof.run_model import CaseStatus, Role, Run
from kprof.store.run_tables import NO_OUTPUTS

EFFECT_CONVENTION = (
    "effect = 100·(t_baseline/t_leg − 1), positive = faster; Hodges–Lehmann estimate with exact 95% interval "
    "over rounds"
)


def effect_cell(row: pd.Series | dict[str, Any], with_verdict: bool = False) -> Cell:
    """The effect text, coloured by its verdict (and followed by it in grids)."""
    text = effect_text(row)
    if with_verdict and row["verdict"] != "BIASED":
        text = f"{text} {row['verdict']}"
    return verdict_cell(text, row["verdict"])


def bias_text(s: CaseSummary) -> str:
    """What an A/A that excludes 0 does to the case: its bias bound, in every other interval."""
    bound = 100 * (math.exp(s.bias) - 1)
    return (
        f"A/A excludes 0: a bias up to ±{bound:.2f}% is folded into every other interval; "
        "BIASED where that bias could explain the effect"
    )


def summary_line(s: CaseSummary) -> str:
    aa = s.aa
    aa_text = "–" if aa is None else f"{aa.effect_pct:+.2f}% [{aa.ci_low_pct:+.2f}, {aa.ci_high_pct:+.2f}]"
    holds = "A/A interval holds 0" if s.aa_copies <= 1 else f"all {s.aa_copies} A/A copies hold 0"
    gate = bias_text(s) if s.biased else holds
    quantum = f", timer quantum {s.quantum_ns:.0f} ns" if s.quantum_ns and s.quantum_ns < 1000 else ""
    return (
        f"A/A {aa_text} ({gate}); {s.rounds} rounds (verdicts need ≥ {s.fewest_rounds}); "
        f"noise floor ±{s.noise_floor_pct:.2f}%, resolvable effect {s.mde_pct:.2f}% (found 80% of the time), "
        f"threshold ±{s.threshold_pct:.2f}%{quantum}; "
        f"{_same_rounds(s)}" + (f"; timer {s.timer}" if s.timer else "")
    )


def _same_rounds(s: CaseSummary) -> str:
    """How many rounds would let a leg with no effect read SAME, at this case's noise and placement."""
    if s.aa is None:
        return "rounds for SAME: unknown (no A/A)"
    more = "; more buffer sets narrow the placement term (--buffer-sets)" if s.placement_in_the_way else ""
    if s.rounds_for_same is None and s.rounds_for_same_if_chance is None:
        why = (
            "placement"  # without its term some number of rounds would do
            if s.placement_in_the_way
            else "noise, placement or the spread between runs"
            if s.between_runs_pct > 0
            else "noise or placement"
        )
        return f"a leg with no effect does not read SAME 80% of the time even at 64 rounds ({why}){more}"
    if s.rounds_for_same_if_chance is None:
        return f"a leg with no effect reads SAME 80% of the time from {s.rounds_for_same} rounds"
    real = "not even at 64 rounds" if s.rounds_for_same is None else f"from {s.rounds_for_same} rounds"
    return (
        f"a leg with no effect reads SAME 80% of the time from {s.rounds_for_same_if_chance} rounds if this "
        f"run's {' and '.join(s.doubtful)} {'is' if len(s.doubtful) == 1 else 'are'} chance (not beyond doubt), "
        f"{real} if real{more}"
    )


def header(run: Run, what: str = "") -> str:
    # graphs captured once per run keep each capture's own offset as a bias of its leg: say so
    once = (
        " · graphs captured once per run" if run.placement.device != "cpu" and run.protocol.captures == "once" else ""
    )
    where = f"preset {run.preset} · {run.placement.device} {run.dtype}"
    return f"{run.subject.name}{what} · {where} · timer: {run.timer_label}{once}"


def _bandwidth_columns(table: pd.DataFrame, run: Run) -> list[str]:
    """Bandwidth columns: only for device time (interpreter bandwidth would be meaningless)."""
    return [c for c in table.columns if c.startswith("gbps_")] if run.device_timed else []


def case_timer_info(run: Run, gpu: str | int | None) -> dict[str, Any]:
    """The measurements of the GPU a case ran on (the run's own when it was not sharded)."""
    per_gpu = (run.timer_info.get("gpus") or {}).get(gpu) if gpu is not None else None
    return per_gpu or run.timer_info


def _pct_copy(row: pd.Series, run: Run, gpu: str | int | None) -> str:
    copy = case_timer_info(run, gpu).get("copy_gbps")
    if not copy or "gbps_unique" not in row or not run.device_timed:
        return "–"
    return f"{100 * row['gbps_unique'] / copy:.0f}%"


def _case_table(
    case: str, rows: pd.DataFrame, run: Run, status: CaseStatus, summary: CaseSummary | None, view: View
) -> Table:
    bw = _bandwidth_columns(rows, run)
    columns = [Column("leg", "left", is_name=True), Column("µs (median)")]
    columns += [Column(f"GB/s {c.removeprefix('gbps_')}") for c in bw]
    columns += [Column("% copy (unique)")] if bw else []
    columns += [Column("effect [95% CI]"), Column("a rerun lands in"), Column("verdict", "left")]
    gpu = status.gpu
    where = f" · GPU {gpu} ({status.device_name or '?'})" if len(run.placement.gpus) > 1 else ""
    table = Table(case + where, columns)
    shown = shown_rows(rows, view)
    for (_, r), time in zip(shown.iterrows(), number_column(shown["time_us"].tolist()), strict=True):
        bandwidth = [f"{r[c]:,.0f}" for c in bw] + ([_pct_copy(r, run, gpu)] if bw else [])
        raced = " (race?)" if r.get("race_rounds", 0) else ""  # its outputs changed after a timed round
        verdict = verdict_cell(r["verdict"] + raced, r["verdict"])
        table.add(r["leg"], time, *bandwidth, effect_text(r), rerun_text(r), verdict)
    table.notes += hidden_notes(rows, view)
    reference = rows.loc[rows["verdict"].eq("REFERENCE"), "leg"]
    if summary is not None and summary.distrust:
        table.notes.append(summary.distrust)  # in place of a headline no verdict of the case supports
    elif len(reference) and (best := best_leg_line(rows, str(reference.iloc[0]))):
        table.notes.append(best)
    if summary is not None:
        table.notes.append(summary_line(summary))
        if summary.biased and (hint := processes_hint(run.protocol.processes, summary.placements)):
            table.notes.append(hint)
        if summary.placements and "placement_pct" in rows:
            spread = rows["placement_pct"].fillna(0.0)
            line = placement_line(summary.placements, spread, run.protocol.processes, summary.pooled_placement_pct)
            table.notes.append(line)
    return table


def between_runs_line(sd_pct: float) -> str:
    """What the rerun column assumes of fresh runs: a known spread between them (--between-runs) in
    every interval, or none beyond what this run's rounds, buffer sets and processes show."""
    if sd_pct > 0:
        return (
            f"fresh runs differ by ±{sd_pct:.2f}% SD per leg (--between-runs), in every interval: a fresh run's "
            'estimate lands in "a rerun lands in" 95% of the time'
        )
    return (
        "\"a rerun lands in\": 95% of fresh runs' estimates, where runs differ only as this run's rounds, "
        "buffer sets and processes do (a spread between runs measured before: --between-runs)"
    )


def processes_hint(processes: int, placements: int) -> str:
    """Under an A/A that excludes 0 in a case timed in fewer processes than buffer sets: each
    process's own offset of the copy is seen through few degrees of freedom and reads as a bias
    (synthetic clean cases with 0.3% process offsets: flagged 14.4% of the time with 2 processes,
    1.7% with one set per process). Empty where each set had its process, or there was one."""
    if processes < 2 or placements <= processes:
        return ""
    return (
        f"the A/A's offset may be its worker processes', not a bias: {processes} processes over {placements} buffer "
        f"sets cannot tell them apart well; --processes {placements} (one set each) can"
    )


def placement_line(placements: int, spread: pd.Series, processes: int = 1, pooled: float = 0.0) -> str:
    """What the rotation over buffer sets at varied offsets (in several processes) showed for a
    case's legs: the spread pooled over them, which every interval carries at 99.5%, and the legs
    whose own spread is counted beyond it."""
    where = f" in {processes} processes" if processes > 1 else ""
    head = f"placement: {placements} buffer sets at varied offsets{where}; "
    own = spread > pooled + 1e-12
    if not (spread > 0).any():
        return head + "no spread between sets is counted (none exceeds the rounds' noise)"
    parts = [f"spread pooled over the legs ±{pooled:.2f}%, in every interval"] if pooled > 0 else []
    if own.any():
        beyond = "beyond it" if pooled > 0 else "between sets"
        parts.append(f"{int(own.sum())} leg(s) vary {beyond} (largest ±{spread.max():.2f}%), in their intervals")
    return head + "; ".join(parts)


def _kernel_breakdown(kernel_effects: pd.DataFrame) -> Table:
    table = Table(
        "per kernel, from the torch profiler (µs per leg call; effect vs baseline, 95% CI)",
        [
            Column("case · kernel", "left", is_name=True),
            Column("leg", "left"),
            Column("µs"),
            Column("effect [95% CI]"),
            Column("verdict", "left"),
        ],
    )
    times = number_column(kernel_effects["time_us"].tolist())
    for (_, r), time in zip(kernel_effects.iterrows(), times, strict=True):
        table.add(r["case"], r["leg"], time, effect_text(r), verdict_cell(r["verdict"], r["verdict"]))
    return table


def status_lines(report: RunReport) -> list[tuple[str, str]]:
    """(text, style): what was not measured is an error; a worker started again after it died, a
    process of a whole program that failed in one round, and legs that launch what the baseline
    launches are warnings."""
    missing = report.missing
    refused = refusal_lines(((m.case, m.leg, m.reason) for m in missing if m.refused), report.run.legs)
    lines = [(m.text, "error") for m in missing if not m.refused] + [(text, "error") for text in refused]
    for case, status in report.statuses.items():
        lines += [
            (death_sentence(case, str(d.get("step", "")), str(d.get("leg") or ""), d.get("reason")), "warning")
            for d in status.deaths
            if d["outcome"] == RESTARTED
        ]
        failures = status.failures  # a whole program's process that failed in one round
        lines += [(f"{case} · {where}: failed: {why}", "warning") for where, why in failures.items()]
        lines += [
            (
                f"{case} · {leg}: launches exactly what the baseline launches (its features change nothing here)",
                "warning",
            )
            for leg in status.no_op_legs
        ]
    return lines


def spin_ladder_note(case: str, ladder: dict[str, Any]) -> str:
    """How a case's spins were sized (kprof.timer.spins): the fitted ladder and the cycles used."""
    cycles = ", ".join(f"{pct}% = {n:,} cycles" for pct, n in ladder["planted_cycles"].items())
    return (
        f"{case}: spins sized on a ladder of {len(ladder['cycles'])} spins timed like the case: past "
        f"{ladder['c0_cycles']:.0f} cycles each cycle adds {ladder['ns_per_cycle']:.3f} ns; planted {cycles}"
    )


def calibration_tables(report: RunReport) -> list[Table]:
    """Planted vs recovered, and what each protocol says about identical (A/A) legs."""
    planted = Table(
        "planted delays (effect convention: negative = slower; planted = the spin timed alone)",
        [
            Column("case", "left"),
            Column("planted"),
            Column("planted effect [95% CI]"),
            Column("recovered [95% CI]"),
            Column("inside", "left"),
            Column("verdict", "left"),
        ],
    )
    for _, r in report.calibration.iterrows():
        planted.add(
            r["case"],
            f"+{r['requested_pct']:g}% ({r['spin_us']:.2f} µs)",
            f"{r['planted_effect_pct']:+.2f}% [{r['planted_ci_low_pct']:+.2f}, {r['planted_ci_high_pct']:+.2f}]",
            f"{r['recovered_pct']:+.2f}% [{r['ci_low_pct']:+.2f}, {r['ci_high_pct']:+.2f}]",
            "yes" if r["inside"] else "NO",
            verdict_cell(r["verdict"], r["verdict"]),
        )
    for case, status in report.statuses.items():
        if ladder := status.spin_ladder:
            planted.notes.append(spin_ladder_note(case, ladder))
    effects, sign = report.effects, report.sign_rule
    aa_kprof = effects[effects["roles"].map(lambda roles: Role.AA.value in roles)]
    aa_pr = sign[sign["roles"].map(lambda roles: Role.AA.value in roles)] if len(sign) else sign
    called = int(aa_kprof["verdict"].isin(["FASTER", "SLOWER"]).sum())
    quoted = int(aa_pr["quoted"].sum()) if len(aa_pr) else 0
    planted.notes.append(
        f"Identical legs (A/A): kprof called {called} of {len(aa_kprof)} different (FASTER/SLOWER); "
        f"the PR method's 5-rounds-same-sign rule on the same samples quoted {quoted} of {len(aa_pr)}."
    )
    return [planted]


def commits_table(run: Run) -> Table | None:
    """The commits of a revision run: each is a lever, named by its short SHA in the other tables."""
    revisions = run.revisions
    if revisions is None or not revisions.commits:
        return None
    t = Table(
        f"commits ({revisions.repo})",
        [
            Column("commit", "left"),
            Column("subject", "left", is_name=True),
            Column("author date", "left"),
            Column("changes", "left"),
        ],
    )
    for c in revisions.commits:
        t.add(
            c["sha"][:7],
            cut_words(c.get("subject", ""), 90),
            c.get("author_date", "")[:10],
            c.get("diffstat", ""),
        )
    return t


def paths_line(paths: list[str], kept: int, left_out: list[dict[str, Any]], what: str) -> str:
    """``--paths``: how many commits touch them and the ones left out (the first few by name; the
    JSON lists every one); ``what`` says what a left-out commit means in this kind of run."""
    line = f"--paths {' '.join(paths)}: {kept} commits of the range touch them"
    if not left_out:
        return line
    shown = 8
    names = "; ".join(f"{c['sha'][:7]} {cut_words(c.get('subject', ''), 50)}" for c in left_out[:shown])
    more = f"; and {len(left_out) - shown} more (the JSON lists every one)" if len(left_out) > shown else ""
    return f"{line}; {len(left_out)} left out ({what}): {names}{more}"


def revision_lines(run: Run) -> list[str]:
    """Where a revision run's benchmark came from, and the commits --paths left out."""
    lines: list[str] = []
    revisions = run.revisions
    if revisions is None:
        return lines
    if revisions.benchmark is not None:
        b = revisions.benchmark
        where = f"at {b.in_tree} inside each revision's tree" if b.in_tree else "from where you keep it"
        lines.append(f"benchmark {b.path} (SHA-256 {b.sha256[:12]}…), {where}; each revision's code from its own tree")
    if revisions.paths:
        lines.append(
            paths_line(
                revisions.paths, len(revisions.commits), revisions.left_out, "in the head's tree, switched by no leg"
            )
        )
    return lines


def _gpu_spread_table(spread: pd.DataFrame) -> Table:
    """--aa-across-gpus: the same case and legs on two GPUs (rounds unpaired: two samples)."""
    table = Table(
        "the same case on every GPU (--aa-across-gpus; two GPUs, rounds unpaired)",
        [Column("leg", "left", is_name=True), Column("GPU A"), Column("GPU B"), Column("A µs"), Column("B µs")]
        + [Column("B vs A [95% CI]"), Column("verdict", "left")],
    )
    decimals = column_decimals([*spread["a_us"], *spread["b_us"]])  # A and B read side by side
    for _, r in spread.iterrows():
        a, b = with_decimals(r["a_us"], decimals), with_decimals(r["b_us"], decimals)
        table.add(
            r["leg"], str(r["gpu_a"]), str(r["gpu_b"]), a, b, effect_text(r), verdict_cell(r["verdict"], r["verdict"])
        )
    table.notes.append("the spread between GPUs of one model; no ratio inside a case ever mixes two GPUs")
    return table


def sequence_tables(table: pd.DataFrame, run: Run) -> list[Table]:
    """Per case, the range's commits oldest first: each against its parent revision as committed,
    and the revision it left against the base. A commit measured across one that could not be
    timed says which commits its effect spans."""
    if not len(table) or not table["design"].eq("sequence").any():
        return []
    table = table[table["design"].isin(sequence.QUANTITIES)]
    subjects = {f.name: f.doc for f in run.features}
    declared = {run.lever_names[i - 1] for i in sequence.points(run.legs) if i}
    tables = []
    for case, rows in table.groupby("case", sort=False):
        by = {(r["design"], r["lever"]): r for _, r in rows.iterrows()}
        t = Table(
            f"{case}: each commit against the revision before it (sequence), and against the base (cumulative)",
            [Column("commit", "left", is_name=True), Column("subject", "left")]
            + [Column("vs parent [95% CI]"), Column("vs base [95% CI]")],
        )
        for lever in run.lever_names:
            step, total = by.get(("sequence", lever)), by.get(("cumulative", lever))
            if step is None and total is None and lever not in declared:
                continue
            cells = [effect_cell(r, with_verdict=True) if r is not None else "not timed" for r in (step, total)]
            t.add(lever, cut_words(subjects.get(lever, ""), 60), *cells)
            spans = list(step["spans"]) if step is not None else []
            if len(spans) > 1:
                t.notes.append(f"{lever}: against {_before(spans[0], run)}, so its effect spans {', '.join(spans)}")
        if run.revisions is not None and run.revisions.paths:
            t.notes.append("a commit that --paths left out counts in the row of the next commit")
        tables.append(t)
    return tables


def _before(first: str, run: Run) -> str:
    """The revision before commit ``first`` of the range: the base, or the commit before it."""
    i = run.lever_names.index(first)
    return run.baseline.name if i == 0 else run.lever_names[i - 1]


def run_document(report: RunReport, view: View = EVERY_ROW) -> Document:
    run = report.run
    doc = Document()
    doc.text(header(run) + "; " + EFFECT_CONVENTION + ".", "bold")
    if (commits := commits_table(run)) is not None:
        doc.table(commits)
    for line in revision_lines(run):
        doc.text(line)
    copy = run.timer_info.get("copy_gbps")
    if copy and run.device_timed:
        doc.text(f"measured device-to-device copy: {copy:,.0f} GB/s (bytes read + written) = 100%")
    for case, rows in report.effects.groupby("case", sort=False):
        doc.table(
            _case_table(str(case), rows, run, report.statuses.of(str(case)), report.summaries.get(str(case)), view)
        )
    if report.summaries:
        doc.text(between_runs_line(report.between_runs_pct))
    for t in sequence_tables(report.sequence, run):
        doc.table(t)
    if checked := output_check_line(report.checks, run):
        doc.text(checked)
    for line, style in status_lines(report):
        doc.text(line, style)
    for warning in report.warnings:
        doc.text(warning, "warning")
    if len(report.kernel_effects):
        doc.table(_kernel_breakdown(report.kernel_effects))
    if len(report.calibration):
        for t in calibration_tables(report):
            doc.table(t)
    if len(report.gpu_spread):
        doc.table(_gpu_spread_table(report.gpu_spread))
    doc.data = to_json(report)
    doc.records = report.effects
    return doc


def output_check_line(checks: pd.DataFrame, run: Run) -> str:
    """Which check of the outputs ran before timing: against the baseline (by which rule), against
    a float64 reference, or none (a call that returns nothing). Empty for whole programs, whose
    outputs kprof does not see."""
    if run.is_program:
        return ""
    gate = checks[checks["round"] < 0] if len(checks) and "round" in checks else checks.iloc[0:0]
    if gate.empty:
        return "outputs: no check is stored for this run"
    rules = [r for r in dict.fromkeys(gate["rule"].astype(str)) if r != NO_OUTPUTS]
    if not rules:
        return (
            "outputs: none checked, the call returns nothing (return a result to check each leg against the baseline)"
        )
    with_reference = bool(gate["vs_reference"].notna().any()) if "vs_reference" in gate else False
    against = (
        "the outputs against a float64 reference too"
        if with_reference
        else "no float64 reference given, so the baseline's own outputs are not checked"
    )
    return f"outputs checked before timing: each leg against the baseline's ({', '.join(rules)}); {against}"


def aa_records(summaries: dict[str, CaseSummary]) -> list[dict[str, Any]]:
    return [
        {
            "case": s.case,
            "effect_pct": s.aa.effect_pct,
            "ci_low_pct": s.aa.ci_low_pct,
            "ci_high_pct": s.aa.ci_high_pct,
            "verdict": "BIASED" if s.biased else s.aa.verdict,
            "bias_bound_pct": 100 * (math.exp(s.bias) - 1),
            "noise_floor_pct": s.noise_floor_pct,
            "mde_pct": s.mde_pct,
            "placement_pct": s.placement_pct,
            "pooled_placement_pct": s.pooled_placement_pct,
            "rounds": s.rounds,
            "rounds_for_same": s.rounds_for_same,
            "rounds_for_same_if_chance": s.rounds_for_same_if_chance,
            "doubtful": list(s.doubtful),
            "placement_in_the_way": s.placement_in_the_way,
            "distrust": s.distrust,
        }
        for s in summaries.values()
        if s.aa is not None
    ]


def to_json(report: RunReport) -> dict[str, Any]:
    run = report.run
    return {
        "timer": run.timer_label,
        "captures": run.protocol.captures,
        "processes": run.protocol.processes,
        "between_runs_pct": report.between_runs_pct,
        "workload": run.subject.name,
        "device": run.placement.device,
        "legs": records(report.effects),
        "aa": aa_records(report.summaries),
        "kernels": records(report.kernel_effects),
        "calibration": records(report.calibration),
        "gpu_spread": records(report.gpu_spread),
        "sequence": records(report.sequence),
        "case_status": report.statuses.records(),
        "missing": [asdict(m) for m in report.missing],
        "output_check": output_check_line(report.checks, run),
        "warnings": [*(text for text, style in status_lines(report) if style == "warning"), *report.warnings],
        **revision_json(run),
    }


def revision_json(run: Run) -> dict[str, Any]:
    """A revision run's benchmark and the commits --paths left out, for JSON readers."""
    revisions = run.revisions
    if revisions is None:
        return {}
    return {
        "benchmark": asdict(revisions.benchmark) if revisions.benchmark else None,
        "commits": [{k: c.get(k) for k in ("sha", "subject")} for c in revisions.commits],
        "paths": revisions.paths,
        "left_out": [{k: c.get(k) for k in ("sha", "subject")} for c in revisions.left_out],
    }
