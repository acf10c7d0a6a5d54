"""A race found after the timed rounds stays in the result: a leg whose outputs change after the
gate (here: right on its first call, wrong on every later one) is flagged in the report's table,
its JSON (`warnings`, `race_rounds`) and the run's exit code. It once printed `outputs changed in
round 3 (a race?)` while the run exited 0 and the report gave the leg a plain verdict."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kprof.cli import app

WORKLOAD = """
import torch
from kprof.workload import Case, Feature, Workload


class Flaky(Workload):
    name = "flaky"
    features = (Feature("flaky"),)
    presets = {"smoke": (Case("n", {"n": 256}),)}

    def setup(self, case, device, dtype, seed):
        x = torch.randn(case.params["n"], generator=torch.Generator().manual_seed(seed)).to(getattr(torch, dtype))
        return {"x": x, "y": torch.empty_like(x)}

    def launch(self, state, features, params):
        calls = [0]

        def run():
            calls[0] += 1
            late = "flaky" in features and calls[0] > 1  # right for the gate's call, wrong after
            torch.mul(state["x"], 3.0 if late else 2.0, out=state["y"])
        return run

    def outputs(self, state):
        return {"y": state["y"]}

    def reference(self, state):
        return {"y": state["x"].double() * 2.0}


WORKLOAD = Flaky()
"""


def test_a_leg_whose_outputs_change_after_the_gate_is_flagged_everywhere(tmp_path: Path) -> None:
    wl = tmp_path / "flaky.py"
    wl.write_text(WORKLOAD)
    out = tmp_path / "run"
    args = ["run", str(wl), "--device", "cpu", "--rounds", "6", "--samples", "1", "--no-torch-leg"]
    res = CliRunner().invoke(app, [*args, "--design", "endpoints", "--out", str(out), "--format", "json"])
    assert res.exit_code == 4, res.output
    assert "flaky: outputs changed after" in res.stderr and "a race?" in res.stderr
    report = json.loads(res.stdout)
    legs = {row["leg"]: row for row in report["legs"]}
    assert legs["flaky"]["race_rounds"] >= 6 and legs["baseline"]["race_rounds"] == 0
    assert any("flaky: outputs changed after" in w for w in report["warnings"])
    table = CliRunner().invoke(app, ["report", str(out), "--format", "md"])
    assert "(race?)" in table.stdout and "outputs changed after" in table.stdout


def test_stored_rows_that_do_not_add_up_are_reported(tmp_path: Path) -> None:
    """Half the rows of a compacted samples table dropped gave other numbers and no warning."""
    import pyarrow.parquet as pq
    from fake_runs import write_run

    from kprof.commands.analyse import analyse_run
    from kprof.designs.legs import design_legs

    folder = write_run(tmp_path / "run", design_legs(("a",), "endpoints"), lambda leg, case: 0.0, rounds=8)
    for case in folder.read_run().case_names:
        folder.update_case(case, samples=3, legs_timed=["baseline", "a", "baseline (A/A)"])
    assert not [w for w in analyse_run(folder.root).warnings if "do not add up" in w]
    folder.compact()
    path = folder.root / "samples" / "compact.parquet"
    table = pq.read_table(path)
    pq.write_table(table.slice(0, table.num_rows // 2), path)
    lines = [w for w in analyse_run(folder.root).warnings if "do not add up" in w]
    assert len(lines) == 1 and "rounds absent" in lines[0] and "short of rows" in lines[0], lines
