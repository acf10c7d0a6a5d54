"""Whole programs as legs: `kprof run --leg NAME:VAR=VALUE … --collector torch|rocprofv3 -- python bench.py`.

Each leg is the same command with its own environment variables, run as its own process under a
collector, one process per leg per round, legs in a seeded balanced order per round (round 0 is a
discarded burn-in). The first leg is the baseline and is run a second time in every round as the
A/A leg. Each process's trace is ingested: its GPU busy time and every kernel's µs per call become
samples (a case per quantity), so the same paired-round statistics, A/A gate and report apply.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from kprof.analysis.trace_tables import busy_ns
from kprof.collectors import program_collector
from kprof.engine.design import aa_legs
from kprof.engine.events import Event
from kprof.engine.schedule import round_orders
from kprof.errors import KprofInputError
from kprof.ingest.load import load_trace
from kprof.run_model import PER_CALL, CaseRecord, Leg, Role, Run
from kprof.store.run_folder import RunFolder

BUSY_CASE = "GPU busy per process"
LEG_SPEC = re.compile(r"^(?P<name>[A-Za-z0-9_.+-]+)(?::(?P<env>.*))?$")


def parse_leg(spec: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``fast:USE_FAST=1,BLOCK=64`` → ("fast", two variables); ``base`` → no variables."""
    m = LEG_SPEC.match(spec.strip())
    if not m:
        raise KprofInputError("--leg", f"expected NAME or NAME:VAR=VALUE[,VAR=VALUE], got {spec!r}")
    env = []
    for item in filter(None, (m.group("env") or "").split(",")):
        if "=" not in item:
            raise KprofInputError("--leg", f"{item!r} in {spec!r} is not VAR=VALUE")
        key, value = item.split("=", 1)
        env.append((key.strip(), value))
    return m.group("name"), tuple(env)


@dataclass(kw_only=True)
class ProgramRequest:
    """A whole program timed as legs that differ in environment variables (``--leg``) or in the git
    revision of the tree the command runs in (``--revisions`` / ``--rev``)."""

    legs: list[str] = field(default_factory=list)
    program: list[str]
    collector: str = "torch"
    rounds: int = 16
    seed: int = 0
    threshold_pct: float = 0.5
    argv: list[str] = field(default_factory=list)
    revisions: str | None = None
    revs: list[str] = field(default_factory=list)
    repo: str | None = None
    design: str = "all"
    aa_copies: int = 1
    setup: str = ""


def _env_legs(specs: list[str]) -> list[Leg]:
    parsed = [parse_leg(s) for s in specs]
    if not parsed:
        raise KprofInputError("--leg", "give at least one leg (the first is the baseline)")
    if len({name for name, _ in parsed}) != len(parsed):
        raise KprofInputError("--leg", "leg names must differ")
    (base_name, base_env), rest = parsed[0], parsed[1:]
    legs = [Leg(base_name, roles=frozenset({Role.BASELINE}), env=base_env)]
    legs += [Leg(name, roles=frozenset({Role.LEG}), env=env) for name, env in rest]
    return legs + [replace(leg, env=base_env) for leg in aa_legs(1, base_name)]


def plan_program_run(req: ProgramRequest) -> Run:
    if not req.program:
        raise KprofInputError("--", "no program to run (put it after --)")
    program_collector(req.collector).check(req.program)
    if req.rounds < 6:
        raise KprofInputError("--rounds", "at least 6 rounds are needed for a 95% interval")
    run = Run(
        kind="program",
        command="kprof " + " ".join(req.argv),
        workload=" ".join(req.program),
        workload_name=_program_name(req.program),
        program=list(req.program),
        collector=req.collector,
        preset="program",
        cases=[CaseRecord(BUSY_CASE)],
        design="program",
        legs=[],
        rounds=req.rounds,
        seed=req.seed,
        device="cuda",
        dtype="program",
        threshold_pct=req.threshold_pct,
        setup_command=req.setup,
        timer=f"{req.collector} trace (device time of each process's kernels)",
        started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )
    if req.revisions or req.revs:
        if req.legs:
            raise KprofInputError("--leg", "give environment legs or revisions, not both")
        from kprof.revisions.plan import commit_records, find_repo, revision_legs

        repo = find_repo(req.repo, None)
        legs, trees, commits, features = revision_legs(repo, req.revisions, req.revs, req.design, req.aa_copies, 2e-2)
        run.legs, run.revisions, run.features, run.design = legs, trees, features, req.design
        run.repo, run.commits = str(repo.root), commit_records(commits)
    else:
        run.legs = _env_legs(req.legs)
    return run


