"""Synthetic runs with known effects through kprof's own analysis: do the verdicts mean what they print?

Each run draws per-sample times ``t = 100 µs · exp(effect + round drift + noise)`` with lognormal
noise, a drift shared by every leg of a round (pairing cancels it) and rare outliers (a sample 50%
slow), then calls the same ``leg_effects`` a real run goes through. The scenarios are the questions
a user asks of a verdict: is the printed resolvable effect found as often as promised; does SAME
mean "within my threshold"; does a leg's verdict depend on unrelated legs in the report; do the
intervals cover the truth. ``tests/test_verdict_rules.py`` runs a small seeded version,
``benchmarks/verdict_simulation.py`` the full one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kprof.analysis.compare import Side, compare_sides, judge, parse_gate
from kprof.analysis.run_effects import CaseSummary, leg_effects, round_statistics
from kprof.parts import case_parts
from kprof.run_model import Leg, Role

BASE_NS = 100e3
SAMPLES = 5
SETS = 4  # buffer sets rotated over the rounds
OUTLIER_RATE = 0.01
TIMER = "cuda-events (synthetic)"


@dataclass(frozen=True)
class Noise:
    sample_sigma: float  # lognormal SD of one sample
    round_sigma: float  # lognormal SD of a leg's level in one round (what does not average out)
    drift_sigma: float = 0.01  # shared by every leg of a round


@dataclass(frozen=True)
class Tick:
    """A device timer that counts whole ticks of ``ns``. With ``phase`` a duration is its end's count
    less its start's, the start anywhere within a tick (kernel starts are not synchronised with
    the timer); without, every duration is rounded to the nearest tick (the worst case for a quiet
    kernel: each reading of it rounds the same way)."""

    ns: float
    phase: bool = False

    def read(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if not self.phase:
            return np.round(t / self.ns) * self.ns
        start = rng.uniform(0, self.ns, t.shape)
        return (np.floor((start + t) / self.ns) - np.floor(start / self.ns)) * self.ns


def legs_for(effects: dict[str, float]) -> list[Leg]:
    """Baseline, one A/A copy, and a leg per named true effect (percent, positive = faster)."""
    legs = [
        Leg("baseline", frozenset(), (), frozenset({Role.BASELINE})),
        Leg("A/A", frozenset(), (), frozenset({Role.AA})),
    ]
    return legs + [Leg(name, frozenset({name}), (), frozenset()) for name in effects]


def samples_for(
    effects: dict[str, float],
    noise: Noise,
    rounds: int,
    rng: np.random.Generator,
    case: str = "c",
    placement: dict[str, list[float]] | None = None,
    base_ns: float = BASE_NS,
    tick: Tick | None = None,
) -> pd.DataFrame:
    """The samples table of one synthetic run (burn-in round included). Round r uses buffer set
    r mod 4, as kprof rotates them; ``placement`` adds a log effect per buffer set to a leg (where
    its buffers happen to lie changes its time); ``tick`` reads every time through a device timer
    of that resolution."""
    log_effect = {"baseline": 0.0, "A/A": 0.0} | {k: -math.log1p(v / 100) for k, v in effects.items()}
    names = list(log_effect)
    n_legs, n_rounds = len(names), rounds + 1
    drift = rng.normal(0, noise.drift_sigma, n_rounds)[:, None, None]
    level = rng.normal(0, noise.round_sigma, (n_rounds, n_legs, 1))
    eff = np.array([log_effect[n] for n in names])[None, :, None]
    sets = np.arange(n_rounds) % SETS
    for leg, per_set in (placement or {}).items():
        eff = eff + np.where(np.array(names) == leg, 1.0, 0.0)[None, :, None] * np.array(per_set)[sets][:, None, None]
    t = base_ns * np.exp(eff + drift + level + rng.normal(0, noise.sample_sigma, (n_rounds, n_legs, SAMPLES)))
    t = np.where(rng.random(t.shape) < OUTLIER_RATE, t * 1.5, t)
    if tick is not None:
        t = tick.read(t, rng)
    r, leg, sample = np.meshgrid(np.arange(n_rounds), np.arange(n_legs), np.arange(SAMPLES), indexing="ij")
    return pd.DataFrame(
        {
            "case": case,
            "leg": np.array(names)[leg.ravel()],
            "round": r.ravel(),
            "sample": sample.ravel(),
            "time_ns": t.ravel(),
            "timer": TIMER,
            "burn_in": r.ravel() == 0,
            "buffer_set": r.ravel() % SETS,
        }
    )


def run_once(
    effects: dict[str, float],
    noise: Noise,
    rounds: int,
    threshold_pct: float,
    rng: np.random.Generator,
    placement: dict[str, list[float]] | None = None,
    between_runs_pct: float = 0.0,
) -> tuple[pd.DataFrame, CaseSummary]:
    """One synthetic run's effects table (the legs with a true effect) and its case summary (the
    printed resolvable effect, the rounds for SAME); ``between_runs_pct`` as --between-runs."""
    samples = samples_for(effects, noise, rounds, rng, placement=placement)
    table, summaries = leg_effects(samples, legs_for(effects), threshold_pct, between_runs_pct=between_runs_pct)
    table = table[table["leg"].isin(list(effects))].copy()
    table["true_pct"] = table["leg"].map(effects)
    return table, summaries["c"]


def run_placed(
    effects: dict[str, float],
    noise: Noise,
    rounds: int,
    threshold_pct: float,
    rng: np.random.Generator,
    placement_sigma: float,
    run_sigma: float = 0.0,
    between_runs_pct: float = 0.0,
) -> tuple[pd.DataFrame, CaseSummary]:
    """``run_once`` with every leg's buffer sets placed anew (SD ``placement_sigma`` per set), every
    leg shifted by the run (SD ``run_sigma``) and the run told ``between_runs_pct`` (--between-runs)."""
    where = placed(effects, placement_sigma, rng, run_sigma=run_sigma)
    return run_once(effects, noise, rounds, threshold_pct, rng, where, between_runs_pct)


def scenario_tick(
    true_pct: float, leg_ns: float, tick: Tick, noise: Noise, rounds: int, runs: int, rng: np.random.Generator
) -> dict:
    """A leg of ``leg_ns`` with a true effect of ``true_pct`` against its baseline, both read through
    ``tick``: how often the interval covers the truth, the median estimate, and the verdicts."""
    effects = {"x": true_pct}
    base_ns = leg_ns * (1 + true_pct / 100)
    rows = []
    for _ in range(runs):
        samples = samples_for(effects, noise, rounds, rng, base_ns=base_ns, tick=tick)
        rows.append(leg_effects(samples, legs_for(effects), 0.5)[0].set_index("leg").loc["x"])
    table = pd.DataFrame(rows).assign(true_pct=true_pct)
    return {
        "coverage": float(table.apply(covers, axis=1).mean()),
        "median_estimate_pct": float(table["effect_pct"].median()),
        "median_tick_bound_pct": float(table["tick_bound_pct"].median()),
        **{v: float(table["verdict"].eq(v).mean()) for v in ("FASTER", "SAME", "UNRESOLVED", "SLOWER", "BIASED")},
    }


def covers(row: pd.Series) -> bool:
    return bool(row["ci_low_pct"] <= row["true_pct"] <= row["ci_high_pct"])


def scenario_mde(
    noise: Noise,
    rounds: int,
    threshold_pct: float,
    runs: int,
    rng: np.random.Generator,
    placement_sigma: float = 0.0,
    run_sigma: float = 0.0,
    between_runs_pct: float = 0.0,
) -> dict:
    """A true effect equal to the printed resolvable effect (its median over A/A runs): how often
    FASTER, over every run and over the runs whose A/A does not gate the case (about 5% are gated).
    With ``placement_sigma`` every leg's time also depends on its buffer set (drawn anew per run);
    with ``run_sigma`` on the run itself, which each run is told as ``between_runs_pct``."""

    def one(pct: float) -> tuple[pd.DataFrame, CaseSummary]:
        return run_placed({"x": pct}, noise, rounds, threshold_pct, rng, placement_sigma, run_sigma, between_runs_pct)

    printed = float(np.median([one(0.0)[1].mde_pct for _ in range(runs // 4)]))
    hits = [one(printed)[0].iloc[0]["verdict"] for _ in range(runs)]
    quoted = [v for v in hits if v != "BIASED"]
    return {
        "printed_mde_pct": printed,
        "faster_rate": float(np.mean([v == "FASTER" for v in hits])),
        "faster_rate_quoted": float(np.mean([v == "FASTER" for v in quoted])) if quoted else float("nan"),
    }


def scenario_same_rounds(
    noise: Noise,
    threshold_pct: float,
    runs: int,
    rng: np.random.Generator,
    placement_sigma: float = 0.0,
    if_chance: bool = False,
) -> dict:
    """The printed rounds at which a leg with no effect reads SAME 80% of the time (its median over
    pilot runs of 16 rounds): how often a null leg is SAME when run at that many rounds. With
    ``if_chance`` the first count printed: the rounds were the terms not beyond doubt chance."""

    def one(rounds: int) -> tuple[pd.DataFrame, CaseSummary]:
        return run_placed({"x": 0.0}, noise, rounds, threshold_pct, rng, placement_sigma)

    never = 1 << 30  # "not even at 64 rounds"

    def printed(s: CaseSummary) -> int:
        return (s.first_rounds_for_same if if_chance else s.rounds_for_same) or never

    pilots = sorted(printed(one(16)[1]) for _ in range(max(runs // 4, 1)))
    rounds = pilots[len(pilots) // 2]  # a median that is one of them: never half "not even at 64"
    if rounds >= never:
        return {"printed_rounds": None, "same_rate": float("nan")}
    verdicts = [one(rounds)[0].iloc[0]["verdict"] for _ in range(runs)]
    return {"printed_rounds": rounds, "same_rate": float(np.mean([v == "SAME" for v in verdicts]))}


def scenario_printed_counts(noise: Noise, threshold_pct: float, runs: int, rng: np.random.Generator) -> dict:
    """How the rounds for SAME printed by runs of one scenario (16 rounds, a null leg) spread: the
    share in each band, for the count with every term taken as true and for the first count printed
    (terms not beyond doubt taken as chance)."""
    bands = {"6-9": (6, 9), "10-15": (10, 15), "16-64": (16, 64)}
    summaries = [run_placed({"x": 0.0}, noise, 16, threshold_pct, rng, 0.0)[1] for _ in range(runs)]

    def shares(counts: list[int | None]) -> dict[str, float]:
        out = {
            band: float(np.mean([c is not None and lo <= c <= hi for c in counts])) for band, (lo, hi) in bands.items()
        }
        return out | {"none": float(np.mean([c is None for c in counts]))}

    return {
        "every_term_true": shares([s.rounds_for_same for s in summaries]),
        "first_count": shares([s.first_rounds_for_same for s in summaries]),
    }


def scenario_same(
    true_pct: float, noise: Noise, rounds: int, threshold_pct: float, runs: int, rng: np.random.Generator
) -> dict:
    """A real gain beyond the threshold: how often SAME (it should not be)."""
    verdicts = [run_once({"x": true_pct}, noise, rounds, threshold_pct, rng)[0].iloc[0]["verdict"] for _ in range(runs)]
    return {v: float(np.mean([x == v for x in verdicts])) for v in ("FASTER", "SAME", "UNRESOLVED", "BIASED")}


def scenario_lone(
    true_pct: float, nulls: int, extra_pct: float | None, noise: Noise, rounds: int, runs: int, rng: np.random.Generator
) -> dict:
    """One real effect among ``nulls`` null legs, with or without an unrelated leg of ``extra_pct``."""
    effects = {"real": true_pct} | {f"null{i}": 0.0 for i in range(nulls)}
    if extra_pct is not None:
        effects["unrelated"] = extra_pct
    found, excludes = [], []
    for _ in range(runs):
        row = run_once(effects, noise, rounds, 0.5, rng)[0].set_index("leg").loc["real"]
        found.append(row["verdict"] == "FASTER")
        excludes.append(row["ci_low_pct"] > 0)
    return {"faster_rate": float(np.mean(found)), "interval_excludes_zero": float(np.mean(excludes))}


def placed(
    effects: dict[str, float],
    sigma: float,
    rng: np.random.Generator,
    process_sigma: float = 0.0,
    processes: int = 1,
    run_sigma: float = 0.0,
) -> dict[str, list[float]] | None:
    """A log effect per buffer set for every leg (baseline and A/A included): where its buffers
    lie (SD ``sigma`` per set), plus what the worker process holding the set adds (SD
    ``process_sigma`` per process; the sets dealt to ``processes`` processes as a run deals them,
    kprof.parts), plus what the run itself adds to the leg (SD ``run_sigma``, the same in every
    set and process: what no run can see from inside). None when all are 0."""
    if not sigma and not process_sigma and not run_sigma:
        return None
    out = {n: rng.normal(0, sigma, SETS) for n in ["baseline", "A/A", *effects]}
    if process_sigma:
        owner = np.zeros(SETS, dtype=int)
        for part in case_parts(SETS, SETS, processes):
            owner[list(part.sets)] = part.index
        out = {n: v + rng.normal(0, process_sigma, processes)[owner] for n, v in out.items()}
    if run_sigma:
        out = {n: v + rng.normal(0, run_sigma) for n, v in out.items()}
    return {n: list(v) for n, v in out.items()}


def scenario_coverage(
    true_pcts: list[float],
    noise: Noise,
    rounds: int,
    threshold_pct: float,
    runs: int,
    rng: np.random.Generator,
    placement_sigma: float = 0.0,
) -> dict:
    """Coverage of the intervals and wrong-direction or false calls, per true effect; with
    ``placement_sigma``, every leg's time also depends on its buffer set (drawn anew per run), and
    the truth is the effect averaged over placements."""
    effects = {f"e{i}": p for i, p in enumerate(true_pcts)}
    tables = []
    for _ in range(runs):
        tables.append(run_placed(effects, noise, rounds, threshold_pct, rng, placement_sigma)[0])
    rows = pd.concat(tables)
    out = {}
    for p, g in rows.groupby("true_pct"):
        wrong = g["verdict"].eq("SLOWER") if p >= 0 else g["verdict"].eq("FASTER")
        if p == 0:
            wrong = g["verdict"].isin(["FASTER", "SLOWER"])
        out[float(p)] = {"coverage": float(g.apply(covers, axis=1).mean()), "false_call_rate": float(wrong.mean())}
    out["biased_rate"] = float(rows["verdict"].eq("BIASED").mean())  # cases the A/A gate silenced
    return out


def scenario_rerun(
    true_pcts: list[float],
    noise: Noise,
    rounds: int,
    runs: int,
    rng: np.random.Generator,
    placement_sigma: float = 0.0,
    process_sigma: float = 0.0,
    processes: int = 1,
    run_sigma: float = 0.0,
    between_runs_pct: float = 0.0,
) -> dict:
    """Pairs of independent runs of the same legs (fresh noise and, with ``placement_sigma``, buffers
    placed anew in each run; with ``process_sigma``, what each of the run's ``processes`` worker
    processes adds to every leg; with ``run_sigma``, what the run itself adds to every leg, the same
    in all its processes, which no run can see from inside; ``between_runs_pct``, what the runs are
    told of that, as --between-runs): how often one run's estimate lies inside the other's
    confidence interval (about 83% for exact 95% intervals: both estimates vary) and inside its
    rerun interval."""
    effects = {f"e{i}": p for i, p in enumerate(true_pcts)}

    def one_run() -> pd.DataFrame:
        where = placed(effects, placement_sigma, rng, process_sigma, processes, run_sigma)
        return run_once(effects, noise, rounds, 0.5, rng, where, between_runs_pct)[0].set_index("leg")

    in_ci = in_rerun = total = 0
    for _ in range(runs):
        a, b = one_run(), one_run()
        for x, y in ((a, b), (b, a)):
            other = y["effect_pct"]
            in_ci += int(((x["ci_low_pct"] <= other) & (other <= x["ci_high_pct"])).sum())
            in_rerun += int(((x["rerun_low_pct"] <= other) & (other <= x["rerun_high_pct"])).sum())
            total += len(x)
    return {"inside_interval": in_ci / total, "inside_rerun_interval": in_rerun / total}


def scenario_aa_bias(
    true_pct: float,
    aa_bias_pct: float,
    noise: Noise,
    rounds: int,
    runs: int,
    rng: np.random.Generator,
    process_sigma: float = 0.0,
    processes: int = 1,
) -> dict:
    """A leg with a true effect in a case whose A/A copy carries a real bias of ``aa_bias_pct``
    (the copy alone is off; the legs are not), every leg shifted by what each of the run's
    ``processes`` worker processes adds (SD ``process_sigma``): how often the leg is quoted with the
    right verdict, called BIASED, and covered by its interval, and how often the case is flagged."""
    effects = {"x": true_pct, "A/A": aa_bias_pct}
    legs = legs_for({"x": true_pct})
    right = "FASTER" if true_pct > 0 else "SLOWER" if true_pct < 0 else "SAME"
    hits = biased = covered = flagged = wrong = 0
    for _ in range(runs):
        where = placed({"x": true_pct}, 0.0, rng, process_sigma, processes)
        table, summaries = leg_effects(samples_for(effects, noise, rounds, rng, placement=where), legs, 0.5)
        row = table.set_index("leg").loc["x"]
        hits += row["verdict"] == right
        biased += row["verdict"] == "BIASED"
        wrong += row["verdict"] in ("FASTER", "SLOWER") and row["verdict"] != right
        covered += row["ci_low_pct"] <= true_pct <= row["ci_high_pct"]
        flagged += summaries["c"].biased
    return {
        "right_verdict": hits / runs,
        "biased": biased / runs,
        "false_call": wrong / runs,
        "coverage": covered / runs,
        "case_flagged": flagged / runs,
    }


def scenario_gate(
    regression_pct: float,
    shift_pct: float,
    between_sigma: float,
    noise: Noise,
    rounds: int,
    pairs: int,
    rng: np.random.Generator,
    size_pct: float = 1.0,
    control: str | None = None,
    processes: int = 2,
) -> dict:
    """compare's gate on pairs of runs A and B of the same legs: in B one leg (``x``) is
    ``regression_pct`` slower, the whole machine ``shift_pct`` slower, and every leg shifted by what
    each of its ``processes`` worker processes adds (SD ``between_sigma``, drawn anew per run: the
    between-run component). Per rule, the share of pairs that fail (exit 1), that cannot decide
    (exit 3), and, with a regression, that fail on ``x`` itself (detection)."""

    def side(effects: dict[str, float], shift: float, label: str) -> Side:
        where = placed(effects, 0.0, rng, between_sigma, processes)
        samples = samples_for(effects, noise, rounds, rng, placement=where)
        samples["time_ns"] *= 1 + shift / 100
        return Side(label, "run", run_rounds=round_statistics(samples))

    def pair() -> tuple[Side, Side]:
        return side(GATE_NULLS | {"x": 0.0}, 0.0, "A"), side(_slower_x(regression_pct), shift_pct, "B")

    return _gate_rates(pair, pairs, size_pct, control, bool(regression_pct))


GATE_NULLS = {f"n{i}": 0.0 for i in range(3)} | {"ctl": 0.0}  # legs no change touches, and a control


def _slower_x(regression_pct: float) -> dict[str, float]:
    """The gate scenarios' legs with ``x`` ``regression_pct`` slower (effects are positive = faster)."""
    return GATE_NULLS | {"x": -regression_pct / (1 + regression_pct / 100)}


