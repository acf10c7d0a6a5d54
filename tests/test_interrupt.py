"""A real `kprof run` process, stopped from outside: SIGTERM and SIGKILL of the parent leave no
worker running, and `--resume` finishes the run with every round exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kprof.store.run_folder import RunFolder

SLOW_WORKLOAD = """
import os
import time

import torch

from kprof.workload import Case, Feature, Workload


class Slow(Workload):
    name = "slow"
    features = (Feature("fast", "bitwise"),)
    presets = {"smoke": (Case("n64", {"n": 64}),)}

    def setup(self, case, device, dtype, seed):
        x = torch.ones(case.params["n"], dtype=getattr(torch, dtype))
        return {"x": x, "y": torch.empty_like(x)}

    def launch(self, state, features, params):
        def run():
            time.sleep(float(os.environ.get("SLOW_CALL_S", "0.01")))
            torch.mul(state["x"], 2.0, out=state["y"])
        return run

    def outputs(self, state):
        return {"y": state["y"]}

    def reference(self, state):
        return {"y": state["x"].double() * 2}


WORKLOAD = Slow()
"""
ROUNDS = 12


def _alive(pid: int) -> bool:
    """Running, not a zombie (a dead orphan may wait unreaped in a container)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _workers(out: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"kprof.engine.worker" in cmd and str(out).encode() in cmd and proc.name.isdigit():
            pids.append(int(proc.name))
    return [p for p in pids if _alive(p)]


def _start(workload: Path, out: Path, *extra: str, call_s: float = 0.01) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "kprof", "run", str(workload), "--device", "cpu", "--preset", "smoke"]
    cmd += ["--rounds", str(ROUNDS), "--samples", "2", "--out", str(out), "--format", "json", *extra]
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # piped: lines are not folded
    env["SLOW_CALL_S"] = str(call_s)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _wait_for_rounds(out: Path, proc: subprocess.Popen, at_least: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        parts = list((out / "samples").glob("*.parquet")) if (out / "samples").exists() else []
        if len(parts) >= at_least and _workers(out):
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the run recorded no rounds in 120 s")


def _gone(pid: int) -> bool:
    """Gone within a second: far less than a round of the slow calls, so an orphan that only dies
    when it next reports (on a broken pipe) does not pass."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_and_sigkill_of_the_parent_then_resume(tmp_path: Path) -> None:
    workload = tmp_path / "slow_workload.py"
    workload.write_text(SLOW_WORKLOAD)
    out = tmp_path / "run"

    first = _start(workload, out)
    _wait_for_rounds(out, first, 2)
    (worker,) = _workers(out)
    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 130 and f"kprof run --out {out} --resume" in err
    assert _gone(worker), "the worker outlived a SIGTERM of its parent"

    second = _start(workload, out, "--resume", call_s=0.5)
    _wait_for_rounds(out, second, len(list((out / "samples").glob("*.parquet"))) + 1)
    (worker,) = _workers(out)
    os.kill(second.pid, signal.SIGKILL)
    second.wait()
    assert _gone(worker), "the worker outlived a SIGKILL of its parent"

    third = _start(workload, out, "--resume")
    _, err = third.communicate(timeout=300)
    assert third.returncode == 0, err
    samples = RunFolder(out).read("samples")
    per_round = samples.groupby(["leg", "round"]).size()
    assert set(samples["round"]) == set(range(ROUNDS + 1))  # round 0 is the burn-in
    assert per_round.nunique() == 1  # no round recorded twice, none missing for any leg


def test_sigterm_while_starting_is_one_line_not_a_silent_kill(tmp_path: Path) -> None:
    """A SIGTERM during start-up (imports, planning) once ended kprof with -15 and no word."""
    cmd = [sys.executable, "-m", "kprof", "run", "paged_decode", "--device", "cpu", "--out", str(tmp_path / "r")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.4)  # past the interpreter's start, well before torch and the plan are ready on a CPU
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (143, 130), (proc.returncode, err)  # 130: it had started the run already
    assert "stopped by SIGTERM while starting" in err or "kprof run --out" in err, err
