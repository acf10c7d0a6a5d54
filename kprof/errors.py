"""Errors a user can fix: the CLI prints them as one line and exits with code 2."""

from __future__ import annotations

import re
from pathlib import Path


def checked_regex(pattern: str, option: str) -> re.Pattern[str]:
    """``pattern`` compiled, or a one-line error naming the option that gave it."""
    try:
        return re.compile(pattern)
    except re.error as e:
        raise KprofInputError(option, f"not a valid regular expression ({e})") from None


class KprofInputError(Exception):
    """Bad input (a file or an argument): names what is wrong and where, never a traceback."""

    def __init__(self, where: str | Path, problem: str):
        self.where = str(where)
        self.problem = " ".join(problem.split())  # one line, whatever a library's message held
        super().__init__(f"{self.where}: {self.problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        """Picklable, so that an error met in a worker process reaches the user as it was raised."""
        return (type(self), (self.where, self.problem))
