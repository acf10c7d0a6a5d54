"""File locks: a blocking one for a read-modify-write that several processes or threads share, and
a folder held by one kprof process, a second refused at once."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kprof.errors import KprofInputError


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing) for the block; waits for other
    holders. Each use opens the file anew, so threads of one process exclude each other too."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def held_alone(folder: Path, refusal: str) -> Iterator[None]:
    """Hold ``folder`` (its ``.lock``) for this process; another process holding it is the one-line
    error ``refusal`` at once. An OS lock: released when the process ends, however it ends."""
    with (folder / ".lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise KprofInputError(folder, refusal) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
