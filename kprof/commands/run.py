"""`kprof run` and `kprof calibrate` as library functions: start (or resume) a run folder, execute
it, and analyse it. The CLI adds argument parsing, a progress display and rendering."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from kprof.analysis.run_analysis import RunReport, analyse_run
from kprof.analysis.stats import walsh_index
from kprof.engine.events import Event
from kprof.engine.parent import execute
from kprof.engine.program import ProgramRequest, plan_program_run
from kprof.engine.request import RunRequest, create_run, default_folder, plan_run
from kprof.errors import KprofInputError
from kprof.revisions.bisect import Bisect
from kprof.store.run_folder import RunFolder


def resume_folder(out: Path | None) -> RunFolder:
    if out is None:
        raise KprofInputError("--resume", "needs --out RUN_DIR")
    folder = RunFolder(out)
    folder.read_run()  # a one-line error when it is not a run folder
    return folder


def start(request: RunRequest | ProgramRequest, out: Path | None) -> RunFolder:
    """A new run folder for the request (every argument checked before anything is written)."""
    if isinstance(request, RunRequest):
        return create_run(out, request)
    run = plan_program_run(request)
    folder = RunFolder(out or default_folder(run.workload_name))
    folder.create(run)
    return folder


def run_and_analyse(folder: RunFolder, on_event: Callable[[Event], None] = lambda e: None) -> RunReport:
    """Run every unfinished case of the folder, then analyse every finished round."""
    execute(folder, on_event)
    return analyse_run(folder.root)


def total_rounds(folder: RunFolder) -> int:
    run = folder.read_run()
    return len(run.cases) * (run.rounds + run.processes)  # a burn-in round per process


def program_and_workload(
    workload: str | None, extra: Sequence[str], legs: Sequence[str]
) -> tuple[str | None, list[str]]:
    """`kprof run --leg … -- CMD` puts the command's first word where the workload goes: when there
    are legs or a program, the whole command is the program."""
    program = list(extra)
    if workload is not None and (program or legs):
        return None, [workload, *program]
    return workload, program


def bisect_revisions(req: RunRequest, out: Path | None, on_event: Callable[[Event], None]) -> Bisect:
    """``--design bisect``: a statistical search of ``--revisions A..B`` for the commit(s) behind a
    change of one case's time; every step is a revision run of its own under ``out/step-N``."""
    from kprof.revisions.bisect import BISECT_FILE, interval_alpha, run_bisect
    from kprof.revisions.plan import find_repo

    repo = find_repo(req.repo, req.workload)
    base, _, commits = repo.range(req.revisions or "")
    first = plan_run(replace(req, revisions=None, revs=[base.sha, commits[-1].sha], design="endpoints"))
    if len(first.cases) != 1:
        raise KprofInputError("--case", f"bisect follows one case; {len(first.cases)} match (narrow it with --case)")
    gpus: list[int | None] = list(first.gpus) or [None]
    alpha = interval_alpha(len(commits), len(gpus))
    if walsh_index(req.rounds, alpha) == 0:
        need = next(n for n in range(req.rounds, 64) if walsh_index(n, alpha) > 0)
        raise KprofInputError("--rounds", f"bisect over {len(commits)} commits needs at least {need} rounds")
    root = out or default_folder(req.workload)
    if (root / BISECT_FILE).exists() or (root / "meta.json").exists():
        raise KprofInputError(root, "already holds a run (use another --out)")
    root.mkdir(parents=True, exist_ok=True)

    def time_revisions(shas: list[str], folder: Path, gpu: int | None) -> RunFolder:
        step = create_run(folder, replace(req, revisions=None, revs=shas, design="endpoints", gpus=None, on_gpu=gpu))
        execute(step, on_event)
        return step

    return run_bisect(base, commits, first.cases[0].name, req.threshold_pct, time_revisions, root, gpus=gpus)
