"""Step and annotation attribution rules, on small hand-made Kineto traces."""

from __future__ import annotations

import json
from pathlib import Path

from kprof.analysis.trace_tables import trace_tables
from kprof.ingest import load_trace
from kprof.ingest.assign_ranges import compile_step_pattern


def _x(cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _kernel(name: str, ts: float, dur: float, corr: int) -> dict:
    return _x("kernel", name, ts, dur, pid=0, tid=7, device=0, stream=7, correlation=corr)


def _launch(ts: float, corr: int, tid: int = 1) -> dict:
    return _x("cuda_runtime", "cudaLaunchKernel", ts, 1, tid=tid, correlation=corr)


def _load(tmp_path: Path, events: list[dict], steps: str | None = None):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = load_trace(path, step_pattern=steps)
    return trace, trace_tables(trace, compile_step_pattern(steps))


def test_cpu_steps_follow_the_launch_not_the_kernel_start(tmp_path: Path) -> None:
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 100),
        _x("user_annotation", "ProfilerStep#2", 100, 100),
        _launch(90, 1),
        _kernel("late", 150, 10, 1),  # runs during step 2's CPU range, launched in step 1
        _launch(120, 2),
        _kernel("k2", 170, 10, 2),
    ]
    trace, tables = _load(tmp_path, events)
    assert trace.events.set_index("name")["step"].to_dict() == {"late": 1, "k2": 2}
    assert trace.meta["step_source"] == "CPU step range holding the launch"


def test_gpu_step_ranges_win_when_present(tmp_path: Path) -> None:
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 100),
        _x("user_annotation", "ProfilerStep#2", 100, 100),
        _x("gpu_user_annotation", "ProfilerStep#1", 140, 20, pid=0, tid=7),
        _x("gpu_user_annotation", "ProfilerStep#2", 160, 40, pid=0, tid=7),
        _launch(90, 1),
        _kernel("a", 150, 5, 1),
        _launch(95, 2),
        _kernel("b", 165, 5, 2),  # launched in CPU step 1, but inside GPU step 2's range
    ]
    trace, _ = _load(tmp_path, events)
    assert trace.events.set_index("name")["step"].to_dict() == {"a": 1, "b": 2}
    assert trace.meta["step_source"] == "GPU step ranges"


def test_nested_annotations_innermost_and_inclusive(tmp_path: Path) -> None:
    events = [
        _x("user_annotation", "layer", 0, 100),
        _x("user_annotation", "attention", 10, 30),
        _launch(20, 1),
        _kernel("qk", 200, 10, 1),
        _launch(50, 2),
        _kernel("mlp", 220, 30, 2),
        _launch(60, 3, tid=2),  # another thread: not inside this thread's ranges
        _kernel("other", 260, 5, 3),
    ]
    trace, tables = _load(tmp_path, events)
    annotation = trace.events.set_index("name")["annotation"]
    assert annotation["qk"] == "attention" and annotation["mlp"] == "layer"
    assert annotation.isna()["other"]
    ann = tables.annotations.set_index("name")
    assert ann.loc["layer", "gpu_us"] == 40.0 and ann.loc["layer", "self_us"] == 30.0
    assert ann.loc["attention", "gpu_us"] == 10.0 and ann.loc["attention", "self_us"] == 10.0


def test_busy_counts_overlapping_streams_once(tmp_path: Path) -> None:
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 1000),
        _launch(1, 1),
        _launch(2, 2),
        _kernel("a", 100, 50, 1),
        {**_kernel("b", 120, 50, 2), "tid": 8, "args": {"device": 0, "stream": 8, "correlation": 2}},
    ]
    _, tables = _load(tmp_path, events)
    step = tables.steps.iloc[0]
    assert step["span_us"] == 70.0 and step["busy_us"] == 70.0 and step["kernel_us"] == 100.0
    assert step["idle_us"] == 0.0


def test_unnumbered_step_ranges_are_numbered_in_time_order(tmp_path: Path) -> None:
    """A file that lists its --steps ranges last first (as one real trace does): the warm-up step
    (number 0) is still the earliest."""
    events = [
        _x("user_annotation", "graph", 200, 100),
        _x("user_annotation", "graph", 0, 100),
        _launch(10, 1),
        _kernel("first", 20, 10, 1),
        _launch(210, 2),
        _kernel("second", 220, 10, 2),
    ]
    trace, tables = _load(tmp_path, events, steps="^graph$")
    assert trace.events.set_index("name")["step"].to_dict() == {"first": 0, "second": 1}
    assert tables.steps["warmup"].tolist() == [True, False]


def test_reverse_ordered_ranges_of_a_real_trace() -> None:
    from conftest import real

    path = real("tracelens_xdit_sd35_rank0.json.gz")
    trace = load_trace(path, step_pattern="CompiledFxGraph")
    steps = trace.events.dropna(subset=["step"]).groupby("step")["start_ns"].min()
    assert steps.is_monotonic_increasing  # step numbers follow time
