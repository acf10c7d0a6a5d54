"""A run analysed from its tables: per-leg effects, the A/A gate, calibration, the PR method's sign
rule on the same samples, per-kernel effects (torch collector) and per-lever attribution. Reading
the tables from a run folder is kprof.commands.analyse's job."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from kprof.analysis.attribution import attribute_run, sweep_table
from kprof.analysis.run_effects import (
    CaseSummary,
    calibration_table,
    gpu_spread,
    kernel_case_labels,
    leg_effects,
    per_round_logs,
    round_statistics,
    sign_rule,
)
from kprof.designs import LegValues, Quantity, lever_values
from kprof.designs import sequence as seq
from kprof.ingest.names import name_labels
from kprof.run_model import CaseStatuses, Missing, Role, Run


@dataclass
class RunReport:
    run: Run
    samples: pd.DataFrame
    effects: pd.DataFrame
    summaries: dict[str, CaseSummary]
    checks: pd.DataFrame
    compile: pd.DataFrame
    calibration: pd.DataFrame
    sign_rule: pd.DataFrame
    kernel_effects: pd.DataFrame
    warnings: list[str]  # damaged parts left out (every intact round is still reported)
    gpu_spread: pd.DataFrame = field(default_factory=pd.DataFrame)  # --aa-across-gpus
    sequence: pd.DataFrame = field(default_factory=pd.DataFrame)  # a range's commits, each against its parent
    races: list[str] = field(default_factory=list)  # legs whose outputs changed after a timed round
    statuses: CaseStatuses = field(default_factory=CaseStatuses)  # how far each case got
    between_runs_pct: float = 0.0  # the spread between fresh runs in every interval (--between-runs)

    @property
    def missing(self) -> list[Missing]:
        """What the plan holds and the run did not measure (kprof.run_model.CaseStatuses.missing)."""
        return self.statuses.missing(self.run.case_names)


def no_rounds_message(run: Run, statuses: CaseStatuses) -> str:
    if run.is_program:
        failures = statuses.of(run.case_names[0]).failures
        if failures:
            return f"holds no finished round: every process failed (first: {next(iter(failures.values()))})"
    failed = [(case, s.reason) for case, s in statuses.items() if s.status == "failed" and s.reason]
    if failed:
        case, reason = failed[0]
        return f"holds no finished round: {len(failed)} case(s) failed (first, {case}: {reason})"
    return "holds no finished round yet"


@dataclass(frozen=True)
class RunTables:
    """What a report reads of a run folder: its samples (failed legs left out), the per-kernel
    times of the torch collector, the checks and compile rows, and what the reading had to say."""

    samples: pd.DataFrame
    kernels: pd.DataFrame
    checks: pd.DataFrame
    compile: pd.DataFrame
    statuses: CaseStatuses = field(default_factory=CaseStatuses)
    warnings: list[str] = field(default_factory=list)


def analyse(
    run: Run, tables: RunTables, threshold_pct: float | None = None, between_runs_pct: float | None = None
) -> RunReport:
    """The run's report from its tables: effects per leg and the A/A gate, per-kernel effects, the
    sequence of a range's commits, calibration, the sign rule, races. ``threshold_pct`` and
    ``between_runs_pct`` replace the run's own (kprof report --threshold, --between-runs)."""
    samples = tables.samples
    if run.is_program:
        cases = samples["case"].astype(str)
        samples = samples.assign(case=cases.map(kernel_case_labels(cases.unique())))
    threshold = run.threshold_pct if threshold_pct is None else threshold_pct
    between = run.between_runs_pct if between_runs_pct is None else between_runs_pct
    effects, summaries = leg_effects(samples, run.legs, threshold, run.bytes_per_call, between)
    kernels = tables.kernels
    kernel_effects = pd.DataFrame()
    if not kernels.empty:  # --collector torch: each kernel of each case becomes a case of its own
        kernel = kernels["kernel"].astype(str)
        as_samples = kernels.assign(
            case=kernels["case"].astype(str) + " · " + kernel.map(name_labels(kernel)),
            time_ns=kernels["total_us"] * 1e3,
            sample=0,
            burn_in=False,
            timer="torch",
        )
        kernel_effects, _ = leg_effects(as_samples, run.legs, threshold, between_runs_pct=between)
    sequence = pd.DataFrame()
    if any(leg.has(Role.SEQUENCE) for leg in run.legs):  # the answer a sequence run is for, in its report
        levers = attribute_run(samples, run.legs, run.lever_names, summaries, effects)
        sequence = levers[levers["design"].isin(seq.QUANTITIES)].reset_index(drop=True) if len(levers) else levers
    races = race_lines(tables.checks)
    return RunReport(
        run,
        samples,
        with_race_rounds(effects, tables.checks),
        summaries,
        tables.checks,
        tables.compile,
        calibration_table(samples, effects, run.legs),
        sign_rule(samples, run.legs),
        kernel_effects,
        [*races, *tables.warnings],
        gpu_spread(samples, run, threshold),
        sequence,
        races,
        tables.statuses,
        between,
    )


