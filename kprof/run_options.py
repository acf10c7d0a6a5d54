"""The options of `kprof run`, `calibrate` and `attribute WORKLOAD`, each declared once.

An option's name is the field of the request it fills (``kprof.engine.options.RunRequest``, or
``kprof.engine.program.ProgramRequest`` for whole programs), so a command turns what it was given
into its request without copying option by option. :func:`with_options` adds a list of them to a
command's signature, where typer reads them; the command receives them as ``**options``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from copy import copy
from dataclasses import dataclass
from functools import wraps
from typing import Annotated, Any

import typer

from kprof import completion, defaults
from kprof.collectors.in_run import IN_RUN
from kprof.errors import KprofInputError

CASE_HELP = "The case of this name; else every case whose name contains this text."


@dataclass(frozen=True)
class Option:
    """One option: its Python type, its default and what typer shows."""

    type: Any
    default: Any
    info: Any  # typer.Option(...)


OPTIONS: dict[str, Option] = {
    "preset": Option(
        str | None,
        None,
        typer.Option(help="Case preset (default: smoke on CPU, pr on a GPU).", autocompletion=completion.presets),
    ),
    "case_filter": Option(str | None, None, typer.Option("--case", help=CASE_HELP, autocompletion=completion.cases)),
    "design": Option(
        str | None,
        None,
        typer.Option(
            help="endpoints, add-one, leave-one-out, factorial or all (the default for a workload's features); "
            "with --revisions also sequence (the default: each commit against its parent) and bisect.",
            autocompletion=completion.designs,
        ),
    ),
    "target": Option(list[str] | None, None, typer.Option(help="Features of the target leg (default: all).")),
    "sweep": Option(str | None, None, typer.Option(help="Force a parameter over values: PARAM=v1,v2,…")),
    "sweep_baseline": Option(
        bool,
        False,
        typer.Option(
            "--sweep-baseline",
            help="Force each sweep value on the baseline too: the target's effect at every value (a mechanism sweep).",
        ),
    ),
    "plants": Option(
        str, "0.5,1,2", typer.Option("--plant", help="Planted delays, percent of the leg's time (comma-separated).")
    ),
    "rounds": Option(int, defaults.ROUNDS, typer.Option(help="Timed rounds (plus one burn-in round).")),
    "samples": Option(
        int | None, None, typer.Option(help="Cold samples per leg per round (default: from the kernel's length).")
    ),
    "buffer_sets": Option(
        int, defaults.BUFFER_SETS, typer.Option(help="Input/output buffer sets, rotated across rounds.", min=1)
    ),
    "buffers": Option(
        str,
        defaults.BUFFERS,
        typer.Option(
            help="shared: all legs of a round share a buffer set (kprof); per-leg: each leg owns its buffers (the "
            "PR method, for comparison)."
        ),
    ),
    "processes": Option(
        int | None,
        None,
        typer.Option(
            help="Worker processes per case, one after another, each with its share of the rounds and buffer "
            "sets, so what one process holds is in the interval (default: 2 on a GPU, else 1)."
        ),
    ),
    "aa_copies": Option(int, defaults.AA_COPIES, typer.Option(help="Independent A/A copies of the baseline.", min=1)),
    "timer_mode": Option(
        str,
        defaults.TIMER_MODE,
        typer.Option(
            "--timer",
            help="GPU timer: events (CUDA events around each replay), kernel-time (CUPTI activity records: the "
            "busy time of each replay's kernels) or auto (kernel time below the size where the event "
            "overhead, measured at start, exceeds 1%).",
        ),
    ),
    "captures": Option(
        str,
        defaults.CAPTURES,
        typer.Option(
            "--captures",
            help="per-round (default): every round times graphs captured afresh, so what one capture of a graph "
            "costs on its own is noise between rounds, inside the interval; once: each leg's graphs are "
            "captured once per run (faster to set up; small kernels keep per-capture offsets); none: eager calls "
            "under events, no graph (for a launch that synchronises with the host: .item(), .cpu(); the host's "
            "launch gaps are in every time).",
        ),
    ),
    "no_graphs": Option(
        bool,
        False,
        typer.Option(
            "--no-graphs",
            help="Time eager calls under events, no CUDA graph: the same as --captures none (for public APIs "
            "that synchronise with the host).",
        ),
    ),
    "gpus": Option(
        str | None,
        None,
        typer.Option(
            help="Shard the cases (and a bisect's revisions) over this host's GPUs: all, a count, or a list like "
            "0,1. Each case runs whole on one GPU (every ratio within one GPU); on a CPU, N runs N workers at "
            "once."
        ),
    ),
    "aa_across_gpus": Option(
        bool,
        False,
        typer.Option(
            "--aa-across-gpus",
            help="With --gpus: the first case on every GPU too, and the GPU-to-GPU spread of its legs.",
        ),
    ),
    "ray": Option(
        str | None,
        None,
        typer.Option(
            help="Run each case as a Ray task needing one GPU on this cluster: auto (a running cluster) or its "
            "address; results are gathered into the run folder (pip install 'kprof[ray]')."
        ),
    ),
    "torch_leg": Option(
        bool,
        True,
        typer.Option(
            "--torch-leg/--no-torch-leg", help="Also time the workload's plain-PyTorch implementation, when it has one."
        ),
    ),
    "collector": Option(
        str | None,
        None,
        typer.Option(
            help="For a workload: "
            + "; ".join(f"{c.name}: {c.doc}" for c in IN_RUN.values())
            + ". For whole programs: torch (their default), nsys or rocprofv3."
        ),
    ),
    "legs": Option(
        list[str] | None,
        None,
        typer.Option(
            "--leg",
            help="Whole-program leg NAME[:VAR=VALUE,…]; the first is the baseline. The program follows --.",
        ),
    ),
    "seed": Option(int, defaults.SEED, typer.Option(help="Seed for inputs and leg order.")),
    "device": Option(
        str | None, None, typer.Option(help="cuda (default when present) or cpu (Triton interpreter, host clock).")
    ),
    "dtype": Option(str | None, None, typer.Option(help="Data type (default: bfloat16 on GPU, float16 on CPU).")),
    "threshold_pct": Option(
        float, defaults.THRESHOLD_PCT, typer.Option("--threshold", help="Practical threshold in percent.")
    ),
    "between_runs_pct": Option(
        float,
        defaults.BETWEEN_RUNS_PCT,
        typer.Option(
            "--between-runs",
            help="SD (percent) of a leg's effect between fresh runs, measured before (kprof compare on "
            "folders of fresh runs prints it); folded into every interval, whose rerun interval then "
            "holds a fresh run's estimate. One run cannot see it.",
        ),
    ),
    "revisions": Option(
        str | None,
        None,
        typer.Option(help="Git range A..B: each commit a lever; legs per --design, each revision in its own process."),
    ),
    "revs": Option(
        list[str] | None,
        None,
        typer.Option(
            "--rev", help="A revision as a leg (repeat; the first is the baseline; WORKTREE = uncommitted tree)."
        ),
    ),
    "repo": Option(
        str | None, None, typer.Option(help="Repository of --revisions (default: the workload file's, else here).")
    ),
    "allow_changed_outputs": Option(
        bool,
        False,
        typer.Option(help="Time revisions whose outputs differ from the first's (flagged in every report)."),
    ),
    "setup": Option(
        str | None,
        None,
        typer.Option(
            help="Revision runs: a command run once in each revision's tree before anything is timed (a build "
            "step, e.g. 'python setup.py build_ext --inplace'); cached with the tree; a tree whose setup fails "
            "is left out, said once."
        ),
    ),
    "paths": Option(
        list[str] | None,
        None,
        typer.Option(
            "--paths",
            help="With --revisions: keep only the range's commits that touch these paths (git pathspecs from the "
            "repository's root; repeat or separate by commas); the others are listed as left out.",
        ),
    ),
    "in_tree": Option(
        bool,
        False,
        typer.Option(
            "--in-tree",
            help="Revision runs: use the benchmark (workload file or script) at its path inside each revision's "
            "tree, instead of the file where you keep it.",
        ),
    ),
    "steps": Option(
        str | None,
        None,
        typer.Option(
            help="Whole programs: a regex over the trace's ranges that marks steps (default: ProfilerStep#N); with "
            "steps, GPU busy per steady step is the headline."
        ),
    ),
    "metric": Option(
        str | None,
        None,
        typer.Option(
            help="Whole programs: a regex over kernel names; those kernels' device time per step (per process "
            "without steps) becomes a case, and the case a bisect follows."
        ),
    ),
}

# Flags that stand for another option's value (the name the issue tracker and other tools use).
SHORTHANDS = {"no_graphs": ("captures", "none")}

# Which command takes which options, in the order its help lists them.
WORKLOAD_PROTOCOL = ["rounds", "samples", "buffer_sets", "buffers"]
RUN = [
    "preset", "case_filter", "design", "target", "sweep", "sweep_baseline", *WORKLOAD_PROTOCOL, "processes",
    "aa_copies", "timer_mode", "captures", "no_graphs", "gpus", "aa_across_gpus", "ray", "torch_leg", "collector",
    "legs", "seed", "device", "dtype", "threshold_pct", "between_runs_pct", "revisions", "revs", "repo",
    "allow_changed_outputs", "setup", "paths", "in_tree", "steps", "metric",
]  # fmt: skip
CALIBRATE = [
    "preset", "case_filter", "target", "plants", "aa_copies", *WORKLOAD_PROTOCOL, "device", "timer_mode",
    "captures", "no_graphs", "dtype", "seed",
]  # fmt: skip
ATTRIBUTE = ["preset", "case_filter", "design", "target", "sweep", "sweep_baseline", *WORKLOAD_PROTOCOL, "device"]


def with_options(
    names: list[str], helps: dict[str, str] | None = None, **defaults: Any
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Add the options ``names`` to a command (with ``defaults`` and ``helps`` where this command
    differs), after its arguments and before its own options; the command takes them as ``**options``."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.kind != p.VAR_KEYWORD]
        added = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=defaults.get(name, OPTIONS[name].default),
                annotation=Annotated[OPTIONS[name].type, _helped(OPTIONS[name].info, (helps or {}).get(name))],
            )
            for name in names
        ]
        first_keyword = next((i for i, p in enumerate(own) if p.kind == p.KEYWORD_ONLY), len(own))
        params = own[:first_keyword] + added + own[first_keyword:]

        @wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            command(*args, **kwargs)

        wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper

    return decorate


def _helped(info: Any, help_text: str | None) -> Any:
    if help_text is None:
        return info
    changed = copy(info)
    changed.help = help_text
    return changed


def request_fields(options: dict[str, Any]) -> dict[str, Any]:
    """The options as a request's fields: lists that were not given are empty, ``--paths`` split at
    commas, ``--setup`` text."""
    fields = dict(options)
    for name in ("revs", "legs"):
        if name in fields:
            fields[name] = fields[name] or []
    if "paths" in fields:
        fields["paths"] = [p.strip() for text in fields["paths"] or [] for p in text.split(",") if p.strip()]
    if "setup" in fields:
        fields["setup"] = fields["setup"] or ""
    for shorthand, (name, value) in SHORTHANDS.items():
        if fields.pop(shorthand, False):
            if fields.get(name, value) not in (value, OPTIONS[name].default):
                raise KprofInputError(f"--{shorthand.replace('_', '-')}", f"contradicts --{name} {fields[name]}")
            fields[name] = value
    if fields.get("collector") is None:  # a workload's default (events) and a program's (torch) differ
        fields.pop("collector", None)
    return fields
