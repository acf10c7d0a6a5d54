"""How much do fresh runs of one design differ, and does each run's interval say so?

Given run folders of the same design in the order they ran (benchmarks/between_runs.sh: a fresh
kprof process and seed each), for every leg compared with its baseline:

- coverage: the share of run k+1's estimates inside run k's 95% interval and inside its rerun
  interval (the prediction interval for a fresh run), over consecutive pairs and over every
  ordered pair;
- verdicts: the legs whose verdict is the same in every run, and what the others flip between;
- the between-run component: per leg, the SD of its log effect over the runs beyond what the runs'
  own intervals explain (variance of the estimates minus their mean squared standard error, the
  standard error read off each 95% interval as half its width / 1.96), summarised over legs;
- compare's gate on identical code: every pair of runs through `kprof compare A B` (the same
  functions), with and without `--control`, under `slower>X%` and `credibly-slower>X%`; the share of
  pairs that fail (exit 1) and that cannot decide (exit 3).

    python benchmarks/between_runs.py RUN1 RUN2 RUN3 … [--control 'plain PyTorch'] [--gate-size 1]
"""

from __future__ import annotations

import argparse
import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
from rerun_agreement import agreement, comparisons

from kprof.analysis.compare import judge, parse_gate
from kprof.commands.compare import compare

Z95 = 1.959964


def coverage(runs: list[pd.DataFrame], pairs: list[tuple[int, int]]) -> dict[str, float]:
    """Share of the later run's estimates inside the earlier run's interval and rerun interval."""
    rows = pd.concat(
        [agreement(runs[i], runs[j]).iloc[: len(runs[i].index.intersection(runs[j].index))] for i, j in pairs]
    )
    return {
        "comparisons": len(rows),
        "inside_interval": float(rows["in_interval"].mean()),
        "inside_rerun_interval": float(rows["in_rerun_interval"].mean()),
    }


def log_effect(pct: pd.Series) -> pd.Series:
    """effect_pct = 100·(t_ref/t_leg − 1) → ln(t_leg/t_ref)."""
    return -np.log1p(pct / 100.0)


def between_run_sd(runs: list[pd.DataFrame]) -> pd.DataFrame:
    """Per (case, leg): SD of the log effect over runs, the runs' mean standard error, and the
    between-run component sqrt(max(0, var − mean SE²)), all in percent of time."""
    frames = []
    for k, r in enumerate(runs):
        est = log_effect(r["effect_pct"])
        se = (log_effect(r["ci_low_pct"]) - log_effect(r["ci_high_pct"])).abs() / (2 * Z95)
        frames.append(pd.DataFrame({"run": k, "est": est, "se": se}))
    long = pd.concat(frames).reset_index()
    g = long.groupby(["case", "leg"])
    out = pd.DataFrame(
        {"runs": g.size(), "sd": g["est"].std(ddof=1), "se": np.sqrt(g["se"].apply(lambda s: (s**2).mean()))}
    )
    out["between"] = np.sqrt(np.maximum(0.0, out["sd"] ** 2 - out["se"] ** 2))
    return (100 * out[["sd", "se", "between"]]).assign(runs=out["runs"])


def gate_outcomes(paths: list[Path], size: float, control: str | None) -> dict[str, dict[str, float]]:
    """Every unordered pair of runs through compare and each gate rule: share failing, undecided."""
    rules = {name: parse_gate(name) for name in (f"slower>{size:g}%", f"credibly-slower>{size:g}%")}
    tally = {name: {"fail": 0, "undecided": 0} for name in rules}
    slower_rows = total_rows = 0
    pairs = list(itertools.combinations(paths, 2))
    for a, b in pairs:
        comparison = compare(a, b, control=control)
        legs = comparison.legs
        judged = legs[legs.get("role", pd.Series("", index=legs.index)).ne("CONTROL")] if len(legs) else legs
        slower_rows += int(judged["verdict"].eq("SLOWER").sum())
        total_rows += len(judged)
        for name, gate in rules.items():
            result = judge(comparison, gate)
            if result.broken:
                tally[name]["fail"] += 1
            elif result.undecided:
                tally[name]["undecided"] += 1
    out = {name: {k: v / len(pairs) for k, v in t.items()} for name, t in tally.items()}
    out["rows_slower"] = {"share": slower_rows / max(total_rows, 1), "rows": total_rows, "pairs": len(pairs)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="run folders of one design, in the order they ran")
    p.add_argument("--control", default="plain PyTorch", help="the leg compare's --control uses ('' for none)")
    p.add_argument("--gate-size", type=float, default=1.0, help="the X of the slower>X%% rules")
    a = p.parse_args()
    runs = [comparisons(path) for path in a.runs]
    n = len(runs)
    print(f"{n} runs: {', '.join(path.name for path in a.runs)}")
    for label, pairs in (
        ("consecutive (run k+1 by run k)", [(k, k + 1) for k in range(n - 1)]),
        ("every ordered pair", [(i, j) for i in range(n) for j in range(n) if i != j]),
    ):
        c = coverage(runs, pairs)
        print(
            f"  {label}: {c['comparisons']} comparisons; inside the interval {c['inside_interval']:.1%}, "
            f"inside the rerun interval {c['inside_rerun_interval']:.1%}"
        )
    verdicts = pd.concat([r["verdict"] for r in runs], axis=1).dropna()
    same = verdicts.nunique(axis=1).eq(1)
    flips = [" / ".join(sorted(set(v))) for v in verdicts[~same].itertuples(index=False)]
    flips = pd.Series(flips, dtype=object).value_counts()
    print(f"  legs with one verdict in every run: {same.sum()} of {len(same)}; the others: {flips.to_dict()}")
    sd = between_run_sd(runs)
    q = sd[["sd", "se", "between"]].quantile([0.5, 0.9])
    print(
        f"  per leg over {n} runs ({len(sd)} legs), median / 90th percentile: SD of the estimate "
        f"{q.loc[0.5, 'sd']:.3f} / {q.loc[0.9, 'sd']:.3f}%, within-run SE {q.loc[0.5, 'se']:.3f} / "
        f"{q.loc[0.9, 'se']:.3f}%, between-run component {q.loc[0.5, 'between']:.3f} / {q.loc[0.9, 'between']:.3f}%; "
        f"legs with a component: {(sd['between'] > 0).mean():.0%}"
    )
    timed_everywhere = all(a.control in r.index.get_level_values("leg") for r in runs)
    if a.control and not timed_everywhere:
        print(f"  no --control rows: the leg {a.control!r} is not timed in every run (a design without it)")
    for control in [None] + ([a.control] if a.control and timed_everywhere else []):
        g = gate_outcomes(list(a.runs), a.gate_size, control)
        rows = g.pop("rows_slower")
        rules = "; ".join(f"{name}: fails {v['fail']:.0%}, undecided {v['undecided']:.0%}" for name, v in g.items())
        print(
            f"  compare, {rows['pairs']} pairs of identical code{f', --control {control!r}' if control else ''}: "
            f"{rules}; SLOWER rows {rows['share']:.1%} of {rows['rows']}"
        )
    if math.isfinite(sd["between"].max()):
        worst = sd.sort_values("between", ascending=False).head(5).round(3)
        print("  largest between-run components (percent):")
        print("    " + worst.to_string().replace("\n", "\n    "))


if __name__ == "__main__":
    main()
