"""AMD's rocprofv3 as a collector for whole programs: command construction, the process, its output.

kprof always asks for CSV explicitly (the default changed from CSV to rocpd in ROCm 7) and names
the output directory and prefix, so it knows where the kernel trace lands whatever the version.
Not yet run on AMD hardware: tested with the real rocprofv3 CSV from the rocprofiler-sdk docs and a
stand-in executable that writes it (tests/test_collectors.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from kprof.collectors import ProgramCollector, run_under
from kprof.errors import KprofInputError

TOOL = "rocprofv3"


def command(program: Sequence[str], out_dir: Path, prefix: str, tool: str = TOOL) -> list[str]:
    """``rocprofv3 --kernel-trace --marker-trace --output-format csv -d DIR -o PREFIX -- PROGRAM…``."""
    if not program:
        raise KprofInputError("--", "no program to run (put it after --)")
    return [
        tool,
        "--kernel-trace",
        "--marker-trace",
        "--output-format",
        "csv",
        "-d",
        str(out_dir),
        "-o",
        prefix,
        "--",
        *program,
    ]


def run(
    program: Sequence[str],
    out_dir: Path,
    prefix: str,
    env: Mapping[str, str],
    cwd: Path | None = None,
    timeout: float | None = None,
    tool: str = TOOL,
) -> Path:
    """Run the program under rocprofv3 and return the kernel-trace CSV it wrote."""
    out_dir.mkdir(parents=True, exist_ok=True)
    run_under(tool, "it ships with ROCm", command(program, out_dir, prefix, tool), program, env, cwd, timeout)
    found = sorted(out_dir.rglob(f"{prefix}_kernel_trace.csv"))
    if not found:
        raise KprofInputError(out_dir, f"{tool} wrote no {prefix}_kernel_trace.csv")
    return found[-1]


def _check(program: Sequence[str]) -> None:
    """Any command runs under rocprofv3; whether the tool is installed is checked when it runs."""


COLLECTOR = ProgramCollector(TOOL, "AMD's rocprofv3 (kernel and marker traces, CSV) around any command", _check, run)
