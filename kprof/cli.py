"""The `kprof` command line: parse arguments, call one library function, render its result.

Every command's work is a function in ``kprof.commands`` that returns data or a
``kprof.report.table.Document``; this module only turns options into calls, shows progress, and
renders (``kprof.report.table.render``). Bad input is one line on stderr and exit code 2.

Exit codes: 0 done; 1 ``compare --fail-on`` found a row that breaks the rule; 2 bad input (one
line naming the file or argument); 3 ``compare --fail-on`` cannot decide (rows without a verdict
or interval that may break it); 4 a run (``run``, ``calibrate``, ``attribute`` of a workload) is
incomplete: a case failed or did not finish, or a leg killed its worker, or a case's baseline
disagrees with its own A/A copy, or a leg's outputs changed after a timed round (each named;
everything measured stored and reported); 130 interrupted (the resume command is printed).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from enum import Enum
from functools import partial, wraps
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from kprof import __version__, completion, defaults
from kprof.cli_help import KprofCommand, OneErrorStyle, examples, given_on_command_line
from kprof.errors import KprofInputError, checked_regex
from kprof.report.console import output_console
from kprof.run_options import ATTRIBUTE, CALIBRATE, RUN, request_fields, with_options

GATE_BROKEN, GATE_UNDECIDED, INCOMPLETE = 1, 3, 4


app = typer.Typer(
    cls=OneErrorStyle,
    name="kprof",
    help="GPU kernel profiling with honest statistics.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help is literal text: `kprof[sql]` and `step[DECODE` once lost their brackets
)
command = partial(app.command, cls=KprofCommand)  # every help page reads as kprof.cli_help writes it


def _formats(*names: str) -> Any:
    """An option type that accepts exactly these output formats."""
    return Enum("Format", {n: n for n in names}, type=str)  # type: ignore[misc]


TableFormat = _formats("table", "md", "json", "csv")  # every command that prints a table
AttributeFormat = _formats("table", "md", "json", "csv", "html")


OUT_OF_MEMORY = (
    "ran out of memory: this machine's available memory, cgroup limit or ulimit -v cannot hold what the "
    "command needs; run it where there is more memory, or on fewer files or steps"
)


def one_line_errors(command: Callable[..., None]) -> Callable[..., None]:
    """Bad input (KprofInputError) becomes ``kprof: error: WHERE: PROBLEM`` on stderr and exit 2 (4
    for a run whose every case failed: kprof.errors.RunIncomplete). Memory this machine cannot give
    (an allocation refused under ``ulimit -v`` or a cgroup limit, after a reader's own check passed)
    is one line and exit 2 too: input too large for where it is read."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            command(*args, **kwargs)
        except KprofInputError as e:
            typer.echo(f"kprof: error: {e}", err=True)
            raise typer.Exit(e.exit_code) from None
        except MemoryError:
            typer.echo(f"kprof: error: {OUT_OF_MEMORY}", err=True)
            raise typer.Exit(2) from None

    return wrapper


OutputOption = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Write the result to this file, in the format its suffix names (.md, .json, .csv), and say so in "
        "one line; the terminal shows the result too only when --format is given. A file inside a run or "
        "saved-trace folder is refused.",
    ),
]
QuietOption = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="No progress on stderr: only warnings, errors and where results are."),
]
HideSameOption = Annotated[
    bool, typer.Option("--hide-same", help="Leave SAME rows out of the tables (JSON and CSV keep every row).")
]
BetweenRunsOption = Annotated[
    float | None,
    typer.Option(
        "--between-runs",
        help="SD (percent) of a leg's effect between fresh runs, folded into every interval (default: the run's).",
    ),
]


class SortOrder(str, Enum):
    run = "run"
    effect = "effect"
    time = "time"


SortOption = Annotated[
    SortOrder,
    typer.Option(
        "--sort", help="Table rows in the run's order, by effect (largest gain first) or by time (slowest first)."
    ),
]
SUFFIX_FORMATS = {".md": "md", ".markdown": "md", ".json": "json", ".csv": "csv"}
HTML_TOO = {**SUFFIX_FORMATS, ".html": "html"}  # attribute also writes its page


