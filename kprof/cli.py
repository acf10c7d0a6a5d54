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

SweepOption = Annotated[str | None, typer.Option(help="Force a parameter over values: PARAM=v1,v2,…")]
SweepBaselineOption = Annotated[
    bool,
    typer.Option(
        "--sweep-baseline",
        help="Force each sweep value on the baseline too: the target's effect at every value (a mechanism sweep).",
    ),
]

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


class RunFormat(str, Enum):
    table = "table"
    md = "md"
    json = "json"


def _render_run(report, fmt: RunFormat) -> None:
    from kprof.report import run_report as rep

    if fmt is RunFormat.json:
        payload = rep.to_json(report.effects, report.summaries, report.meta)
        payload["kernels"] = (
            json.loads(report.kernel_effects.to_json(orient="records")) if len(report.kernel_effects) else []
        )
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    elif fmt is RunFormat.md:
        sys.stdout.write(rep.render_markdown(report.effects, report.summaries, report.meta))
        sys.stdout.write(rep.render_kernel_breakdown(report.kernel_effects, markdown=True))
    else:
        rep.render_terminal(report.effects, report.summaries, report.meta, Console())
        Console().print(rep.render_kernel_breakdown(report.kernel_effects, markdown=False))


@app.command()
def kernels() -> None:
    """List the bundled workloads: features (levers), presets and sweepable parameters."""
    from rich.table import Table

    from kprof.workload import bundled_names, load_workload

    console = Console()
    for name in bundled_names():
        w = load_workload(name)
        console.rule(f"[bold]{name}[/bold] · {w.description}")
        t = Table(show_header=True)
        t.add_column("feature")
        t.add_column("exactness")
        t.add_column("what it switches")
        for f in w.features:
            rule = {"bitwise": "bitwise", "ulp": f"≤ {f.ulps} ulp", "tolerance": f"rel ≤ {f.rtol:g}"}[f.exactness]
            t.add_row(f.name, rule, f.doc)
        if w.features:
            console.print(t)
        else:
            console.print("  no features: a reference workload")
        for preset, cases in w.presets.items():
            console.print(f"  preset [bold]{preset}[/bold]: " + ", ".join(c.name for c in cases))
        for s in w.sweeps:
            console.print(f"  sweep [bold]{s.name}[/bold]: {s.doc}")


def _execute_and_report(store, fmt: RunFormat, calibration: bool = False, quiet: bool = False) -> None:
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from kprof.commands.report import analyse_run
    from kprof.commands.run import execute

    meta = store.read_meta()
    err = Console(stderr=True)
    total = len(meta["cases"]) * (meta["rounds"] + 1)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeRemainingColumn(),
        console=err,
        transient=fmt is not RunFormat.table,
    ) as progress:
        task = progress.add_task(f"{meta['workload_name']} rounds", total=total)

        def on_event(event: dict) -> None:
            kind = event.get("event")
            if kind == "round":
                progress.advance(task)
                progress.update(task, description=f"{event['case']} round {event['round']}/{event['rounds']}")
            elif kind in ("leg_failed", "leg_crashed", "race", "case_failed"):
                progress.console.print(f"[yellow]{kind}[/yellow]: {event}")

        execute(store, on_event)
    Console(stderr=True).print(f"run stored in {store.root}")
    if quiet:
        return
    report = analyse_run(store.root)
    _render_run(report, fmt)
    if calibration:
        _render_calibration(report, fmt)


def _render_calibration(report, fmt: RunFormat) -> None:
    from kprof.report import run_report as rep

    if fmt is RunFormat.json:
        return  # the JSON of the run already holds every leg; calibration rows follow in report --format json
    text = rep.render_calibration(report.calibration, report.sign_rule, report.effects, fmt is RunFormat.md)
    if fmt is RunFormat.md:
        sys.stdout.write(text)
    else:
        Console().print(text)


def _start(out: Path | None, resume: bool, request) -> object:
    import time as _time

    from kprof.commands.run import create_run
    from kprof.run_store import RunStore

    if resume:
        if out is None:
            raise KprofInputError("--resume", "needs --out RUN_DIR")
        store = RunStore(out)
        store.read_meta()
        return store
    name = Path(request.workload).stem
    out = out or Path("runs") / f"{name}-{_time.strftime('%Y%m%d-%H%M%S')}"
    return create_run(out, request)


