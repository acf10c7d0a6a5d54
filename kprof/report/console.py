"""The console reports print to: a terminal's own width, full width when piped (light to import:
the CLI uses it before it knows what it will print)."""

from __future__ import annotations

import os

from rich.console import Console

# Output piped to a file or another program is laid out at this width (tables take only what they
# need): nothing is folded or left out there, whatever width the terminal had.
PIPED_WIDTH = 10_000


def output_console(stderr: bool = False) -> Console:
    """A terminal's own width; full width when piped, unless COLUMNS says otherwise."""
    console = Console(stderr=stderr)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, width=PIPED_WIDTH)
    return console