def _write(doc: Any, fmt: Any, output: Path | None = None) -> None:
    """The document to stdout in ``fmt``; with ``output``, to that file in its suffix's format and
    to stdout only when ``--format`` was given too."""
    from kprof.report.table import render

    if output is not None:
        _write_output(output, lambda kind: render(doc, kind))
        if not _format_given():
            return
    text = render(doc, fmt.value, output_console())
    if fmt.value == "csv" and not text:
        raise KprofInputError("--format", "csv: this result has no table of rows (use md or json)")
    sys.stdout.write(text)


def _output_kind(output: Path | None, formats: dict[str, str] = SUFFIX_FORMATS) -> str:
    """The format ``output``'s suffix names, or a one-line error: checked before a run starts, and
    again when it is written (never into a folder kprof keeps data in)."""
    from kprof.store.layout import is_run_folder

    if output is None:
        return ""
    try:
        inside = output.is_dir() or any(is_run_folder(folder) for folder in (output.parent, *output.parent.parents))
    except OSError as e:  # a name longer than the file system takes
        raise KprofInputError("--output", f"{str(output)[:80]}…: cannot be written ({e.strerror or e})") from None
    if inside:
        raise KprofInputError("--output", f"{output}: is a folder or lies in a kprof folder, which it would change")
    kind = formats.get(output.suffix.lower())
    if kind is None:
        names = ", ".join(sorted(formats))
        raise KprofInputError("--output", f"{output}: name a file ending in {names} (its format)")
    return kind


def _write_output(output: Path, rendered: Callable[[str], str], formats: dict[str, str] = SUFFIX_FORMATS) -> None:
    """``rendered(format)`` into ``output``, atomically, and one line on stderr saying so."""
    from kprof.store.atomic import write_text

    kind = _output_kind(output, formats)
    text = rendered(kind)
    if not text:
        raise KprofInputError("--output", f"{output}: this result has no table to write as {kind}")
    write_text(text, output)
    typer.echo(f"wrote {output} ({kind}, {len(text.encode()):,} bytes)", err=True)


def _format_given() -> bool:
    """Whether ``--format`` was on the command line (with ``-o``, the terminal then shows it too)."""
    return given_on_command_line("fmt")


class ReadProgress:
    """A plain line on stderr every few seconds while a large trace is read (terminals and CI logs
    alike); a file read in less than that prints nothing."""

    every_s = 2.0

    def __init__(self) -> None:
        self.last = time.monotonic()

    def __call__(self, path: Path, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last >= self.every_s and done < total:
            self.last = now
            typer.echo(f"kprof: reading {path.name}: {100 * done / total:.0f}% of {total / 1e6:,.0f} MB", err=True)


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
    return None if pattern is None else checked_regex(pattern, option)


@command(epilog=examples("trace"))
@one_line_errors
def trace(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Trace files, folders of them, or globs ('ranks/*.json.gz'): Kineto JSON(.gz), Nsight Systems "
            "(.sqlite export, or .nsys-rep with nsys on PATH), rocprofv3 CSV/JSON/rocpd, RPD. Several files are the "
            "ranks of one job (a file may hold several); a rocprofv3 counter_collection.csv joins the kernel trace."
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
        TableFormat, typer.Option("--format", help="table, md (for a PR), csv (per-kernel), json.")
    ] = TableFormat.table,
    output: OutputOption = None,
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
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", help="Files read in parallel processes (0: one per core).", min=0)
    ] = 1,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Refuse a trace with impossible records (kernels before their launch, …) instead of warning.",
        ),
    ] = False,
    quiet: QuietOption = False,
) -> None:
    """Per-kernel, per-step and per-annotation device time of one or more traces (and, for several
    ranks, the slowest rank per step, each kernel's spread across ranks and collective wait)."""
    from kprof.commands.trace import default_jobs, run_trace
    from kprof.report.trace_report import trace_document

    _output_kind(output)  # a suffix kprof cannot write is said before the trace is read
    result = run_trace(
        files,
        step_pattern=steps,
        kernel_filter=_regex(kernels, "--kernels"),
        recover=recover,
        save=save,
        on_progress=None if quiet else ReadProgress(),
        jobs=jobs or default_jobs(),
        strict=strict,
    )
    _write(trace_document(result.tables, top or None, result.cross, result.skipped, result.counters), fmt, output)
    if save is not None and fmt.value == "table" and not quiet:
        names = ", ".join(p.name for p in result.saved)
        output_console(stderr=True).print(f"saved {len(result.saved)} entries to {save}: {names}", highlight=False)


