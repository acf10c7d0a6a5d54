"""Nsight Systems report files (``.nsys-rep``, and ``.qdrep`` before nsys 2021.4): a binary format
only nsys reads. With nsys on PATH the report is exported to SQLite (``nsys export --type
sqlite``) into a temporary folder and read as an export; without it, one line says how."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from contextlib import closing
from pathlib import Path

from kprof.errors import KprofInputError
from kprof.ingest.formats import nsys
from kprof.ingest.registry import LoadOptions, Probe, TraceFormat, read_only_sqlite
from kprof.trace import Trace

SUFFIXES = (".nsys-rep", ".qdrep")


def export_sqlite(report: Path, out: Path) -> Path:
    """``report`` exported by ``nsys export`` to ``out`` (an .sqlite path); one line when it fails."""
    exe = shutil.which("nsys")
    if exe is None:
        raise KprofInputError(
            report,
            "an Nsight Systems report, which only nsys reads, and nsys is not on PATH: export it where nsys "
            f"is (nsys export --type sqlite {report.name}) and give kprof the .sqlite file",
        )
    cmd = [exe, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out), str(report)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not out.exists():
        last = (done.stderr or done.stdout).strip().splitlines()
        raise KprofInputError(report, f"nsys export failed ({last[-1] if last else f'exit {done.returncode}'})")
    return out


def load(p: Probe, options: LoadOptions) -> Trace | list[Trace]:
    with tempfile.TemporaryDirectory(prefix="kprof-nsys-") as tmp:
        exported = export_sqlite(p.path, Path(tmp) / "report.sqlite")
        with closing(read_only_sqlite(exported)) as con:
            return nsys.load(con, p.path, options.rank)


def _is_report(p: Probe) -> bool:
    return p.path.name.endswith(SUFFIXES) and not p.is_sqlite


FORMAT = TraceFormat(
    "nsys-rep", "Nsight Systems report (.nsys-rep, exported through nsys)", _is_report, load, priority=20
)
