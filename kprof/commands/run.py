"""`kprof run` and `kprof calibrate` as library functions: start (or resume) a run folder, execute
it, and analyse it. The CLI adds argument parsing, a progress display and rendering."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kprof.analysis.run_analysis import RunReport
from kprof.analysis.stats import walsh_index
from kprof.bisect_model import Bisect
from kprof.commands.analyse import analyse_run
from kprof.engine.parent import execute
from kprof.engine.program import ProgramFailed, ProgramRequest, headline_case, plan_program_run
from kprof.engine.request import RunRequest, create_run, default_folder, plan_run
from kprof.errors import KprofInputError, RunIncomplete
from kprof.events import Event, Note
from kprof.run_model import BenchmarkRecord, Run, WorkloadSubject
from kprof.run_options import OPTIONS
from kprof.store.run_folder import RunFolder


def resume_folder(out: Path | None, workload: str | None = None, options: dict[str, Any] | None = None) -> RunFolder:
    """The run folder ``--resume`` continues, as it was planned: a workload or an option given
    with it that contradicts the stored run is a one-line error (it once resumed another workload's
    run in silence, and took no notice of ``--rounds``)."""
    if out is None:
        raise KprofInputError("--resume", "needs --out RUN_DIR")
    folder = RunFolder(out)
    run = folder.read_run()  # a one-line error when it is not a run folder
    if workload is not None and isinstance(run.subject, WorkloadSubject) and workload not in _names(run.subject):
        raise KprofInputError("--resume", f"{out} holds a run of {run.subject.spec}, not {workload}")
    stored = _stored_options(run)
    for name, value in (options or {}).items():
        if value in (None, [], "", False) or (name in OPTIONS and value == OPTIONS[name].default):
            continue
        if name not in stored:
            raise KprofInputError(f"--{name.replace('_', '-')}", "is not taken with --resume: the run's plan is stored")
        if value != stored[name]:
            raise KprofInputError(
                f"--{name.replace('_', '-')}",
                f"is {value!r}, the stored run's {stored[name]!r}: --resume continues it as planned",
            )
    return folder


def _names(subject: WorkloadSubject) -> set[str]:
    return {
        subject.spec,
        subject.name,
        str(Path(subject.spec).resolve()) if subject.spec.endswith(".py") else subject.spec,
    }


def _stored_options(run: Run) -> dict[str, Any]:
    """The run's own values of the options a resume could be given."""
    protocol = run.protocol
    return {
        "rounds": protocol.rounds,
        "samples": protocol.samples,
        "buffer_sets": protocol.buffer_sets,
        "buffers": protocol.buffers,
        "processes": protocol.processes,
        "timer_mode": protocol.timer_mode,
        "captures": protocol.captures,
        "seed": run.seed,
        "threshold_pct": run.threshold_pct,
        "dtype": run.dtype,
        "preset": run.preset,
        "design": run.design,
        "collector": run.collector,
        "device": run.placement.device,
    }


def start(
    request: RunRequest | ProgramRequest, out: Path | None, on_event: Callable[[Event], None] = lambda e: None
) -> RunFolder:
    """A new run folder for the request (every argument checked before anything is written)."""
    if isinstance(request, RunRequest):
        return create_run(out, request, on_event)
    run = plan_program_run(request, on_event)
    folder = RunFolder(out or default_folder(run.subject.name))
    folder.create(run)
    return folder


def run_and_analyse(
    folder: RunFolder, on_event: Callable[[Event], None] = lambda e: None, fresh: bool = False
) -> RunReport:
    """Run every unfinished case of the folder, then analyse every finished round. A ``fresh`` folder
    (made by this call's ``start``) whose run is refused before a single round is stored — a whole
    program whose baseline fails its first run — is removed: no empty run folder is left behind."""
    try:
        execute(folder, on_event)
    except ProgramFailed:
        if fresh and not folder.finished_rounds(0):
            shutil.rmtree(folder.root, ignore_errors=True)
        raise
    try:
        return analyse_run(folder.root)
    except KprofInputError as e:  # nothing to report: when cases failed, an incomplete run (exit 4)
        if any(not m.refused for m in folder.read_statuses().missing(folder.case_names)):
            raise RunIncomplete(e.where, e.problem) from None
        raise