@command(epilog=examples("sql"))
@one_line_errors
def sql(
    query: Annotated[
        str, typer.Argument(help="A DuckDB SELECT over the folder's tables, e.g. 'SELECT * FROM kernels'.")
    ],
    folder: Annotated[Path, typer.Argument(help="A `kprof trace --save` folder or a run folder.")],
    fmt: Annotated[TableFormat, typer.Option("--format", help="table, md, csv or json.")] = TableFormat.table,
    output: OutputOption = None,
    quiet: QuietOption = False,  # nothing but the result here either: taken so that every command takes it
    timeout: Annotated[float, typer.Option(help="Stop the query after this many seconds.", min=0.1)] = 60.0,
) -> None:
    """Read-only SQL over saved traces and runs (DuckDB; pip install 'kprof[sql]'): tables by their documented
    names; a SELECT (or an EXPLAIN of one), no file access of its own, at most 100,000 rows and 256 MiB."""
    from kprof.commands.sql import run_sql
    from kprof.report.sql_report import sql_document

    result, tables, cut = run_sql(query, folder, timeout)
    _write(sql_document(result, tables, cut), fmt, output)


@command(epilog=examples("kernels"))
@one_line_errors
def kernels(
    fmt: Annotated[TableFormat, typer.Option("--format", help="table, md, json or csv.")] = TableFormat.table,
    output: OutputOption = None,
    quiet: QuietOption = False,  # nothing but the result here either: taken so that every command takes it
) -> None:
    """List the bundled workloads: features (levers), presets and sweepable parameters."""
    from kprof.commands.kernels import kernels_document

    _write(kernels_document(), fmt, output)


def _say(err: Any, quiet: bool = False) -> Callable[[Any], None]:
    """Events from planning (a revision's tree built, a revision refused) as lines on stderr; with
    ``quiet`` the warnings alone."""
    from kprof.events import Event, Phase

    def on_event(event: Event) -> None:
        if (text := event.sentence()) is not None:
            err.print(f"[yellow]{escape(text)}[/yellow]", highlight=False)
        elif isinstance(event, Phase) and not quiet:
            err.print(event.text(), highlight=False)

    return on_event


def _execute_and_report(
    folder: Any,
    fmt: Any,
    show_report: bool = True,
    fresh: bool = False,
    output: Path | None = None,
    quiet: bool = False,
) -> Any:
    """Run the folder with a progress display (kprof.report.progress: a bar per phase, plain lines
    when stderr is not a terminal, as in CI logs; none with ``quiet``), then render the report
    and return it (kprof.analysis.run_analysis.RunReport). Ctrl-C keeps every finished round and
    says how to resume. A ``fresh`` folder refused before its first round is removed
    (kprof.commands.run.run_and_analyse)."""
    from kprof.commands.run import run_and_analyse
    from kprof.engine.lifeline import exit_on_sigterm
    from kprof.report.progress import RunProgress
    from kprof.report.run_report import run_document

    exit_on_sigterm()
    err = output_console(stderr=True)
    try:
        with RunProgress(err, folder.read_run(), folder.root, transient=fmt.value != "table", quiet=quiet) as progress:
            report = run_and_analyse(folder, progress.on_event, fresh=fresh)
    except KeyboardInterrupt:
        root = folder.root
        err.print(
            f"interrupted: every finished round is in {root}; continue with kprof run --out {root} --resume",
            soft_wrap=True,  # a command to copy: never folded
            highlight=False,
        )
        raise typer.Exit(130) from None
    err.print(f"run stored in {folder.root}", highlight=False)  # no colour on a path's digits
    if show_report:
        _write(run_document(report), fmt, output)
    return report


