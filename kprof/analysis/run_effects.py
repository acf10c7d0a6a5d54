"""From raw samples of a run to per-leg effects with intervals and verdicts.

Per (case, leg, round) the within-round statistic is the 20%-trimmed mean of the cold samples;
per round ``d = ln(t_leg / t_baseline)``. Every A/A copy checks the case: if any copy's interval,
at level 1 − α/k for k copies (so a clean case is flagged at most α of the time), excludes 0, that
interval's far end is a bound on the case's bias, folded into every other interval of the case;
a leg is BIASED only where that bias could explain its effect (its FASTER or SLOWER does not
survive the bound). The first copy sets the noise floor.

A leg's verdict comes from its own interval and the user's threshold (kprof.analysis.stats.verdict),
so it never depends on which other legs are in the report. Multiplicity is controlled where a
family of look-alike comparisons is searched for its best member: the values of a sweep, per case
(Benjamini–Hochberg); the summary says the fewest rounds at which a verdict is possible.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from kprof.analysis import stats as S
from kprof.ingest.names import name_labels
from kprof.run_model import PER_CALL, PLANT, SPIN_PARAM, Leg, Role, Run

TRIM = 0.2
NO_BASELINE = "NO BASELINE"  # the case has no baseline rounds (a kernel the baseline never launches)


def kernel_case_labels(cases: Iterable[str]) -> dict[str, str]:
    """Each case → the name its tables show. A program run stores a kernel's case under the kernel's
    full name (the same in every round and leg); it is shown by the label that tells it from the
    other kernels given (the short name where no other kernel shares it). Other cases keep theirs."""
    cases = list(cases)
    kernels = [c.removesuffix(PER_CALL) for c in cases if c.endswith(PER_CALL)]
    shown = {name + PER_CALL: label + PER_CALL for name, label in name_labels(kernels).items()}
    return {case: shown.get(case, case) for case in cases}


def round_statistics(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per (case, leg, round) of the timed rounds: trimmed mean and median of the samples (ns)."""
    timed = samples[~samples["burn_in"] & (samples["time_ns"] > 0)]  # a zero time has no logarithm
    keys = ["case", "leg", "round"]
    g = timed.groupby(keys, sort=False)["time_ns"]
    out = g.agg(median_ns="median", n="size").reset_index()
    # The trimmed mean of each group without a Python call per group (scipy.stats.trim_mean's cut:
    # int(TRIM · n) samples from each end): rank the samples within their group, keep the middle.
    ordered = timed[[*keys, "time_ns"]].sort_values([*keys, "time_ns"], kind="stable")
    grouped = ordered.groupby(keys, sort=False)["time_ns"]
    rank, size = grouped.cumcount(), grouped.transform("size")
    cut = (TRIM * size).astype(int)
    kept = ordered[(rank >= cut) & (rank < size - cut)]
    trimmed = kept.groupby(keys, sort=False)["time_ns"].mean().rename("t_ns").reset_index()
    return out.merge(trimmed, on=keys, how="left")[[*keys, "t_ns", "median_ns", "n"]]


@dataclass
class CaseSummary:
    case: str
    rounds: int
    sigma_aa: float
    noise_floor_pct: float
    mde_pct: float
    threshold_pct: float
    aa: S.Effect | None
    quantum_ns: float | None
    rounds_for_same: int | None  # rounds at which a leg with no effect reads SAME 80% of the time (None: > 64)
    fewest_rounds: int = 6  # below this the exact test cannot give a verdict (a sweep family needs more)
    aa_copies: int = 1
    placement_pct: float = 0.0  # the A/A's spread between buffer sets beyond the rounds' noise
    pooled_placement_pct: float = 0.0  # the legs' spread pooled: every interval carries at least its term
    placements: int = 0  # buffer sets (placements) the rounds rotated over
    bias: float = 0.0  # the A/A's bias bound, log units (0: every copy holds 0), in every other interval
    timer: str = ""  # the short name of the timer of this case's samples (cuda-events, cuda-kernel-time, …)
    ticks: dict[str, float] = field(default_factory=dict)  # each leg's timer-rounding bias bound, log units
    distrust: str = ""  # why no verdict of this case stands: its baseline disagrees with its own A/A copy
    between_runs_pct: float = 0.0  # the known SD of a leg's effect between fresh runs, in every interval
    # the rounds for SAME if the A/A's widening terms not beyond doubt (``doubtful``, in words) are chance;
    # None where no such term changes the count
    rounds_for_same_if_chance: int | None = None
    doubtful: tuple[str, ...] = ()
    placement_in_the_way: bool = False  # no rounds reach SAME, and the placement term is why (more buffer sets help)

    @property
    def first_rounds_for_same(self) -> int | None:
        """The count the footer gives first: the one were the doubtful terms chance, where there is one."""
        return self.rounds_for_same_if_chance or self.rounds_for_same

    def tick(self, *legs: str) -> float:
        """The rounding bias bound of a comparison of ``legs`` (log units): the sum of theirs."""
        return sum(self.ticks.get(leg, 0.0) for leg in legs)

    @property
    def derived_tick(self) -> float:
        """The bound for a quantity derived from several legs (a Shapley value, a leave-one-out
        difference, an interaction): each is a difference of weighted legs whose weights sum to at
        most one on each side, so at most twice the largest leg's bound."""
        return 2 * max(self.ticks.values(), default=0.0)

    @property
    def biased(self) -> bool:
        """Whether an A/A copy excludes 0 (its bias bound is then in every other interval)."""
        return self.bias > 0


