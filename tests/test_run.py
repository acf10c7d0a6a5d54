"""`kprof run`, `report` and `calibrate` end to end: on the CPU (Triton interpreter, host clock),
and the same tests on a GPU when one is present (device time)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from fake_runs import forget_rounds
from typer.testing import CliRunner

from conftest import DEVICE, HAS_GPU
from kprof.cli import INCOMPLETE, app
from kprof.store.layout import STATUS
from kprof.store.run_folder import RunFolder as RunStore

runner = CliRunner()
SMALL = [
    "--device",
    DEVICE,
    "--preset",
    "smoke",
    "--case",
    "b2",
    "--rounds",
    "6",
    "--samples",
    "1",
    "--buffer-sets",
    "2",
]
ONE_PROCESS = ["--processes", "1"]  # `kprof run` on a GPU splits a case over two by default
TIMER = "cuda-events" if HAS_GPU else "host-clock"  # on a GPU, auto may add kernel times below a size


def test_a_run_stores_every_sample_round_by_round(tmp_path: Path) -> None:
    """The whole pipeline on the copy workload (plain PyTorch, no interpreter: seconds): progress
    lines, every sample on disk by round and buffer set, checks, the JSON and markdown reports. The
    same with Triton levers is the slow test below."""
    out = tmp_path / "run"
    args = ["run", "copy", "--out", str(out), "--format", "json", *SMALL, *ONE_PROCESS]
    args[args.index("b2")] = "64KiB"
    res = runner.invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert lines[0].startswith("copy: 1 case × 2 legs, 6 rounds each (+1 burn-in)")  # said before the first case
    # piped (as in CI logs): each stage of a case once, however many legs and buffer sets it checks
    assert sum("correctness gate" in line for line in lines) == 1 and "64KiB: warming up" in lines
    progress = [line.split(": round ")[-1] for line in lines if ": round " in line]
    assert progress == ["1/7 (burn-in)", *[f"{r}/7" for r in range(2, 8)]]
    report = json.loads(res.stdout)
    assert TIMER in report["timer"] and report["captures"] == "per-round"
    assert {row["leg"] for row in report["legs"]} == {"baseline", "baseline (A/A)"}
    samples = RunStore(out).read("samples")
    assert len(samples) == 2 * 7  # 2 legs × (6 rounds + burn-in) × 1 sample
    assert sorted(samples["round"].unique()) == list(range(7))
    assert (samples.groupby("round")["buffer_set"].nunique() == 1).all()
    assert sorted(samples.groupby("round")["buffer_set"].first()) == [0, 0, 0, 0, 1, 1, 1]
    checks = RunStore(out).read("checks")
    assert checks["passed"].all() and (checks["round"] == -1).any() and (checks["round"] == 6).any()
    md = runner.invoke(app, ["report", str(out), "--format", "md"], catch_exceptions=False)
    assert "| baseline (A/A) |" in md.stdout and TIMER in md.stdout


def _two_process_run(out: Path):
    """The copy workload, one case, 6 timed rounds over 4 buffer sets in two processes."""
    args = ["run", "copy", "--out", str(out), "--format", "json", *SMALL, "--processes", "2"]
    args[args.index("b2")] = "64KiB"
    args[args.index("--buffer-sets") + 1] = "4"
    res = runner.invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


@pytest.mark.slow  # two runs of two processes each (11 s)
def test_two_processes_share_a_cases_rounds_and_buffer_sets(tmp_path: Path) -> None:
    """--processes 2: each of two worker processes runs its own burn-in and half the timed rounds
    on its own buffer sets (so the process is inside the spread between sets), and the report reads
    them as one case."""
    out = tmp_path / "run"
    res = _two_process_run(out)
    assert any("(process 2/2): setting up buffers" in line for line in res.stderr.splitlines())
    store = RunStore(out)
    samples, rounds = store.read("samples"), store.read("rounds")
    assert sorted(samples["round"].unique()) == list(range(8))  # 6 timed rounds + a burn-in per process
    assert sorted(samples.loc[samples["burn_in"], "round"].unique()) == [0, 4]
    by_process = rounds.set_index("round")["process"].to_dict()
    assert by_process == {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}
    sets = samples.assign(process=samples["round"].map(by_process)).groupby("process")["buffer_set"].unique()
    assert sorted(sets[0]) == [0, 2] and sorted(sets[1]) == [1, 3]
    assert len(pd.unique(store.read("checks").query("round == -1")["buffer_set"])) == 4  # both gates on disk
    report = json.loads(res.stdout)
    assert report["processes"] == 2
    assert {row["leg"] for row in report["legs"]} == {"baseline", "baseline (A/A)"}
    assert store.read_statuses().of(report["legs"][0]["case"]).status == "done"


@pytest.mark.slow  # three worker processes in all (15 s)
def test_a_two_process_case_interrupted_in_its_second_process_resumes_there(tmp_path: Path) -> None:
    """Interrupted in the second process: a resume runs that process alone, for its missing rounds."""
    out = tmp_path / "run"
    case = json.loads(_two_process_run(out).stdout)["legs"][0]["case"]
    store = RunStore(out)
    forget_rounds(out, {6, 7}, ("samples", "rounds"))  # the finished run is compacted
    store.update_case(case, status="")
    res = runner.invoke(app, ["run", "--resume", "--out", str(out), "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "(process 2/2): setting up" in res.stderr and "(process 1/2)" not in res.stderr
    assert sorted(store.read("rounds")["round"]) == list(range(8)) and store.read_statuses().of(case).status == "done"


def test_processes_that_cannot_be_split_are_refused(tmp_path: Path) -> None:
    base = ["run", "paged_decode", "--out", str(tmp_path / "run"), *SMALL]
    for extra, why in (
        (["--processes", "3"], "need at least 3 buffer sets"),
        (["--processes", "2", "--buffers", "per-leg"], "only shared buffers"),
        (["--processes", "0"], "at least 1"),
    ):
        res = runner.invoke(app, base + extra)
        assert res.exit_code == 2 and "--processes" in res.stderr and why in res.stderr, res.output


@pytest.mark.slow
def test_run_stores_every_sample_and_reports_effects(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = runner.invoke(
        app,
        ["run", "paged_decode", "--design", "endpoints", "--out", str(out), "--format", "json", *SMALL, *ONE_PROCESS],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    # not a terminal (as in CI logs): each phase and each round is a plain line on stderr
    lines = res.stderr.splitlines()
    assert sum("correctness gate" in line for line in lines) == 1
    progress = [line.split(": round ")[-1] for line in lines if ": round " in line]
    assert progress == ["1/7 (burn-in)", *[f"{r}/7" for r in range(2, 8)]]
    report = json.loads(res.stdout)
    assert TIMER in report["timer"]
    legs = {row["leg"]: row for row in report["legs"]}
    assert set(legs) == {"baseline", "all", "plain PyTorch", "baseline (A/A)"}
    # The host clock's A/A interval can exclude 0 on a busy CPU: then its bias bound is in every
    # other interval, and a leg is BIASED only where that bias could explain its effect
    biased = report["aa"][0]["verdict"] == "BIASED"
    for name, row in legs.items():
        allowed = {"REFERENCE", "FASTER", "SLOWER", "SAME", "UNRESOLVED"} | ({"BIASED"} if biased else set())
        assert row["verdict"] in allowed, (name, row["verdict"])
        assert row["ci_low_pct"] <= row["effect_pct"] <= row["ci_high_pct"]
    assert report["aa"] and report["aa"][0]["case"].startswith("b2")
    samples = RunStore(out).read("samples")
    assert set(samples.columns) >= {"case", "leg", "round", "sample", "time_ns", "timer"}
    assert len(samples) == 4 * 7  # 4 legs × (6 rounds + burn-in) × 1 sample
    assert sorted(samples["round"].unique()) == list(range(7))
    # Shared protocol: all legs of a round use that round's buffer set.
    assert (samples.groupby("round")["buffer_set"].nunique() == 1).all()
    checks = RunStore(out).read("checks")
    assert checks["passed"].all() and (checks["round"] == -1).any() and (checks["round"] == 6).any()
    md = runner.invoke(app, ["report", str(out), "--format", "md"], catch_exceptions=False)
    assert "| baseline (A/A) |" in md.stdout and TIMER in md.stdout


@pytest.mark.slow
def test_resume_continues_after_the_last_finished_round(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # a 5% threshold: host-clock rounds on a busy machine once left the baseline disagreeing with its
    # A/A copy by more than 0.5% (exit 4); this test is about resuming, not about the host clock's noise
    args = ["run", "paged_decode", "--design", "endpoints", "--out", str(out), *SMALL, *ONE_PROCESS, "--threshold", "5"]
    assert runner.invoke(app, args, catch_exceptions=False).exit_code == 0
    store = RunStore(out)
    before = store.read("samples")
    # Forget the last two rounds and the case's completion, as an interrupted run would have: the
    # finished run is compacted, and resuming it writes parts beside the compacted table.
    assert not list((out / "samples").glob("c000-r*.parquet"))
    rounds = int(before["round"].max())
    forget_rounds(out, {rounds - 1, rounds})
    shutil.rmtree(out / STATUS)  # every case's status: as if none had finished
    res = runner.invoke(app, ["run", "paged_decode", "--out", str(out), "--resume"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    after = store.read("samples")
    assert len(after) == len(before)
    kept = before[before["round"] < rounds - 1].sort_values(["round", "leg"]).reset_index(drop=True)
    again = after[after["round"] < rounds - 1].sort_values(["round", "leg"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, again)


@pytest.mark.slow  # 30 s of interpreter rounds: run in CI's slow step
def test_calibrate_plants_and_recovers(tmp_path: Path) -> None:
    """A 100% delay planted into the leg: the spin timed alone measures it, and the recovered effect
    (with its interval) lands near the planted one; the A/A copies are reported against the PR rule.
    (A 50% plant left zero inside the 6-round host-clock interval once on a busy CI machine.)"""
    res = runner.invoke(
        app,
        [
            "calibrate",
            "paged_decode",
            "--plant",
            "100",
            "--aa-copies",
            "2",
            "--out",
            str(tmp_path / "cal"),
            "--format",
            "json",
            *SMALL,
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    (row,) = out["calibration"]
    assert row["requested_pct"] == 100
    legs = {r["leg"]: r for r in out["legs"]}
    reference = next(r for r in out["legs"] if r["verdict"] == "REFERENCE")
    # the spin alone lasts about as long as the reference (it is sized from one warm-up call, so
    # on a busy CPU it can come out longer or shorter)
    assert 0.5 * reference["time_us"] < row["spin_us"] < 3 * reference["time_us"]
    # planted effect = t_ref / (t_ref + t_spin) − 1: about −50% for a 100% delay
    assert -75 < row["planted_effect_pct"] < -30
    assert abs(row["recovered_pct"] - row["planted_effect_pct"]) < 12
    assert row["ci_low_pct"] <= row["recovered_pct"] <= row["ci_high_pct"]
    # Six host-clock rounds on a busy 2-core CI machine: one stalled reference round once widened the
    # interval to +89% (recovered −50%), so the plant may come out UNRESOLVED, never FASTER or SAME;
    # when it is called SLOWER, its interval must lie wholly below zero.
    assert row["verdict"] in ("SLOWER", "UNRESOLVED")
    if row["verdict"] == "SLOWER":
        assert row["ci_high_pct"] < 0
    assert legs[row["leg"]]["verdict"] == row["verdict"]
    md = runner.invoke(app, ["report", str(tmp_path / "cal"), "--format", "md"], catch_exceptions=False).stdout
    assert "spin 100% alone" in md and "kprof called" in md and "PR method" in md


@pytest.mark.slow
def test_per_leg_buffers_give_each_leg_its_own_set(tmp_path: Path) -> None:
    out = tmp_path / "pr"
    args = ["run", "paged_decode", "--design", "endpoints", "--buffers", "per-leg", "--out", str(out), *SMALL]
    args[args.index("--rounds") + 1] = "5"
    assert runner.invoke(app, args, catch_exceptions=False).exit_code == 0
    samples = RunStore(out).read("samples")
    assert (samples.groupby("leg")["buffer_set"].nunique() == 1).all()
    assert samples.groupby("leg")["buffer_set"].first().nunique() == samples["leg"].nunique()


def test_bad_run_arguments_are_one_line_errors(tmp_path: Path) -> None:
    for args, word in [
        (["run", "nope"], "not a bundled workload"),
        (["run", "paged_decode", "--device", "cpu", "--rounds", "3"], "--rounds"),
        (["run", "paged_decode", "--device", "cpu", "--design", "x"], "--design"),
        (["run", "paged_decode", "--device", "cpu", "--sweep", "num_splits=1"], "--sweep"),
        (["run", "paged_decode", "--device", "cpu", "--sweep", "warps=1,2"], "cannot force"),
        (["run", "paged_decode", "--device", "cpu", "--sweep-baseline"], "--sweep-baseline"),
        (["run", "paged_decode", "--device", "cpu", "--case", "zzz"], "--case"),
        (["report", str(tmp_path)], "not a kprof run folder"),
        (["run", "paged_decode", "--device", "tpu"], "--device"),
        (["run", "paged_decode", "--device", "cpu", "--dtype", "bogus"], "--dtype"),
        (["run", "paged_decode", "--device", "cpu", "--samples", "0"], "--samples"),
        (["run", "paged_decode", "--device", "cpu", "--target", "bogus"], "--target"),
        (["run", "paged_decode", "--device", "cpu", "--captures", "sometimes"], "--captures"),
        *([] if HAS_GPU else [(["run", "paged_decode", "--device", "cuda"], "no GPU is visible")]),
    ]:
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        assert res.stderr.count("\n") == 1 and word in res.stderr, (args, res.stderr)


@pytest.mark.slow
def test_sweep_legs_are_checked_with_the_float64_tolerance(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    args = ["run", "paged_decode", "--design", "endpoints", "--sweep", "num_splits=1,3", "--out", str(out), *SMALL]
    args += ONE_PROCESS
    assert runner.invoke(app, args, catch_exceptions=False).exit_code == 0
    checks = RunStore(out).read("checks")
    sweep = checks[checks["leg"].str.contains("num_splits") & (checks["round"] == -1)]
    assert len(sweep) and sweep["passed"].all() and set(sweep["rule"]) == {"rel ≤ 0.02"}


USER_WORKLOAD = '''
"""A user's workload file, written the way the bundled ones are: plain PyTorch, one feature."""
import os
import torch
from kprof.workload import Case, Feature, Workload