def _gate_rates(
    pair: Callable[[], tuple[Side, Side]], pairs: int, size_pct: float, control: str | None, regressed: bool
) -> dict:
    """``pairs`` pairs of sides through compare and both gates: per rule, the share that fail, that
    cannot decide, and (with a regression) that fail naming ``x``."""
    rules = {rule: parse_gate(rule) for rule in (f"slower>{size_pct:g}%", f"credibly-slower>{size_pct:g}%")}
    tally = {rule: {"fail": 0, "undecided": 0, "caught": 0} for rule in rules}
    for _ in range(pairs):
        a, b = pair()
        comparison = compare_sides(a, b, 0.5, control)
        for rule, gate in rules.items():
            result = judge(comparison, gate)
            tally[rule]["fail"] += bool(result.broken)
            tally[rule]["undecided"] += bool(not result.broken and result.undecided)
            tally[rule]["caught"] += any(line.startswith("x:") for line in result.broken)
    out = {rule: {k: v / pairs for k, v in t.items()} for rule, t in tally.items()}
    if not regressed:
        for t in out.values():
            t.pop("caught")
    return out


def scenario_gate_runs(
    regression_pct: float,
    runs_per_side: int,
    noise: Noise,
    rounds: int,
    pairs: int,
    rng: np.random.Generator,
    shift_pct: float = 0.5,
    process_sigma: float = 0.003,
    run_sigma: float = 0.003,
    size_pct: float = 1.0,
    control: str | None = None,
    processes: int = 2,
) -> dict:
    """compare's gate between two folders of fresh runs (kprof.analysis.compare, replicates
    ``runs``): every run of B on a machine ``shift_pct`` slower; every leg of every run shifted by
    what each of its ``processes`` worker processes adds (SD ``process_sigma``) and by what the run
    itself adds (SD ``run_sigma``, drawn anew per run and leg); in B, ``x`` is ``regression_pct``
    slower. Per rule, the share of pairs of sides that fail (exit 1), that cannot decide (exit 3),
    and, with a regression, that fail on ``x`` (detection)."""

    def one_run(effects: dict[str, float], shift: float) -> pd.DataFrame:
        where = placed(effects, 0.0, rng, process_sigma, processes, run_sigma)
        samples = samples_for(effects, noise, rounds, rng, placement=where)
        samples["time_ns"] *= 1 + shift / 100
        return round_statistics(samples)

    def pair() -> tuple[Side, Side]:
        a = Side("A", "runs", runs=[one_run(GATE_NULLS | {"x": 0.0}, 0.0) for _ in range(runs_per_side)])
        b = Side("B", "runs", runs=[one_run(_slower_x(regression_pct), shift_pct) for _ in range(runs_per_side)])
        return a, b

    return _gate_rates(pair, pairs, size_pct, control, bool(regression_pct))
