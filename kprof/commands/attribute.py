"""`kprof attribute`: per-lever effects of a stored run (or of a fresh run of a workload)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kprof.analysis.attribution import attribute_run, lever_values, sweep_table
from kprof.analysis.run_effects import per_round_logs, round_statistics
from kprof.commands.report import RunReport, analyse_run
from kprof.run_store import RunStore


@dataclass
class Attribution:
    run: RunReport
    levers: pd.DataFrame
    sweep: pd.DataFrame
    per_round: dict[str, dict[str, pd.Series]]


def attribute(root: Path, threshold_pct: float | None = None) -> Attribution:
    run = analyse_run(root, threshold_pct)
    samples = RunStore(root).read("samples")
    legs = run.meta["legs"]
    levers = [f["name"] for f in run.meta["features"]]
    table = attribute_run(samples, legs, levers, run.summaries)
    rounds = round_statistics(samples)
    per_round = {
        case: lever_values(per_round_logs(rounds, case).dropna(how="any"), legs, levers)
        for case in pd.unique(rounds["case"])
    }
    sweep = sweep_table(samples, legs, run.summaries, run.meta.get("sweep_columns"))
    return Attribution(run, table, sweep, per_round)
