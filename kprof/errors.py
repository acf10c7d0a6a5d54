"""Errors a user can fix: the CLI prints them as one line and exits with code 2."""

from __future__ import annotations

from pathlib import Path


class KprofInputError(Exception):
    """Bad input (a file or an argument): names what is wrong and where, never a traceback."""

    def __init__(self, where: str | Path, problem: str):
        self.where = str(where)
        self.problem = " ".join(problem.split())  # one line, whatever a library's message held
        super().__init__(f"{self.where}: {self.problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        """Picklable, so that an error met in a worker process reaches the user as it was raised."""
        return (type(self), (self.where, self.problem))
