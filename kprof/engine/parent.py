"""The parent of a run: picks the executor a run needs — worker processes per case
(kprof.engine.workers), a leg host per revision tree (kprof.engine.hosted), whole programs
(kprof.engine.program) or Ray tasks (kprof.engine.ray_cases) — under the folder's lock, and compacts
the folder when it returns."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack

from kprof.events import Event, Started
from kprof.store.run_folder import RunFolder


def execute(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    """Run every case not done yet (a failed one is tried again); a worker that dies loses only the
    leg it was running. One kprof process at a time per folder (an OS lock). When the executor
    returns, the folder's parts are compacted (an interrupted run keeps its parts as they are)."""
    with folder.lock(), ExitStack() as held:
        run = folder.read_run()
        if run.revisions is not None:  # its trees stay in the cache while it runs; any cleaned away are made again
            from kprof.revisions.plan import restore_trees
            from kprof.revisions.trees import cache_in_use

            held.enter_context(cache_in_use())
            restore_trees(folder, on_event)
            run = folder.read_run()
        on_event(Started())
        if run.is_program:
            from kprof.engine.program import execute_program

            execute_program(folder, on_event)
        elif any(leg.revision for leg in run.legs):
            from kprof.engine.hosted import execute_hosted

            execute_hosted(folder, on_event)
        elif run.placement.ray is not None:
            from kprof.engine.ray_cases import execute_ray

            execute_ray(folder, on_event)
        else:
            from kprof.engine.workers import execute_workers

            execute_workers(folder, on_event)
        folder.compact()  # one file per table; a resume writes parts beside it again
