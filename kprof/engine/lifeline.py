"""Child processes die with their parent: a `kprof run` killed with SIGKILL (or by the OOM killer)
leaves no worker timing on the GPU for the rest of its round; the parent keeps the children it runs
now, so an interrupt stops them all, and reads why one ended from its log."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

PARENT_ENV = "KPROF_PARENT_PID"
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def child_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a child that should die with this process."""
    return dict(env, **{PARENT_ENV: str(os.getpid())})


def die_with_parent() -> None:
    """Called first thing in a child: on Linux the kernel sends SIGKILL when the parent dies; a
    parent that died before the request was made is caught by its pid."""
    parent = os.environ.get(PARENT_ENV)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent is not None and os.getppid() != int(parent):
        os._exit(1)


def exit_on_sigterm() -> None:
    """SIGTERM (``kill PID``, a CI job cancelled) unwinds like Ctrl-C, so the parent stops its
    children and says how to resume instead of vanishing."""

    def _raise(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _raise)


class Workers:
    """The processes running now (worker processes, or a revision run's leg hosts; one case per GPU
    at a time), so an interrupt can stop them all."""

    def __init__(self) -> None:
        self.procs: set[subprocess.Popen[str]] = set()
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        for proc in list(self.procs):
            proc.kill()


def last_line(log: Path, default: str) -> str:
    """The last line a child process wrote to its log (its error, when it died)."""
    lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
    return lines[-1] if lines else default
