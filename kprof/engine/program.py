"""Whole programs as legs: `kprof run --leg NAME:VAR=VALUE … --collector torch|nsys|rocprofv3 -- python bench.py`.

Each leg is the same command with its own environment variables, run as its own process under a
collector, one process per leg per round, legs in a seeded balanced order per round (round 0 is a
discarded burn-in). The first leg is the baseline and is run a second time in every round as the
A/A leg. Each process's trace is ingested: its GPU busy time and every kernel's µs per call become
samples (a case per quantity), so the same paired-round statistics, A/A gate and report apply.
When the trace has steps (ProfilerStep ranges, or ``--steps REGEX``), GPU busy per steady step is
the headline case (the first step, with its autotuning and warm-up, left out; each steady step a
sample) and the kernels' µs per call come from the steady steps; busy per process stays beside it.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from kprof.analysis.trace_tables import busy_ns, step_table
from kprof.collectors import program_collector
from kprof.engine.design import aa_legs
from kprof.engine.schedule import round_orders
from kprof.errors import KprofInputError, checked_regex
from kprof.events import Event, LegFailed, RevisionRefused, RoundDone
from kprof.ingest.assign_ranges import compile_step_pattern
from kprof.ingest.load import load_trace
from kprof.ingest.names import name_matches
from kprof.run_model import PER_CALL, CaseRecord, Leg, Placement, ProgramSubject, Protocol, Role, Run
from kprof.store.run_folder import RunFolder
from kprof.trace import Trace

BUSY_CASE = "GPU busy per process"
BUSY_STEP_CASE = "GPU busy per step"
HOST_CASE = "host time per process"  # --device cpu: the profiled span of a CPU program (host clock)
HOST_STEP_CASE = "host time per step"  # its step ranges' lengths, the first step left out
HOST_TIMER = "host-clock (a CPU program's profiler ranges: not device time)"
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
    design: str | None = None
    aa_copies: int = 1
    setup: str = ""
    paths: list[str] = field(default_factory=list)
    in_tree: bool = False  # --in-tree: the script at its path inside each revision's tree
    steps: str | None = None  # --steps: a regex over the trace's ranges that marks steps
    metric: str | None = None  # --metric: a regex over kernel names; their device time per step is a case
    device: str | None = None  # --device cpu: a CPU program, timed by its profiler ranges (host clock)

    @property
    def by_revision(self) -> bool:
        return bool(self.revisions or self.revs)


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


def plan_program_run(req: ProgramRequest, on_event: Callable[[Event], None] = lambda e: None) -> Run:
    if not req.program:
        raise KprofInputError("--", "no program to run (put it after --)")
    program_collector(req.collector).check(req.program)
    on_cpu = req.device == "cpu"
    if req.device not in (None, "cpu") and not str(req.device).startswith("cuda"):
        raise KprofInputError("--device", f"expected cpu, cuda or cuda:N, got {req.device!r}")
    if on_cpu and req.collector != "torch":
        raise KprofInputError(
            "--collector", f"a CPU program is timed under torch (its profiler's ranges), not {req.collector}"
        )
    if on_cpu and req.metric:
        raise KprofInputError("--metric", "selects kernels by their device time: not for a CPU program")
    if req.rounds < 6:
        raise KprofInputError("--rounds", "at least 6 rounds are needed for a 95% interval")
    subject = ProgramSubject(
        command=list(req.program),
        name=_program_name(req.program),
        step_pattern=checked_regex(req.steps, "--steps").pattern if req.steps else "",
        metric=checked_regex(req.metric, "--metric").pattern if req.metric else "",
    )
    run = Run(
        subject,
        command="kprof " + " ".join(req.argv),
        collector=req.collector,
        preset="program",
        cases=[CaseRecord(HOST_CASE if on_cpu else BUSY_CASE)],
        design="program",
        legs=[],
        protocol=Protocol(rounds=req.rounds),
        placement=Placement(device="cpu" if on_cpu else "cuda"),
        seed=req.seed,
        dtype="program",
        threshold_pct=req.threshold_pct,
        timer=HOST_TIMER if on_cpu else f"{req.collector} trace (device time of each process's kernels)",
        started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )
    if not req.by_revision:
        from kprof.revisions.plan import refuse_revision_options

        refuse_revision_options(req.setup, req.paths, req.in_tree)
        run.legs = _env_legs(req.legs)
        return run
    if req.legs:
        raise KprofInputError("--leg", "give environment legs or revisions, not both")
    from kprof.revisions.benchmark import locate_program
    from kprof.revisions.plan import find_repo, note_benchmark, revision_legs

    repo = find_repo(req.repo, None)
    subject.command, bench = locate_program(req.program, repo.root, req.in_tree)
    plan = revision_legs(repo, req.revisions, req.revs, req.design, req.aa_copies, 2e-2, req.paths, req.setup, on_event)
    note_benchmark(plan, bench, repo, on_event)
    run.legs, run.features, run.design = plan.legs, plan.features, plan.design
    run.revisions = plan.revision_set(repo, req.paths, bench, req.setup)
    return run


def _program_name(program: Sequence[str]) -> str:
    runs_script = len(program) > 1 and Path(program[0]).name.startswith("python") and not program[1].startswith("-")
    script = program[1] if runs_script else program[0]
    return Path(script).name


class ProgramFailed(KprofInputError):
    """A leg's command failed the probe (its first run) where the run cannot go on without it: the
    baseline, or any leg of an environment run (the user wrote every one of them)."""


def _leg_env(run: Run, leg: Leg) -> tuple[dict[str, str], Path | None]:
    """A leg's environment and working directory: its variables; in a revision's tree, that tree's
    code first on Python's import path (and its own Triton cache)."""
    env = dict(os.environ, **dict(leg.env))
    tree = run.tree(leg.revision)
    if run.revisions is None or tree is None or not tree.path:
        return env, None
    from kprof.revisions.benchmark import import_path, program_env
    from kprof.revisions.trees import revision_env

    path, bench = Path(tree.path), run.revisions.benchmark
    entries = import_path(path, bench, Path(run.revisions.repo)) if bench else [str(path)]
    env = program_env(dict(revision_env(run, leg.revision or ""), **dict(leg.env)), entries)
    return env, path


