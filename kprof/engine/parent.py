"""The parent of a run: one worker process per unfinished case, restarted without a leg that
killed it; whole-program runs go to their own executor (kprof.engine.program)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

from kprof.engine.events import Event
from kprof.store.run_folder import RunFolder

MAX_RESTARTS = 4
SETUP_STEPS = ("check", "capture")  # a worker that dies here is blamed on the leg it was on


def _worker_env(device: str) -> dict[str, str]:
    env = dict(os.environ)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


def execute(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    """Run every unfinished case; a worker that dies loses only the leg it was running."""
    run = folder.read_run()
    if run.kind == "program":
        from kprof.engine.program import execute_program

        execute_program(folder, on_event)
        return
    if any(leg.revision for leg in run.legs):
        execute_hosted(folder, on_event)
        return
    env = _worker_env(run.device)
    baseline = run.baseline.name
    for index, case in enumerate(run.case_names):
        status = run.status(case)
        if status.finished:
            continue
        skip = sorted(status.crashed_legs)
        for _ in range(MAX_RESTARTS + 1):
            cmd = [sys.executable, "-m", "kprof.engine.worker", str(folder.root), str(index), json.dumps(skip)]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            assert proc.stdout is not None
            for line in proc.stdout:
                try:
                    on_event(json.loads(line))
                except json.JSONDecodeError:
                    continue
            stderr = proc.stderr.read() if proc.stderr else ""
            if proc.wait() == 0:
                break
            progress = folder.root / f".progress-c{index:03d}.json"
            where = json.loads(progress.read_text()) if progress.exists() else {}
            reason = (stderr.strip().splitlines() or ["worker exited"])[-1]
            leg = where.get("leg")
            if where.get("step") in SETUP_STEPS and leg and leg != baseline:
                skip.append(leg)
                folder.update_case(case, crashed_legs=skip, **{f"crash:{leg}": reason})
                on_event({"event": "leg_crashed", "case": case, "leg": leg, "reason": reason})
                continue
            folder.update_case(case, status="failed", reason=f"{where.get('step', 'start')}: {reason}")
            on_event({"event": "case_failed", "case": case, "reason": reason})
            break


def execute_hosted(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    """Revision runs: every case with one leg host per revision tree (kprof.engine.hosted)."""
    from kprof.engine.hosted import HostDied, run_hosted_case

    run = folder.read_run()
    for index, case in enumerate(run.case_names):
        if run.status(case).finished:
            continue
        try:
            run_hosted_case(folder, index, on_event)
        except HostDied as e:
            folder.update_case(case, status="failed", reason=str(e))
            on_event({"event": "case_failed", "case": case, "reason": str(e)})
            continue
        folder.update_case(case, status="done")
