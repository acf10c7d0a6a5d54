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

from kprof import defaults
from kprof.analysis.program_samples import (
    BUSY_CASE,
    BUSY_STEP_CASE,
    HOST_CASE,
    HOST_STEP_CASE,
    host_samples,
    metric_case,
    process_samples,
)
from kprof.collectors import program_collector
from kprof.designs.legs import aa_legs
from kprof.engine.case import CaseRun, Item, Prepared, run_protocol
from kprof.errors import KprofInputError, checked_regex
from kprof.events import Event, LegFailed, RevisionRefused
from kprof.ingest.load import load_trace
from kprof.run_model import CaseRecord, Leg, Placement, ProgramSubject, Protocol, Role, Run, Sample
from kprof.store.run_folder import RunFolder

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
    rounds: int = defaults.ROUNDS
    seed: int = defaults.SEED
    threshold_pct: float = defaults.THRESHOLD_PCT
    between_runs_pct: float = defaults.BETWEEN_RUNS_PCT
    argv: list[str] = field(default_factory=list)
    revisions: str | None = None
    revs: list[str] = field(default_factory=list)
    repo: str | None = None
    design: str | None = None
    aa_copies: int = defaults.AA_COPIES
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
    defaults.check_threshold(req.threshold_pct)
    defaults.check_between_runs(req.between_runs_pct)
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
        between_runs_pct=req.between_runs_pct,
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
    """Every round not stored yet, through the case protocol (kprof.engine.case)."""
    from kprof.revisions.plan import say_refused

    run = folder.read_run()
    say_refused(run, on_event)
    runner = ProgramRunner(folder, run, on_event)
    run_protocol(CaseRun(folder, 0, run.cases[0].name, run.protocol, run.seed, runner, on_event))


@dataclass
class ProgramRunner:
    """Each leg a process of the program under the collector, once per round; its trace ingested
    into samples of several cases. Round 0 (the discarded burn-in) is each leg's probe: a leg whose
    command fails there is said once — the run stops when it is the baseline or an environment leg,
    a revision is left out of every later round — never retried round after round."""

    folder: RunFolder
    run: Run
    on_event: Callable[[Event], None]
    dropped: dict[str, str] = field(default_factory=dict)  # legs left out of every round, and why
    failures: dict[str, str] = field(default_factory=dict)  # a later round's failure of a leg
    round: int = 0

    @property
    def label(self) -> str:
        return self.run.timer

    @property
    def case(self) -> str:
        return self.run.cases[0].name

    def prepare(self) -> Prepared:
        status = self.folder.status(self.case)
        self.dropped = dict(status.failed)
        for leg in self.run.legs:
            tree = self.run.tree(leg.revision)
            if tree is not None and (tree.refused or tree.path is None):
                self.dropped.setdefault(leg.name, f"refused: {tree.refused}")
        if self.run.baseline.name in self.dropped:
            base = self.run.baseline.name
            raise ProgramFailed(base, f"the baseline cannot run: {self.dropped[base]}")
        self.failures = dict(status.failures)
        return Prepared(legs=len(self.run.legs), samples=1)

    def item(self, i: int, r: int) -> Item:
        return i, -1  # a process has no buffer sets of kprof's

    def start_round(self, items: list[Item], r: int) -> None:
        from kprof.revisions.benchmark import check_unchanged

        bench = self.run.revisions.benchmark if self.run.revisions is not None else None
        if bench is not None and not bench.in_tree:
            check_unchanged(bench)
        self.round = r

    def time_round(self, items: list[Item], samples: int) -> dict[Item, list[Sample]]:
        run, r = self.run, self.round
        subject, collect = program_subject(run), program_collector(run.collector)
        times: dict[Item, list[Sample]] = {}
        for item in items:
            leg = run.legs[item[0]]
            if leg.name in self.dropped:
                continue
            env, cwd = _leg_env(run, leg)
            try:
                traces = (self.folder.root / "traces").resolve()
                path = collect.run(subject.command, traces, f"r{r:03d}-{item[0]}", env, cwd)
                trace = load_trace(path, step_pattern=subject.step_pattern or None)
                on_cpu = run.placement.device == "cpu"
                times[item] = host_samples(trace, subject) if on_cpu else process_samples(trace.events, subject)
            except KprofInputError as e:
                self.failed(leg, _reason(e, cwd))
        self.folder.update_case(self.case, failed=self.dropped, failures=self.failures)
        return times

    def failed(self, leg: Leg, reason: str) -> None:
        """A leg's process failed in round ``self.round``: counted (after the probe), left out (a
        revision that fails its probe), or the end of the run (the baseline, an environment leg)."""
        base = leg.has(Role.BASELINE) or leg.has(Role.AA)
        if self.round > 0:  # it ran in the probe: a failure of one process, said and counted
            self.failures[f"{leg.name} round {self.round}"] = reason
            self.on_event(LegFailed(leg=leg.name, round=self.round, reason=reason))
        elif leg.revision and not base:
            self.dropped[leg.name] = reason
            self.on_event(RevisionRefused(leg=leg.name, reason=reason))
        else:
            who = f"the baseline {self.run.baseline.name}" if base else leg.name
            raise ProgramFailed(who, f"its command failed its first run: {reason}") from None

    def conditions(self) -> dict[str, Any]:
        return {}  # the collector's trace holds no clock readings

    def race(self, items: list[Item], r: int) -> list[dict[str, Any]]:
        return []  # a program's outputs are its own business

    def leg_name(self, item: Item) -> str:
        return self.run.legs[item[0]].name

    def finish(self, rounds: dict[int, list[Item]]) -> None:
        self.folder.update_case(self.case, status="done", failed=self.dropped, failures=self.failures)


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
