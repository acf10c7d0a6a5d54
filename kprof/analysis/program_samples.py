"""A whole program's trace as samples: GPU busy per steady step (the first step, with its
autotuning and warm-up, left out; each steady step a sample) when the trace has steps, GPU busy per
process, the ``--metric`` kernels' device time, every kernel's µs per call; for a CPU program, its
step ranges and profiled span by the host clock. Each quantity is a case of the program run."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from kprof.analysis.trace_tables import busy_ns, step_table
from kprof.errors import KprofInputError
from kprof.ingest.assign_ranges import compile_step_pattern
from kprof.ingest.names import name_matches
from kprof.run_model import PER_CALL, ProgramSubject, Sample
from kprof.trace import Trace

BUSY_CASE = "GPU busy per process"
BUSY_STEP_CASE = "GPU busy per step"
HOST_CASE = "host time per process"  # --device cpu: the profiled span of a CPU program (host clock)
HOST_STEP_CASE = "host time per step"  # its step ranges' lengths, the first step left out


def process_samples(events: pd.DataFrame, subject: ProgramSubject) -> list[Sample]:
    """One process's samples: GPU busy per steady step (one sample per step; the first step is
    warm-up) when its trace has steps, GPU busy over the whole process, the --metric kernels' time
    (per steady step, else per process), and every kernel's µs per call (in the steady steps)."""
    if len(events) == 0:
        raise KprofInputError(
            "the trace", "holds no GPU activity (was it run on a GPU? a CPU program is timed with --device cpu)"
        )
    steps, _ = step_table(events)
    steady = steps.loc[~steps["warmup"].astype(bool), "step"].to_numpy("int64") if len(steps) else []
    if subject.step_pattern and not len(steady):
        raise KprofInputError("--steps", f"{subject.step_pattern!r} marks fewer than two steps in the trace")
    rows = []
    if len(steady):
        busy = steps.set_index("step")["busy_us"]
        rows += [Sample(BUSY_STEP_CASE, i, float(busy[s] * 1e3)) for i, s in enumerate(steady)]
    rows.append(Sample(BUSY_CASE, 0, float(busy_ns(events))))
    kernels = events[events["kind"] == "kernel"]
    if len(steady):
        kernels = kernels[kernels["step"].isin(steady)]
    if subject.metric:
        rows += _metric_rows(kernels, subject.metric, steady)
    for name, g in kernels.groupby("name", observed=True):
        rows.append(Sample(f"{name}{PER_CALL}", 0, float(g["dur_ns"].astype("int64").mean())))
    return rows


def host_samples(trace: Trace, subject: ProgramSubject) -> list[Sample]:
    """A CPU program's samples, by the host clock: each steady step's length (its step range in the
    profiler's CPU ranges; the first step, with its warm-up, left out) and the profiled span of the
    whole process."""
    cpu = trace.ranges[trace.ranges["domain"] == "cpu"]
    if not len(cpu):
        raise KprofInputError("the trace", "holds no CPU ranges (the profiler recorded nothing of the program)")
    pattern = compile_step_pattern(subject.step_pattern or None)
    steps = cpu[cpu["name"].map(lambda name: bool(pattern.search(str(name))))].sort_values("start_ns")
    if subject.step_pattern and len(steps) < 2:
        raise KprofInputError("--steps", f"{subject.step_pattern!r} marks fewer than two steps in the trace")
    lengths = (steps["end_ns"] - steps["start_ns"]).to_numpy("int64")[1:]
    rows = [Sample(HOST_STEP_CASE, i, float(t)) for i, t in enumerate(lengths)]
    span = int(cpu["end_ns"].max()) - int(cpu["start_ns"].min())
    return [*rows, Sample(HOST_CASE, 0, float(span))]


def metric_case(pattern: str, stepped: bool) -> str:
    return f"kernels /{pattern}/ per {'step' if stepped else 'process'}"


def _metric_rows(kernels: pd.DataFrame, pattern: str, steady: Any) -> list[Sample]:
    """The device time of the kernels whose names match ``pattern``: one sample per steady step,
    else one for the process. Their names may change between revisions; their work is what counts."""
    hit = kernels[name_matches(kernels["name"], re.compile(pattern))]
    if not len(hit):
        raise KprofInputError("--metric", f"{pattern!r} matches no kernel of the trace")
    dur = hit["dur_ns"].astype("int64")
    case = metric_case(pattern, bool(len(steady)))
    if not len(steady):
        return [Sample(case, 0, float(dur.sum()))]
    per_step = dur.groupby(hit["step"].to_numpy("int64")).sum().reindex(steady, fill_value=0)
    return [Sample(case, i, float(v)) for i, v in enumerate(per_step.to_numpy())]