def _fail_if_incomplete(report: Any) -> None:
    """A run with a case that failed or did not finish, or a leg that killed its worker, exits
    INCOMPLETE, naming them (legs refused on purpose are findings the report states); so does a
    run with a case whose baseline disagrees with its own A/A copy (none of its verdicts stands), or
    a leg whose outputs changed after a timed round (a race: its times may not be of its work)."""
    failed = [m for m in report.missing if not m.refused] if report is not None else []
    distrusted = [case for case, s in report.summaries.items() if s.distrust] if report is not None else []
    if failed:
        named = [m.case + (f" · {m.leg}" if m.leg else "") for m in failed]
        more = f" and {len(named) - 5} more" if len(named) > 5 else ""
        typer.echo(f"kprof: the run is incomplete, not measured: {'; '.join(named[:5])}{more}", err=True)
    if distrusted:
        more = f" and {len(distrusted) - 5} more" if len(distrusted) > 5 else ""
        cases = "; ".join(distrusted[:5]) + more
        typer.echo(f"kprof: the baseline disagrees with its own A/A copy, no verdict stands: {cases}", err=True)
    races = report.races if report is not None else []
    for line in races[:5]:
        typer.echo(f"kprof: {line}", err=True)
    if failed or distrusted or races:
        raise typer.Exit(INCOMPLETE)


def _floats(text: str | None, option: str) -> list[float]:
    if not text:
        return []
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise KprofInputError(option, f"expected comma-separated numbers, got {text!r}") from None


@command(epilog=examples("run"), context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@one_line_errors
@with_options(RUN)
def run(
    ctx: typer.Context,
    workload: Annotated[
        str | None,
        typer.Argument(
            help="Bundled workload name or path to a .py file defining WORKLOAD (omit for a whole program after --).",
            autocompletion=completion.workloads,
        ),
    ] = None,
    *,
    out: Annotated[Path | None, typer.Option(help="Run folder (default: runs/NAME-TIME).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run in --out.")] = False,
    fmt: Annotated[
        TableFormat, typer.Option("--format", help="Summary format: table, md, json or csv.")
    ] = TableFormat.table,
    output: OutputOption = None,
    quiet: QuietOption = False,
    **options: Any,
) -> None:
    """Run the legs of a workload (correctness gate, interleaved timed rounds) or of a whole program
    (one process per leg per round under a collector); legs are feature sets, git revisions, or
    environments; store every sample."""
    from kprof.engine.options import refuse_unknown_options, run_or_program_request

    _output_kind(output)  # a file the result cannot go to is said before anything runs
    fields = request_fields(options)
    refuse_unknown_options(workload, ctx.args)
    if resume:
        from kprof.commands.run import resume_folder

        resumed = resume_folder(out, workload, fields)
        _fail_if_incomplete(_execute_and_report(resumed, fmt, output=output, quiet=quiet))
        return
    request = run_or_program_request(workload, ctx.args, fields, sys.argv[1:])
    if fields["design"] == "bisect":
        _bisect(request, out, fmt, output, quiet)
        return
    started = _start(request, out, _say(output_console(stderr=True), quiet))
    _fail_if_incomplete(_execute_and_report(started, fmt, fresh=True, output=output, quiet=quiet))


def _start(request: Any, out: Path | None, say: Callable[[Any], None] | None = None) -> Any:
    """The run folder of a request, the options alone checked first: a mistyped option is one line
    before torch, pandas and the analysis are imported (seconds on a small machine)."""
    from kprof.engine.options import RunRequest, check_options

    if isinstance(request, RunRequest):
        check_options(request)
    from kprof.commands.run import start

    return start(request, out) if say is None else start(request, out, say)


def _bisect(request: Any, out: Path | None, fmt: Any, output: Path | None, quiet: bool) -> None:
    from kprof.commands.run import bisect_revisions
    from kprof.report.bisect_report import bisect_document

    said = _say(output_console(stderr=True), quiet)
    _write(bisect_document(bisect_revisions(request, out, said)), fmt, output)


@command(epilog=examples("calibrate"))
@one_line_errors
@with_options(CALIBRATE, aa_copies=3)
def calibrate(
    workload: Annotated[
        str, typer.Argument(help="Bundled workload name or path to a .py file.", autocompletion=completion.workloads)
    ] = "paged_decode",
    *,
    out: Annotated[Path | None, typer.Option(help="Run folder.")] = None,
    fmt: Annotated[TableFormat, typer.Option("--format", help="table, md, json or csv.")] = TableFormat.table,
    output: OutputOption = None,
    quiet: QuietOption = False,
    **options: Any,
) -> None:
    """Plant delays of known length and report planted vs recovered effects and the A/A false positives."""
    from kprof.engine.options import RunRequest

    _output_kind(output)
    fields = request_fields(options)
    fields["plants"] = _floats(fields["plants"], "--plant")
    if not fields["plants"]:
        raise KprofInputError("--plant", "needs at least one delay")
    request = RunRequest(workload=workload, design="endpoints", argv=sys.argv[1:], **fields)
    _fail_if_incomplete(_execute_and_report(_start(request, out), fmt, output=output, quiet=quiet))


@command("attribute", epilog=examples("attribute"))
@one_line_errors
@with_options(ATTRIBUTE, helps={"design": "Legs to run: all, add-one, leave-one-out, factorial or endpoints."})
def attribute_command(
    subject: Annotated[
        str,
        typer.Argument(
            metavar="TARGET",
            help="A run folder, or a workload to run first (bundled name or .py).",
            autocompletion=completion.workloads,
        ),
    ],
    *,
    threshold: Annotated[
        float | None, typer.Option(help="Practical threshold in percent (default: the run's own).")
    ] = None,
    between_runs: BetweenRunsOption = None,
    out: Annotated[Path | None, typer.Option(help="Run folder to write when running.")] = None,
    fmt: Annotated[
        AttributeFormat, typer.Option("--format", help="table, md, json, csv or html (with plots).")
    ] = AttributeFormat.table,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the result to this file, in the format its suffix names (.md, .json, .csv, .html), and "
            "say so in one line; the terminal shows the result too only when --format is given. A file inside "
            "a run or saved-trace folder is refused.",
        ),
    ] = None,
    quiet: QuietOption = False,
    **options: Any,
) -> None:
    """Per-lever effects: add-one, leave-one-out, exact Shapley, interactions, sweeps; all with intervals."""
    from kprof.commands.target import stored_run
    from kprof.engine.options import RunRequest

    _output_kind(output, HTML_TOO)  # before a workload is run for it
    if between_runs is not None:
        defaults.check_between_runs(between_runs)
    root = stored_run(subject)
    if root is None:
        request = RunRequest(
            workload=subject,
            threshold_pct=threshold if threshold is not None else defaults.THRESHOLD_PCT,
            between_runs_pct=between_runs if between_runs is not None else defaults.BETWEEN_RUNS_PCT,
            argv=sys.argv[1:],
            **request_fields(options),
        )
        folder = _start(request, out)
        ran = _execute_and_report(folder, TableFormat.table, show_report=fmt.value == "table", quiet=quiet)
        root = folder.root
    else:
        ran = None  # attributing a stored folder reads it; its report names what it lacks
    from kprof.commands.analyse import attribute
    from kprof.report.attribution_report import attribution_document, render_html

    result = attribute(root, threshold, between_runs)
    doc = attribution_document(result)
    if output is not None:
        from kprof.report.table import render

        _write_output(output, lambda kind: render_html(result) if kind == "html" else render(doc, kind), HTML_TOO)
        if not _format_given():
            return _fail_if_incomplete(ran)
    if fmt.value == "html":
        sys.stdout.write(render_html(result))
    else:
        _write(doc, fmt)
    _fail_if_incomplete(ran)


