"""The parent of a run: one worker process per unfinished case, restarted without a leg that
killed it; whole-program runs go to their own executor (kprof.engine.program)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from kprof.engine.events import Event
from kprof.engine.lifeline import child_env
from kprof.store.run_folder import RunFolder

MAX_RESTARTS = 4
SETUP_STEPS = ("check", "capture")  # a worker that dies here is blamed on the leg it was on


def _worker_env(device: str) -> dict[str, str]:
    env = dict(os.environ)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


def execute(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    """Run every case not done yet (a failed one is tried again); a worker that dies loses only the
    leg it was running. One kprof process at a time per folder (an OS lock)."""
    with folder.lock():
        run = folder.read_run()
        if run.kind == "program":
            from kprof.engine.program import execute_program

            execute_program(folder, on_event)
        elif any(leg.revision for leg in run.legs):
            execute_hosted(folder, on_event)
        else:
            _execute_workers(folder, on_event)


def _execute_workers(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    run = folder.read_run()
    env = _worker_env(run.device)
    baseline = run.baseline.name
    for index, case in enumerate(run.case_names):
        status = run.status(case)
        if status.status == "done":
            continue
        if status.status == "failed":
            folder.update_case(case, status="", reason="")
        skip = sorted(status.crashed_legs)
        for _ in range(MAX_RESTARTS + 1):
            code, reason = _worker(folder, index, skip, env, on_event)
            if code == 0:
                break
            progress = folder.root / f".progress-c{index:03d}.json"
            where = json.loads(progress.read_text()) if progress.exists() else {}
            leg = where.get("leg")
            if where.get("step") in SETUP_STEPS and leg and leg != baseline:
                skip.append(leg)
                folder.update_case(case, crashed_legs=skip, **{f"crash:{leg}": reason})
                on_event({"event": "leg_crashed", "case": case, "leg": leg, "reason": reason})
                continue
            folder.update_case(case, status="failed", reason=f"{where.get('step', 'start')}: {reason}")
            on_event({"event": "case_failed", "case": case, "reason": reason})
            break


def _worker(
    folder: RunFolder, index: int, skip: list[str], env: dict[str, str], on_event: Callable[[Event], None]
) -> tuple[int, str]:
    """One worker process for case ``index``: its events as they come, its exit code and the last
    line it wrote to stderr (kept in ``.worker-cNNN.log``). Interrupted, it stops the worker too."""
    cmd = [sys.executable, "-m", "kprof.engine.worker", str(folder.root), str(index), json.dumps(skip)]
    log = folder.root / f".worker-c{index:03d}.log"
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=child_env(env))
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                try:
                    on_event(json.loads(line))
                except json.JSONDecodeError:
                    continue
            code = proc.wait()
        except BaseException:  # Ctrl-C or a kill of the parent: no orphan worker runs on
            proc.kill()
            proc.wait()
            raise
    return code, last_line(log, "worker exited")


def last_line(log: Path, default: str) -> str:
    """The last line a child process wrote to its log (its error, when it died)."""
    lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
    return lines[-1] if lines else default


def execute_hosted(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    """Revision runs: every case with one leg host per revision tree (kprof.engine.hosted)."""
    from kprof.engine.hosted import HostDied, run_hosted_case

    run = folder.read_run()
    for index, case in enumerate(run.case_names):
        if run.status(case).status == "done":
            continue
        try:
            run_hosted_case(folder, index, on_event)
        except HostDied as e:
            folder.update_case(case, status="failed", reason=str(e))
            on_event({"event": "case_failed", "case": case, "reason": str(e)})
            continue
        folder.update_case(case, status="done")
