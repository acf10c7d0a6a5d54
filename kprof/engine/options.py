"""What `kprof run` / `calibrate` / `attribute WORKLOAD` were asked for, and the checks that need
nothing but the options themselves: they run before torch, the workload or a GPU is touched, so a
mistyped option is one line in a fraction of a second (kprof.engine.request plans the rest)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from typing import Any

from kprof import defaults
from kprof.collectors.in_run import IN_RUN
from kprof.errors import KprofInputError
from kprof.timer import CAPTURE_MODES
from kprof.timer.kernel_time import TIMER_MODES

DTYPES = ("float16", "bfloat16", "float32")
BUFFERS = ("shared", "per-leg")


@dataclass(kw_only=True)
class RunRequest:
    """Everything `kprof run` / `kprof calibrate` was asked for."""

    workload: str
    preset: str | None = None
    case_filter: str | None = None
    design: str | None = None  # None: all for a workload's features, sequence for a range's commits
    target: list[str] | None = None
    sweep: str | None = None
    sweep_baseline: bool = False
    rounds: int = defaults.ROUNDS
    samples: int | None = None
    buffer_sets: int = defaults.BUFFER_SETS
    buffers: str = defaults.BUFFERS
    processes: int | None = None  # worker processes per case (None: 2 on a GPU for shared buffers, else 1)
    timer_mode: str = defaults.TIMER_MODE
    captures: str = defaults.CAPTURES
    gpus: str | None = None  # all | N | 0,1
    on_gpu: int | None = None  # every case on this host GPU (a bisect step's share of --gpus)
    aa_across_gpus: bool = False
    ray: str | None = None  # auto | ADDRESS
    seed: int = defaults.SEED
    device: str | None = None
    dtype: str | None = None
    threshold_pct: float = defaults.THRESHOLD_PCT
    between_runs_pct: float = defaults.BETWEEN_RUNS_PCT
    plants: list[float] = field(default_factory=list)
    aa_copies: int = defaults.AA_COPIES
    collector: str = "events"
    torch_leg: bool = True
    argv: list[str] = field(default_factory=list)
    # revisions as legs
    revisions: str | None = None  # A..B
    revs: list[str] = field(default_factory=list)  # repeated --rev (the first is the baseline)
    repo: str | None = None
    allow_changed_outputs: bool = False
    paths: list[str] = field(default_factory=list)  # --paths: only the range's commits that touch these
    setup: str = ""  # --setup: a command run once in each revision's tree before anything is timed
    in_tree: bool = False  # --in-tree: the workload file at its path inside each revision's tree

    @property
    def by_revision(self) -> bool:
        return bool(self.revisions or self.revs)


def check_options(req: RunRequest) -> None:
    """Every rule that the options alone decide; a one-line error naming the option."""
    defaults.check_threshold(req.threshold_pct)
    defaults.check_between_runs(req.between_runs_pct)
    min_rounds = 5 if req.buffers == "per-leg" else 6
    if req.rounds < min_rounds:
        raise KprofInputError("--rounds", f"at least {min_rounds} rounds are needed ({defaults.ROUNDS} is the default)")
    if req.samples is not None and req.samples < 1:
        raise KprofInputError("--samples", "must be at least 1")
    if req.collector not in IN_RUN:
        raise KprofInputError(
            "--collector",
            f"a workload runs under {' or '.join(IN_RUN)}; nsys and rocprofv3 wrap "
            "whole programs (kprof run --leg … --collector nsys -- CMD)",
        )
    if req.ray is not None and req.gpus is not None:
        raise KprofInputError("--ray", "takes the place of --gpus: Ray gives each case its GPU")
    if req.timer_mode not in TIMER_MODES:
        raise KprofInputError("--timer", f"must be one of {', '.join(TIMER_MODES)}")
    if req.captures not in CAPTURE_MODES:
        raise KprofInputError("--captures", f"must be one of {', '.join(CAPTURE_MODES)}")
    if req.captures == "none" and req.timer_mode == "kernel-time":
        raise KprofInputError(
            "--timer", "kernel-time reads each graph replay's activity records: not with --captures none"
        )
    if req.buffers not in BUFFERS:
        raise KprofInputError("--buffers", "must be shared (kprof's protocol) or per-leg (the PR method)")
    if req.dtype is not None and req.dtype not in DTYPES:
        raise KprofInputError("--dtype", f"{req.dtype!r} is not one of {', '.join(DTYPES)}")
    if req.by_revision:
        if req.plants or req.sweep:
            raise KprofInputError("--revisions", "revision runs take no --plant or --sweep")
        if not IN_RUN[req.collector].revisions or req.buffers != "shared":
            gather = " or ".join(name for name, c in IN_RUN.items() if c.revisions)
            raise KprofInputError("--revisions", f"revision runs of a workload time with {gather} over shared buffers")
        if req.ray is not None:
            raise KprofInputError("--ray", "revision runs drive their leg hosts from this process (use --gpus)")


PROGRAM_ONLY = ("legs", "steps", "metric")  # options of whole programs that a workload run refuses


def run_or_program_request(workload: str | None, extra: list[str], fields: dict[str, Any], argv: list[str]) -> Any:
    """What `kprof run` was asked for: a whole program (``--leg`` or a command after ``--``), as a
    ProgramRequest with the fields it takes, or a workload's RunRequest (``extra`` checked by
    :func:`refuse_unknown_options` first)."""
    workload, program = program_and_workload(workload, extra, fields["legs"])
    if program or fields["legs"]:
        if fields["processes"] is not None:
            raise KprofInputError("--processes", "whole programs already run one process per leg per round")
        from kprof.engine.program import ProgramRequest

        taken = {f.name for f in dataclass_fields(ProgramRequest)}
        return ProgramRequest(program=program, argv=argv, **{k: v for k, v in fields.items() if k in taken})
    if workload is None:
        raise KprofInputError("WORKLOAD", "name a workload (kprof kernels lists them) or give a program after --")
    for name in ("steps", "metric"):
        if fields[name]:
            raise KprofInputError(f"--{name}", "is for whole programs (kprof run … -- CMD)")
    if not (fields["revisions"] or fields["revs"]):  # a revision's benchmark may live in its tree alone
        from kprof.workload import check_spec

        check_spec(workload)
    return RunRequest(workload=workload, argv=argv, **{k: v for k, v in fields.items() if k not in PROGRAM_ONLY})


def refuse_unknown_options(workload: str | None, extra: list[str]) -> None:
    """`kprof run` passes what it does not know on to a whole program (the words after --); after a
    bundled workload's name those words are a mistyped option, which once read as a program named
    after the workload ('--collector: whole programs run under …')."""
    from kprof.workload import bundled_names

    unknown = [word for word in extra if word.startswith("-")]
    if workload is not None and unknown and workload in bundled_names():
        raise KprofInputError(unknown[0], "no such option of kprof run ('kprof run -h' lists them)")


def program_and_workload(
    workload: str | None, extra: Sequence[str], legs: Sequence[str]
) -> tuple[str | None, list[str]]:
    """`kprof run --leg … -- CMD` puts the command's first word where the workload goes: when there
    are legs or a program, the whole command is the program."""
    program = list(extra)
    if workload is not None and (program or legs):
        return None, [workload, *program]
    return workload, program
