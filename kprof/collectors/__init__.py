"""Collectors for whole programs: ways to run a command and get a trace of its device activity.

Each module of this package that defines ``COLLECTOR = ProgramCollector(...)`` is one collector
(``torch_program``: the PyTorch profiler around a Python script; ``rocprofv3``: AMD's profiler
around any command). Adding a collector is adding a module; nothing else names them. The in-run
collectors of workloads (CUDA events, the torch profile pass) are this package's ``in_run`` registry.
"""

from __future__ import annotations

import importlib
import pkgutil
import shutil
import subprocess
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


def run_under(
    tool: str,
    hint: str,
    cmd: Sequence[str],
    program: Sequence[str],
    env: Mapping[str, str],
    cwd: Path | None,
    timeout: float | None,
) -> None:
    """Run ``cmd`` (``program`` wrapped by ``tool``); one line when the tool is not on PATH (``hint``
    says where it comes from) or the program fails under it, with the last line it printed."""
    if shutil.which(tool) is None:
        raise KprofInputError("--collector", f"{tool} is not on PATH ({hint})")
    done = subprocess.run(
        list(cmd), env=dict(env), cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        last = ((done.stderr or done.stdout).strip().splitlines() or ["no output"])[-1]
        raise KprofInputError(" ".join(program), f"exited with {done.returncode} under {tool}: {last}")


def program_collector(name: str) -> ProgramCollector:
    collectors = program_collectors()
    if name not in collectors:
        raise KprofInputError("--collector", f"whole programs run under {' or '.join(collectors)}, not {name!r}")
    return collectors[name]
