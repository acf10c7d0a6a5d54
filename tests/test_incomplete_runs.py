"""Runs that did not measure all they planned. A worker killed once from outside is started again (a
warning, every leg timed); a leg that crashes it twice is left out; a case killed twice fails and
`--resume` tries it again; a round whose samples part is damaged is timed again on `--resume`. Such a
run exits 4 and names what is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kprof.cli import INCOMPLETE, app
from kprof.store.run_folder import RunFolder

runner = CliRunner()

WORKLOAD = '''
"""Plain PyTorch, one leg per way a worker can die (marker files say when)."""
import os
import signal
from pathlib import Path

import torch
from kprof.workload import Case, Feature, Workload

MARKS = Path(__MARKS__)


class Dying(Workload):
    name = "dying"
    features = (Feature("flaky", "bitwise"), Feature("crash", "bitwise"), Feature("killed", "bitwise"))
    presets = {"smoke": (Case("n1024", {"n": 1024}), Case("n2048", {"n": 2048}))}

    def setup(self, case, device, dtype, seed):
        x = torch.arange(case.params["n"], dtype=torch.float32)
        return {"x": x, "y": torch.empty_like(x)}

    def launch(self, state, features, params):
        def run():
            if set(features) == {"flaky"} and not (MARKS / "flaky-died").exists():
                (MARKS / "flaky-died").touch()  # killed once from outside, as the OOM killer would
                os.kill(os.getpid(), signal.SIGKILL)
            if "crash" in features:
                os._exit(3)  # stands in for a kernel that kills the GPU context, every time
            if "killed" in features and (MARKS / f"kill-n{state['x'].numel()}").exists():
                os.kill(os.getpid(), signal.SIGKILL)  # a user's kill -9, while the mark stays
            torch.mul(state["x"], 2.0, out=state["y"])
        return run

    def outputs(self, state):
        return {"y": state["y"]}

    def reference(self, state):
        return {"y": state["x"].double() * 2}


WORKLOAD = Dying()
'''

ARGS = ["--device", "cpu", "--preset", "smoke", "--rounds", "6", "--samples", "2", "--format", "json"]


def _workload(tmp_path: Path) -> Path:
    marks = tmp_path / "marks"
    marks.mkdir()
    path = tmp_path / "dying.py"
    path.write_text(WORKLOAD.replace("__MARKS__", repr(str(marks))))
    return path


@pytest.mark.slow  # workers killed and started again (10 s on two cores)
def test_a_worker_killed_once_is_started_again_and_a_leg_that_crashes_twice_is_named(tmp_path: Path) -> None:
    path = _workload(tmp_path)
    out = tmp_path / "run"
    args = [
        "run",
        str(path),
        "--case",
        "n1024",
        "--design",
        "add-one",
        "--target",
        "flaky",
        "--target",
        "crash",
        "--out",
        str(out),
        *ARGS,
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == INCOMPLETE, res.output
    said, named = res.stderr.strip().splitlines()[-1].split(": ", 1)[1].split(": ")
    assert said == "the run is incomplete, not measured"
    assert set(named.split("; ")) == {"n1024 · crash", "n1024 · flaky+crash"}
    doc = json.loads(res.stdout)
    legs = {row["leg"] for row in doc["legs"]}
    assert "flaky" in legs and not legs & {"crash", "flaky+crash"}  # the kill from outside cost no leg
    reason = "its worker died twice: worker exited with code 3"
    assert sorted(doc["missing"], key=lambda m: m["leg"]) == [
        {"case": "n1024", "leg": leg, "reason": reason, "refused": False} for leg in ("crash", "flaky+crash")
    ]
    restarted = "n1024: its worker died at correctness gate · flaky (killed by SIGKILL) and was started again"
    assert restarted in doc["warnings"]
    status = RunFolder(out).read_statuses().of("n1024")
    assert status.status == "done" and sorted(status.crashed_legs) == ["crash", "flaky+crash"]
    deaths = [(d["leg"], d.get("signal"), d["outcome"]) for d in status.deaths]
    assert [d for d in deaths if d[0] == "flaky"] == [("flaky", 9, "started again")]
    for leg in ("crash", "flaky+crash"):
        assert [d for d in deaths if d[0] == leg] == [
            (leg, None, "started again"),
            (leg, None, f"{leg} is left out of the case"),
        ]


@pytest.mark.slow  # a case killed twice, then resumed (7 s on two cores)
def test_a_case_killed_twice_from_outside_fails_alone_and_resume_times_it_with_every_leg(tmp_path: Path) -> None:
    path = _workload(tmp_path)
    (tmp_path / "marks" / "kill-n2048").touch()
    out = tmp_path / "run"
    res = runner.invoke(
        app, ["run", str(path), "--design", "endpoints", "--target", "killed", "--out", str(out), *ARGS]
    )
    assert res.exit_code == INCOMPLETE, res.output
    assert res.stderr.strip().splitlines()[-1] == "kprof: the run is incomplete, not measured: n2048"
    doc = json.loads(res.stdout)
    assert {row["case"] for row in doc["legs"]} == {"n1024"}  # the other case is reported
    (missing,) = doc["missing"]
    assert missing["case"] == "n2048" and missing["leg"] == "" and not missing["refused"]
    assert missing["reason"] == "its worker died twice at check · killed: killed by SIGKILL"
    assert RunFolder(out).read_statuses().of("n2048").crashed_legs == []  # signals never blame a leg

    (tmp_path / "marks" / "kill-n2048").unlink()
    again = runner.invoke(app, ["run", "--out", str(out), "--resume", "--format", "json"])
    assert again.exit_code == 0, again.output
    resumed = json.loads(again.stdout)
    assert resumed["missing"] == []
    assert {(row["case"], row["leg"]) for row in resumed["legs"]} >= {("n2048", "killed"), ("n1024", "killed")}


@pytest.mark.slow  # 5–12 s on the 2-core machine: CI's slow step runs it
def test_a_run_whose_every_case_failed_exits_incomplete_in_one_line(tmp_path: Path) -> None:
    path = _workload(tmp_path)
    (tmp_path / "marks" / "kill-n1024").touch()
    out = tmp_path / "run"
    res = runner.invoke(
        app,
        ["run", str(path), "--case", "n1024", "--design", "endpoints", "--target", "killed", "--out", str(out), *ARGS],
    )
    assert res.exit_code == INCOMPLETE, res.output
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith(f"kprof: error: {out}: holds no finished round: 1 case(s) failed (first, n1024:")
    assert "Traceback" not in res.output


@pytest.mark.slow  # several seconds on the 2-core machine: CI's slow step runs it
def test_resume_times_again_a_round_whose_samples_part_does_not_read_back(tmp_path: Path) -> None:
    path = _workload(tmp_path)
    out = tmp_path / "run"
    res = runner.invoke(
        app,
        ["run", str(path), "--case", "n1024", "--design", "endpoints", "--target", "killed", "--out", str(out), *ARGS],
    )
    assert res.exit_code == 0, res.output
    whole = RunFolder(out).read("samples")
    damaged = out / "samples" / "c000-r0003.parquet"  # replaces round 3's rows of the compacted table
    damaged.write_bytes(b"PAR1 not a parquet file")
    report = json.loads(runner.invoke(app, ["report", str(out), "--format", "json"]).stdout)
    assert {row["rounds"] for row in report["legs"] if row["verdict"] != "REFERENCE"} == {5}
    assert any(str(damaged) in w for w in report["warnings"])
    assert RunFolder(out).finished_rounds(0) == [0, 1, 2, 4, 5, 6]

    again = runner.invoke(app, ["run", "--out", str(out), "--resume", "--format", "json"])
    assert again.exit_code == 0, again.output
    resumed = json.loads(again.stdout)
    assert {row["rounds"] for row in resumed["legs"] if row["verdict"] != "REFERENCE"} == {6}
    assert resumed["warnings"] == [] and not damaged.exists()  # timed again, then compacted
    assert len(RunFolder(out).read("samples")) == len(whole)


def test_resume_refuses_what_contradicts_the_stored_run(tmp_path: Path) -> None:
    """`kprof run gdn_decode --out PAGED_RUN --resume` resumed the other workload in silence, and
    `--rounds 8 --resume` was ignored."""
    from fake_runs import write_run

    from kprof.designs.legs import design_legs

    out = tmp_path / "run"
    write_run(out, design_legs(("a",), "endpoints"), lambda leg, case: 0.0, rounds=6, features=("a",))

    def resume(*args: str):
        return runner.invoke(app, ["run", *args, "--out", str(out), "--resume", "--format", "json"])

    for args, says in (
        (["gdn_decode"], "holds a run of synthetic, not gdn_decode"),
        (["--rounds", "8"], "--rounds: is 8, the stored run's 6"),
        (["--aa-copies", "3"], "--aa-copies: is not taken with --resume"),
    ):
        res = resume(*args)
        assert res.exit_code == 2 and says in res.stderr and res.stderr.count("\n") == 1, (args, res.stderr)
    assert resume("--rounds", "6").exit_code == 0  # what the run holds: taken
