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
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kprof.store.atomic import write_text
from kprof.store.locks import exclusive_lock

SETUP_MARK = ".kprof-setup.json"
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
        try:
            proc = subprocess.run(command, shell=True, cwd=tree, env=env, capture_output=True, text=True, check=False)
            code, output = proc.returncode, proc.stdout + proc.stderr
        except OSError as e:
            code, output = 127, str(e)
        record = {"command": command, "exit_code": code, "output_tail": output[-TAIL_CHARS:], "cached": False}
        if code == 0:
            write_text(json.dumps(record) + "\n", mark)
        return record


def refusal(record: dict[str, Any]) -> str:
    """Why a tree whose setup failed is refused, in one line (the last line of its output)."""
    lines = record.get("output_tail", "").strip().splitlines()
    return f"--setup exited with {record['exit_code']}" + (f": {lines[-1].strip()}" if lines else "")