TICK_JITTER_NS = 2.0  # device timestamps converted to ns land ±1 ns around their tick


def timer_quantum(samples: pd.DataFrame) -> float | None:
    """The device timer's tick: the step between groups of sample values, where values within
    TICK_JITTER_NS of each other are one group (an H200's kernel times come as 5,760, 5,761,
    5,791, 5,792 … ns: a 32 ns tick read with ±1 ns rounding). Quiet legs may each read one value
    only, so the smallest step between groups can be many ticks: the tick is the largest divisor of
    that step of which (nine in ten of) the steps are whole multiples. None for the host clock, and
    where fewer than three groups leave it undetermined (one step has any divisor)."""
    if not samples["timer"].str.startswith("cuda").any():
        return None
    values = np.unique(np.round(samples["time_ns"].to_numpy()))
    groups = np.split(values, np.flatnonzero(np.diff(values) > TICK_JITTER_NS) + 1)
    if len(groups) < 3:
        return None
    steps = np.diff([g.mean() for g in groups])
    smallest = float(np.median(steps[steps < 1.5 * steps.min()]))  # one tick apart (a group's mean wobbles)
    for divisor in range(1, int(smallest // (2 * TICK_JITTER_NS)) + 1):
        tick = smallest / divisor
        off = np.abs(steps / tick - np.round(steps / tick)) * tick
        if np.mean(off <= TICK_JITTER_NS) >= 0.9:  # a stray group (a sum of several kernels) may not fit
            return tick
    return smallest


def tick_bias_ns(quantum: float, spread: float, dithered: bool = False) -> float:
    """The most a timer's rounding can bias the round statistic of a duration read through it (ns),
    given the spread (SD) of its readings. The readings' own spread overstates the spread
    underneath by the rounding's q²/12 (Sheppard), so that is taken off first. Below half a tick of
    spread, readings that all round alike are off by up to half a tick; readings that step between
    neighbouring ticks (``dithered``) come from starts at random points of a tick — kernel starts
    are not synchronised with the timer — whose mean is exact, so only the trimmed mean's cut can
    bias them: by at most TRIM of a tick (it drops the rarer value first). From half a tick the
    rounding dithers and the bias of a rounded mean falls as Σₖ q/(πk)·exp(−2π²k²σ²/q²) (Widrow's
    quantization theorem, Gaussian spread; two timestamps per duration), under 0.5% of a tick."""
    sigma = math.sqrt(max(spread**2 - quantum**2 / 12, 0.0)) if math.isfinite(spread) else 0.0
    if sigma < quantum / 2:
        return TRIM * quantum if dithered else quantum / 2
    k = np.arange(1, 65)
    return float(2 * np.sum(quantum / (np.pi * k) * np.exp(-2 * np.pi**2 * k**2 * sigma**2 / quantum**2)))


DITHERED_ROUNDS = 0.5  # a leg whose readings step between ticks in at least this share of rounds


def tick_bounds(samples: pd.DataFrame, quantum: float | None) -> dict[str, float]:
    """Each leg's rounding bias bound in log units (the bias over its median time), from the spread
    of its samples within a round (median over rounds) and whether they step between ticks within
    a round (in at least DITHERED_ROUNDS of them); empty for a clock without a known tick."""
    if not quantum:
        return {}
    timed = samples[~samples["burn_in"] & (samples["time_ns"] > 0)]
    by_round = timed.groupby(["leg", "round"], sort=False)["time_ns"]
    spread = by_round.std().groupby(level="leg", sort=False).median()
    steps = (by_round.max() - by_round.min()) >= quantum / 2  # two readings a tick apart, not jitter
    dithered = steps.groupby(level="leg", sort=False).mean() >= DITHERED_ROUNDS
    typical = timed.groupby("leg", sort=False)["time_ns"].median()
    return {
        str(leg): tick_bias_ns(quantum, float(spread.get(leg, 0.0)), bool(dithered.get(leg, False))) / float(t)
        for leg, t in typical.items()
    }


def per_round_logs(rounds: pd.DataFrame, case: str) -> pd.DataFrame:
    """Wide table: rows = rounds, columns = legs, values = ln t (trimmed mean)."""
    sub = rounds[rounds["case"] == case]
    return np.log(sub.pivot(index="round", columns="leg", values="t_ns"))


@dataclass
class _CaseTerms:
    """What every leg of one case is judged with: the paired log differences against the baseline,
    the A/A copies and their noise, the placement, timer-tick and bias terms of the intervals."""

    logs: pd.DataFrame  # log time per round (rows) and leg (columns)
    d_all: pd.DataFrame  # log(t_leg / t_baseline) per round, rounds every leg has
    declared: list[str]  # the legs this case has, in the run's order
    sigma: float
    threshold: float
    copies: list[str]
    n_placements: int
    placement: S.CasePlacement
    quantum: float | None
    ticks: dict[str, float]
    tick_of: dict[str, float]
    bias: float
    aa_placement: S.PlacementTerm
    aa: S.Effect | None
    case_wide: bool  # every leg's placement spread is counted (stats.case_wide)
    between_pct: float = 0.0  # the known SD of a leg's effect between fresh runs (percent)
    distrust: str = ""
    bias_beyond_doubt: float = 0.0  # the bias bound of copies whose intervals at level 1 − α/10 exclude 0

    @property
    def between(self) -> float:
        """What the spread between fresh runs adds to a leg's interval (log units, in quadrature)."""
        return S.between_runs_half_width(self.between_pct)


def _case_terms(
    samples: pd.DataFrame,
    logs: pd.DataFrame,
    legs: list[Leg],
    baseline: str,
    aa_names: list[str],
    threshold_pct: float,
    between_pct: float = 0.0,
) -> _CaseTerms:
    by_name = {leg.name: leg for leg in legs}
    aa_leg = aa_names[0] if aa_names else None
    d_all = logs.sub(logs[baseline], axis=0).dropna(how="any")
    aa = S.estimate(d_all[aa_leg].to_numpy()) if aa_leg is not None and aa_leg in d_all else None
    threshold = S.pct_threshold_to_log(threshold_pct)
    sets = round_sets(samples)
    n_placements = int(sets.nunique()) if sets is not None else 0
    set_of_round = sets.reindex(d_all.index).to_numpy() if sets is not None else None
    declared = [leg.name for leg in legs if leg.name in logs.columns]
    compared = [leg for leg in declared if leg != baseline and Role.SPIN not in by_name[leg].roles]
    tested = tested_spreads(d_all[compared], set_of_round)
    placement = S.case_placement(tested, n_placements)
    quantum = timer_quantum(samples)
    ticks = tick_bounds(samples, quantum)
    tick_of = {leg: ticks.get(leg, 0.0) + ticks.get(baseline, 0.0) for leg in compared}
    copies = [name for name in aa_names if name in d_all]
    bias = bias_bound(d_all, copies, tested, n_placements, tick_of, between_pct)
    aa_placement = placement.terms.get(aa_leg, S.PlacementTerm()) if aa is not None else S.PlacementTerm()
    between = S.between_runs_half_width(between_pct)

    def copy_effect(c: str) -> S.Effect:  # an A/A row's own numbers: the footer prints what the row prints
        return placed_effect(d_all[c].to_numpy(), placement.terms[c].half_width, threshold, 0.0, tick_of[c], between)

    if aa is not None:
        aa = copy_effect(aa_leg)
    own = {c: copy_effect(c) for c in copies}
    return _CaseTerms(
        logs=logs,
        d_all=d_all,
        declared=declared,
        sigma=S.noise_sigma(d_all[aa_leg].to_numpy()) if aa is not None else float("nan"),
        threshold=threshold,
        copies=copies,
        n_placements=n_placements,
        placement=placement,
        quantum=quantum,
        ticks=ticks,
        tick_of=tick_of,
        bias=bias,
        aa_placement=aa_placement,
        aa=aa,
        case_wide=S.case_wide(tested),
        between_pct=between_pct,
        distrust=baseline_distrust(baseline, own),
        bias_beyond_doubt=bias_bound(
            d_all, copies, tested, n_placements, tick_of, between_pct, S.ALPHA * S.FLOOR_ALPHA_SHARE
        )
        if bias > 0
        else 0.0,
    )


def baseline_distrust(baseline: str, copies: dict[str, S.Effect]) -> str:
    """Why no verdict of a case stands, or "": an A/A copy that reads FASTER or SLOWER than its
    baseline (beyond the threshold, its interval clear of 0) says the baseline's own times are off
    (a loaded machine ran one process 5-100x slower than its copy): every comparison with it is."""
    for name, effect in copies.items():
        if effect.verdict in ("FASTER", "SLOWER"):
            return (
                f"the baseline {baseline} disagrees with its own A/A copy {name}: {effect.effect_pct:+.2f}% "
                f"[{effect.ci_low_pct:+.2f}, {effect.ci_high_pct:+.2f}], beyond the threshold; no verdict of "
                "this case stands (run it again on a quiet machine)"
            )
    return ""


def distrusted(verdict: str) -> str:
    """A verdict of a case whose baseline disagrees with its A/A copy: a FASTER or SLOWER that
    bias could explain is BIASED, a SAME is not shown to be one (UNRESOLVED)."""
    return {"FASTER": "BIASED", "SLOWER": "BIASED", "SAME": "UNRESOLVED"}.get(verdict, verdict)


def _rounds_for_same_if_chance(
    t: _CaseTerms, aa_leg: str | None, widening: S.Widening, rounds_for_same: int | None
) -> tuple[int | None, tuple[str, ...]]:
    """The rounds for SAME of a fresh run were the A/A's widening terms that are not beyond doubt
    chance, and those terms in words; (None, ()) where there are none or they do not change
    ``rounds_for_same``, the count with every term taken as true. Four buffer sets test a
    placement spread on three degrees of freedom: a clean case counts one at p < PLACEMENT_ALPHA
    one run in five, and taken as true
    it put "not even at 64 rounds" in 11.5% of quiet synthetic runs (200, seed 0) whose legs read
    SAME from 6–9 rounds in most others. Beyond doubt: a spread the case counts for every leg
    (stats.case_wide), a bias whose copy excludes 0 at level 1 − α/10. Dropped outright the terms
    undershoot a real 0.1% spread (SAME 62.8%, not 80%, at the count), so both counts are printed."""
    placement = (
        ""
        if t.case_wide or t.aa_placement.sigma <= 0
        else f"placement spread ±{100 * math.expm1(t.aa_placement.sigma):.2f}%"
    )
    bias = "" if t.bias <= t.bias_beyond_doubt else f"A/A bias bound ±{100 * math.expm1(t.bias):.2f}%"
    doubtful = tuple(term for term in (placement, bias) if term)
    if not doubtful:
        return None, ()
    screened = S.Widening.of(
        0.0 if placement else widening.sigma_p,
        widening.placements,
        t.bias_beyond_doubt + t.tick_of.get(aa_leg or "", 0.0),
        widening.case_wide,
        widening.legs,
        widening.between,
    )
    if_chance = S.rounds_for_same(t.sigma, t.threshold, widening=screened)
    return (None, ()) if if_chance == rounds_for_same else (if_chance, doubtful)


def _placement_stands_in_the_way(t: _CaseTerms, widening: S.Widening) -> bool:
    """Whether the case's placement term is what keeps a leg with no effect from SAME: no number of
    rounds up to 64 reaches it, yet one would with that term left out. Rounds do not average where
    the buffers lie, more buffer sets do (the term is t(K−1)·σ_p/√K); H200 runs whose legs' spreads
    pooled to ±0.4–1% left no interval inside ±0.5% at four sets."""
    if t.n_placements < 2 or (widening.sigma_p <= 0 and not widening.legs):
        return False
    without = S.Widening(bound=widening.bound, between=widening.between)
    return S.rounds_for_same(t.sigma, t.threshold, widening=without) is not None


def _case_summary(case: str, t: _CaseTerms, aa_leg: str | None, swept: int, samples: pd.DataFrame) -> CaseSummary:
    """The A/A gate and the resolution of a case: the resolvable effect and the rounds for SAME of
    the interval a leg like the A/A prints."""
    n = len(t.d_all)
    bound = t.bias + t.tick_of.get(aa_leg or "", 0.0)
    widening = S.Widening.of(t.aa_placement.sigma, t.n_placements, bound, t.case_wide, t.placement.legs, t.between)
    measured = t.aa is not None
    mde = S.minimum_detectable_effect(t.sigma, n, t.threshold, widening=widening) if measured else float("inf")
    rounds_for_same = S.rounds_for_same(t.sigma, t.threshold, widening=widening) if measured else None
    in_the_way = measured and rounds_for_same is None and _placement_stands_in_the_way(t, widening)
    if_chance, doubtful = _rounds_for_same_if_chance(t, aa_leg, widening, rounds_for_same) if measured else (None, ())
    return CaseSummary(
        case=case,
        rounds=n,
        sigma_aa=t.sigma,
        noise_floor_pct=100 * (np.exp(S.noise_floor(t.sigma, n)) - 1) if measured else float("nan"),
        mde_pct=100 * (np.exp(mde) - 1),
        threshold_pct=100 * (np.exp(t.threshold) - 1),
        aa=t.aa,
        quantum_ns=t.quantum,
        rounds_for_same=rounds_for_same,
        rounds_for_same_if_chance=if_chance,
        doubtful=doubtful,
        placement_in_the_way=in_the_way,
        fewest_rounds=S.fewest_rounds(max(swept, 1)),
        placement_pct=100 * (np.exp(t.aa_placement.sigma) - 1),
        pooled_placement_pct=100 * (np.exp(t.placement.pooled) - 1),
        placements=t.n_placements,
        bias=t.bias,
        aa_copies=len(t.copies),
        distrust=t.distrust,
        timer=", ".join(sorted({str(x).split(" ")[0] for x in samples["timer"].unique()})),
        ticks=t.ticks,
        between_runs_pct=t.between_pct,
    )


def _leg_row(case: str, leg: Leg, baseline: str, t: _CaseTerms, nbytes: dict[str, int]) -> dict[str, Any]:
    """One leg's row: its time and bandwidth, and its effect against the baseline with interval and verdict."""
    t_med = float(np.exp(t.logs[leg.name]).median())
    row: dict[str, Any] = dict(
        case=case, leg=leg.name, roles=sorted(r.value for r in leg.roles), rounds=len(t.d_all), time_us=t_med / 1e3
    )
    for convention, b in nbytes.items():
        row[f"gbps_{convention}"] = b / t_med  # bytes per ns = GB/s
    if leg.name == baseline:
        row.update(effect_pct=0.0, ci_low_pct=0.0, ci_high_pct=0.0, p=1.0, p_sign=1.0, verdict="REFERENCE")
    elif leg.has(Role.SPIN):  # a planted delay measured alone: not a comparison
        row.update(effect_pct=np.nan, ci_low_pct=np.nan, ci_high_pct=np.nan, p=1.0, p_sign=1.0, verdict="MEASURED")
    else:
        own_bias = 0.0 if leg.has(Role.AA) else t.bias  # A/A copies are the evidence: shown as measured
        placement, tick = t.placement.terms[leg.name], t.tick_of[leg.name]
        eff = placed_effect(t.d_all[leg.name].to_numpy(), placement.half_width, t.threshold, own_bias, tick, t.between)
        if t.distrust and not leg.has(Role.AA):
            eff = replace(eff, verdict=distrusted(eff.verdict))
        row.update(
            eff.row(),
            p_sign=eff.p_sign,
            estimate=eff.estimate,
            placement_pct=100 * (np.exp(placement.sigma) - 1),
            bias_bound_pct=100 * (np.exp(own_bias) - 1),
            tick_bound_pct=100 * (np.exp(tick) - 1),
        )
    row["ratio_to_baseline"] = t_med / np.exp(t.logs[baseline]).median()
    return row


def _unpaired_rows(case: str, logs: pd.DataFrame, legs: list[Leg]) -> list[dict[str, Any]]:
    """A case the baseline has no rounds of (a kernel that only some legs launch): times, no comparison."""
    rows = []
    for leg in (leg for leg in legs if leg.name in logs.columns):
        t_med = float(np.exp(logs[leg.name]).median())
        rows.append(
            dict(
                case=case,
                leg=leg.name,
                roles=sorted(r.value for r in leg.roles),
                rounds=int(logs[leg.name].notna().sum()),
                time_us=t_med / 1e3,
                effect_pct=np.nan,
                ci_low_pct=np.nan,
                ci_high_pct=np.nan,
                p=np.nan,
                verdict=NO_BASELINE,
            )
        )
    return rows


def leg_effects(
    samples: pd.DataFrame,
    legs: list[Leg],
    threshold_pct: float,
    bytes_per_call: dict[str, dict[str, int]] | None = None,
    between_runs_pct: float = 0.0,
) -> tuple[pd.DataFrame, dict[str, CaseSummary]]:
    """Effects of every leg against the baseline, per case; plus a summary (A/A gate, resolution)
    per case. The first A/A copy gates the case; the others are reported as comparisons. With
    ``between_runs_pct`` (the SD of a leg's effect between fresh runs, measured beforehand) every
    interval also covers what a fresh run would add (stats.between_runs_half_width)."""
    rounds = round_statistics(samples)
    by_name = {leg.name: leg for leg in legs}
    baseline = next(leg.name for leg in legs if leg.has(Role.BASELINE))
    aa_names = [leg.name for leg in legs if leg.has(Role.AA)]
    swept = sum(leg.has(Role.SWEEP) for leg in legs)
    rows: list[dict[str, Any]] = []
    summaries: dict[str, CaseSummary] = {}
    for case in pd.unique(rounds["case"]):
        logs = per_round_logs(rounds, case)
        if baseline not in logs:
            rows += _unpaired_rows(case, logs, legs)
            continue
        case_samples = samples[samples["case"] == case]
        terms = _case_terms(case_samples, logs, legs, baseline, aa_names, threshold_pct, between_runs_pct)
        summaries[case] = _case_summary(case, terms, aa_names[0] if aa_names else None, swept, case_samples)
        nbytes = (bytes_per_call or {}).get(case, {})
        rows += [_leg_row(case, by_name[leg], baseline, terms, nbytes) for leg in terms.declared]
    table = pd.DataFrame(rows)
    if len(table):
        sweep_legs = {leg.name for leg in legs if leg.has(Role.SWEEP)}
        tested = table["verdict"].isin(S.VERDICTS) & table["leg"].isin(sweep_legs)
        control_false_discoveries(table, tested, by=["case"])
    return table, summaries


def placed_effect(
    d: np.ndarray, placement: float, threshold: float, bias: float = 0.0, tick: float = 0.0, between: float = 0.0
) -> S.Effect:
    """The one computation of an effect from per-round log differences: Hodges–Lehmann with its
    exact interval, widened by the placement term (``placement``, log units: a half-width from
    ``stats.case_placement``) and a known spread between fresh runs (``between``, log units:
    ``stats.between_runs_half_width``), both in quadrature, by what the timer's rounding may bias
    (``tick``, log units: ``tick_bounds``) and by the case's bias bound (``bias``, log units; 0 where
    the A/A holds 0), and its verdict — BIASED where the A/A bound alone turns a FASTER or SLOWER
    into something else. The leg table, attribution and sweeps all call it, so one comparison
    prints one interval in every command."""
    widened = S.with_bias_bound(S.with_placement(S.estimate(d), float(np.hypot(placement, between))), tick)
    placed = S.with_verdict(widened, threshold)
    if bias <= 0:
        return placed
    bounded = S.with_verdict(S.with_bias_bound(placed, bias), threshold)
    if placed.verdict in ("FASTER", "SLOWER") and bounded.verdict != placed.verdict:
        return replace(bounded, verdict="BIASED")
    return bounded


def round_sets(samples: pd.DataFrame) -> pd.Series | None:
    """The buffer set (placement) of each timed round, when every leg of a round used the same one
    (kprof's shared protocol); None for per-leg buffers or folders without the column."""
    if "buffer_set" not in samples:
        return None
    timed = samples[~samples["burn_in"]]
    per_round = timed.groupby("round")["buffer_set"].agg(["min", "max"])
    if (per_round["min"] != per_round["max"]).any() or per_round["min"].nunique() < 2:
        return None
    return per_round["min"]


def placement_terms(
    d: pd.DataFrame | Mapping[Any, pd.Series], set_of_round: np.ndarray | None
) -> dict[Any, S.PlacementTerm]:
    """Each leg's (or quantity's) placement term as folded into its interval (``stats.case_placement``);
    none for each when the rounds did not rotate placements."""
    placements = len(np.unique(set_of_round)) if set_of_round is not None else 0
    return S.case_placement(tested_spreads(d, set_of_round), placements).terms


def tested_spreads(d: pd.DataFrame | Mapping[Any, pd.Series], set_of_round: np.ndarray | None) -> dict[Any, S.Spread]:
    """Each column's spread between buffer sets and the F-test's p (``stats.placement_spread``);
    (0, 1), nothing to count, for each when the rounds did not rotate placements."""
    if set_of_round is None:
        return dict.fromkeys(d, S.Spread(0.0, 1.0))
    return {k: S.placement_spread(v.to_numpy(), set_of_round) for k, v in d.items()}


def gpu_spread(samples: pd.DataFrame, run: Run, threshold_pct: float) -> pd.DataFrame:
    """--aa-across-gpus: each leg of the first case on another GPU against the same leg on the first
    GPU — two samples of rounds, unpaired (two GPUs never share a round). What the user sees is
    the GPU-to-GPU spread; kprof never forms a ratio across GPUs inside a case."""
    repeats = [c for c in run.cases if c.repeats]
    if not repeats:
        return pd.DataFrame()
    rounds = round_statistics(samples)
    threshold = S.pct_threshold_to_log(threshold_pct)
    gpu_of = {c.name: c.gpu for c in run.cases}
    rows = []
    for copy in repeats:
        first = rounds[rounds["case"] == copy.repeats]
        again = rounds[rounds["case"] == copy.name]
        for leg, a in first.groupby("leg", sort=False):
            b = again[again["leg"] == leg]
            if len(b):
                effect = S.with_verdict(S.two_sample(a["t_ns"].to_numpy(), b["t_ns"].to_numpy()), threshold)
                rows.append(
                    dict(
                        case=copy.repeats,
                        leg=leg,
                        gpu_a=gpu_of[copy.repeats],
                        gpu_b=copy.gpu,
                        a_us=float(a["t_ns"].median() / 1e3),
                        b_us=float(b["t_ns"].median() / 1e3),
                        rounds=min(len(a), len(b)),
                        **effect.row(),
                    )
                )
    return pd.DataFrame(rows)


def bias_bound(
    d: pd.DataFrame,
    copies: list[str],
    spreads: dict[str, S.Spread] | None = None,
    placements: int = 0,
    ticks: dict[str, float] | None = None,
    between_pct: float = 0.0,
    level: float = S.ALPHA,
) -> float:
    """The bias the A/A copies show (log units): 0 when every copy's interval at level 1 − α/k (k
    copies: Bonferroni) holds 0, else the largest far end from 0 of the intervals that exclude it.
    The interval is the one the copy's row prints (with its placement, timer-rounding and
    between-run terms): the gate once tested the raw interval, and a row printed [−0.07, +0.26]
    SAME while its case was gated; told that effects move by ``between_pct`` between runs, a copy
    moved by that much is what a run is, not a bias (found faster 72% of the time, not 80%, before).
    ``spreads`` holds every compared leg's (σ_p, p): the copies' placement terms are the case's
    (``stats.case_placement``), at the copies' level.

    Why a bound and not a veto: an A/A discrepancy is evidence of a bias of about its size. The veto
    (every leg BIASED) silenced a +226% effect over a 0.008-point A/A in one H200 run of four, and, on
    synthetic runs, a true +200% effect in 2.4–5.7% of clean runs; the bound quotes them. ``level``:
    the family's α (a stricter one tells a bias beyond doubt, for the rounds-for-SAME forecast)."""
    alpha = level / max(len(copies), 1)
    terms = S.case_placement(spreads or {}, placements, alpha).terms
    bound = 0.0
    between = S.between_runs_half_width(between_pct, alpha=alpha)
    for name in copies:
        effect = S.estimate(d[name].to_numpy(), alpha)
        effect = S.with_placement(effect, float(np.hypot(terms[name].half_width if name in terms else 0.0, between)))
        effect = S.with_bias_bound(effect, (ticks or {}).get(name, 0.0))
        if effect.low > 0 or effect.high < 0:
            bound = max(bound, abs(effect.low), abs(effect.high))
    return bound


def control_false_discoveries(table: pd.DataFrame, tested: pd.Series, by: list[str] | None = None) -> pd.DataFrame:
    """Benjamini–Hochberg over the ``tested`` rows (in place), within each family of rows that share
    the ``by`` columns (the whole table when None): a FASTER or SLOWER that does not survive it
    becomes UNRESOLVED; ``bh_significant`` records the outcome (False for rows not tested), and is
    never true beside a printed interval that holds 0 (p comes from the raw rounds, the interval
    carries the placement, tick and bias terms: a row read p = 3e-05 significant inside [−0.31, +1.97])."""
    table["bh_significant"] = False
    families = [g.index for _, g in table[tested].groupby(by, sort=False)] if by else [table.index[tested]]
    for index in families:
        if len(index):
            table.loc[index, "bh_significant"] = S.benjamini_hochberg(table.loc[index, "p"].to_numpy())
    if {"ci_low_pct", "ci_high_pct"} <= set(table.columns):
        clear_of_zero = (table["ci_low_pct"] > 0) | (table["ci_high_pct"] < 0)
        table["bh_significant"] = table["bh_significant"] & clear_of_zero
    demote = tested & table["verdict"].isin(["FASTER", "SLOWER"]) & ~table["bh_significant"]
    table.loc[demote, "verdict"] = "UNRESOLVED"
    return table


def sign_rule(samples: pd.DataFrame, legs: list[Leg], rounds: int = 5) -> pd.DataFrame:
    """The by-hand PR method on the same samples: per-round median ratio against the baseline over
    the first ``rounds`` timed rounds; a leg is "quoted" only if every round has the same sign (5/5);
    the value is the median of the per-round effects. Kept to show what it would claim."""
    baseline = next(leg.name for leg in legs if leg.has(Role.BASELINE))
    timed = samples[~samples["burn_in"]]
    first = sorted(pd.unique(timed["round"]))[:rounds]
    med = timed[timed["round"].isin(first)].groupby(["case", "leg", "round"])["time_ns"].median().unstack("leg")
    rows = []
    for case, per_round in med.groupby(level="case", sort=False):
        if baseline not in per_round:
            continue
        for d in legs:
            leg = d.name
            if not d.is_comparison or leg not in per_round:
                continue
            effects = 100.0 * (per_round[baseline] / per_round[leg] - 1.0)
            signs = np.sign(effects.to_numpy())
            rows.append(
                dict(
                    case=case,
                    leg=leg,
                    roles=sorted(r.value for r in d.roles),
                    rounds=len(effects),
                    effect_pct=float(effects.median()),
                    quoted=bool(len(signs) == rounds and (np.all(signs > 0) or np.all(signs < 0))),
                )
            )
    return pd.DataFrame(rows)


def calibration_table(samples: pd.DataFrame, effects: pd.DataFrame, legs: list[Leg]) -> pd.DataFrame:
    """Planted vs recovered. Planted time = (spin alone) − (zero-length spin alone), both timed in the
    same rounds, so the fixed cost of one more kernel cancels as it does between the legs. Empty for
    a run without planted legs."""
    planted = {leg.name: float(dict(leg.params)[PLANT]) for leg in legs if leg.has(Role.PLANTED)}
    if not planted:
        return pd.DataFrame()
    rounds = round_statistics(samples)
    baseline = next(leg.name for leg in legs if leg.has(Role.BASELINE))
    spins = {float(dict(leg.params)[SPIN_PARAM]): leg.name for leg in legs if leg.has(Role.SPIN)}
    rows = []
    for case in pd.unique(rounds["case"]):
        per = rounds[rounds["case"] == case].pivot(index="round", columns="leg", values="t_ns")
        if baseline not in per:
            continue
        t_base = float(per[baseline].median())
        zero = spins.get(0.0)
        for leg, pct in planted.items():
            spin_leg = spins.get(float(pct))
            if leg not in per or spin_leg not in per or zero not in per:
                continue
            spin_ns = (per[spin_leg] - per[zero]).dropna().to_numpy()
            t_spin = float(np.median(spin_ns))
            expected = 100.0 * (t_base / (t_base + t_spin) - 1.0)
            # the planted size has its own interval: the spin's length is measured, not assumed
            _, lo_ns, hi_ns = S.hodges_lehmann(spin_ns)
            planted_low = 100.0 * (t_base / (t_base + lo_ns) - 1.0) if math.isfinite(lo_ns) else -math.inf
            planted_high = 100.0 * (t_base / (t_base + hi_ns) - 1.0) if math.isfinite(hi_ns) else math.inf
            got = effects[(effects["case"] == case) & (effects["leg"] == leg)].iloc[0]
            rows.append(
                dict(
                    case=case,
                    leg=leg,
                    requested_pct=pct,
                    spin_us=t_spin / 1e3,
                    planted_effect_pct=expected,
                    planted_ci_low_pct=min(planted_low, planted_high),
                    planted_ci_high_pct=max(planted_low, planted_high),
                    recovered_pct=got["effect_pct"],
                    ci_low_pct=got["ci_low_pct"],
                    ci_high_pct=got["ci_high_pct"],
                    verdict=got["verdict"],
                    inside=bool(got["ci_low_pct"] <= expected <= got["ci_high_pct"]),
                )
            )
    return pd.DataFrame(rows)
