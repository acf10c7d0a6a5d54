"""Does compare's CI gate hold on the GPU? Issue 54's check, on the runs of
benchmarks/gate_fresh_runs.sh.

- Identical code: the ten fresh runs of each preset split every way into five base and five head
  runs (252 ordered splits: each split of the ten twice, either half the base), each through
  compare's gate `credibly-slower>1%` (the recipe in docs/run.md): how many fail (a false
  failure), how many cannot decide, the largest estimate and interval seen.
- A planted regression: the first five copy runs (base) against five whose 256MiB calls end with a
  spin sized to make them 2% slower (head, benchmarks/gate_plant.py): each row with its interval
  and verdict, and the gate (the 8MiB case is the same code on both sides).
- The command itself: `kprof compare BASE HEAD --fail-on 'credibly-slower>1%'` once on a null
  split and once on the planted pair, for its exit code (0 passes, 1 fails).

    python benchmarks/gate_fresh_runs.py RUNS_DIR [--json OUT.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from kprof.analysis.compare import judge, parse_gate
from kprof.commands.compare import compare

RULE = "credibly-slower>1%"
PER_SIDE = 5


def side_folder(root: Path, name: str, runs: list[Path]) -> Path:
    """A folder of fresh runs (links to the run folders), what compare takes as one side."""
    folder = root / name
    folder.mkdir(parents=True)
    for run in runs:
        (folder / run.name).symlink_to(run.resolve())
    return folder


def gate(base: Path, head: Path) -> tuple[str, pd.DataFrame]:
    """The gate's outcome (pass, fail, undecided) and compare's leg rows for one pair of sides."""
    comparison = compare(base, head)
    result = judge(comparison, parse_gate(RULE))
    outcome = "fail" if result.broken else "undecided" if result.undecided else "pass"
    return outcome, comparison.legs


def null_splits(runs: list[Path], tmp: Path, per_side: int = PER_SIDE) -> dict:
    """Every ordered split of the runs into ``per_side`` base runs and the rest as head runs through
    the gate (of ten into five and five: each choice of five is a base once, and its complement's
    base another time)."""
    tally = {"pass": 0, "fail": 0, "undecided": 0}
    rows = []
    for k, picked in enumerate(itertools.combinations(range(len(runs)), per_side)):
        rest = [i for i in range(len(runs)) if i not in picked]
        base = side_folder(tmp, f"s{k}a", [runs[i] for i in picked])
        outcome, legs = gate(base, side_folder(tmp, f"s{k}b", [runs[i] for i in rest]))
        tally[outcome] += 1
        rows.append(legs)
    legs = pd.concat(rows)
    return {
        "splits": sum(tally.values()),
        **tally,
        "rows": len(legs),
        "largest_abs_effect_pct": round(float(legs["effect_pct"].abs().max()), 3),
        "median_half_width_pct": round(float(((legs["ci_high_pct"] - legs["ci_low_pct"]) / 2).median()), 3),
        "verdicts": legs["verdict"].value_counts().to_dict(),
    }


def cli_exit(base: Path, head: Path) -> int:
    return subprocess.run(
        [sys.executable, "-m", "kprof", "compare", str(base), str(head), "--fail-on", RULE],
        capture_output=True,
        text=True,
    ).returncode


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs_dir", type=Path, help="the runs/ folder of gate_fresh_runs.sh")
    p.add_argument("--json", type=Path, help="write the figures here too")
    a = p.parse_args()
    groups: dict[str, list[Path]] = {}
    for run in sorted(a.runs_dir.iterdir(), key=lambda r: int(r.name.rsplit("_", 1)[1]) if r.is_dir() else 0):
        if run.is_dir() and (run / "meta.json").exists():
            groups.setdefault(run.name.rsplit("_", 1)[0], []).append(run)
    out: dict = {"rule": RULE, "runs_a_side": PER_SIDE}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for name, runs in groups.items():
            if name == "plant2":
                continue
            if len(runs) < 2 * PER_SIDE:
                print(f"{name}: {len(runs)} runs, fewer than {2 * PER_SIDE}: no null splits")
                continue
            result = null_splits(runs[: 2 * PER_SIDE], tmp / name)
            result["cli_exit_first_split"] = cli_exit(
                side_folder(tmp, f"{name}-cli-a", runs[:PER_SIDE]),
                side_folder(tmp, f"{name}-cli-b", runs[PER_SIDE : 2 * PER_SIDE]),
            )
            out[name] = result
            print(f"{name}, identical code: {json.dumps(result)}")
        if len(groups.get("copy", [])) >= PER_SIDE and len(groups.get("plant2", [])) >= PER_SIDE:
            base = side_folder(tmp, "plant-base", groups["copy"][:PER_SIDE])
            head = side_folder(tmp, "plant2", groups["plant2"][:PER_SIDE])
            outcome, legs = gate(base, head)
            shown = legs[["case", "leg", "effect_pct", "ci_low_pct", "ci_high_pct", "verdict"]].round(3)
            print(f"planted 2% on copy 256MiB: gate {outcome}\n{shown.to_string(index=False)}")
            out["planted"] = {"gate": outcome, "cli_exit": cli_exit(base, head), "rows": shown.to_dict("records")}
            print(f"  kprof compare exit code: {out['planted']['cli_exit']}")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
