"""compare's CI gate on fresh runs already stored (issue 54): every split of one design's runs into
a base folder of K runs and a head folder of the rest, through `credibly-slower>1%` (the recipe in
docs/run.md asks five a side; stored sessions hold five to seven runs, so K is smaller here). The
code is the same on both sides: any failure is a false one.

    python benchmarks/gate_stored_runs.py RUN1 RUN2 … --per-side K [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from gate_fresh_runs import RULE, null_splits


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="run folders of one design (fresh runs)")
    p.add_argument("--per-side", type=int, required=True, help="runs in each base folder (the head takes the rest)")
    p.add_argument("--json", type=Path, help="write the figures here too")
    a = p.parse_args()
    if not 2 <= a.per_side <= len(a.runs) - 2:
        p.error(f"--per-side must leave at least two runs on each side of {len(a.runs)}")
    with tempfile.TemporaryDirectory() as tmp:
        result = null_splits(a.runs, Path(tmp), a.per_side)
    out = {"rule": RULE, "runs": [r.name for r in a.runs], "base_runs": a.per_side, **result}
    print(json.dumps(out))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