def _raced(checks: pd.DataFrame) -> pd.DataFrame:
    """The race checks that failed: a leg replayed after a timed round whose outputs changed."""
    if checks.empty or not {"round", "passed"} <= set(checks.columns):
        return checks.iloc[0:0]
    return checks[(checks["round"] >= 0) & ~checks["passed"].astype(bool)]


def race_lines(checks: pd.DataFrame) -> list[str]:
    """One line per leg whose outputs changed after any timed round: its times may not be of the
    work it should do (a race, or a leg that reads what another wrote), whatever its verdict says."""
    raced, lines = _raced(checks), []
    if raced.empty:
        return lines
    for (case, leg), failed in raced.groupby(["case", "leg"], sort=False):
        rounds = sorted(int(r) for r in failed["round"].unique())
        detail = str(failed["detail"].iloc[0]) if "detail" in failed else ""
        lines.append(
            f"{case} · {leg}: outputs changed after {len(rounds)} timed round(s) (first: round {rounds[0]}; "
            f"{detail}) — a race? its times may not be of the work it should do"
        )
    return lines


def with_race_rounds(effects: pd.DataFrame, checks: pd.DataFrame) -> pd.DataFrame:
    """The leg table with ``race_rounds``: how many timed rounds each leg failed its race check in."""
    raced = _raced(checks)
    if effects.empty or raced.empty:
        return effects.assign(race_rounds=0) if len(effects) else effects
    counts = raced.groupby(["case", "leg"])["round"].nunique()
    keys = pd.MultiIndex.from_arrays([effects["case"], effects["leg"]])
    return effects.assign(race_rounds=counts.reindex(keys, fill_value=0).to_numpy())


def without_failed_legs(samples: pd.DataFrame, statuses: CaseStatuses) -> pd.DataFrame:
    """A leg that failed its correctness check, or took its worker down, in any of a case's
    processes is not reported from the rounds another process timed before (its outputs differ on
    some buffer set, or it cannot be run on them)."""
    failed = {(case, leg) for case, status in statuses.items() for leg in (*status.failed, *status.crashed_legs)}
    if not failed or samples.empty:
        return samples
    keep = [key not in failed for key in zip(samples["case"], samples["leg"])]
    return samples[keep]


@dataclass
class Attribution:
    run: RunReport
    levers: pd.DataFrame
    sweep: pd.DataFrame
    per_round: dict[str, dict[Quantity, pd.Series]]  # case → each attribution quantity per round


def attribution(report: RunReport) -> Attribution:
    """Per-lever attribution of an analysed run: every design's quantities, each with its interval,
    the sweep table, and each quantity per round (for plots)."""
    run, samples = report.run, report.samples
    table = attribute_run(samples, run.legs, run.lever_names, report.summaries, report.effects)
    rounds = round_statistics(samples)
    per_round = {
        case: lever_values(LegValues(per_round_logs(rounds, case).dropna(how="any"), run.legs, tuple(run.lever_names)))
        for case in pd.unique(rounds["case"])
    }
    columns = {c.name: c.sweep_columns for c in run.cases}
    sweep = sweep_table(samples, run.legs, report.summaries, columns)
    return Attribution(report, table, sweep, per_round)
