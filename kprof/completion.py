"""Tab completion of the names kprof knows (`kprof --install-completion` sets it up in a shell):
workloads, designs, and the presets and cases of the workload already on the line. Workloads and
designs are read without torch; presets and cases load the workload typed (a second or two)."""

from __future__ import annotations

import contextlib
from typing import Any

import typer


def workloads(incomplete: str) -> list[str]:
    """The bundled families (a .py file is the shell's own file completion)."""
    from kprof.workload import bundled_names

    return [name for name in bundled_names() if name.startswith(incomplete)]


def designs(incomplete: str) -> list[str]:
    """Every design `--design` takes, ``bisect`` included (it needs --revisions)."""
    from kprof.designs import names

    return [name for name in (*names(True), "bisect") if name.startswith(incomplete)]


def presets(ctx: typer.Context, incomplete: str) -> list[str]:
    workload = _typed_workload(ctx)
    return [name for name in (workload.presets if workload else ()) if name.startswith(incomplete)]


def cases(ctx: typer.Context, incomplete: str) -> list[str]:
    """The cases of the preset on the line (else the workload's ``pr`` preset, else its first)."""
    workload = _typed_workload(ctx)
    if workload is None or not workload.presets:
        return []
    preset = ctx.params.get("preset") or ("pr" if "pr" in workload.presets else next(iter(workload.presets)))
    found = workload.presets.get(preset, ())
    return [case.name for case in found if case.name.startswith(incomplete)]


def _typed_workload(ctx: typer.Context) -> Any:
    """The workload named on the line so far (run's WORKLOAD, attribute's TARGET), or None when
    there is none or it cannot be loaded: completion offers nothing then, it never fails."""
    typed = [a for a in ctx.args if not a.startswith("-")]  # click leaves it here before a valueless option
    spec = ctx.params.get("workload") or ctx.params.get("subject") or (typed[0] if typed else None)
    if not spec:
        return None
    from kprof.workload import load_workload

    with contextlib.suppress(Exception):  # a half-typed path, a file that does not import: no names
        return load_workload(str(spec))
    return None
