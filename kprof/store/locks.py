"""File locks: a blocking one for a read-modify-write that several processes or threads share, a
shared one that many holders take and a sole one refuses, and a folder held by one kprof process, a
second refused at once."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO

from kprof.errors import KprofInputError
from kprof.store.layout import FOLDER_LOCK


def exclusive_lock(path: Path) -> AbstractContextManager[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing) for the block; waits for other
    holders. Each use opens the file anew, so threads of one process exclude each other too."""
    return _waiting(path, fcntl.LOCK_EX)


def shared_lock(path: Path) -> AbstractContextManager[None]:
    """Hold a shared ``flock`` on ``path`` (created if missing): any number of holders at once; a
    :func:`sole_lock` on it is refused while one is held."""
    return _waiting(path, fcntl.LOCK_SH)


@contextmanager
def _waiting(path: Path, mode: int) -> Iterator[None]:
    with _opened(path) as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def sole_lock(path: Path, where: str | Path, refusal: str) -> Iterator[None]:
    """Hold ``path`` exclusively; when another process holds it (shared or not), the one-line error
    ``where: refusal`` at once. An OS lock: released when the process ends, however it ends."""
    with _opened(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise KprofInputError(where, refusal) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def held_alone(folder: Path, refusal: str) -> AbstractContextManager[None]:
    """Hold ``folder`` (its ``.lock``) for this process; another process holding it is the one-line
    error ``refusal`` at once."""
    return sole_lock(folder / FOLDER_LOCK, folder, refusal)


def _opened(path: Path) -> IO[str]:
    """The lock file, opened for locking (never truncated); one that cannot be (a directory in its
    place, no permission) is a one-line error naming it."""
    try:
        return path.open("a")
    except OSError as e:
        raise KprofInputError(path, f"cannot be opened as a lock file ({e.strerror or e})") from None
