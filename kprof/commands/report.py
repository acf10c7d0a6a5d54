"""Analysis of a stored run folder (used by `kprof run` at the end and by `kprof report`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from kprof.analysis.run_effects import CaseSummary, calibration_table, leg_effects, sign_rule
from kprof.errors import KprofInputError
from kprof.run_store import RunStore


@dataclass
class RunReport:
    meta: dict[str, Any]
    effects: pd.DataFrame
    summaries: dict[str, CaseSummary]
    checks: pd.DataFrame
    compile: pd.DataFrame
    calibration: pd.DataFrame
    sign_rule: pd.DataFrame
    kernel_effects: pd.DataFrame


def analyse_run(root: Path, threshold_pct: float | None = None) -> RunReport:
    store = RunStore(root)
    meta = store.read_meta()
    samples = store.read("samples")
    if samples.empty:
        raise KprofInputError(root, "holds no finished round yet")
    threshold = meta.get("threshold_pct", 0.5) if threshold_pct is None else threshold_pct
    effects, summaries = leg_effects(samples, meta["legs"], threshold, meta.get("bytes_per_call"))
    kernels = store.read("kernels")
    kernel_effects = pd.DataFrame()
    if not kernels.empty:  # --collector torch: each kernel of each case becomes a case of its own
        as_samples = kernels.assign(
            case=kernels["case"].astype(str) + " · " + kernels["kernel"].astype(str),
            time_ns=kernels["total_us"] * 1e3,
            sample=0,
            burn_in=False,
            timer="torch",
        )
        kernel_effects, _ = leg_effects(as_samples, meta["legs"], threshold)
    return RunReport(
        meta,
        effects,
        summaries,
        store.read("checks"),
        store.read("compile"),
        calibration_table(samples, effects, meta["legs"]),
        sign_rule(samples, meta["legs"]),
        kernel_effects,
    )
