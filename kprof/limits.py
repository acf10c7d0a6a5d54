"""Time limits of the steps that can hang on what a user hands kprof — reading a database, building
or importing a revision — each set by an environment variable, so a long but honest job can be given
more time and a test less."""

from __future__ import annotations

import os

from kprof.errors import KprofInputError


def seconds(variable: str, default: float) -> float:
    """The limit ``variable`` sets (``default`` when unset); a value that is not a positive number
    of seconds is a one-line error naming it."""
    text = os.environ.get(variable)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise KprofInputError(variable, f"is {text!r}, not a number of seconds > 0")
    return value