def _program_name(program: Sequence[str]) -> str:
    runs_script = len(program) > 1 and Path(program[0]).name.startswith("python") and not program[1].startswith("-")
    script = program[1] if runs_script else program[0]
    return Path(script).name


def run_setup(folder: RunFolder, run: Run, on_event: Callable[[Event], None]) -> Run:
    """``--setup``: once in each revision's tree (its own environment), before any round; recorded."""
    for key, tree in run.revisions.items():
        if not run.setup_command or tree.setup or tree.path is None or "#aa" in key:
            continue
        done = subprocess.run(run.setup_command, shell=True, cwd=tree.path, capture_output=True, text=True, check=False)
        tree.setup = {
            "command": run.setup_command,
            "exit_code": done.returncode,
            "output_tail": (done.stdout + done.stderr)[-2000:],
        }
        if done.returncode != 0:
            tree.refused = f"--setup exited with {done.returncode}"
            on_event({"event": "leg_failed", "leg": key, "reason": tree.refused})
    return folder.update(revisions=run.revisions)


def execute_program(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    run = folder.read_run()
    if run.revisions:
        run = run_setup(folder, run, on_event)
    collect = program_collector(run.collector)
    orders = round_orders(len(run.legs), run.rounds + 1, run.seed)
    done = set(folder.finished_rounds(0))
    failures: dict[str, str] = dict(run.status(BUSY_CASE).extra.get("failures", {}))
    for r in range(run.rounds + 1):
        if r in done:
            continue
        rows = []
        for slot, li in enumerate(orders[r]):
            leg = run.legs[li]
            tag = f"r{r:03d}-{li}"
            tree = run.revisions.get(leg.revision or "")
            if tree is not None and (tree.refused or tree.path is None):
                failures[f"{leg.name} round {r}"] = f"refused: {tree.refused}"
                continue
            cwd = Path(tree.path) if tree is not None and tree.path else None
            try:
                env = dict(os.environ, **dict(leg.env))
                trace = load_trace(collect.run(run.program, (folder.root / "traces").resolve(), tag, env, cwd))
            except KprofInputError as e:
                failures[f"{leg.name} round {r}"] = str(e)
                on_event({"event": "leg_failed", "leg": leg.name, "round": r, "reason": str(e)})
                continue
            k = trace.events
            if len(k) == 0:
                reason = "the trace holds no GPU activity (was it run on a GPU?)"
                failures[f"{leg.name} round {r}"] = reason
                on_event({"event": "leg_failed", "leg": leg.name, "round": r, "reason": reason})
                continue
            common = dict(leg=leg.name, round=r, sample=0, buffer_set=-1, slot=slot, timer=run.timer, burn_in=r == 0)
            rows.append(dict(common, case=BUSY_CASE, time_ns=float(busy_ns(k))))
            kernels = k[k["kind"] == "kernel"]
            for name, g in kernels.groupby("name", observed=True):
                rows.append(dict(common, case=f"{name}{PER_CALL}", time_ns=float(g["dur_ns"].astype("int64").mean())))
        folder.write_part("samples", 0, r, pd.DataFrame(rows))
        on_event({"event": "round", "case": "program", "round": r, "rounds": run.rounds})
    folder.update_case(BUSY_CASE, status="done", failures=failures)
