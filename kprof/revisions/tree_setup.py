"""``--setup CMD``: a command run once in each revision's tree before anything of it is timed — a
build step such as ``python setup.py build_ext --inplace`` or ``make`` — with its exit code and the
tail of its output recorded in the run.

A success is cached with the tree: a marker beside the tree's files names the command (as asv marks
a finished build), so a later run that needs the same tree and command does not build it again. A
failure is not cached (the cause may be outside the tree) but refuses the tree for this run, once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kprof.limits import seconds
from kprof.store.atomic import write_text
from kprof.store.locks import exclusive_lock

SETUP_MARK = ".kprof-setup.json"
REVISION_SECONDS = "KPROF_REVISION_SECONDS"
TAIL_CHARS = 2000


def run_setup(
    tree: Path, command: str, env: dict[str, str], on_start: Callable[[], None] = lambda: None
) -> dict[str, Any]:
    """Run ``command`` in ``tree`` unless a finished run of it is recorded there (``on_start`` is
    called first when it does run); the record says which (``cached``). Locked per tree: the shares
    of a bisect step on several GPUs may ask for the revision they share at the same time."""
    with exclusive_lock(tree / ".kprof-setup.lock"):
        mark = tree / SETUP_MARK
        if mark.is_file():
            with contextlib.suppress(OSError, ValueError):
                done = json.loads(mark.read_text())
                if done.get("command") == command and done.get("exit_code") == 0:
                    return dict(done, cached=True)
        on_start()
        code, output = _bounded(command, tree, env)
        record = {"command": command, "exit_code": code, "output_tail": output[-TAIL_CHARS:], "cached": False}
        if code == 0:
            write_text(json.dumps(record) + "\n", mark)
        return record


def revision_seconds() -> float:
    """How long one revision may take to build (``--setup``) or to import in its leg host:
    ``KPROF_REVISION_SECONDS``, 900 s by default. Beyond it the revision is refused, said once."""
    return seconds(REVISION_SECONDS, 900.0)


def too_long(what: str) -> str:
    return f"{what} took longer than {revision_seconds():g} s ({REVISION_SECONDS}): stopped"


def _bounded(command: str, tree: Path, env: dict[str, str]) -> tuple[int, str]:
    """The command's exit code and output; stopped (with everything it started) past the limit."""
    try:
        proc = subprocess.Popen(
            command,
            shell=True,
            cwd=tree,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    except OSError as e:
        return 127, str(e)
    try:
        output, _ = proc.communicate(timeout=revision_seconds())
        return proc.returncode, output
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        return 124, (output or "") + "\n" + too_long("--setup")


def refusal(record: dict[str, Any]) -> str:
    """Why a tree whose setup failed is refused, in one line (the last line of its output)."""
    lines = record.get("output_tail", "").strip().splitlines()
    return f"--setup exited with {record['exit_code']}" + (f": {lines[-1].strip()}" if lines else "")
