"""Whole programs on a CPU (--device cpu): host time per steady step and per process from the torch
profiler's CPU ranges, labelled as the host clock; the banner says cpu; what a CPU program cannot
take (a GPU profiler, a kernel metric) is one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from kprof.analysis.program_samples import HOST_CASE, HOST_STEP_CASE, host_samples
from kprof.cli import app
from kprof.engine.program import ProgramRequest, plan_program_run
from kprof.errors import KprofInputError
from kprof.run_model import ProgramSubject
from kprof.trace import Trace

runner = CliRunner()


def _trace(steps: list[tuple[int, int]]) -> Trace:
    ranges = pd.DataFrame(
        {
            "name": ["main"] + [f"ProfilerStep#{i}" for i in range(len(steps))],
            "start_ns": [0] + [s for s, _ in steps],
            "end_ns": [10_000] + [e for _, e in steps],
            "domain": "cpu",
        }
    )
    return Trace(pd.DataFrame(), ranges)


def test_host_time_per_steady_step_and_per_process() -> None:
    trace = _trace([(100, 1_100), (1_200, 1_700), (1_800, 2_400)])  # the first step is warm-up
    rows = host_samples(trace, ProgramSubject(command=["python", "x.py"], name="x"))
    assert [(r.case, r.time_ns) for r in rows] == [
        (HOST_STEP_CASE, 500.0),
        (HOST_STEP_CASE, 600.0),
        (HOST_CASE, 10_000.0),
    ]
    with pytest.raises(KprofInputError, match="--steps: 'decode' marks fewer than two steps"):
        host_samples(trace, ProgramSubject(command=["python", "x.py"], name="x", step_pattern="decode"))


def test_a_cpu_program_takes_the_torch_collector_only() -> None:
    req = ProgramRequest(legs=["a"], program=["python", "x.py"], device="cpu")
    run = plan_program_run(req)
    assert run.placement.device == "cpu" and run.cases[0].name == HOST_CASE and run.timer.startswith("host-clock")
    with pytest.raises(KprofInputError, match="--collector: a CPU program is timed under torch"):
        plan_program_run(ProgramRequest(legs=["a"], program=["python", "x.py"], device="cpu", collector="nsys"))


SCRIPT = """
import os, time
from torch.profiler import record_function
for step in range(5):
    with record_function(f"step {step}"):
        time.sleep(0.004 * (2 if os.environ.get("SLOW") else 1))
"""


@pytest.mark.slow  # 21 Python processes under the torch profiler (about 60 s on two cores)
def test_a_cpu_program_is_timed_per_step_by_the_host_clock(tmp_path: Path) -> None:
    script = tmp_path / "steps.py"
    script.write_text(SCRIPT)
    args = ["run", "--leg", "a", "--leg", "slow:SLOW=1", "--device", "cpu", "--steps", r"^step \d+$"]
    res = runner.invoke(
        app,
        [*args, "--rounds", "6", "--out", str(tmp_path / "run"), "--format", "json", "--", sys.executable, str(script)],
    )
    assert res.exit_code == 0, res.output[-2000:]
    report = json.loads(res.stdout)
    assert report["device"] == "cpu" and report["timer"].startswith("host-clock")
    rows = {(r["case"], r["leg"]): r for r in report["legs"]}
    slow = rows[(HOST_STEP_CASE, "slow")]
    assert slow["verdict"] in ("SLOWER", "BIASED", "UNRESOLVED") and slow["effect_pct"] < -30  # twice the sleep
    assert "on cpu" in res.stderr
