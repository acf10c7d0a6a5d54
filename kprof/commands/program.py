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
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from kprof.analysis.trace_tables import busy_ns
from kprof.collectors import rocprofv3
from kprof.errors import KprofInputError
from kprof.ingest import load_trace
from kprof.run_store import RunStore
from kprof.schedule import round_orders

COLLECTORS = ("torch", "rocprofv3")
BUSY_CASE = "GPU busy per process"
LEG_SPEC = re.compile(r"^(?P<name>[A-Za-z0-9_.+-]+)(?::(?P<env>.*))?$")


@dataclass(frozen=True)
class ProgramLeg:
    name: str
    env: tuple[tuple[str, str], ...] = ()


def parse_leg(spec: str) -> ProgramLeg:
    """``fast:USE_FAST=1,BLOCK=64`` → leg "fast" with two variables; ``base`` → no variables."""
    m = LEG_SPEC.match(spec.strip())
    if not m:
        raise KprofInputError("--leg", f"expected NAME or NAME:VAR=VALUE[,VAR=VALUE], got {spec!r}")
    env = []
    for item in filter(None, (m.group("env") or "").split(",")):
        if "=" not in item:
            raise KprofInputError("--leg", f"{item!r} in {spec!r} is not VAR=VALUE")
        key, value = item.split("=", 1)
        env.append((key.strip(), value))
    return ProgramLeg(m.group("name"), tuple(env))


def create_program_run(
    out: Path,
    legs: Sequence[ProgramLeg],
    program: Sequence[str],
    collector: str,
    rounds: int,
    seed: int,
    threshold_pct: float,
    argv: list[str],
) -> RunStore:
    if len(legs) < 1:
        raise KprofInputError("--leg", "give at least one leg (the first is the baseline)")
    if len({leg.name for leg in legs}) != len(legs):
        raise KprofInputError("--leg", "leg names must differ")
    if collector not in COLLECTORS:
        raise KprofInputError("--collector", f"whole programs need torch or rocprofv3, got {collector!r}")
    if not program:
        raise KprofInputError("--", "no program to run (put it after --)")
    if collector == "torch" and not (Path(program[0]).name.startswith("python") and len(program) > 1):
        raise KprofInputError("--collector", "torch wraps Python scripts: the program must be `python SCRIPT …`")
    if rounds < 6:
        raise KprofInputError("--rounds", "at least 6 rounds are needed for a 95% interval")
    base = legs[0]
    meta_legs = [
        {"name": base.name, "env": dict(base.env), "roles": ["baseline"], "features": [], "params": [], "replica": 0}
    ]
    meta_legs += [
        {"name": leg.name, "env": dict(leg.env), "roles": ["leg"], "features": [], "params": [], "replica": 0}
        for leg in legs[1:]
    ]
    meta_legs.append(
        {
            "name": f"{base.name} (A/A)",
            "env": dict(base.env),
            "roles": ["aa"],
            "features": [],
            "params": [],
            "replica": 1,
        }
    )
    meta = {
        "command": "kprof " + " ".join(argv),
        "mode": "program",
        "program": list(program),
        "collector": collector,
        "workload": " ".join(program),
        "workload_name": Path(program[-1]).name,
        "preset": "program",
        "cases": [BUSY_CASE],
        "features": [],
        "design": "program",
        "legs": meta_legs,
        "rounds": rounds,
        "seed": seed,
        "device": "cuda",
        "dtype": "program",
        "threshold_pct": threshold_pct,
        "timer": f"{collector} trace (device time of each process's kernels)",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "case_status": {},
    }
    store = RunStore(out)
    store.create(meta)
    return store


def _trace_of(collector: str, program: Sequence[str], folder: Path, tag: str, env: dict[str, str]) -> Path:
    if collector == "rocprofv3":
        return rocprofv3.run(program, folder, tag, env)
    path = folder / f"{tag}.pt.trace.json.gz"
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "kprof.collectors.torch_wrap", str(path), *program[1:]]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise KprofInputError(" ".join(program), f"exited with {done.returncode}: {last}")
    return path


def execute_program(store: RunStore, on_event: Callable[[dict[str, Any]], None]) -> None:
    meta = store.read_meta()
    legs = meta["legs"]
    rounds = int(meta["rounds"])
    orders = round_orders(len(legs), rounds + 1, int(meta["seed"]))
    done = set(store.finished_rounds(0))
    failures: dict[str, str] = dict(meta.get("case_status", {}).get(BUSY_CASE, {}).get("failures", {}))
    for r in range(rounds + 1):
        if r in done:
            continue
        rows = []
        for slot, li in enumerate(orders[r]):
            leg = legs[li]
            env = dict(os.environ, **leg["env"])
            tag = f"r{r:03d}-{li}"
            try:
                trace = load_trace(_trace_of(meta["collector"], meta["program"], store.root / "traces", tag, env))
            except KprofInputError as e:
                failures[f"{leg['name']} round {r}"] = str(e)
                on_event({"event": "leg_failed", "leg": leg["name"], "round": r, "reason": str(e)})
                continue
            k = trace.kernels
            if len(k) == 0:
                failures[f"{leg['name']} round {r}"] = "the trace holds no GPU activity (was it run on a GPU?)"
                on_event({"event": "leg_failed", "leg": leg["name"], "round": r, "reason": "no GPU activity"})
                continue
            common = dict(
                leg=leg["name"], round=r, sample=0, buffer_set=-1, slot=slot, timer=meta["timer"], burn_in=r == 0
            )
            rows.append(dict(common, case=BUSY_CASE, time_ns=float(busy_ns(k))))
            kernels = k[k["kind"] == "kernel"]
            for name, g in kernels.groupby("short_name", observed=True):
                rows.append(dict(common, case=f"{name} (per call)", time_ns=float(g["dur_ns"].astype("int64").mean())))
        store.write_part("samples", 0, r, pd.DataFrame(rows))
        on_event({"event": "round", "case": "program", "round": r, "rounds": rounds})
    store.update_case(BUSY_CASE, status="done", failures=failures)
