"""Worker processes: each unfinished case in a process of its own running the in-process protocol
(kprof.engine.worker), its rounds split over ``--processes`` one after another; a worker that dies
once is started again, and a leg that kills its worker twice is dropped alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from kprof.engine.gpus import pinned_env
from kprof.engine.lifeline import Workers, child_env, last_line
from kprof.engine.sharding import shard_cases
from kprof.events import CASE_FAILED_STEP, RESTARTED, CaseFailed, Event, LegCrashed, WorkerDied, decode
from kprof.parts import case_parts
from kprof.run_model import Run
from kprof.store.layout import progress_file, worker_log
from kprof.store.run_folder import RunFolder

MAX_WORKERS = 10  # worker processes per part of a case: each leg it drops costs two
SETUP_STEPS = ("check", "capture")  # a worker that dies twice here is blamed on the leg it was on
OUTSIDE_SIGNALS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGHUP, signal.SIGINT})  # a user, the OOM killer


def worker_env(device: str) -> dict[str, str]:
    env = dict(os.environ)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


def execute_workers(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    """Every unfinished case in its own worker process, pinned to its GPU when sharded."""
    run = folder.read_run()
    pending = folder.unfinished_cases(run)

    def one(index: int, gpu: int | None, events: Callable[[Event], None], live: Workers) -> None:
        env = pinned_env(worker_env(run.placement.device), gpu, run.placement.device)
        run_case_workers(folder, run, index, env, events, live)

    shard_cases(run, pending, on_event, one)


def run_case_workers(
    folder: RunFolder,
    run: Run,
    index: int,
    env: dict[str, str],
    on_event: Callable[[Event], None],
    live: Workers,
) -> None:
    """One case to its end: its processes one after another (kprof.parts), each restarted
    without a leg that killed it twice (_run_part). ``run``: the plan, as the caller read it."""
    case, baseline = run.case_names[index], run.baseline.name
    status = folder.status(case)
    if status.status == "failed":
        folder.update_case(case, status="", reason="")
    skip = sorted(status.crashed_legs)
    finished = set(folder.finished_rounds(index))
    parts = case_parts(run.protocol.rounds, run.protocol.buffer_sets, run.protocol.processes)
    pending = [p.index for p in parts if set(p.rounds) - finished] or [parts[-1].index]  # the last marks it done
    for part in pending:
        if not _run_part(folder, index, part, skip, env, on_event, live, baseline, case):
            return


def death_reason(code: int, log: Path) -> str:
    """Why a worker ended: the signal that killed it, else the last line it wrote."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return last_line(log, f"worker exited with code {code}")


def _run_part(
    folder: RunFolder,
    index: int,
    part: int,
    skip: list[str],
    env: dict[str, str],
    on_event: Callable[[Event], None],
    live: Workers,
    baseline: str,
    case: str,
) -> bool:
    """One process of a case; whether the case goes on. A worker that dies is started again once:
    once may be the machine (a kill from outside, the OOM killer). Twice at the same step and leg, a
    crash of the leg's own (an exit, a segfault) at its check or capture drops the leg; anything else
    fails the case, which ``--resume`` tries again, every leg included (a leg is never blamed for
    signals a user or the OOM killer sends)."""
    deaths: dict[tuple[str, str], int] = {}
    for _ in range(MAX_WORKERS):
        code, reason = _worker(folder, index, skip, part, env, on_event, live)
        if live.stopped:  # the run was interrupted, nothing is to blame
            return False
        if code == 0:
            return True
        progress = progress_file(folder.root, index)
        where = json.loads(progress.read_text()) if progress.exists() else {}
        step, leg = str(where.get("step", "start")), str(where.get("leg") or "")
        deaths[step, leg] = deaths.get((step, leg), 0) + 1
        if step == CASE_FAILED_STEP:  # the worker said why, in its last line
            return _fail_case(folder, case, reason, on_event)
        twice = deaths[step, leg] >= 2
        outside = code < 0 and -code in OUTSIDE_SIGNALS
        blame = twice and not outside and step in SETUP_STEPS and bool(leg) and leg != baseline
        outcome = RESTARTED if not twice else f"{leg} is left out of the case" if blame else "the case failed"
        _record_death(folder, case, part, step, leg, code, reason, outcome)
        if not twice:
            on_event(WorkerDied(case=case, leg=leg, step=step, reason=reason))
        elif blame:
            skip.append(leg)
            folder.add_to_case(case, crashed_legs=[leg], crash_reasons={leg: reason})
            on_event(LegCrashed(case=case, leg=leg, reason=reason))
        else:
            at = f"{step} · {leg}" if leg else step
            return _fail_case(folder, case, f"its worker died twice at {at}: {reason}", on_event)
    return _fail_case(folder, case, f"its worker died {MAX_WORKERS} times", on_event)


def _fail_case(folder: RunFolder, case: str, reason: str, on_event: Callable[[Event], None]) -> bool:
    folder.update_case(case, status="failed", reason=reason)
    on_event(CaseFailed(case=case, reason=reason))
    return False


def _record_death(
    folder: RunFolder, case: str, part: int, step: str, leg: str, code: int, reason: str, outcome: str
) -> None:
    """Each worker death in the case's status: what the report warns about, and what resume reads."""
    death = {"part": part, "step": step, "leg": leg, "reason": reason, "outcome": outcome}
    if code < 0:
        death["signal"] = -code
    folder.add_to_case(case, deaths=[death])


def _worker(
    folder: RunFolder,
    index: int,
    skip: list[str],
    part: int,
    env: dict[str, str],
    on_event: Callable[[Event], None],
    live: Workers,
) -> tuple[int, str]:
    """One worker process for case ``index``: its events as they come, its exit code and the last
    line it wrote to stderr (kept in ``.worker-cNNN.log``). Interrupted, it stops the worker too.
    A later process is handed what the first one chose (its status), so that it times alike."""
    first = folder.status(folder.case_names[index]) if part > 0 else None
    legs = sorted({*skip, *first.failed}) if first else skip  # a leg the first process found wrong is not set up again
    cmd = [sys.executable, "-m", "kprof.engine.worker", str(folder.root), str(index), json.dumps(legs), str(part)]
    cmd += [json.dumps(first.record(), default=str)] if first else []
    log = worker_log(folder.root, index)
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=child_env(env))
        assert proc.stdout is not None
        live.procs.add(proc)
        try:
            for line in proc.stdout:
                if (event := decode(line)) is not None:  # anything else is a workload's own print
                    on_event(event)
            code = proc.wait()
        except BaseException:  # Ctrl-C or a kill of the parent: no orphan worker runs on
            proc.kill()
            proc.wait()
            raise
        finally:
            live.procs.discard(proc)
    return code, death_reason(code, log)
