"""What a run records about where it ran: device checks, library versions, the git state of kprof."""

from __future__ import annotations

import platform
import re
import subprocess
from pathlib import Path
from typing import Any

from kprof import __version__
from kprof.errors import KprofInputError

KPROF_DIR = Path(__file__).resolve().parent.parent


def default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def check_device(device: str) -> None:
    """``cpu`` or ``cuda``/``cuda:N`` that this machine has (ROCm builds of torch answer to cuda too)."""
    if device == "cpu":
        return
    if not re.fullmatch(r"cuda(:\d+)?", device):
        raise KprofInputError("--device", f"expected cpu, cuda or cuda:N, got {device!r}")
    import torch

    if not torch.cuda.is_available():
        raise KprofInputError("--device", "no GPU is visible here (use --device cpu for the interpreter)")
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= torch.cuda.device_count():
        raise KprofInputError("--device", f"{device} does not exist ({torch.cuda.device_count()} GPU(s) here)")


def git(cwd: Path, *args: str, timeout: float = 5) -> str | None:
    """``git ARGS`` in ``cwd``: its stripped stdout, or None when git fails or is absent."""
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_state(cwd: Path = KPROF_DIR) -> dict[str, Any]:
    """The commit kprof runs from and whether tracked files differ from it: numbers measured with
    uncommitted changes must say so. None for both outside a git checkout."""
    revision = git(cwd, "rev-parse", "HEAD")
    changed = git(cwd, "status", "--porcelain", "--untracked-files=no") if revision else None
    return {"git_revision": revision, "git_dirty": None if changed is None else bool(changed)}


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {"kprof": __version__, "python": platform.python_version()}
    for name in ("torch", "triton", "numpy"):
        try:
            out[name] = __import__(name).__version__
        except ImportError:
            out[name] = None
    return out
