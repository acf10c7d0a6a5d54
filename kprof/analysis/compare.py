"""A against B: two samples per row — runs' rounds, repeated traces per side, or, when each side is
one trace of a loop, its steady steps (within-process replicates).

Hodges–Lehmann shift with Lehmann's distribution-free interval and the Mann–Whitney p,
Benjamini–Hochberg across the report. With one trace per side and fewer than ``MIN_STEADY_STEPS``
steady steps there is one sample: the delta is shown and no verdict is given.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import special

from kprof.analysis import stats as S
from kprof.analysis.run_effects import control_false_discoveries, kernel_case_labels
from kprof.analysis.trace_tables import StepReplicates
from kprof.ingest.names import labelled

NO_VERDICT = "ONE SAMPLE"
UNEVEN = "NOT EVERY STEP"  # a kernel that skips some steady steps: time per step is not one quantity
MIN_STEADY_STEPS = 6
# What the samples of a comparison are.
REPLICATES = {
    "runs": "fresh runs per side (each run's mean over its rounds; the spread between runs in every interval)",
    "rounds": "interleaved rounds of each run",
    "traces": "repeated traces per side",
    "steps": "steady steps of the one trace per side (within-process replicates)",
    "none": "one trace per side with too few steady steps: single samples",
}


@dataclass
class Side:
    """What one side contributes: a run's per-round times, or per-trace kernel and step tables."""

    label: str
    kind: str  # "run" or "traces"
    kernels: list[pd.DataFrame] = field(default_factory=list)  # one per-kernel table per trace
    steps: list[pd.DataFrame] = field(default_factory=list)
    step_replicates: list[StepReplicates] = field(default_factory=list)  # one per trace
    run_rounds: pd.DataFrame | None = None
    runs: list[pd.DataFrame] = field(default_factory=list)  # kind "runs": each fresh run's per-round times
    timers: list[str] = field(default_factory=list)  # run sides: what timed them (device time, or the host clock)
    effects: list[pd.DataFrame] = field(default_factory=list)  # kind "runs": each run's leg table (its intervals)


@dataclass
class Comparison:
    a: Side
    b: Side
    kernels: pd.DataFrame
    steps: pd.DataFrame
    legs: pd.DataFrame
    replicates: str  # a key of REPLICATES
    control: str | None = None  # runs: the leg whose shift between the runs is taken out of every other leg
    between_runs_pct: float = 0.0  # one run a side: a known SD of a leg's effect between fresh runs, in every interval

    @property
    def has_verdicts(self) -> bool:
        return self.replicates != "none"


def _verdict_rows(rows: list[dict[str, Any]]) -> pd.DataFrame:
    table = pd.DataFrame(rows)
    if not len(table) or "p" not in table:
        return table
    tested = table["verdict"].isin(S.VERDICTS)
    if "role" in table:  # the control leg is the yardstick, not one of the comparisons
        tested &= table["role"].ne(CONTROL)
    return control_false_discoveries(table, tested)


def _row(
    key: dict[str, Any], a: np.ndarray, b: np.ndarray, threshold: float, repeated: bool, between: float = 0.0
) -> dict[str, Any]:
    """One row of A against B; ``between`` (log units) is added to its interval in quadrature."""
    row = dict(key, a=float(np.median(a)), b=float(np.median(b)), n_a=len(a), n_b=len(b))
    if not repeated:
        row.update(
            effect_pct=100.0 * (row["a"] / row["b"] - 1.0),
            ci_low_pct=np.nan,
            ci_high_pct=np.nan,
            p=np.nan,
            verdict=NO_VERDICT,
        )
        return row
    row.update(S.with_verdict(S.with_placement(S.two_sample(a, b), between), threshold).row())
    return row


CONTROL = "CONTROL"  # the control leg's row: its own shift between the runs, the run-level shift


def relative_to(rounds: pd.DataFrame, control: str) -> pd.DataFrame:
    """Each leg's time per round divided by the control leg's in the same case and round (the
    control's row keeps its own time): a shift of the whole machine cancels in the ratio."""
    ctl = rounds[rounds["leg"] == control].set_index(["case", "round"])["t_ns"]
    ratio = rounds["t_ns"] / ctl.reindex(pd.MultiIndex.from_frame(rounds[["case", "round"]])).to_numpy()
    return rounds.assign(t_ns=rounds["t_ns"].where(rounds["leg"] == control, ratio)).dropna(subset=["t_ns"])


