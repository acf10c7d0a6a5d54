"""The parent of a run: one worker process per unfinished case, started again once when it dies
and without a leg that killed it twice; whole-program runs go to their own executor
(kprof.engine.program)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

from kprof.engine.events import CASE_FAILED_STEP, RESTARTED, Event
from kprof.engine.gpus import pinned_env
from kprof.engine.lifeline import child_env
from kprof.engine.parts import case_parts
from kprof.revisions.benchmark import check_unchanged
from kprof.run_model import Run
from kprof.store.run_folder import RunFolder

MAX_WORKERS = 10  # worker processes per part of a case: each leg it drops costs two
SETUP_STEPS = ("check", "capture")  # a worker that dies twice here is blamed on the leg it was on
OUTSIDE_SIGNALS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGHUP, signal.SIGINT})  # a user, the OOM killer


def worker_env(device: str) -> dict[str, str]:
    env = dict(os.environ)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


def execute(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    """Run every case not done yet (a failed one is tried again); a worker that dies loses only the
    leg it was running. One kprof process at a time per folder (an OS lock). When the executor
    returns, the folder's parts are compacted (an interrupted run keeps its parts as they are)."""
    with folder.lock(), ExitStack() as held:
        run = folder.read_run()
        if run.revisions:  # its trees stay in the cache while it runs; any cleaned away are made again
            from kprof.revisions.plan import restore_trees
            from kprof.revisions.trees import cache_in_use

            held.enter_context(cache_in_use())
            restore_trees(folder, on_event)
            run = folder.read_run()
        if run.kind == "program":
            from kprof.engine.program import execute_program

            execute_program(folder, on_event)
        elif any(leg.revision for leg in run.legs):
            execute_hosted(folder, on_event)
        elif run.ray is not None:
            from kprof.engine.ray_cases import execute_ray

            execute_ray(folder, on_event)
        else:
            _execute_workers(folder, on_event)
        folder.compact()  # one file per table; a resume writes parts beside it again


class Workers:
    """The processes running now (worker processes, or a revision run's leg hosts; one case per GPU
    at a time), so an interrupt can stop them all."""

    def __init__(self) -> None:
        self.procs: set[subprocess.Popen[str]] = set()
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        for proc in list(self.procs):
            proc.kill()


CaseRunner = Callable[[int, int | None, Callable[[Event], None], Workers], None]


def shard_cases(run: Run, pending: list[int], on_event: Callable[[Event], None], run_one: CaseRunner) -> None:
    """``run_one(index, gpu, on_event, live)`` for every pending case: one after another, or with
    ``--gpus`` one thread per GPU, each GPU taking the next case as it frees up (a case pinned to a
    GPU by --aa-across-gpus waits for that one). Ctrl-C stops every GPU's processes."""
    live = Workers()
    if len(run.gpus) <= 1:
        for index in pending:
            run_one(index, run.gpus[0] if run.gpus else None, on_event, live)
        return
    lock = threading.Lock()
    queue = deque(i for i in pending if run.cases[i].gpu is None)  # any free GPU takes these
    own = {gpu: deque(i for i in pending if run.cases[i].gpu == gpu) for gpu in run.gpus}  # pinned ones

    def events(event: Event) -> None:  # one display, fed from every GPU's thread
        with lock:
            on_event(event)

    def drain(gpu: int) -> None:
        while True:
            with lock:
                mine = own[gpu] or queue
                if not mine:
                    return
                index = mine.popleft()
            run_one(index, gpu, events, live)

    with ThreadPoolExecutor(len(run.gpus)) as pool:
        futures = [pool.submit(drain, gpu) for gpu in run.gpus]
        try:
            for f in futures:
                f.result()
        except BaseException:  # Ctrl-C: no process keeps timing, and no thread starts another case
            with lock:
                queue.clear()
                for q in own.values():
                    q.clear()
                live.stop()
            raise


