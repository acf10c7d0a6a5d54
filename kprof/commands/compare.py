"""`kprof compare A B`: load each side (a run folder, a trace file, a folder of repeated traces, or
a ``kernel_events.parquet`` written by ``kprof trace --save``) and compare them (kprof.analysis.compare)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kprof import defaults
from kprof.analysis.compare import Comparison, FailRule, RuleResult, Side, compare_sides, judge, parse_gate
from kprof.analysis.run_effects import leg_effects, round_statistics
from kprof.analysis.trace_tables import step_replicates, trace_tables
from kprof.commands.analyse import reported_samples
from kprof.errors import KprofInputError
from kprof.ingest.assign_ranges import compile_step_pattern
from kprof.ingest.load import load_trace
from kprof.store.layout import is_run_folder
from kprof.store.run_folder import RunFolder
from kprof.store.trace_folder import load_frame, read_dataset
from kprof.trace import Trace, range_table


def _saved_events(path: Path) -> Path | None:
    """The event table of a `kprof trace --save` folder: a dataset partitioned by rank (or, from
    kprof 0.1, one ``kernel_events.parquet``)."""
    for candidate in (path / "kernel_events", path / "kernel_events.parquet"):
        if candidate.exists():
            return candidate
    return None


EVENT_COLUMNS = ("name", "kind", "device", "start_ns", "end_ns", "dur_ns")  # what the tables are made of


def _trace_files(path: Path) -> list[Path]:
    if path.is_dir():
        if (saved := _saved_events(path)) is not None:
            return [saved]
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        if not files:
            raise KprofInputError(path, "holds no trace files")
        return files
    return [path]


def _is_run(path: Path) -> bool:
    """A `kprof run` folder (a `kprof trace --save` folder has a meta.json too, without legs)."""
    return is_run_folder(path) and _saved_events(path) is None


def _run_rounds(path: Path, with_effects: bool = False) -> tuple[pd.DataFrame, str, pd.DataFrame]:
    """A run's per-round times, what timed them and (``with_effects``) its leg table, each leg
    against its baseline with the run's own interval."""
    folder = RunFolder(path)
    run = folder.read_run()
    samples = reported_samples(folder, run, folder.read_statuses())
    effects = leg_effects(samples, run.legs, run.threshold_pct)[0] if with_effects else pd.DataFrame()
    return round_statistics(samples), run.timer_label, effects


def _fresh_runs(path: Path) -> list[Path]:
    """The run folders directly inside ``path`` (a side of several fresh runs), in name order."""
    if not path.is_dir() or _is_run(path) or _saved_events(path) is not None:
        return []
    return sorted(p for p in path.iterdir() if p.is_dir() and _is_run(p))


def load_side(path: Path, steps: str | None) -> Side:
    if _is_run(path):
        rounds, timer, _ = _run_rounds(path)
        return Side(str(path), "run", run_rounds=rounds, timers=[timer])
    if runs := _fresh_runs(path):  # a folder of fresh runs of one benchmark: the run is the unit
        read = [_run_rounds(p, with_effects=True) for p in runs]
        return Side(
            str(path), "runs", runs=[r[0] for r in read], timers=[r[1] for r in read], effects=[r[2] for r in read]
        )
    if not path.exists():
        raise KprofInputError(path, "no such file or folder")
    pattern = compile_step_pattern(steps)
    side = Side(str(path), "traces")
    for f in _trace_files(path):
        if f.suffix == ".parquet" or f.is_dir():
            events = read_dataset(f) if f.is_dir() else load_frame(f)
            if missing := [c for c in EVENT_COLUMNS if c not in events.columns]:  # a damaged or foreign table
                raise KprofInputError(
                    f, f"holds no kernel_events table kprof can read (no column {', '.join(missing)})"
                )
            trace = Trace(events=events, ranges=range_table({}), meta={"file": str(f), "format": "parquet"})
        else:
            trace = load_trace(f, step_pattern=steps, purpose="kprof compare compares one rank with one rank")
        if not len(trace.events):
            raise KprofInputError(f, "holds no GPU activity (no kernel, memcpy or memset): nothing to compare")
        tables = trace_tables(trace, pattern)
        side.kernels.append(tables.kernels)
        side.steps.append(tables.steps)
        side.step_replicates.append(step_replicates(trace.events, tables.steps))
    return side


def compare(
    a_path: Path,
    b_path: Path,
    threshold_pct: float = defaults.THRESHOLD_PCT,
    steps: str | None = None,
    control: str | None = None,
    between_runs_pct: float = defaults.BETWEEN_RUNS_PCT,
) -> Comparison:
    a, b = load_side(a_path, steps), load_side(b_path, steps)
    a, b = (_as_runs(a), _as_runs(b)) if {a.kind, b.kind} == {"run", "runs"} else (a, b)
    if a.kind != b.kind:
        what = {"run": "a run folder", "runs": "a folder of run folders", "traces": "a trace (or a folder of traces)"}
        raise KprofInputError(
            b_path, f"is {what.get(b.kind, b.kind)}, but {a_path} is {what.get(a.kind, a.kind)}: compare like with like"
        )
    if control is not None:
        _check_control(control, a, b)
    if between_runs_pct and a.kind != "run":
        raise KprofInputError(
            "--between-runs",
            "is for one run folder a side (folders of fresh runs measure the spread between runs themselves)",
        )
    return compare_sides(a, b, threshold_pct, control, between_runs_pct)


def _as_runs(side: Side) -> Side:
    """A single run beside a folder of runs: a side of one run (which cannot be judged between
    runs, and the gate says so)."""
    if side.kind == "runs":
        return side
    return Side(side.label, "runs", runs=[side.run_rounds], timers=side.timers)


def _check_control(control: str, a: Side, b: Side) -> None:
    """The control leg must be timed in every case of both runs (of every run of a side)."""
    if a.kind not in ("run", "runs"):
        raise KprofInputError("--control", "needs two run folders (a leg timed in both)")
    for side in (a, b):
        for rounds in side.runs or [side.run_rounds]:
            _check_control_in(control, side.label, rounds)


def _check_control_in(control: str, label: str, rounds: pd.DataFrame) -> None:
    have = rounds.groupby("case")["leg"].agg(lambda legs: control in set(legs))
    if not have.all():
        legs = ", ".join(sorted(map(str, rounds["leg"].unique())))
        raise KprofInputError("--control", f"leg {control!r} is not timed in every case of {label} (legs: {legs})")


def parse_rule(rule: str) -> FailRule:
    """``--fail-on``'s rule, or a one-line error naming the forms it takes."""
    try:
        return parse_gate(rule)
    except ValueError:
        raise KprofInputError(
            "--fail-on", f"expected e.g. 'slower>2%', 'credibly-slower>2%' or 'point-slower>2%', got {rule!r}"
        ) from None


def gate(comparison: Comparison, rule: str) -> RuleResult:
    """``comparison`` judged by ``slower>2%``, ``credibly-slower>2%``, ``point-slower>2%`` (or the
    ``faster`` forms): the rows that break it and those it cannot judge."""
    return judge(comparison, parse_rule(rule))