def execute_program(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    """Every round not stored yet. Round 0 (the discarded burn-in) is each leg's probe: a leg whose
    command fails there is said once — the run stops when it is the baseline or an environment leg,
    a revision is left out of every later round — never retried round after round."""
    from kprof.revisions.benchmark import check_unchanged
    from kprof.revisions.plan import say_refused

    run = folder.read_run()
    subject = program_subject(run)
    bench = run.revisions.benchmark if run.revisions is not None else None
    collect = program_collector(run.collector)
    say_refused(run, on_event)
    case = run.cases[0].name
    status = run.status(case)
    dropped: dict[str, str] = dict(status.failed)  # legs left out of every round, and why
    for leg in run.legs:
        tree = run.tree(leg.revision)
        if tree is not None and (tree.refused or tree.path is None):
            dropped.setdefault(leg.name, f"refused: {tree.refused}")
    if run.baseline.name in dropped:
        raise ProgramFailed(run.baseline.name, f"the baseline cannot run: {dropped[run.baseline.name]}")
    failures: dict[str, str] = dict(status.extra.get("failures", {}))  # a later round's failure of a leg
    orders = round_orders(len(run.legs), run.protocol.rounds + 1, run.seed)
    done = set(folder.finished_rounds(0))
    for r in range(run.protocol.rounds + 1):
        if r in done:
            continue
        if bench is not None and not bench.in_tree:
            check_unchanged(bench)
        rows: list[dict[str, Any]] = []
        for slot, li in enumerate(orders[r]):
            leg = run.legs[li]
            if leg.name in dropped:
                continue
            env, cwd = _leg_env(run, leg)
            try:
                path = collect.run(subject.command, (folder.root / "traces").resolve(), f"r{r:03d}-{li}", env, cwd)
                trace = load_trace(path, step_pattern=subject.step_pattern or None)
                common = dict(leg=leg.name, round=r, buffer_set=-1, slot=slot, timer=run.timer, burn_in=r == 0)
                on_cpu = run.placement.device == "cpu"
                rows += (
                    host_samples(trace, subject, common) if on_cpu else process_samples(trace.events, subject, common)
                )
            except KprofInputError as e:
                reason = _reason(e, cwd)
                base = leg.has(Role.BASELINE) or leg.has(Role.AA)
                if r > 0:  # it ran in the probe: a failure of one process, said and counted
                    failures[f"{leg.name} round {r}"] = reason
                    on_event(LegFailed(leg=leg.name, round=r, reason=reason))
                elif leg.revision and not base:
                    dropped[leg.name] = reason
                    on_event(RevisionRefused(leg=leg.name, reason=reason))
                else:
                    who = f"the baseline {run.baseline.name}" if base else leg.name
                    raise ProgramFailed(who, f"its command failed its first run: {reason}") from None
        folder.write_part("samples", 0, r, pd.DataFrame(rows))
        folder.update_case(case, failed=dropped, failures=failures)
        on_event(RoundDone(case="program", round=r, rounds=run.protocol.rounds, burn_in=r == 0))
    folder.update_case(case, status="done", failed=dropped, failures=failures)


def _reason(error: KprofInputError, tree: Path | None) -> str:
    """A failed run in words, with the revision's cache folder cut out of it."""
    if tree is None:
        return str(error)
    from kprof.revisions.benchmark import without_tree

    return without_tree(str(error), tree)


def program_subject(run: Run) -> ProgramSubject:
    """The program a program run measures (this module runs nothing else)."""
    if not isinstance(run.subject, ProgramSubject):
        raise KprofInputError("meta.json", f"describes a {run.subject.__class__.__name__}, not a program run")
    return run.subject


def process_samples(events: pd.DataFrame, subject: ProgramSubject, common: dict[str, Any]) -> list[dict[str, Any]]:
    """One process's samples: GPU busy per steady step (one sample per step; the first step is
    warm-up) when its trace has steps, GPU busy over the whole process, the --metric kernels' time
    (per steady step, else per process), and every kernel's µs per call (in the steady steps)."""
    if len(events) == 0:
        raise KprofInputError(
            "the trace", "holds no GPU activity (was it run on a GPU? a CPU program is timed with --device cpu)"
        )
    steps, _ = step_table(events)
    steady = steps.loc[~steps["warmup"].astype(bool), "step"].to_numpy("int64") if len(steps) else []
    if subject.step_pattern and not len(steady):
        raise KprofInputError("--steps", f"{subject.step_pattern!r} marks fewer than two steps in the trace")
    rows = []
    if len(steady):
        busy = steps.set_index("step")["busy_us"]
        rows += [dict(common, case=BUSY_STEP_CASE, sample=i, time_ns=busy[s] * 1e3) for i, s in enumerate(steady)]
    rows.append(dict(common, case=BUSY_CASE, sample=0, time_ns=float(busy_ns(events))))
    kernels = events[events["kind"] == "kernel"]
    if len(steady):
        kernels = kernels[kernels["step"].isin(steady)]
    if subject.metric:
        rows += _metric_rows(kernels, subject.metric, steady, common)
    for name, g in kernels.groupby("name", observed=True):
        rows.append(dict(common, case=f"{name}{PER_CALL}", sample=0, time_ns=float(g["dur_ns"].astype("int64").mean())))
    return rows


def host_samples(trace: Trace, subject: ProgramSubject, common: dict[str, Any]) -> list[dict[str, Any]]:
    """A CPU program's samples, by the host clock: each steady step's length (its step range in the
    profiler's CPU ranges; the first step, with its warm-up, left out) and the profiled span of the
    whole process."""
    cpu = trace.ranges[trace.ranges["domain"] == "cpu"]
    if not len(cpu):
        raise KprofInputError("the trace", "holds no CPU ranges (the profiler recorded nothing of the program)")
    pattern = compile_step_pattern(subject.step_pattern or None)
    steps = cpu[cpu["name"].map(lambda name: bool(pattern.search(str(name))))].sort_values("start_ns")
    if subject.step_pattern and len(steps) < 2:
        raise KprofInputError("--steps", f"{subject.step_pattern!r} marks fewer than two steps in the trace")
    lengths = (steps["end_ns"] - steps["start_ns"]).to_numpy("int64")[1:]
    rows = [dict(common, case=HOST_STEP_CASE, sample=i, time_ns=float(t)) for i, t in enumerate(lengths)]
    span = int(cpu["end_ns"].max()) - int(cpu["start_ns"].min())
    return [*rows, dict(common, case=HOST_CASE, sample=0, time_ns=float(span))]


def metric_case(pattern: str, stepped: bool) -> str:
    return f"kernels /{pattern}/ per {'step' if stepped else 'process'}"


def _metric_rows(kernels: pd.DataFrame, pattern: str, steady: Any, common: dict[str, Any]) -> list[dict[str, Any]]:
    """The device time of the kernels whose names match ``pattern``: one sample per steady step,
    else one for the process. Their names may change between revisions; their work is what counts."""
    hit = kernels[name_matches(kernels["name"], re.compile(pattern))]
    if not len(hit):
        raise KprofInputError("--metric", f"{pattern!r} matches no kernel of the trace")
    dur = hit["dur_ns"].astype("int64")
    case = metric_case(pattern, bool(len(steady)))
    if not len(steady):
        return [dict(common, case=case, sample=0, time_ns=float(dur.sum()))]
    per_step = dur.groupby(hit["step"].to_numpy("int64")).sum().reindex(steady, fill_value=0)
    return [dict(common, case=case, sample=i, time_ns=float(v)) for i, v in enumerate(per_step.to_numpy())]


def headline_case(folder: RunFolder) -> str:
    """The case a bisect of whole programs follows: the --metric kernels, else GPU busy per steady
    step when the traces have steps, else GPU busy per process."""
    subject = program_subject(folder.read_run())
    cases = set(folder.read("samples")["case"].astype(str)) if folder.finished_rounds(0) else set()
    if subject.metric:
        stepped = metric_case(subject.metric, True)
        return stepped if stepped in cases else metric_case(subject.metric, False)
    if HOST_CASE in cases:
        return HOST_STEP_CASE if HOST_STEP_CASE in cases else HOST_CASE
    return BUSY_STEP_CASE if BUSY_STEP_CASE in cases else BUSY_CASE
