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
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from kprof.analysis.trace_tables import busy_ns
from kprof.collectors import program_collector
from kprof.engine.design import aa_legs
from kprof.engine.events import Event
from kprof.engine.schedule import round_orders
from kprof.errors import KprofInputError
from kprof.ingest import load_trace
from kprof.run_model import CaseRecord, Leg, Role, Run
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


def plan_program_run(
    specs: Sequence[str],
    program: Sequence[str],
    collector: str,
    rounds: int,
    seed: int,
    threshold_pct: float,
    argv: Sequence[str],
) -> Run:
    parsed = [parse_leg(s) for s in specs]
    if not parsed:
        raise KprofInputError("--leg", "give at least one leg (the first is the baseline)")
    if len({name for name, _ in parsed}) != len(parsed):
        raise KprofInputError("--leg", "leg names must differ")
    if not program:
        raise KprofInputError("--", "no program to run (put it after --)")
    collect = program_collector(collector)
    collect.check(program)
    if rounds < 6:
        raise KprofInputError("--rounds", "at least 6 rounds are needed for a 95% interval")
    (base_name, base_env), rest = parsed[0], parsed[1:]
    legs = [Leg(base_name, roles=frozenset({Role.BASELINE}), env=base_env)]
    legs += [Leg(name, roles=frozenset({Role.LEG}), env=env) for name, env in rest]
    legs += [Leg(leg.name, roles=leg.roles, replica=leg.replica, env=base_env) for leg in aa_legs(1, base_name)]
    name = Path(program[1] if len(program) > 1 and Path(program[0]).name.startswith("python") else program[0]).name
    return Run(
        kind="program",
        command="kprof " + " ".join(argv),
        workload=" ".join(program),
        workload_name=name,
        program=list(program),
        collector=collector,
        preset="program",
        cases=[CaseRecord(BUSY_CASE)],
        design="program",
        legs=legs,
        rounds=rounds,
        seed=seed,
        device="cuda",
        dtype="program",
        threshold_pct=threshold_pct,
        timer=f"{collector} trace (device time of each process's kernels)",
        started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )


def execute_program(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    run = folder.read_run()
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
            try:
                trace = load_trace(
                    collect.run(run.program, folder.root / "traces", tag, dict(os.environ, **dict(leg.env)))
                )
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
            for name, g in kernels.groupby("short_name", observed=True):
                rows.append(dict(common, case=f"{name} (per call)", time_ns=float(g["dur_ns"].astype("int64").mean())))
        folder.write_part("samples", 0, r, pd.DataFrame(rows))
        on_event({"event": "round", "case": "program", "round": r, "rounds": run.rounds})
    folder.update_case(BUSY_CASE, status="done", failures=failures)
