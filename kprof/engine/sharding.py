"""Cases over GPUs (``--gpus``): one thread per GPU, each taking the next pending case as it frees
up; the executors (worker processes, leg hosts) say how one case runs."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from kprof.engine.lifeline import Workers
from kprof.events import Event
from kprof.run_model import Run

CaseRunner = Callable[[int, int | None, Callable[[Event], None], Workers], None]


def shard_cases(run: Run, pending: list[int], on_event: Callable[[Event], None], run_one: CaseRunner) -> None:
    """``run_one(index, gpu, on_event, live)`` for every pending case: one after another, or with
    ``--gpus`` one thread per GPU, each GPU taking the next case as it frees up (a case pinned to a
    GPU by --aa-across-gpus waits for that one). Ctrl-C stops every GPU's processes."""
    live, gpus = Workers(), run.placement.gpus
    if len(gpus) <= 1:
        for index in pending:
            run_one(index, gpus[0] if gpus else None, on_event, live)
        return
    lock = threading.Lock()
    queue = deque(i for i in pending if run.cases[i].gpu is None)  # any free GPU takes these
    own = {gpu: deque(i for i in pending if run.cases[i].gpu == gpu) for gpu in gpus}  # pinned ones

    def events(event: Event) -> None:  # one display, fed from every GPU's thread
        with lock:
            on_event(event)

    def drain(gpu: int) -> None:
        while True:
            with lock:
                mine = own[gpu] or queue
                if not mine:
                    return
                index = mine.popleft()
            run_one(index, gpu, events, live)

    with ThreadPoolExecutor(len(gpus)) as pool:
        futures = [pool.submit(drain, gpu) for gpu in gpus]
        try:
            for f in futures:
                f.result()
        except BaseException:  # Ctrl-C: no process keeps timing, and no thread starts another case
            with lock:
                queue.clear()
                for q in own.values():
                    q.clear()
                live.stop()
            raise