def _compare_runs(
    a: Side, b: Side, threshold: float, control: str | None, between_runs_pct: float = 0.0
) -> list[dict[str, Any]]:
    """Each (case, leg) as B's rounds against A's. ``between_runs_pct``: a known SD of a leg's
    effect between fresh runs, which two runs' rounds cannot show: each leg's time moves by half
    that variance per run, so a leg's shift between two runs by the SD itself, and its ratio to a
    control (two legs each run) by √2 of it; added to the interval in quadrature."""
    ra, rb = a.run_rounds, b.run_rounds
    assert ra is not None and rb is not None
    if control is not None:
        ra, rb = relative_to(ra, control), relative_to(rb, control)
    rows = []
    for (case, leg), ga in ra.groupby(["case", "leg"], sort=False):
        gb = rb[(rb["case"] == case) & (rb["leg"] == leg)]
        if len(gb):
            scale = _unit(leg, control)
            a_t, b_t = ga["t_ns"].to_numpy() / scale, gb["t_ns"].to_numpy() / scale
            weight = 1.0 if control is None or leg == control else math.sqrt(2)
            between = S.between_runs_half_width(between_runs_pct, weight)
            rows.append(_row({"case": case, "leg": leg}, a_t, b_t, threshold, True, between))
    return _leg_rows(rows, control)


def _unit(leg: str, control: str | None) -> float:
    """What a leg's times are divided by for its row: ns to µs, or 1 for a ratio to the control."""
    return 1e3 if control is None or leg == control else 1.0


def _leg_rows(rows: list[dict[str, Any]], control: str | None) -> list[dict[str, Any]]:
    """The legs' rows as the table shows them: the control's marked as the yardstick, cases named
    by their table labels."""
    shown = kernel_case_labels(row["case"] for row in rows)
    return [dict(row, case=shown[row["case"]], **({"role": CONTROL} if row["leg"] == control else {})) for row in rows]


MIN_RUNS = 2  # fresh runs a side needed to measure how runs differ (one run cannot)


def _run_means(runs: list[pd.DataFrame], control: str | None) -> pd.DataFrame:
    """One column per run, one row per (case, leg): the run's mean log time over its rounds (with a
    control, of each round's ratio to the control leg's time in that round)."""
    columns = []
    for i, rounds in enumerate(runs):
        if control is not None:
            rounds = relative_to(rounds, control)
        logs = rounds.assign(log_t=np.log(rounds["t_ns"].to_numpy(float)))
        columns.append(logs.groupby(["case", "leg"], sort=False)["log_t"].mean().rename(i))
    return pd.concat(columns, axis=1)


def _compare_run_sets(a: Side, b: Side, threshold: float, control: str | None) -> list[dict[str, Any]]:
    """Each (case, leg) as the shift of B's runs against A's, every run one value (Welch): what
    differs between fresh runs — placement, process offsets, the machine — is in the interval."""
    ma, mb = _run_means(a.runs, control), _run_means(b.runs, control)
    rows = []
    for key in ma.index.intersection(mb.index, sort=False):
        la, lb = ma.loc[key].dropna().to_numpy(), mb.loc[key].dropna().to_numpy()
        case, leg = key
        scale = _unit(leg, control)
        row = dict(case=case, leg=leg, a=float(np.exp(la.mean())) / scale, b=float(np.exp(lb.mean())) / scale)
        rows.append(row | dict(n_a=len(la), n_b=len(lb), **S.with_verdict(S.welch(la, lb), threshold).row()))
    return _leg_rows(rows, control)


def _compare_kernels(a: Side, b: Side, threshold: float, repeated: bool) -> list[dict[str, Any]]:
    per_kernel: dict[tuple[str, str, str], dict[str, Any]] = {}
    for side, tables in (("a", a.kernels), ("b", b.kernels)):
        for t in tables:
            for kind, name, short, mean_us, calls in zip(
                t["kind"], t["name"], t["short_name"], t["mean_us"], t["calls"]
            ):
                entry = per_kernel.setdefault((kind, name, short), {"a": [], "b": [], "calls_a": [], "calls_b": []})
                entry[side].append(mean_us)
                entry[f"calls_{side}"].append(calls)
    rows = []
    for (kind, name, short), e in per_kernel.items():
        key = {"kind": kind, "name": name, "short_name": short}
        calls = {f"calls_{side}": float(np.median(e[f"calls_{side}"])) for side in "ab" if e[side]}
        if e["a"] and e["b"]:
            row = _row(key, np.array(e["a"]), np.array(e["b"]), threshold, repeated)
        else:
            only = "a" if e["a"] else "b"
            row = dict(key, **{only: float(np.median(e[only]))}, verdict=f"ONLY IN {only.upper()}")
        rows.append(dict(row, **calls))
    return rows


def _steady_busy(steps: list[pd.DataFrame]) -> np.ndarray:
    return np.concatenate([s.loc[~s["warmup"], "busy_us"].to_numpy() for s in steps if len(s)] or [[]])


