"""`kprof run` and `kprof calibrate` as library functions: start (or resume) a run folder, execute
it, and analyse it. The CLI adds argument parsing, a progress display and rendering."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from kprof.analysis.run_analysis import RunReport, analyse_run
from kprof.engine.events import Event
from kprof.engine.parent import execute
from kprof.engine.program import ProgramRequest, plan_program_run
from kprof.engine.request import RunRequest, create_run, default_folder
from kprof.errors import KprofInputError
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
    return len(run.cases) * (run.rounds + 1)


def program_and_workload(
    workload: str | None, extra: Sequence[str], legs: Sequence[str]
) -> tuple[str | None, list[str]]:
    """`kprof run --leg … -- CMD` puts the command's first word where the workload goes: when there
    are legs or a program, the whole command is the program."""
    program = list(extra)
    if workload is not None and (program or legs):
        return None, [workload, *program]
    return workload, program