@command("compare", epilog=examples("compare"))
@one_line_errors
def compare_command(
    a: Annotated[
        Path,
        typer.Argument(
            help="A: run folder, folder of fresh run folders, trace file, folder of repeated traces, or parquet."
        ),
    ],
    b: Annotated[Path, typer.Argument(help="B: the same kind as A.")],
    threshold: Annotated[
        float, typer.Option(help="Practical threshold in percent for verdicts.")
    ] = defaults.THRESHOLD_PCT,
    steps: Annotated[str | None, typer.Option(help="Step regex for traces (default ProfilerStep#N).")] = None,
    fail_on: Annotated[
        str | None,
        typer.Option(
            "--fail-on",
            help="Exit 1 when a row breaks this: 'slower>2%' (a SLOWER estimate beyond 2%), "
            "'credibly-slower>2%' (its whole 95% interval beyond 2%) or 'point-slower>2%' (the estimate alone, "
            "verdict or not); 'faster' likewise. Exit 3 when the first two cannot judge a row (no verdict, "
            "no interval) that may break them: a gate that cannot decide does not pass.",
        ),
    ] = None,
    control: Annotated[
        str | None,
        typer.Option(
            help="Runs: a leg the change does not touch, timed in both; its shift between the runs (a slower "
            "machine, other clocks) is shown and taken out of every other leg."
        ),
    ] = None,
    between_runs: Annotated[
        float,
        typer.Option(
            "--between-runs",
            help="One run folder a side: the SD (percent) of a leg's effect between fresh runs, measured before "
            "(compare prints it for folders of fresh runs), folded into every interval.",
        ),
    ] = defaults.BETWEEN_RUNS_PCT,
    top: Annotated[int, typer.Option(help="Rows per table in table/md output (0 = all).", min=0)] = 30,
    fmt: Annotated[TableFormat, typer.Option("--format", help="table, md, json or csv.")] = TableFormat.table,
    output: OutputOption = None,
    quiet: QuietOption = False,  # nothing but the result here either: taken so that every command takes it
    hide_same: HideSameOption = False,
    sort: SortOption = SortOrder.run,
) -> None:
    """A against B per kernel (µs/call, calls), per step (GPU busy µs) and per leg, with verdicts when both sides
    have repetitions."""
    from kprof.commands.compare import compare, gate, parse_rule
    from kprof.report.compare_report import compare_document
    from kprof.report.effects import View

    _output_kind(output)  # what the arguments alone decide is said before any trace is read
    defaults.check_threshold(threshold)
    defaults.check_between_runs(between_runs)
    if fail_on:
        parse_rule(fail_on)
    result = compare(a, b, threshold, steps, control, between_runs)
    judged = gate(result, fail_on) if fail_on else None
    _write(compare_document(result, top or None, View(hide_same, sort.value)), fmt, output)
    if judged is not None and judged.broken:
        typer.echo(f"kprof: --fail-on {fail_on}: " + "; ".join(judged.broken), err=True)
        raise typer.Exit(GATE_BROKEN)
    if judged is not None and judged.undecided:
        typer.echo(f"kprof: --fail-on {fail_on} cannot decide: " + "; ".join(judged.undecided), err=True)
        raise typer.Exit(GATE_UNDECIDED)


