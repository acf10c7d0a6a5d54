"""The `kprof` command line: parse arguments, call one library function, render its result."""

from __future__ import annotations

import json
import re
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from kprof import __version__
from kprof.errors import KprofInputError

app = typer.Typer(
    name="kprof",
    help="GPU kernel profiling with honest statistics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class TraceFormat(str, Enum):
    table = "table"
    md = "md"
    csv = "csv"
    json = "json"


def _fail(message: str) -> None:
    typer.echo(f"kprof: error: {message}", err=True)
    raise typer.Exit(2)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kprof {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """kprof: where device time goes, whether B beats A, and which change bought it."""


def _regex(pattern: str | None, option: str) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as e:
        raise KprofInputError(option, f"not a valid regular expression ({e})") from None


@app.command()
def trace(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Trace files: Kineto JSON(.gz), rocprofv3 CSV/JSON/rocpd, RPD. Several files are the ranks of one job."
        ),
    ],
    steps: Annotated[
        str | None,
        typer.Option(help="Regex for step ranges (default: ProfilerStep#N), e.g. 'step\\[DECODE'."),
    ] = None,
    kernels: Annotated[
        str | None,
        typer.Option("--kernels", help="Only kernels whose name matches this regex (per-kernel table)."),
    ] = None,
    fmt: Annotated[
        TraceFormat, typer.Option("--format", help="table, md (for a PR), csv (per-kernel), json.")
    ] = TraceFormat.table,
    top: Annotated[int, typer.Option(help="Rows per table in table/md output (0 = all).", min=0)] = 20,
    save: Annotated[
        Path | None,
        typer.Option(help="Write the normalized kernel-event table and the result tables as parquet into this folder."),
    ] = None,
    recover: Annotated[
        bool | None,
        typer.Option(
            "--recover/--no-recover",
            help="Keep every complete event of a truncated trace (default: only for Kineto's unfinished .tmp files).",
        ),
    ] = None,
) -> None:
    """Per-kernel, per-step and per-annotation device time of one or more traces."""
    from kprof.commands.trace import run_trace

    try:
        result = run_trace(
            files, step_pattern=steps, kernel_filter=_regex(kernels, "--kernels"), recover=recover, save=save
        )
    except KprofInputError as e:
        _fail(str(e))
        return
    from kprof.report import trace_report as rep

    limit = top or None
    if fmt is TraceFormat.json:
        sys.stdout.write(json.dumps(rep.to_json(result.tables), indent=2) + "\n")
    elif fmt is TraceFormat.csv:
        sys.stdout.write(rep.render_csv(result.tables))
    elif fmt is TraceFormat.md:
        sys.stdout.write(rep.render_markdown(result.tables, limit))
    else:
        rep.render_terminal(result.tables, Console(), limit)
        if save is not None:
            Console(stderr=True).print(f"saved {len(result.saved)} files to {save}")


if __name__ == "__main__":
    app()