def _compare_steps(a: StepReplicates, b: StepReplicates, threshold: float) -> list[dict[str, Any]]:
    """Per kernel, its µs in each steady step of A against B's; calls are per step too."""
    rows = []
    for key in a.us.index.union(b.us.index, sort=False):
        kind, name = key
        row_key = {"kind": kind, "name": name, "short_name": a.short_names.get(name) or b.short_names.get(name)}
        if key not in a.us.index or key not in b.us.index:
            only = "a" if key in a.us.index else "b"
            present = a if only == "a" else b
            row = {
                only: float(np.median(present.us.loc[key])),
                f"calls_{only}": float(np.median(present.calls.loc[key])),
            }
            rows.append(dict(row_key, **row, verdict=f"ONLY IN {only.upper()}"))
            continue
        ua, ub = a.us.loc[key].to_numpy(float), b.us.loc[key].to_numpy(float)
        extra = {"calls_a": float(np.median(a.calls.loc[key])), "calls_b": float(np.median(b.calls.loc[key]))}
        if (ua <= 0).any() or (ub <= 0).any():
            row = _row(row_key, ua, ub, threshold, False)
            row["verdict"] = UNEVEN
        else:
            row = _row(row_key, ua, ub, threshold, True)
        rows.append(dict(row, **extra))
    return rows


def _replicates(a: Side, b: Side) -> str:
    if a.kind == "runs":
        return "runs"
    if a.kind == "run":
        return "rounds"
    if len(a.kernels) > 1 and len(b.kernels) > 1:
        return "traces"
    one_each = len(a.step_replicates) == 1 and len(b.step_replicates) == 1
    if one_each and min(a.step_replicates[0].steps, b.step_replicates[0].steps) >= MIN_STEADY_STEPS:
        return "steps"
    return "none"


def compare_sides(
    a: Side, b: Side, threshold_pct: float, control: str | None = None, between_runs_pct: float = 0.0
) -> Comparison:
    threshold = S.pct_threshold_to_log(threshold_pct)
    kernels: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    legs: list[dict[str, Any]] = []
    replicates = _replicates(a, b)
    metric = "GPU busy µs per step (steady steps)"
    if replicates == "runs":
        legs = _compare_run_sets(a, b, threshold, control)
    elif replicates == "rounds":
        legs = _compare_runs(a, b, threshold, control, between_runs_pct)
    elif replicates == "steps":
        ra, rb = a.step_replicates[0], b.step_replicates[0]
        kernels = _compare_steps(ra, rb, threshold)
        steps.append(_row({"metric": metric}, ra.busy_us, rb.busy_us, threshold, True))
    else:
        repeated = replicates == "traces"
        kernels = _compare_kernels(a, b, threshold, repeated)
        busy_a, busy_b = _steady_busy(a.steps), _steady_busy(b.steps)
        if len(busy_a) and len(busy_b):
            steps.append(_row({"metric": metric}, busy_a, busy_b, threshold, repeated))
    kt = _verdict_rows(kernels)
    if len(kt):
        kt = kt.sort_values("a", ascending=False, na_position="last").reset_index(drop=True)
    return Comparison(a, b, kt, _verdict_rows(steps), _verdict_rows(legs), replicates, control, between_runs_pct)


def effect_spread_between_runs(effects: list[pd.DataFrame]) -> tuple[float, int] | None:
    """What ``--between-runs`` asks for, measured on a side of fresh runs (each run's leg table:
    effect and 95% interval per case and leg): the SD (percent) of a leg's effect between runs
    beyond what each run's own interval allows for — per (case, leg), the variance of the runs' log
    effects less their mean squared standard error (half the interval's log width / z), averaged
    over legs and cut at 0 (legs without a spread pull the pool down, as they should) — and how
    many legs it pools. None with fewer than two runs or no interval to read."""
    if len(effects) < MIN_RUNS:
        return None
    z = float(special.ndtri(1 - S.ALPHA / 2))
    logs, errors = [], []
    for table in effects:
        rows = table[table["verdict"].isin([*S.VERDICTS, "BIASED"])].set_index(["case", "leg"])
        low, high = -np.log1p(rows["ci_high_pct"] / 100), -np.log1p(rows["ci_low_pct"] / 100)
        logs.append(-np.log1p(rows["effect_pct"] / 100))
        errors.append(((high - low) / (2 * z)) ** 2)
    est, err = pd.concat(logs, axis=1), pd.concat(errors, axis=1)
    kept = est.notna().all(axis=1) & np.isfinite(err).all(axis=1)
    if not kept.any():
        return None
    excess = est[kept].var(axis=1, ddof=1) - err[kept].mean(axis=1)
    return 100 * math.expm1(math.sqrt(max(0.0, float(excess.mean())))), int(kept.sum())


FAIL_ON = re.compile(r"^(credibly-|point-)?(slower|faster)>(\d+(?:\.\d+)?)%$")
DECIDED = ("FASTER", "SLOWER", "SAME")