@command(epilog=examples("report"))
@one_line_errors
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run folder written by kprof run.")],
    fmt: Annotated[
        TableFormat, typer.Option("--format", help="table, md (for a PR), json or csv.")
    ] = TableFormat.table,
    output: OutputOption = None,
    quiet: QuietOption = False,  # nothing but the result here either: taken so that every command takes it
    threshold: Annotated[
        float | None, typer.Option(help="Practical threshold in percent (default: the run's).")
    ] = None,
    between_runs: BetweenRunsOption = None,
    hide_same: HideSameOption = False,
    sort: SortOption = SortOrder.run,
) -> None:
    """Render a stored run (or bisect) again."""
    from kprof.bisect_model import Bisect
    from kprof.commands.analyse import analyse_run
    from kprof.report.effects import View
    from kprof.report.run_report import run_document
    from kprof.store.layout import BISECT_FILE

    _output_kind(output)
    if threshold is not None:
        defaults.check_threshold(threshold)
    if between_runs is not None:
        defaults.check_between_runs(between_runs)
    if (run_dir / BISECT_FILE).is_file():
        from kprof.report.bisect_report import bisect_document

        _write(bisect_document(Bisect.load(run_dir)), fmt, output)
        return
    _write(run_document(analyse_run(run_dir, threshold, between_runs), View(hide_same, sort.value)), fmt, output)


@command(epilog=examples("cache"))
@one_line_errors
def cache(
    clean: Annotated[bool, typer.Option("--clean", help="Remove every cached revision tree.")] = False,
    quiet: QuietOption = False,  # nothing but the result here either: taken so that every command takes it
) -> None:
    """Where revision trees are cached (KPROF_CACHE, default ~/.cache/kprof), and cleaning them."""
    from kprof.cache import cache_root
    from kprof.revisions.trees import clean as clean_trees

    if clean:
        removed = clean_trees()
        typer.echo(f"removed {len(removed)} cached trees from {cache_root() / 'trees'}")
        return
    trees = cache_root() / "trees"
    count = sum(1 for _ in trees.iterdir()) if trees.is_dir() else 0
    typer.echo(f"{count} cached revision trees in {trees} (kprof cache --clean removes them)")


if __name__ == "__main__":
    app()
