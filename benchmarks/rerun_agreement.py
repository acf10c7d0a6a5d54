"""Do two independent runs of the same design agree as their intervals say? For every leg both runs
compared (A/A copies included), whether one run's 95% interval — and its rerun interval, the
prediction interval for a fresh run — holds the other run's estimate, both ways. Exact 95%
intervals hold a fresh estimate about 83% of the time (both estimates vary); the rerun interval
about 95% when one run's rounds and placements show how runs differ.

    python benchmarks/rerun_agreement.py RUN_A RUN_B [RUN_A2 RUN_B2 ...] [--misses]

Each pair is two run folders (fresh processes, other seeds). Prints one line per pair and the total.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from kprof.commands.analyse import analyse_run


def comparisons(root: Path) -> pd.DataFrame:
    """The run's effect rows that compare a leg with the reference, indexed by (case, leg)."""
    effects = analyse_run(root).effects
    compared = effects[effects["rerun_low_pct"].notna()]
    columns = ["effect_pct", "ci_low_pct", "ci_high_pct", "rerun_low_pct", "rerun_high_pct", "verdict"]
    return compared.set_index(["case", "leg"])[columns]


def agreement(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per (leg, direction): does this run's interval / rerun interval hold the other's estimate."""
    common = a.index.intersection(b.index)
    rows = []
    for this, other in ((a, b), (b, a)):
        x, y = this.loc[common], other.loc[common, "effect_pct"]
        rows.append(
            pd.DataFrame(
                {
                    "effect_pct": x["effect_pct"],
                    "other_pct": y,
                    "in_interval": (x["ci_low_pct"] <= y) & (y <= x["ci_high_pct"]),
                    "in_rerun_interval": (x["rerun_low_pct"] <= y) & (y <= x["rerun_high_pct"]),
                }
            )
        )
    return pd.concat(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="run folders, two per pair")
    p.add_argument("--misses", action="store_true", help="list the comparisons outside the rerun interval")
    args = p.parse_args()
    if len(args.runs) % 2:
        p.error("run folders come in pairs")
    total = []
    for a, b in zip(args.runs[::2], args.runs[1::2]):
        rows = agreement(comparisons(a), comparisons(b))
        total.append(rows)
        print(
            f"{a.name} / {b.name}: {len(rows) // 2} legs, {len(rows)} comparisons; inside the interval "
            f"{rows['in_interval'].mean():.1%}, inside the rerun interval {rows['in_rerun_interval'].mean():.1%}"
        )
        if args.misses:
            print(rows[~rows["in_rerun_interval"]].round(2).to_string())
    if len(total) > 1:
        rows = pd.concat(total)
        print(
            f"all: {len(rows)} comparisons; inside the interval {rows['in_interval'].mean():.1%}, "
            f"inside the rerun interval {rows['in_rerun_interval'].mean():.1%}"
        )


if __name__ == "__main__":
    main()
