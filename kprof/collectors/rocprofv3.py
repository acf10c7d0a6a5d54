"""AMD's rocprofv3 as a collector for whole programs: command construction, the process, its output.

kprof always asks for CSV explicitly (the default changed from CSV to rocpd in ROCm 7) and names
the output directory and prefix, so it knows where the kernel trace lands whatever the version.
Not yet run on AMD hardware: tested with the real rocprofv3 CSV from the rocprofiler-sdk docs and a
stand-in executable that writes it (tests/test_collectors.py).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from kprof.collectors import ProgramCollector
from kprof.errors import KprofInputError

TOOL = "rocprofv3"


def available(tool: str = TOOL) -> bool:
    return shutil.which(tool) is not None


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
    if not available(tool):
        raise KprofInputError("--collector", f"{tool} is not on PATH (it ships with ROCm)")
    out_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        command(program, out_dir, prefix, tool),
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise KprofInputError(" ".join(program), f"exited with {done.returncode} under {tool}: {last}")
    found = sorted(out_dir.rglob(f"{prefix}_kernel_trace.csv"))
    if not found:
        raise KprofInputError(out_dir, f"{tool} wrote no {prefix}_kernel_trace.csv")
    return found[-1]


def _check(program: Sequence[str]) -> None:
    """Any command runs under rocprofv3; whether the tool is installed is checked when it runs."""


COLLECTOR = ProgramCollector(TOOL, "AMD's rocprofv3 (kernel and marker traces, CSV) around any command", _check, run)
