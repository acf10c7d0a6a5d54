"""Per-lever attribution from one run's legs, per round, then Hodges–Lehmann.

With v(S) = ln t(S) − ln t(∅) per round (S a set of levers):
* add-one: v({f}) — the lever's effect in the baseline's context;
* leave-one-out: v(N) − v(N∖{f}) — its effect in the full change's context ("revert one commit");
* Shapley: exact, from the 2^n factorial legs; the values add up to v(N) in every round;
* interaction (i, j): the ±1-coded 2^n two-way term E_ij;
* total: v(N); unexplained: v(N) − Σ add-one (what an additive story leaves out);
* sequence (commits of a range): ln t(revision i) − ln t(revision before it), each commit against
  its parent as committed (a revision that was not timed is stepped over: the effect spans it);
  cumulative: revision i against the base.
Each design's quantities are formed in its module (kprof.designs); here they are estimated.
Every estimate is reported as effect_pct = 100·(exp(−x) − 1), positive = the lever makes it faster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from kprof import defaults
from kprof.analysis import stats as S
from kprof.analysis.run_effects import (
    CaseSummary,
    control_false_discoveries,
    distrusted,
    per_round_logs,
    placed_effect,
    placement_terms,
    round_sets,
    round_statistics,
)
from kprof.designs import QUANTITY_ORDER, LegValues, Quantity, lever_values
from kprof.designs import sequence as seq
from kprof.designs.base import legs_by_levers
from kprof.run_model import Leg, Role

# Designs whose quantity is one leg against the baseline: their rows are that leg's row of the
# leg table (same interval, same verdict), not a second computation of the same comparison.
LEG_DESIGNS = ("total", "add_one", "cumulative")


def attribute_run(
    samples: pd.DataFrame,
    legs: list[Leg],
    levers: Sequence[str],
    summaries: dict[str, CaseSummary],
    effects: pd.DataFrame,
) -> pd.DataFrame:
    """One row per (case, design, lever): estimate, 95% interval (with the placement term, as every
    leg's), p, verdict. ``total`` and ``add_one`` are legs of ``effects`` (the leg table) and carry
    their rows; the other designs are computed here by the same function and Benjamini–Hochberg
    adjusted within each case's design (the levers of one design are one family)."""
    rounds = round_statistics(samples)
    by = legs_by_levers(legs)
    at = seq.points(legs)
    rows: list[dict[str, Any]] = []
    for case in pd.unique(rounds["case"]):
        logs = per_round_logs(rounds, case).dropna(how="any")
        summary = summaries.get(case)
        threshold = S.pct_threshold_to_log(summary.threshold_pct if summary else defaults.THRESHOLD_PCT)
        leg_rows = effects[effects["case"] == case].set_index("leg") if len(effects) else pd.DataFrame()
        per_leg = LegValues(logs, legs, tuple(levers))
        series = lever_values(per_leg)
        weights = offset_weights(per_leg) if summary is not None and summary.between_runs_pct > 0 else {}
        sets = round_sets(samples[samples["case"] == case])
        set_of_round = sets.reindex(logs.index).to_numpy() if sets is not None else None
        same_as = _same_as_legs(series, logs, leg_rows)
        derived = {k: v for k, v in series.items() if k.design not in LEG_DESIGNS and k not in same_as and v.any()}
        terms = placement_terms(pd.DataFrame(derived), set_of_round)
        bias = summary.bias if summary else 0.0
        since = seq.since(legs, levers, logs.columns)
        for key, values in series.items():
            design, lever = key
            leg = same_as.get(key)
            if design in LEG_DESIGNS:
                if design == "cumulative":
                    leg = at[list(levers).index(lever) + 1]
                else:
                    leg = by[frozenset(levers) if design == "total" else frozenset({lever})]
            if leg is not None:  # one quantity, one interval: the leg's row
                row = {c: leg_rows.loc[leg, c] for c in S.EFFECT_COLUMNS if c in leg_rows.columns}
                n = int(leg_rows.loc[leg, "rounds"])
                row["same_as_leg"] = leg
            elif key not in derived:  # identically 0 by construction (unexplained with one lever)
                eff = placed_effect(values.to_numpy(), 0.0, threshold)
                row, n = eff.row(), eff.rounds
            else:
                tick = summary.derived_tick if summary else 0.0
                between = S.between_runs_half_width(summary.between_runs_pct, weights[key]) if weights else 0.0
                eff = placed_effect(values.to_numpy(), terms[key].half_width, threshold, bias, tick, between)
                row, n = eff.row(), eff.rounds
            if summary is not None and summary.distrust:
                row["verdict"] = distrusted(row["verdict"])
            if design == "sequence":
                row["spans"] = seq.spanned(legs, levers, lever, since[lever][1])
            rows.append(dict(case=case, design=design, lever=lever or "(all levers)", rounds=n, **row))
    table = pd.DataFrame(rows)
    if len(table):
        tested = (table["verdict"] != "BIASED") & table.get("same_as_leg", pd.Series(index=table.index)).isna()
        control_false_discoveries(table, tested, by=["case", "design"])
        # Cases in run order, designs in reading order, levers by name.
        rank = {
            "design": {d: i for i, d in enumerate(QUANTITY_ORDER)},
            "case": {c: i for i, c in enumerate(pd.unique(rounds["case"]))},
        }
        table = table.sort_values(
            ["case", "design", "lever"], key=lambda c: c.map(rank[c.name]) if c.name in rank else c, kind="stable"
        ).reset_index(drop=True)
    return table


def _same_as_legs(series: dict[Quantity, pd.Series], logs: pd.DataFrame, leg_rows: pd.DataFrame) -> dict[Quantity, str]:
    """Derived quantities that are, round for round, one leg against the baseline (leave-one-out
    and Shapley with one lever, a first commit's sequence effect): each → that leg, whose row they
    print, so one comparison never prints two intervals."""
    base = leg_rows.index[leg_rows["verdict"].eq("REFERENCE")] if "verdict" in leg_rows else []
    if not len(base) or base[0] not in logs:
        return {}
    legs = {leg: logs[leg] - logs[base[0]] for leg in leg_rows.index if leg in logs and leg != base[0]}
    out: dict[Quantity, str] = {}
    for key, values in series.items():
        if key.design in LEG_DESIGNS:
            continue
        match = next((leg for leg, d in legs.items() if np.allclose(values, d, rtol=0, atol=1e-12)), None)
        if match is not None:
            out[key] = match
    return out


def _judged(series: pd.Series, threshold: float, bias: float, tick: float, between: float) -> dict[str, Any]:
    return placed_effect(series.to_numpy(), 0.0, threshold, bias, tick, between).row()


def offset_weights(values: LegValues) -> dict[Quantity, float]:
    """Each quantity's size in leg effects where every leg's time moves by its own offset between
    fresh runs: √(Σw²/2) for the quantity Σ w·ln t (1 for a leg against its baseline). The
    quantities are linear in the legs' log times, so each leg's weight is the quantity's value
    where that leg alone reads 1."""
    columns = values.logs.columns
    unit = pd.DataFrame(np.eye(len(columns)), index=columns, columns=columns)
    return {
        key: float(np.sqrt((w.to_numpy() ** 2).sum() / 2))
        for key, w in lever_values(LegValues(unit, values.legs, values.levers)).items()
    }


def _trend(per_dose: list[pd.Series]) -> float:
    """Page's test over the doses in order (rounds as blocks); NaN with fewer than three doses."""
    if len(per_dose) < 3:
        return float("nan")
    return S.trend_test(np.stack([s.to_numpy() for s in per_dose], axis=1))


def sweep_table(
    samples: pd.DataFrame,
    legs: list[Leg],
    summaries: dict[str, CaseSummary],
    columns: dict[str, dict[str, dict[str, Any]]] | None = None,
) -> pd.DataFrame:
    """Dose-response per case: each forced value's target against the unforced target, with Page's
    trend test over the values. When the baseline was forced too (``--sweep-baseline``), the
    target's effect at each value (``lever_*`` columns, with its own trend test): the table a
    mechanism claim needs. ``columns``: what each value means per case (e.g. loop trips)."""
    sweep_legs = [leg for leg in legs if leg.has(Role.SWEEP)]
    if not sweep_legs:
        return pd.DataFrame()
    name = sweep_legs[0].params[0][0]
    target = next(leg.name for leg in legs if leg.has(Role.TARGET))
    baseline_at = {leg.params[0][1]: leg.name for leg in legs if leg.has(Role.SWEEP_BASELINE)}
    rounds = round_statistics(samples)
    rows = []
    for case in pd.unique(rounds["case"]):
        logs = per_round_logs(rounds, case).dropna(how="any")
        doses = sorted(((leg.params[0][1], leg.name) for leg in sweep_legs if leg.name in logs), key=lambda x: x[0])
        paired = [(v, n) for v, n in doses if baseline_at.get(v) in logs]
        summary = summaries.get(case)
        threshold = S.pct_threshold_to_log(summary.threshold_pct if summary else defaults.THRESHOLD_PCT)
        bias = summary.bias if summary else 0.0
        tick = summary.tick if summary else lambda *legs: 0.0
        between = S.between_runs_half_width(summary.between_runs_pct if summary else 0.0)
        trend_p = _trend([logs[n] for _, n in doses])
        lever_trend_p = _trend([logs[n] - logs[baseline_at[v]] for v, n in paired])
        for value, leg in doses:
            row = dict(
                case=case,
                param=name,
                value=value,
                **(columns or {}).get(case, {}).get(str(value), {}),
                time_us=float(np.exp(logs[leg]).median() / 1e3),
                rounds=len(logs),
                **_judged(logs[leg] - logs[target], threshold, bias, tick(leg, target), between),
                trend_p=trend_p,
            )
            if baseline_at.get(value) in logs:
                lever = _judged(
                    logs[leg] - logs[baseline_at[value]], threshold, bias, tick(leg, baseline_at[value]), between
                )
                row.update({f"lever_{k}": v for k, v in lever.items()}, lever_trend_p=lever_trend_p)
            if summary is not None and summary.distrust:
                row.update({k: distrusted(row[k]) for k in ("verdict", "lever_verdict") if k in row})
            rows.append(row)
    table = pd.DataFrame(rows)
    tested = table["verdict"] != "BIASED"
    control_false_discoveries(table, tested, by=["case"])  # one family: a case's swept values
    if "lever_p" in table:
        levers = pd.DataFrame({"case": table["case"], "p": table["lever_p"], "verdict": table["lever_verdict"]})
        control_false_discoveries(levers, tested & table["lever_p"].notna(), by=["case"])
        table["lever_verdict"] = levers["verdict"]
    return table
