"""Tables across the ranks of one job: which rank is slowest in each step, how much each kernel's
time varies between ranks, and how long each rank waits inside collectives.

Collective wait: NCCL/RCCL kernels run until every rank has arrived, so the n-th call of one
collective lasts longest on the ranks that came first. For each call, its duration on a rank minus
its shortest duration on any rank is time that rank spent waiting for the others; summed per rank
it says who waits (fast ranks) and who is waited for (the straggler waits least). Calls are matched
by kernel name and order, and only where every rank made the same number of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kprof.analysis.trace_tables import NS_PER_US, TraceTables

COLLECTIVE_MARKERS = ("nccl", "rccl")
COLLECTIVE_COLUMNS = ["short_name", "call", "dur_us"]


def collective_calls(events: pd.DataFrame) -> pd.DataFrame:
    """Each NCCL/RCCL kernel call of one rank, numbered per kernel name in time order."""
    if not len(events):
        return pd.DataFrame(columns=COLLECTIVE_COLUMNS)
    short = events["short_name"].astype("category")  # each distinct name tested once, not each call
    codes = short.cat.codes.to_numpy()
    named = np.asarray(short.cat.categories.astype(str).str.lower().str.contains("|".join(COLLECTIVE_MARKERS)), bool)
    is_collective = (events["kind"] == "kernel").to_numpy(bool) & (codes >= 0) & named[np.maximum(codes, 0)]
    calls = events.loc[is_collective, ["short_name", "start_ns", "dur_ns"]].sort_values("start_ns", kind="stable")
    out = pd.DataFrame(
        {
            "short_name": calls["short_name"].astype(str).to_numpy(),
            "dur_us": calls["dur_ns"].to_numpy("int64") / NS_PER_US,
        }
    )
    out["call"] = out.groupby("short_name").cumcount()
    return out[COLLECTIVE_COLUMNS]


@dataclass
class CrossRank:
    steps: pd.DataFrame  # per step: slowest rank, its busy µs, the median over ranks, spread
    kernels: pd.DataFrame  # per kernel: total µs per rank summarised, slowest rank, spread
    collectives: pd.DataFrame  # per rank: collective µs and the part of it spent waiting
    notes: list[str] = field(default_factory=list)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"rank_steps": self.steps, "rank_kernels": self.kernels, "rank_collectives": self.collectives}


def _spread_pct(high: pd.Series, low: pd.Series, middle: pd.Series) -> pd.Series:
    return 100.0 * (high - low) / middle.where(middle > 0)


def _steps(tables: list[TraceTables]) -> pd.DataFrame:
    frames = [t.steps.loc[~t.steps["warmup"].astype(bool), ["step", "busy_us"]].assign(rank=t.rank) for t in tables]
    per = pd.concat(
        [f for f in frames if len(f)] or [pd.DataFrame(columns=["step", "busy_us", "rank"])], ignore_index=True
    )
    columns = ["step", "ranks", "slowest_rank", "slowest_busy_us", "median_busy_us", "fastest_busy_us", "spread_pct"]
    if not len(per):
        return pd.DataFrame(columns=columns)
    g = per.groupby("step", sort=True)["busy_us"]
    out = pd.DataFrame(
        {
            "ranks": g.size(),
            "slowest_rank": per.loc[g.idxmax(), "rank"].to_numpy(),
            "slowest_busy_us": g.max(),
            "median_busy_us": g.median(),
            "fastest_busy_us": g.min(),
        }
    ).reset_index()
    out["spread_pct"] = _spread_pct(out["slowest_busy_us"], out["fastest_busy_us"], out["median_busy_us"])
    return out[out["ranks"] > 1][columns].reset_index(drop=True)


def _kernels(tables: list[TraceTables]) -> pd.DataFrame:
    """Per kernel (full name: instantiations that share a short name are different kernels)."""
    per = pd.concat([t.kernels[["name", "short_name", "kind", "total_us"]].assign(rank=t.rank) for t in tables])
    per = per.groupby(["name", "short_name", "kind", "rank"], sort=False, as_index=False)["total_us"].sum()
    g = per.groupby(["name", "short_name", "kind"], sort=False)["total_us"]
    out = pd.DataFrame(
        {
            "ranks": g.size(),
            "min_us": g.min(),
            "median_us": g.median(),
            "max_us": g.max(),
            "slowest_rank": per.loc[g.idxmax(), "rank"].to_numpy(),
        }
    ).reset_index()
    out["spread_pct"] = _spread_pct(out["max_us"], out["min_us"], out["median_us"])
    return out.sort_values("max_us", ascending=False, kind="stable").reset_index(drop=True)


def _collectives(ranks: list[int], calls: list[pd.DataFrame]) -> tuple[pd.DataFrame, list[str]]:
    columns = ["rank", "collective_us", "wait_us", "wait_pct"]
    notes: list[str] = []
    per = pd.concat([c.assign(rank=r) for r, c in zip(ranks, calls) if len(c)] or [pd.DataFrame()])
    if not len(per):
        return pd.DataFrame(columns=columns), notes
    counts = per.groupby(["short_name", "rank"]).size().unstack("rank")
    uneven = counts.index[counts.isna().any(axis=1) | (counts.nunique(axis=1) > 1)] if len(ranks) else []
    if len(uneven):
        notes.append(
            "collective wait leaves out kernels called a different number of times per rank: " + ", ".join(uneven)
        )
    matched = per[~per["short_name"].isin(uneven)].copy()
    matched["wait_us"] = matched["dur_us"] - matched.groupby(["short_name", "call"])["dur_us"].transform("min")
    g = per.groupby("rank")["dur_us"].sum()
    waits = matched.groupby("rank")["wait_us"].sum().reindex(g.index, fill_value=0.0)
    out = pd.DataFrame({"rank": g.index, "collective_us": g.to_numpy(), "wait_us": waits.to_numpy()})
    out["wait_pct"] = 100.0 * out["wait_us"] / out["collective_us"].where(out["collective_us"] > 0)
    return out[columns], notes


def cross_rank_tables(tables: list[TraceTables], calls: list[pd.DataFrame]) -> CrossRank:
    collectives, notes = _collectives([t.rank for t in tables], calls)
    steps = _steps(tables)
    if not len(steps):
        notes.append(_no_step_table(tables))
    return CrossRank(steps, _kernels(tables), collectives, notes)


def _no_step_table(tables: list[TraceTables]) -> str:
    """Why there is no slowest-rank-per-step table, in one line (it was left out without a word)."""
    stepped = [t for t in tables if len(t.steps)]
    if not stepped:
        return "no slowest rank per step: no rank's trace has steps (--steps REGEX picks other ranges)"
    steady = [t for t in stepped if (~t.steps["warmup"].astype(bool)).any()]
    if not steady:
        return (
            "no slowest rank per step: every rank's trace holds only its first step, which is warm-up "
            "(profile two or more steps)"
        )
    return "no slowest rank per step: no steady step is recorded by two ranks or more"
