"""compare's CI gate on fresh runs already stored (issue 54): every split of one design's runs into
a base folder of K runs and a head folder of the rest, through `credibly-slower>1%` (the recipe in
docs/run.md asks five a side; stored sessions hold five to seven runs, so K is smaller here). The
code is the same on both sides: any failure is a false one.

With ``--plant LEG:PCT`` the head's runs are copies whose LEG samples are PCT% slower (its stored
times scaled: a regression planted in real between-run noise, not a slower kernel timed on a GPU):
the share of splits whose gate fails on that leg, and how many fail on any other.

    python benchmarks/gate_stored_runs.py RUN1 RUN2 … --per-side K [--plant 'all:2'] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import tempfile
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
from gate_fresh_runs import RULE, gate, null_splits, side_folder


def planted_copy(run: Path, to: Path, leg: str, pct: float) -> Path:
    """A copy of a run folder whose ``leg`` samples take ``pct``% longer (every samples part)."""
    shutil.copytree(run, to, symlinks=False)
    for part in (to / "samples").glob("*.parquet"):
        table = pq.read_table(part)
        times = table["time_ns"]
        scaled = pc.if_else(pc.equal(table["leg"], leg), pc.multiply(times, 1 + pct / 100), times)
        column = table.schema.get_field_index("time_ns")
        pq.write_table(table.set_column(column, "time_ns", scaled.cast(times.type)), part)
    return to


def planted_splits(runs: list[Path], tmp: Path, per_side: int, leg: str, pct: float) -> dict:
    """Every split as in null_splits, the head's runs planted: how many splits fail, how many of
    those on another leg too (a false failure beside the true one), how many cannot decide, and of
    the planted leg's rows (one per case) the share the rule breaks (its interval wholly beyond −1%)."""
    planted = [planted_copy(run, tmp / "planted" / run.name, leg, pct) for run in runs]
    tally = {"fail": 0, "fail_elsewhere": 0, "undecided": 0, "pass": 0}
    caught = rows = 0
    for k, picked in enumerate(itertools.combinations(range(len(runs)), per_side)):
        rest = [i for i in range(len(runs)) if i not in picked]
        base = side_folder(tmp, f"p{k}a", [runs[i] for i in picked])
        outcome, legs = gate(base, side_folder(tmp, f"p{k}b", [planted[i] for i in rest]))
        beyond = legs["ci_high_pct"] < -1.0
        tally[outcome] += 1
        tally["fail_elsewhere"] += bool((beyond & legs["leg"].ne(leg)).any())
        caught += int((beyond & legs["leg"].eq(leg)).sum())
        rows += int(legs["leg"].eq(leg).sum())
    return {"planted": f"{leg} {pct:g}% slower", "splits": k + 1, **tally, "planted_rows": rows, "caught_rows": caught}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="run folders of one design (fresh runs)")
    p.add_argument("--per-side", type=int, required=True, help="runs in each base folder (the head takes the rest)")
    p.add_argument("--plant", help="LEG:PCT — the head's LEG made PCT%% slower (its stored times scaled)")
    p.add_argument("--json", type=Path, help="write the figures here too")
    a = p.parse_args()
    if not 2 <= a.per_side <= len(a.runs) - 2:
        p.error(f"--per-side must leave at least two runs on each side of {len(a.runs)}")
    out: dict = {"rule": RULE, "runs": [r.name for r in a.runs], "base_runs": a.per_side}
    with tempfile.TemporaryDirectory() as tmp:
        if a.plant:
            leg, _, pct = a.plant.rpartition(":")
            out |= planted_splits(a.runs, Path(tmp), a.per_side, leg, float(pct))
        else:
            out |= null_splits(a.runs, Path(tmp), a.per_side)
    print(json.dumps(out))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