class Scale(Workload):
    name = "user_scale"
    features = (Feature("double_buffer", "bitwise"), Feature("crash", "bitwise"), Feature("no_fit", "bitwise"))
    presets = {"smoke": (Case("n4096", {"n": 4096}),)}

    def setup(self, case, device, dtype, seed):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(case.params["n"], generator=g).to(getattr(torch, dtype))
        return {"x": x.to(device), "y": torch.empty_like(x).to(device)}

    def launch(self, state, features, params):
        def run():
            if "crash" in features:
                os._exit(3)  # stands in for a kernel that kills the GPU context
            if "no_fit" in features:
                raise RuntimeError("out of resource: shared memory, Required: 262144")  # as Triton says
            torch.mul(state["x"], 2.0, out=state["y"])
        return run

    def outputs(self, state):
        return {"y": state["y"]}

    def reference(self, state):
        return {"y": state["x"].double() * 2}


WORKLOAD = Scale()
'''


@pytest.mark.slow  # a whole run with a leg that crashes, under the interpreter (12 s)
def test_user_workload_file_and_a_crashing_leg(tmp_path: Path) -> None:
    path = tmp_path / "my_workload.py"
    path.write_text(USER_WORKLOAD)
    out = tmp_path / "user"
    res = runner.invoke(
        app,
        [
            "run",
            str(path),
            "--design",
            "add-one",
            "--device",
            DEVICE,
            "--preset",
            "smoke",
            "--rounds",
            "6",
            "--samples",
            "2",
            "--out",
            str(out),
            "--format",
            "json",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == INCOMPLETE, res.output  # the run goes on, and says what it lost
    assert (
        res.stderr.strip().splitlines()[-1] == "kprof: the run is incomplete, not measured: n4096 · all; n4096 · crash"
    )
    legs = {row["leg"] for row in json.loads(res.stdout)["legs"]}
    assert {"baseline", "double_buffer", "baseline (A/A)"} <= legs
    assert not any("crash" in leg for leg in legs)  # the crashing legs lost only themselves
    status = RunStore(out).read_statuses().of("n4096")
    assert status.status == "done" and set(status.crashed_legs) >= {"crash"}
    # a leg that raises at launch (does not compile) fails alone, in its worker, with the reason
    assert not any("no_fit" in leg for leg in legs)
    assert "no_fit" not in status.crashed_legs
    assert status.failed["no_fit"] == "launch: RuntimeError: out of resource: shared memory, Required: 262144"


def test_a_baseline_that_fails_the_reference_check_says_so_in_one_line(tmp_path: Path) -> None:
    """The workload's own float64 reference disagrees with its baseline: the case fails with the leg,
    the output and the size of the error, and the command ends in one line, exit 4 (nothing of the
    plan was measured)."""
    path = tmp_path / "wrong_reference.py"
    path.write_text(USER_WORKLOAD.replace('state["x"].double() * 2', 'state["x"].double() * 3'))
    out = tmp_path / "wrong"
    args = ["--device", "cpu", "--preset", "smoke", "--rounds", "6", "--samples", "2", "--out", str(out)]
    res = runner.invoke(app, ["run", str(path), "--design", "endpoints", "--target", "double_buffer", *args])
    assert res.exit_code == INCOMPLETE
    last = res.output.strip().splitlines()[-1]
    assert last.startswith(f"kprof: error: {out}: holds no finished round: 1 case(s) failed")
    assert "the baseline leg 'baseline' failed its check" in last
    assert re.search(r"y: \d+ of 4096 elements differ from float64 by more than", last)
    assert "Traceback" not in res.output


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_state_says_when_the_tree_has_uncommitted_changes(tmp_path: Path) -> None:
    from kprof.engine.environment import git_state

    assert git_state(tmp_path) == {"git_revision": None, "git_dirty": None}  # not a checkout
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "kernel.py").write_text("BV = 32\n")
    subprocess.run([*git, "add", "kernel.py"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "kernel"], check=True)
    clean = git_state(tmp_path)
    assert len(clean["git_revision"]) == 40 and clean["git_dirty"] is False
    (tmp_path / "kernel.py").write_text("BV = 16\n")
    assert git_state(tmp_path) == {"git_revision": clean["git_revision"], "git_dirty": True}
