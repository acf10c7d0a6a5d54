"""NVIDIA Nsight Systems as a collector for whole programs: ``nsys profile`` around any command,
its report exported to SQLite, read by kprof.ingest.formats.nsys.

kprof asks for CUDA and NVTX tracing only (no CPU sampling, no context switches: they cost the
program time and kprof reads neither), names the output, and has nsys export SQLite as it ends
(``--export sqlite``); a report left without its export is exported afterwards. Not yet run on a
machine with nsys (this project's GPU machine has none): tested with a stand-in executable that
writes an export in the documented schema (tests/fake_bin/nsys).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from kprof.collectors import ProgramCollector, run_under
from kprof.errors import KprofInputError
from kprof.ingest.formats.nsys_report import export_sqlite

TOOL = "nsys"


def command(program: Sequence[str], output: Path, tool: str = TOOL) -> list[str]:
    """``nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --export sqlite -o OUT -- PROGRAM…``."""
    if not program:
        raise KprofInputError("--", "no program to run (put it after --)")
    return [
        tool,
        "profile",
        "--trace=cuda,nvtx",
        "--sample=none",
        "--cpuctxsw=none",
        "--export=sqlite",
        "--force-overwrite=true",
        "--output",
        str(output),
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
    """Run the program under nsys and return the SQLite export of its report."""
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / prefix
    hint = "it ships with the CUDA toolkit and Nsight Systems"
    run_under(tool, hint, command(program, output, tool), program, env, cwd, timeout)
    exported = output.with_name(f"{prefix}.sqlite")
    if exported.is_file():
        return exported
    report = output.with_name(f"{prefix}.nsys-rep")
    if not report.is_file():
        raise KprofInputError(out_dir, f"{tool} wrote neither {prefix}.sqlite nor {prefix}.nsys-rep")
    return export_sqlite(report, exported)


def _check(program: Sequence[str]) -> None:
    """Any command runs under nsys; whether the tool is installed is checked when it runs."""


COLLECTOR = ProgramCollector(
    TOOL, "NVIDIA Nsight Systems (CUDA and NVTX trace, SQLite export) around any command", _check, run
)
