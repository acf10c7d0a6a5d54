"""`kprof compare A B`: per kernel, per step and per leg, A against B.

Each side is a run folder, a trace file, a folder of trace files (repetitions of one
configuration), or a ``kernel_events.parquet`` written by ``kprof trace --save`` (or its folder).
With repetitions on both sides every row gets an interval and a verdict (two independent samples:
Hodges–Lehmann shift, Lehmann interval, Mann–Whitney p, Benjamini–Hochberg across the report).
With one trace per side the deltas are shown and no verdict is given: one sample supports none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from kprof.analysis import stats as S
from kprof.analysis.run_effects import control_false_discoveries, round_statistics
from kprof.analysis.trace_tables import trace_tables
from kprof.errors import KprofInputError
from kprof.ingest import load_trace
from kprof.ingest.attribute import compile_step_pattern
from kprof.run_store import RunStore
from kprof.store import load_frame
from kprof.trace import Trace, range_table

NO_VERDICT = "ONE SAMPLE"


@dataclass
class Side:
    label: str
    kind: str  # "run" or "traces"
    kernels: list[pd.DataFrame] = field(default_factory=list)  # one per-kernel table per trace
    steps: list[pd.DataFrame] = field(default_factory=list)
    run_rounds: pd.DataFrame | None = None


@dataclass
class Comparison:
    a: Side
    b: Side
    kernels: pd.DataFrame
    steps: pd.DataFrame
    legs: pd.DataFrame
    repeated: bool


def _trace_files(path: Path) -> list[Path]:
    if path.is_dir():
        if (path / "kernel_events.parquet").exists():
            return [path / "kernel_events.parquet"]
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        if not files:
            raise KprofInputError(path, "holds no trace files")
        return files
    return [path]


def _is_run(path: Path) -> bool:
    """A `kprof run` folder (a `kprof trace --save` folder has a meta.json too, without legs)."""
    return (path / "meta.json").is_file() and "legs" in RunStore(path).read_meta()


def load_side(path: Path, steps: str | None) -> Side:
    if _is_run(path):
        store = RunStore(path)
        samples = store.read("samples")
        if samples.empty:
            raise KprofInputError(path, "holds no finished round yet")
        return Side(str(path), "run", run_rounds=round_statistics(samples))
    if not path.exists():
        raise KprofInputError(path, "no such file or folder")
    pattern = compile_step_pattern(steps)
    side = Side(str(path), "traces")
    for f in _trace_files(path):
        if f.suffix == ".parquet":
            trace = Trace(kernels=load_frame(f), ranges=range_table({}), meta={"file": str(f), "format": "parquet"})
        else:
            trace = load_trace(f, step_pattern=steps)
        tables = trace_tables(trace, pattern)
        side.kernels.append(tables.kernels)
        side.steps.append(tables.steps)
    return side


def _verdict_rows(rows: list[dict]) -> pd.DataFrame:
    table = pd.DataFrame(rows)
    if not len(table) or "p" not in table:
        return table
    return control_false_discoveries(table, table["verdict"].isin(S.VERDICTS))


def _row(key: dict, a: np.ndarray, b: np.ndarray, threshold: float, repeated: bool) -> dict:
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
    row.update(S.with_verdict(S.two_sample(a, b), threshold).row())
    return row


def compare(a_path: Path, b_path: Path, threshold_pct: float = 0.5, steps: str | None = None) -> Comparison:
    a, b = load_side(a_path, steps), load_side(b_path, steps)
    if a.kind != b.kind:
        raise KprofInputError(b_path, f"is a {b.kind}, but {a_path} is a {a.kind}: compare like with like")
    threshold = S.pct_threshold_to_log(threshold_pct)
    kernels, steps_rows, legs = [], [], []
    if a.kind == "run":
        repeated = True
        ra, rb = a.run_rounds, b.run_rounds
        for (case, leg), ga in ra.groupby(["case", "leg"], sort=False):
            gb = rb[(rb["case"] == case) & (rb["leg"] == leg)]
            if len(gb):
                legs.append(
                    _row(
                        {"case": case, "leg": leg},
                        ga["t_ns"].to_numpy() / 1e3,
                        gb["t_ns"].to_numpy() / 1e3,
                        threshold,
                        True,
                    )
                )
    else:
        repeated = len(a.kernels) > 1 and len(b.kernels) > 1
        per_kernel = {}
        for side, tables in (("a", a.kernels), ("b", b.kernels)):
            for t in tables:
                for _, r in t.iterrows():
                    per_kernel.setdefault((r["kind"], r["name"], r["short_name"]), {"a": [], "b": [], "calls": {}})
                    entry = per_kernel[(r["kind"], r["name"], r["short_name"])]
                    entry[side].append(r["mean_us"])
                    entry["calls"].setdefault(side, []).append(r["calls"])
        for (kind, name, short), e in per_kernel.items():
            if e["a"] and e["b"]:
                row = _row(
                    {"kind": kind, "name": name, "short_name": short},
                    np.array(e["a"]),
                    np.array(e["b"]),
                    threshold,
                    repeated,
                )
                row.update(calls_a=float(np.median(e["calls"]["a"])), calls_b=float(np.median(e["calls"]["b"])))
                kernels.append(row)
            else:
                only = "a" if e["a"] else "b"
                kernels.append(
                    {
                        "kind": kind,
                        "name": name,
                        "short_name": short,
                        "a": float(np.median(e["a"])) if e["a"] else np.nan,
                        "b": float(np.median(e["b"])) if e["b"] else np.nan,
                        "verdict": f"ONLY IN {only.upper()}",
                    }
                )
        busy_a = np.concatenate([s.loc[~s["warmup"], "busy_us"].to_numpy() for s in a.steps if len(s)] or [[]])
        busy_b = np.concatenate([s.loc[~s["warmup"], "busy_us"].to_numpy() for s in b.steps if len(s)] or [[]])
        if len(busy_a) and len(busy_b):
            steps_rows.append(
                _row({"metric": "GPU busy µs per step (steady steps)"}, busy_a, busy_b, threshold, repeated)
            )
    kt = _verdict_rows(kernels)
    if len(kt):
        kt = kt.sort_values("a", ascending=False, na_position="last").reset_index(drop=True)
    return Comparison(a, b, kt, _verdict_rows(steps_rows), _verdict_rows(legs), repeated)


FAIL_ON = re.compile(r"^(slower|faster)>(\d+(?:\.\d+)?)%$")


def failures(comparison: Comparison, rule: str) -> list[str]:
    """Rows that break ``slower>2%`` (or ``faster>…``): a verdict in that direction beyond the size."""
    m = FAIL_ON.match(rule.strip().lower())
    if not m:
        raise KprofInputError("--fail-on", f"expected e.g. 'slower>2%', got {rule!r}")
    direction, size = m.group(1).upper(), float(m.group(2))
    broken = []
    for table, label in ((comparison.kernels, "short_name"), (comparison.steps, "metric"), (comparison.legs, "leg")):
        if not len(table) or "effect_pct" not in table:
            continue
        for _, r in table.iterrows():
            if r.get("verdict") == direction and abs(r["effect_pct"]) > size:
                broken.append(f"{r[label]}: {r['effect_pct']:+.2f}% ({direction})")
    return broken