@dataclass(frozen=True)
class FailRule:
    """``slower>2%``: a SLOWER verdict whose estimate is beyond 2% (a true 2% regression fails it
    about half the time). ``credibly-slower>2%``: the whole 95% interval is beyond 2%, so the gate
    fires only on a regression the data show to exceed 2%. ``point-slower>2%``: the point estimate
    alone is beyond 2%, verdict or not (nvbench_compare's rule; for one trace per side, where no
    interval exists). The first two fail closed: a row they cannot judge is ``undecided``."""

    direction: str  # "SLOWER" or "FASTER"
    size: float
    mode: str = "verdict"  # "verdict", "credibly" or "point"

    def _beyond(self, value: Any) -> bool:
        if value is None or pd.isna(value):
            return False
        return value < -self.size if self.direction == "SLOWER" else value > self.size

    def _far_bound(self, row: pd.Series) -> Any:
        """The interval's end on the gate's side (its slower end for a slower gate)."""
        return row.get("ci_low_pct") if self.direction == "SLOWER" else row.get("ci_high_pct")

    def _near_bound(self, row: pd.Series) -> Any:
        return row.get("ci_high_pct") if self.direction == "SLOWER" else row.get("ci_low_pct")

    def breaks(self, row: pd.Series) -> bool:
        if self.mode == "point":
            return self._beyond(row["effect_pct"])
        if self.mode == "credibly":
            return self._beyond(self._near_bound(row))
        return row.get("verdict") == self.direction and self._beyond(row["effect_pct"])

    def undecided(self, row: pd.Series) -> bool:
        """A row the gate cannot judge: no decided verdict (UNRESOLVED, ONE SAMPLE, BIASED …) or, for
        ``credibly``, no interval, while its interval (or estimate, without one) reaches beyond the
        size. The point rule judges every row."""
        if self.mode == "point" or self.breaks(row):
            return False
        far = self._far_bound(row)
        no_interval = far is None or pd.isna(far) or math.isinf(far)  # ±inf: too few rounds to bound it
        if self.mode == "credibly":
            return no_interval and self._beyond(row["effect_pct"])
        return row.get("verdict") not in DECIDED and self._beyond(row["effect_pct"] if no_interval else far)


def parse_gate(rule: str) -> FailRule:
    """``slower>2%`` → FailRule("SLOWER", 2.0); ``credibly-faster>1%`` → FailRule("FASTER", 1.0, "credibly")."""
    m = FAIL_ON.match(rule.strip().lower())
    if not m:
        raise ValueError(rule)
    mode = (m.group(1) or "verdict-").rstrip("-")
    return FailRule(m.group(2).upper(), float(m.group(3)), mode)


@dataclass
class RuleResult:
    broken: list[str]  # rows that break the rule
    undecided: list[str]  # rows it cannot judge (or, first, why the whole comparison cannot be judged)


def _describe(r: pd.Series, label: str) -> str:
    interval = f" [{r['ci_low_pct']:+.2f}, {r['ci_high_pct']:+.2f}]" if not pd.isna(r.get("ci_low_pct")) else ""
    return f"{r[label]}: {r['effect_pct']:+.2f}%{interval} ({r.get('verdict')})"


def judge(comparison: Comparison, gate: FailRule) -> RuleResult:
    """Every row (legs, kernels, steps) against ``gate``; the control leg is the yardstick, never a
    row. One trace a side without enough steps gives no interval anywhere: only the point rule can
    judge it."""
    result = RuleResult([], [])
    runs = (len(comparison.a.runs), len(comparison.b.runs))
    if comparison.replicates == "runs" and min(runs) < MIN_RUNS and gate.mode != "point":
        result.undecided.append(
            f"{runs[0]} and {runs[1]} fresh run(s) a side: judging between runs needs at least {MIN_RUNS} a side "
            "(run the benchmark again into the side's folder)"
        )
    if not comparison.has_verdicts and gate.mode != "point":
        result.undecided.append(
            f"one sample per side ({REPLICATES['none']}): no interval to judge; give repeated traces or at least "
            f"{MIN_STEADY_STEPS + 1} steps per trace, or use a point rule ('point-{gate.direction.lower()}>"
            f"{gate.size:g}%')"
        )
    kernels = labelled(comparison.kernels)  # named as the table names them: short names may be shared
    for table, label in ((kernels, "label"), (comparison.steps, "metric"), (comparison.legs, "leg")):
        if not len(table) or "effect_pct" not in table:
            continue
        for _, r in table.iterrows():
            if pd.isna(r.get("effect_pct")) or r.get("role") == CONTROL:
                continue
            if gate.breaks(r):
                result.broken.append(_describe(r, label))
            elif comparison.has_verdicts and gate.undecided(r):
                result.undecided.append(_describe(r, label))
    return result
