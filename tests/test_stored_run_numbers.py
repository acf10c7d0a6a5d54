"""Every stored run (docs/runs) reports the numbers it reported when this file's table was written:
each leg's effect, interval and verdict in every case. A change to the engine, the run model or the
folder layout must leave what the stored runs say as it was; a change to a statistical rule changes
them on purpose, and the table is then written again with

    python tests/test_stored_run_numbers.py --write

(and the change explained in the commit)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "docs" / "runs"
TABLE = Path(__file__).resolve().parent / "data" / "stored_run_effects.csv.gz"
NUMBERS = ["effect_pct", "ci_low_pct", "ci_high_pct"]


def stored_runs() -> list[Path]:
    return sorted(m.parent for m in [*RUNS.glob("*/*/meta.json"), *RUNS.glob("*/*/step-*/meta.json")])


def effects_now() -> pd.DataFrame:
    from kprof.commands.analyse import analyse_run

    frames = []
    for root in stored_runs():
        effects = analyse_run(root).effects
        frames.append(effects[["case", "leg", *NUMBERS, "verdict"]].assign(run=str(root.relative_to(RUNS))))
    table = pd.concat(frames, ignore_index=True)[["run", "case", "leg", *NUMBERS, "verdict"]]
    return table.astype({"case": str, "leg": str, "verdict": str}).sort_values(
        ["run", "case", "leg"], ignore_index=True
    )


@pytest.mark.slow  # 14 s on the 2-core machine: CI's slow step runs it
def test_every_stored_run_reports_what_it_reported() -> None:
    expected = pd.read_csv(TABLE, keep_default_na=False, dtype={"case": str, "leg": str, "verdict": str})
    now = effects_now()
    assert sorted(set(now["run"])) == sorted(set(expected["run"])), "stored runs were added or removed"
    assert len(now) == len(expected)
    assert (now[["run", "case", "leg"]].to_numpy() == expected[["run", "case", "leg"]].to_numpy()).all()
    changed = now["verdict"].to_numpy() != expected["verdict"].to_numpy()
    assert not changed.any(), now[changed].head(10).to_string()
    for column in NUMBERS:
        a, b = now[column].to_numpy(float), pd.to_numeric(expected[column], errors="coerce").to_numpy(float)
        same = np.isclose(a, b, rtol=1e-9, atol=1e-9) | (np.isnan(a) & np.isnan(b))
        assert same.all(), now.loc[~same, ["run", "case", "leg", column]].head(10).to_string()


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    sys.path.insert(0, str(ROOT))
    TABLE.parent.mkdir(exist_ok=True)
    effects_now().to_csv(TABLE, index=False, float_format="%.12g")
    print(f"wrote {TABLE}")
