"""How kprof's command line reads: help as a person writes it (each option's metavar the value a
user types, ``--rounds N``, not the Python type typer shows, ``<int>``; arguments by their
metavar alone, ``FILE...``, not ``files... <list[Path]>``), an Examples block closing every help
page, and usage errors in kprof's one style."""

from __future__ import annotations

import sys
from contextvars import ContextVar
from typing import Any

import typer
import typer.core as typer_core
from typer.core import TyperCommand, TyperGroup


def _usage_problem(error: Any, click: Any) -> str:
    """A usage error in kprof's words: a bad value as ``--format: 'x' is not one of …`` or
    ``--top: must be a valid integer`` (typer's validator said "Invalid value for '--format': Value
    error, 'x' is not one of …" and "Input should be a valid integer, unable to parse string …")."""
    param = getattr(error, "param", None)
    exceptions = click.exceptions
    if not isinstance(error, exceptions.BadParameter) or isinstance(error, exceptions.MissingParameter) or not param:
        return str(error.format_message())
    name = next((o for o in param.opts if o.startswith("--")), None) or param.metavar or param.name
    problem = str(error.message).removeprefix("Value error, ").replace("Input should be", "must be")
    return f"{name}: {problem.split(', unable to parse')[0]}"


class OneErrorStyle(TyperGroup):
    """Usage errors (an unknown option, a missing argument, a bad value) in kprof's one style —
    ``kprof: error: …`` and exit 2, as every other bad input — instead of click's usage block."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        click = getattr(typer_core, "_click", None) or typer_core.click  # vendored by typer ≥ 0.20
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # `kprof` alone: the help, as asked
                typer.echo(e.format_message(), err=True)
                sys.exit(e.exit_code)
            command = e.ctx.command_path if e.ctx is not None else "kprof"
            typer.echo(f"kprof: error: {_usage_problem(e, click)} ('{command} -h' for help)", err=True)
            sys.exit(e.exit_code)
        except click.exceptions.ClickException as e:
            typer.echo(f"kprof: error: {e.format_message()}", err=True)
            sys.exit(e.exit_code)
        except typer.Abort:
            typer.echo("kprof: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


EXAMPLES = {
    "trace": [
        "kprof trace traces/llama_eager_decode.pt.trace.json.gz",
        "kprof trace run.pt.trace.json.gz --format md -o kernels.md",
        "kprof trace report.sqlite --steps '^step (\\d+)$'",
        "kprof trace 'ranks/*.json.gz' --jobs 4 --save saved/",
    ],
    "sql": [
        'kprof sql "SELECT name, sum(dur_ns) FROM kernel_events GROUP BY 1" saved/',
        'kprof sql "SELECT leg, count(*) FROM samples GROUP BY leg" runs/base',
    ],
    "kernels": ["kprof kernels", "kprof kernels --format json"],
    "run": [
        "kprof run paged_decode --device cpu --case b2 --rounds 6 --samples 1",
        "kprof run mla_decode --preset pr --design endpoints",
        "kprof run bench.py --revisions main..my-branch --paths pkg/ops",
        "kprof run --rev HEAD --rev WORKTREE --collector torch -- python bench.py",
    ],
    "calibrate": ["kprof calibrate copy --case 8MiB --plant 0.5,1,2"],
    "attribute": [
        "kprof attribute docs/runs/h200-2026-11-30-s3/gdn_pr --format md",
        "kprof attribute gdn_decode --preset pr --design leave-one-out -o levers.html",
    ],
    "compare": [
        "kprof compare runs/base runs/head",
        "kprof compare base.pt.trace.json.gz head.pt.trace.json.gz --format md",
        "kprof compare runs/base runs/head --control plain",
        "kprof compare runs/base runs/head --fail-on 'credibly-slower>2%'",
    ],
    "report": [
        "kprof report docs/runs/h200-2026-12-02-s17/mla_end_1",
        "kprof report runs/mine --hide-same --sort effect -o mine.md",
    ],
    "cache": ["kprof cache", "kprof cache --clean"],
}


def examples(command: str) -> str:
    """A help page's closing Examples block; ``\\b`` keeps click from rewrapping its lines."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[command])


# What a user types after each option, as man pages and argparse write it.
METAVARS = {
    "--preset": "NAME",
    "--case": "NAME",
    "--design": "DESIGN",
    "--target": "FEATURE",
    "--sweep": "PARAM=V1,V2,…",
    "--plant": "PCT,PCT,…",
    "--rounds": "N",
    "--samples": "N",
    "--buffer-sets": "N",
    "--buffers": "shared|per-leg",
    "--processes": "N",
    "--aa-copies": "N",
    "--timer": "auto|events|kernel-time",
    "--captures": "per-round|once|none",
    "--gpus": "all|N|0,1,…",
    "--ray": "auto|ADDRESS",
    "--collector": "events|torch|nsys|rocprofv3",
    "--leg": "NAME[:VAR=VALUE,…]",
    "--seed": "N",
    "--device": "cuda|cpu",
    "--dtype": "DTYPE",
    "--threshold": "PCT",
    "--between-runs": "PCT",
    "--revisions": "A..B",
    "--rev": "REV",
    "--repo": "DIR",
    "--setup": "COMMAND",
    "--paths": "PATH",
    "--steps": "REGEX",
    "--metric": "REGEX",
    "--kernels": "REGEX",
    "--out": "DIR",
    "--output": "FILE",
    "--save": "DIR",
    "--top": "N",
    "--jobs": "N",
    "--fail-on": "RULE",
    "--control": "LEG",
}


ARGUMENTS = {"files": "FILE"}  # an argument's metavar where its name in capitals does not read right


INVOKED: ContextVar[Any] = ContextVar("INVOKED", default=None)  # the click context of the command running


class KprofCommand(TyperCommand):
    """A command whose help reads as a person writes it (METAVARS; an argument by its metavar), and
    whose context the command can ask for (typer runs the callback outside click's context stack)."""

    def invoke(self, ctx: Any) -> Any:
        token = INVOKED.set(ctx)
        try:
            return super().invoke(ctx)
        finally:
            INVOKED.reset(token)

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:
            long = next((o for o in getattr(param, "opts", ()) if o.startswith("--")), None)
            if param.param_type_name == "option" and long in METAVARS and param.metavar is None:
                param.metavar = METAVARS[long]
            elif param.param_type_name == "argument" and param.metavar is None:
                param.metavar = ARGUMENTS.get(param.name, param.name.upper())
        return params

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """``[OPTIONS] FILE...``, as click writes it (typer writes ``{FILE}...``)."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar + ("..." if param.nargs != 1 else "")
                pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args, opts = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":  # typer adds the Python type: 'files... <list[Path]>'
                args.append((param.metavar + ("..." if param.nargs != 1 else ""), record[1]))
            else:
                opts.append(record)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def given_on_command_line(name: str) -> bool:
    """Whether the running command's parameter ``name`` was typed (not its default). By the
    source's name: typer carries its own copy of click, whose enum is not click's."""
    ctx = INVOKED.get()
    source = ctx.get_parameter_source(name) if ctx is not None else None
    return source is not None and source.name != "DEFAULT"
