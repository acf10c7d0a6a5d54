"""Errors a user can fix: the CLI prints them as one line and exits with code 2."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path


def checked_regex(pattern: str, option: str) -> re.Pattern[str]:
    """``pattern`` compiled, or a one-line error naming the option that gave it."""
    try:
        return re.compile(pattern)
    except re.error as e:
        raise KprofInputError(option, f"not a valid regular expression ({e})") from None


def checked_file(path: Path, what: str, limit: int | None = None) -> os.stat_result:
    """``path``'s status when it is a regular, non-empty file (of at most ``limit`` bytes), else a
    one-line error that says what it is instead: a FIFO would hang a read, /dev/zero never ends,
    and a symlink loop is not a missing file."""
    try:
        st = path.stat()
    except FileNotFoundError:
        gone = path.is_symlink()
        raise KprofInputError(path, "is a symbolic link to nothing" if gone else "no such file") from None
    except OSError as e:
        loop = e.errno == errno.ELOOP
        raise KprofInputError(
            path, "is a symbolic link loop" if loop else f"cannot be read ({e.strerror or e})"
        ) from None
    if stat.S_ISDIR(st.st_mode):
        raise KprofInputError(path, f"is a directory, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise KprofInputError(path, f"is not a regular file (a FIFO, a socket or a device), not a {what}")
    if st.st_size == 0:
        raise KprofInputError(path, "empty file")
    if limit is not None and st.st_size > limit:
        raise KprofInputError(path, f"is {st.st_size / 2**20:,.0f} MiB: larger than any {what} kprof writes")
    return st


class KprofInputError(Exception):
    """Bad input (a file or an argument): names what is wrong and where, never a traceback."""

    exit_code = 2

    def __init__(self, where: str | Path, problem: str):
        self.where = str(where)
        self.problem = " ".join(problem.split())  # one line, whatever a library's message held
        super().__init__(f"{self.where}: {self.problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        """Picklable, so that an error met in a worker process reaches the user as it was raised."""
        return (type(self), (self.where, self.problem))


class RunIncomplete(KprofInputError):
    """A run that measured nothing of its plan because its cases failed: one line too, but exit 4,
    the code of every run that did not measure all it planned (kprof.cli)."""

    exit_code = 4