def _floats(text: str | None, option: str) -> list[float]:
    if not text:
        return []
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise KprofInputError(option, f"expected comma-separated numbers, got {text!r}") from None


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    ctx: typer.Context,
    workload: Annotated[
        str | None,
        typer.Argument(
            help="Bundled workload name or path to a .py file defining WORKLOAD (omit for a whole program after --)."
        ),
    ] = None,
    preset: Annotated[str | None, typer.Option(help="Case preset (default: smoke on CPU, pr on a GPU).")] = None,
    case: Annotated[str | None, typer.Option(help="Only cases whose name contains this text.")] = None,
    design: Annotated[str, typer.Option(help="endpoints, add-one, leave-one-out, factorial or all.")] = "all",
    target: Annotated[list[str] | None, typer.Option(help="Features of the target leg (default: all).")] = None,
    sweep: SweepOption = None,
    sweep_baseline: SweepBaselineOption = False,
    rounds: Annotated[int, typer.Option(help="Timed rounds (plus one burn-in round).")] = 16,
    samples: Annotated[
        int | None, typer.Option(help="Cold samples per leg per round (default: from the kernel's length).")
    ] = None,
    buffer_sets: Annotated[int, typer.Option(help="Input/output buffer sets, rotated across rounds.")] = 4,
    buffers: Annotated[
        str,
        typer.Option(
            help="shared: all legs of a round share a buffer set (kprof); per-leg: "
            "each leg owns its buffers (the PR method, for comparison)."
        ),
    ] = "shared",
    aa_copies: Annotated[int, typer.Option(help="Independent A/A copies of the baseline.", min=1)] = 1,
    torch_leg: Annotated[
        bool,
        typer.Option(
            "--torch-leg/--no-torch-leg", help="Also time the workload's plain-PyTorch implementation, when it has one."
        ),
    ] = True,
    collector: Annotated[
        str,
        typer.Option(
            help="events (default), torch (adds per-kernel times per leg), or, for whole programs, torch or rocprofv3."
        ),
    ] = "events",
    leg: Annotated[
        list[str] | None,
        typer.Option(help="Whole-program leg NAME[:VAR=VALUE,…]; the first is the baseline. The program follows --."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for inputs and leg order.")] = 0,
    device: Annotated[
        str | None, typer.Option(help="cuda (default when present) or cpu (Triton interpreter, host clock).")
    ] = None,
    dtype: Annotated[str | None, typer.Option(help="Data type (default: bfloat16 on GPU, float16 on CPU).")] = None,
    threshold: Annotated[float, typer.Option(help="Practical threshold in percent for verdicts.")] = 0.5,
    out: Annotated[Path | None, typer.Option(help="Run folder (default: runs/NAME-TIME).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run in --out.")] = False,
    fmt: Annotated[RunFormat, typer.Option("--format", help="Summary format.")] = RunFormat.table,
) -> None:
    """Run the legs of a workload (correctness gate, interleaved timed rounds) or of a whole program
    (one process per leg per round under a collector); store every sample."""
    from kprof.commands.run import RunRequest

    try:
        program = list(ctx.args)
        if workload is not None and (program or leg):  # `kprof run --leg … -- CMD`: the whole command is program
            program, workload = [workload, *program], None
        if program or leg:
            import time as _time

            from kprof.commands.program import create_program_run, parse_leg

            if resume:
                from kprof.run_store import RunStore

                store = RunStore(out) if out else None
                if store is None:
                    raise KprofInputError("--resume", "needs --out RUN_DIR")
            else:
                legs = [parse_leg(spec) for spec in (leg or [])]
                name = Path(program[-1]).stem if program else "program"
                out = out or Path("runs") / f"{name}-{_time.strftime('%Y%m%d-%H%M%S')}"
                store = create_program_run(out, legs, program, collector, rounds, seed, threshold, sys.argv[1:])
            _execute_and_report(store, fmt)
            return
        if workload is None and not resume:
            raise KprofInputError("WORKLOAD", "name a workload (kprof kernels lists them) or give a program after --")
        request = RunRequest(
            workload or "",
            preset,
            case,
            design,
            target,
            sweep,
            rounds,
            samples,
            buffer_sets,
            buffers,
            seed,
            device,
            dtype,
            threshold,
            [],
            aa_copies,
            sys.argv[1:],
            collector,
            torch_leg,
            sweep_baseline,
        )
        _execute_and_report(_start(out, resume, request), fmt)
    except KprofInputError as e:
        _fail(str(e))


@app.command()
def calibrate(
    workload: Annotated[str, typer.Argument(help="Bundled workload name or path to a .py file.")] = "paged_decode",
    preset: Annotated[str | None, typer.Option(help="Case preset (default: smoke on CPU, pr on a GPU).")] = None,
    case: Annotated[str | None, typer.Option(help="Only cases whose name contains this text.")] = None,
    target: Annotated[list[str] | None, typer.Option(help="Features of the leg to plant into (default: all).")] = None,
    plant: Annotated[str, typer.Option(help="Planted delays, percent of the leg's time.")] = "0.5,1,2",
    aa_copies: Annotated[int, typer.Option(help="Independent A/A copies.", min=1)] = 3,
    rounds: Annotated[int, typer.Option(help="Timed rounds.")] = 16,
    buffers: Annotated[str, typer.Option(help="shared (kprof) or per-leg (the PR method).")] = "shared",
    samples: Annotated[int | None, typer.Option(help="Cold samples per leg per round.")] = None,
    device: Annotated[str | None, typer.Option(help="cuda or cpu.")] = None,
    dtype: Annotated[str | None, typer.Option(help="Data type.")] = None,
    seed: Annotated[int, typer.Option(help="Seed.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Run folder.")] = None,
    fmt: Annotated[RunFormat, typer.Option("--format", help="table, md or json.")] = RunFormat.table,
) -> None:
    """Plant delays of known length and report planted vs recovered effects and the A/A false positives."""
    from kprof.commands.run import RunRequest

    try:
        plants = _floats(plant, "--plant")
        if not plants:
            raise KprofInputError("--plant", "needs at least one delay")
        request = RunRequest(
            workload,
            preset,
            case,
            "endpoints",
            target,
            None,
            rounds,
            samples,
            4,
            buffers,
            seed,
            device,
            dtype,
            0.5,
            plants,
            aa_copies,
            sys.argv[1:],
        )
        _execute_and_report(_start(out, False, request), fmt, calibration=True)
    except KprofInputError as e:
        _fail(str(e))


class AttributeFormat(str, Enum):
    table = "table"
    md = "md"
    json = "json"
    html = "html"


@app.command("attribute")
def attribute_command(
    target: Annotated[str, typer.Argument(help="A run folder, or a workload to run first (bundled name or .py).")],
    preset: Annotated[str | None, typer.Option(help="Preset when running a workload.")] = None,
    case: Annotated[str | None, typer.Option(help="Only cases whose name contains this text.")] = None,
    design: Annotated[str, typer.Option(help="Legs to run: all, add-one, leave-one-out, factorial.")] = "all",
    target_features: Annotated[
        list[str] | None, typer.Option("--target", help="Features of the target leg when running (default: all).")
    ] = None,
    sweep: SweepOption = None,
    sweep_baseline: SweepBaselineOption = False,
    rounds: Annotated[int, typer.Option(help="Timed rounds when running.")] = 16,
    device: Annotated[str | None, typer.Option(help="cuda or cpu when running.")] = None,
    threshold: Annotated[float | None, typer.Option(help="Practical threshold in percent.")] = None,
    out: Annotated[Path | None, typer.Option(help="Run folder to write when running.")] = None,
    fmt: Annotated[
        AttributeFormat, typer.Option("--format", help="table, md, json or html (with plots).")
    ] = AttributeFormat.table,
) -> None:
    """Per-lever effects: add-one, leave-one-out, exact Shapley, interactions, sweeps; all with intervals."""
    from kprof.commands.attribute import attribute
    from kprof.report import attribution_report as rep
    from kprof.report import run_report as run_rep

    try:
        root = Path(target)
        if not (root / "meta.json").is_file():
            from kprof.commands.run import RunRequest

            request = RunRequest(
                target,
                preset=preset,
                case_filter=case,
                design=design,
                target=target_features,
                sweep=sweep,
                rounds=rounds,
                device=device,
                threshold_pct=threshold if threshold is not None else 0.5,
                argv=sys.argv[1:],
                sweep_baseline=sweep_baseline,
            )
            store = _start(out, False, request)
            _execute_and_report(
                store,
                RunFormat.json if fmt is not AttributeFormat.table else RunFormat.table,
                quiet=fmt is not AttributeFormat.table,
            )
            root = store.root
        result = attribute(root, threshold)
        kernel_effects = result.run.kernel_effects
        if fmt is AttributeFormat.json:
            payload = rep.to_json(result.levers, result.sweep, result.run.summaries, result.run.meta)
            payload["kernels"] = json.loads(kernel_effects.to_json(orient="records")) if len(kernel_effects) else []
            sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        elif fmt is AttributeFormat.md:
            sys.stdout.write(rep.render_markdown(result.levers, result.sweep, result.run.summaries, result.run.meta))
            sys.stdout.write(run_rep.render_kernel_breakdown(kernel_effects, markdown=True))
        elif fmt is AttributeFormat.html:
            sys.stdout.write(
                rep.render_html(result.levers, result.sweep, result.per_round, result.run.summaries, result.run.meta)
            )
        else:
            rep.render_terminal(result.levers, result.sweep, result.run.summaries, result.run.meta, Console())
            Console().print(run_rep.render_kernel_breakdown(kernel_effects, markdown=False))
    except KprofInputError as e:
        _fail(str(e))


class CompareFormat(str, Enum):
    table = "table"
    md = "md"
    json = "json"
    csv = "csv"


@app.command("compare")
def compare_command(
    a: Annotated[Path, typer.Argument(help="A: run folder, trace file, folder of repeated traces, or parquet.")],
    b: Annotated[Path, typer.Argument(help="B: the same kind as A.")],
    threshold: Annotated[float, typer.Option(help="Practical threshold in percent for verdicts.")] = 0.5,
    steps: Annotated[str | None, typer.Option(help="Step regex for traces (default ProfilerStep#N).")] = None,
    fail_on: Annotated[
        str | None, typer.Option("--fail-on", help="Exit 1 when a verdict breaks this, e.g. 'slower>2%'.")
    ] = None,
    top: Annotated[int, typer.Option(help="Rows per table in table/md output (0 = all).", min=0)] = 30,
    fmt: Annotated[CompareFormat, typer.Option("--format", help="table, md, json or csv.")] = CompareFormat.table,
) -> None:
    """A against B per kernel (µs/call, calls), per step (GPU busy µs) and per leg, with verdicts when both sides
    have repetitions."""
    from kprof.commands.compare import compare, failures
    from kprof.report import compare_report as rep

    try:
        result = compare(a, b, threshold, steps)
        broken = failures(result, fail_on) if fail_on else []
    except KprofInputError as e:
        _fail(str(e))
        return
    if fmt is CompareFormat.json:
        sys.stdout.write(json.dumps(rep.to_json(result), indent=2) + "\n")
    elif fmt is CompareFormat.csv:
        sys.stdout.write(rep.render_csv(result))
    elif fmt is CompareFormat.md:
        sys.stdout.write(rep.render_markdown(result, top or None))
    else:
        rep.render_terminal(result, Console(), top or None)
    if broken:
        typer.echo(f"kprof: --fail-on {fail_on}: " + "; ".join(broken), err=True)
        raise typer.Exit(1)


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run folder written by kprof run.")],
    fmt: Annotated[RunFormat, typer.Option("--format", help="table, md (for a PR) or json.")] = RunFormat.table,
    threshold: Annotated[
        float | None, typer.Option(help="Practical threshold in percent (default: the run's).")
    ] = None,
) -> None:
    """Render a stored run again."""
    from kprof.commands.report import analyse_run

    try:
        result = analyse_run(run_dir, threshold)
    except KprofInputError as e:
        _fail(str(e))
        return
    _render_run(result, fmt)
    if result.meta.get("design") == "calibration":
        _render_calibration(result, fmt)


if __name__ == "__main__":
    app()
