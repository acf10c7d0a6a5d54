"""The `kprof` command's entry: a SIGTERM from the first instant is an orderly stop — one line, exit
143 — where it once ended the process at start-up with a bare -15 and no word. Once a run executes,
kprof.engine.lifeline makes SIGTERM unwind like Ctrl-C (children stopped, the resume command said)."""

from __future__ import annotations

import signal
import sys
from types import FrameType


def _stopped(signum: int, frame: FrameType | None) -> None:
    sys.stderr.write("kprof: stopped by SIGTERM while starting: nothing was measured\n")
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _stopped)
    from kprof.cli import app

    app()
