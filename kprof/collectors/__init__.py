"""Collectors for whole programs: ways to run a command and get a trace of its device activity.

Each module of this package that defines ``COLLECTOR = ProgramCollector(...)`` is one collector
(``torch_program``: the PyTorch profiler around a Python script; ``rocprofv3``: AMD's profiler
around any command). Adding a collector is adding a module; nothing else names them. The in-run
collectors of workloads (CUDA events, the torch profile pass) live with the engine.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kprof.errors import KprofInputError


@dataclass(frozen=True)
class ProgramCollector:
    name: str
    doc: str
    #: raises KprofInputError when the program cannot run under this collector
    check: Callable[[Sequence[str]], None]
    #: runs the program once (its own process, in ``cwd`` when given: a revision's tree) and returns
    #: the trace it wrote: run(program, out_dir, tag, env, cwd) → a trace file kprof.ingest reads
    run: Callable[[Sequence[str], Path, str, Mapping[str, str], Path | None], Path]


@cache
def program_collectors() -> dict[str, ProgramCollector]:
    found = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        collector = getattr(module, "COLLECTOR", None)
        if isinstance(collector, ProgramCollector):
            found[collector.name] = collector
    return dict(sorted(found.items()))


def program_collector(name: str) -> ProgramCollector:
    collectors = program_collectors()
    if name not in collectors:
        raise KprofInputError("--collector", f"whole programs run under {' or '.join(collectors)}, not {name!r}")
    return collectors[name]