def _execute_workers(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    """Every unfinished case in its own worker process, pinned to its GPU when sharded."""
    run = folder.read_run()
    pending = folder.unfinished_cases(run)

    def one(index: int, gpu: int | None, events: Callable[[Event], None], live: Workers) -> None:
        run_case_workers(folder, index, pinned_env(worker_env(run.device), gpu, run.device), events, live)

    shard_cases(run, pending, on_event, one)


def run_case_workers(
    folder: RunFolder,
    index: int,
    env: dict[str, str],
    on_event: Callable[[Event], None],
    live: Workers,
) -> None:
    """One case to its end: its processes one after another (kprof.engine.parts), each restarted
    without a leg that killed it twice (kprof.engine.parent._run_part)."""
    run = folder.read_run()
    case, baseline = run.case_names[index], run.baseline.name
    status = run.status(case)
    if status.status == "failed":
        folder.update_case(case, status="", reason="")
    skip = sorted(status.crashed_legs)
    finished = set(folder.finished_rounds(index))
    parts = case_parts(run.rounds, run.buffer_sets, run.processes)
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
        progress = folder.root / f".progress-c{index:03d}.json"
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
            on_event({"event": "worker_died", "case": case, "leg": leg, "step": step, "reason": reason})
        elif blame:
            skip.append(leg)
            folder.update_case(case, crashed_legs=skip, **{f"crash:{leg}": reason})
            on_event({"event": "leg_crashed", "case": case, "leg": leg, "reason": reason})
        else:
            at = f"{step} · {leg}" if leg else step
            return _fail_case(folder, case, f"its worker died twice at {at}: {reason}", on_event)
    return _fail_case(folder, case, f"its worker died {MAX_WORKERS} times", on_event)


def _fail_case(folder: RunFolder, case: str, reason: str, on_event: Callable[[Event], None]) -> bool:
    folder.update_case(case, status="failed", reason=reason)
    on_event({"event": "case_failed", "case": case, "reason": reason})
    return False


def _record_death(
    folder: RunFolder, case: str, part: int, step: str, leg: str, code: int, reason: str, outcome: str
) -> None:
    """Each worker death in the case's status: what the report warns about, and what resume reads."""
    death = {"part": part, "step": step, "leg": leg, "reason": reason, "outcome": outcome}
    if code < 0:
        death["signal"] = -code
    folder.update_case(case, deaths=[*folder.read_run().status(case).deaths, death])


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
    line it wrote to stderr (kept in ``.worker-cNNN.log``). Interrupted, it stops the worker too."""
    cmd = [sys.executable, "-m", "kprof.engine.worker", str(folder.root), str(index), json.dumps(skip), str(part)]
    log = folder.root / f".worker-c{index:03d}.log"
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=child_env(env))
        assert proc.stdout is not None
        live.procs.add(proc)
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
        finally:
            live.procs.discard(proc)
    return code, death_reason(code, log)


def last_line(log: Path, default: str) -> str:
    """The last line a child process wrote to its log (its error, when it died)."""
    lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
    return lines[-1] if lines else default


def say_refused(run: Run, on_event: Callable[[Event], None]) -> None:
    """One line per revision that cannot be run (a commit that does not apply, a failed --setup, code
    that does not import): said once, before any round, and left out of every case."""
    for key, tree in run.revisions.items():
        legs = [leg.name for leg in run.legs if leg.revision == key]
        if tree.refused and legs and "#aa" not in key:
            on_event({"event": "revision_refused", "leg": ", ".join(legs), "reason": tree.refused})


def execute_hosted(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    """Revision runs: every case with one leg host per revision tree (kprof.engine.hosted), all of
    a case's hosts pinned to one GPU; with ``--gpus`` the cases are sharded as worker cases are."""
    from kprof.engine.hosted import HostDied, run_hosted_case

    run = folder.read_run()
    if run.benchmark is not None and not run.benchmark.in_tree:
        check_unchanged(run.benchmark)
    pending = folder.unfinished_cases(run)
    if pending:
        say_refused(run, on_event)

    def one(index: int, gpu: int | None, events: Callable[[Event], None], live: Workers) -> None:
        case = run.case_names[index]
        try:
            run_hosted_case(folder, index, events, gpu, live)
        except HostDied as e:
            if live.stopped:  # interrupted: the hosts were stopped, nothing is to blame
                return
            folder.update_case(case, status="failed", reason=str(e))
            events({"event": "case_failed", "case": case, "reason": str(e)})
            return
        folder.update_case(case, status="done")

    shard_cases(run, pending, on_event, one)