def bisect_revisions(
    req: RunRequest | ProgramRequest, out: Path | None, on_event: Callable[[Event], None] = lambda e: None
) -> Bisect:
    """``--design bisect``: a statistical search of ``--revisions A..B`` (its commits that touch
    ``--paths``, when given) for the commit(s) behind a change of one case's time — a workload's
    case, or a whole program's GPU busy per step (``--metric``: the matching kernels' time); every
    step is a revision run of its own under ``out/step-N``."""
    from kprof.revisions.bisect import interval_alpha, run_bisect
    from kprof.revisions.plan import commit_records, find_repo

    if not req.revisions:
        raise KprofInputError("--design bisect", "needs --revisions A..B")
    program = isinstance(req, ProgramRequest)
    repo = find_repo(req.repo, None if program else req.workload)
    span = repo.range(req.revisions, req.paths)
    first, gpus, case = _bisect_ends(req, [span.base.sha, span.commits[-1].sha], on_event)
    alpha = interval_alpha(len(span.commits), len(gpus))
    if walsh_index(req.rounds, alpha) == 0:
        need = next(n for n in range(req.rounds, 64) if walsh_index(n, alpha) > 0)
        raise KprofInputError("--rounds", f"bisect over {len(span.commits)} commits needs at least {need} rounds")
    root = _new_bisect_folder(out or default_folder(req.workload if isinstance(req, RunRequest) else "bisect"))

    def time_revisions(shas: list[str], folder: Path, gpu: int | None) -> RunFolder:
        step_req = replace(req, revisions=None, revs=shas, design="endpoints", paths=[])
        if isinstance(step_req, RunRequest):
            step = create_run(folder, replace(step_req, gpus=None, on_gpu=gpu), on_event)
        else:
            step = start(step_req, folder, on_event)
        if _benchmark(step.read_run()) != _benchmark(first):  # the same benchmark in every step
            raise KprofInputError(
                req.workload if isinstance(req, RunRequest) else req.program[0],
                "changed while the bisect ran: restore it, or start a new bisect",
            )
        execute(step, on_event)
        return step

    return run_bisect(
        span.base,
        span.commits,
        case,
        req.threshold_pct,
        time_revisions,
        root,
        gpus=gpus,
        pick_case=headline_case if program else None,
        paths=list(req.paths),
        left_out=commit_records(span.left_out),
        on_plan=lambda text: on_event(Note(text=text)),
    )


def _benchmark(run: Run) -> BenchmarkRecord | None:
    return run.revisions.benchmark if run.revisions is not None else None


def _bisect_ends(
    req: RunRequest | ProgramRequest, ends: list[str], on_event: Callable[[Event], None]
) -> tuple[Run, list[int | None], str | None]:
    """The run of the range's two ends, planned (every argument checked before a step runs); the
    GPUs the search shares its probes over, and the one case a workload's bisect follows."""
    one = dict(revisions=None, revs=ends, design="endpoints", paths=[])
    if isinstance(req, ProgramRequest):
        return plan_program_run(replace(req, **one), on_event), [None], None
    first = plan_run(replace(req, **one), on_event)
    if len(first.cases) != 1:
        raise KprofInputError("--case", f"bisect follows one case; {len(first.cases)} match (narrow it with --case)")
    return first, list(first.placement.gpus) or [None], first.cases[0].name


def _new_bisect_folder(root: Path) -> Path:
    from kprof.store.layout import BISECT_FILE, is_run_folder

    if (root / BISECT_FILE).exists() or is_run_folder(root):
        raise KprofInputError(root, "already holds a run (use another --out)")
    root.mkdir(parents=True, exist_ok=True)
    return root
