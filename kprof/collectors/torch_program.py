"""The PyTorch profiler around a whole Python program (``kprof run --leg … --collector torch -- python S``):
the script runs unchanged inside ``kprof.collectors.torch_wrap`` and its Kineto trace is read back."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from kprof.collectors import ProgramCollector, torch_wrap
from kprof.errors import KprofInputError


def check(program: Sequence[str]) -> None:
    if not (Path(program[0]).name.startswith("python") and len(program) > 1):
        raise KprofInputError("--collector", "torch wraps Python scripts: the program must be `python SCRIPT …`")


def run(program: Sequence[str], out_dir: Path, tag: str, env: Mapping[str, str], cwd: Path | None = None) -> Path:
    path = out_dir / f"{tag}.pt.trace.json.gz"
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(Path(torch_wrap.__file__)), str(path), *program[1:]]
    done = subprocess.run(cmd, env=dict(env), cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise KprofInputError(" ".join(program), f"exited with {done.returncode}: {last}")
    return path


COLLECTOR = ProgramCollector("torch", "the PyTorch profiler around a Python script", check, run)
