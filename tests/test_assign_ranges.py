"""Step and annotation attribution rules, on small hand-made Kineto traces."""

from __future__ import annotations

import json
from pathlib import Path

from kprof.analysis.trace_tables import trace_tables
from kprof.ingest.assign_ranges import compile_step_pattern
from kprof.ingest.load import load_trace
from tests.kineto_events import event, kernel, launch


def _load(tmp_path: Path, events: list[dict], steps: str | None = None):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = load_trace(path, step_pattern=steps)
    return trace, trace_tables(trace, compile_step_pattern(steps))


def test_cpu_steps_follow_the_launch_not_the_kernel_start(tmp_path: Path) -> None:
    events = [
        event("user_annotation", "ProfilerStep#1", 0, 100),
        event("user_annotation", "ProfilerStep#2", 100, 100),
        launch(90, 1),
        kernel("late", 150, 10, 1),  # runs during step 2's CPU range, launched in step 1
        launch(120, 2),
        kernel("k2", 170, 10, 2),
    ]
    trace, tables = _load(tmp_path, events)
    assert trace.events.set_index("name")["step"].to_dict() == {"late": 1, "k2": 2}
    assert trace.meta["step_source"] == "CPU step range holding the launch"


def test_gpu_step_ranges_win_when_present(tmp_path: Path) -> None:
    events = [
        event("user_annotation", "ProfilerStep#1", 0, 100),
        event("user_annotation", "ProfilerStep#2", 100, 100),
        event("gpu_user_annotation", "ProfilerStep#1", 140, 20, pid=0, tid=7),
        event("gpu_user_annotation", "ProfilerStep#2", 160, 40, pid=0, tid=7),
        launch(90, 1),
        kernel("a", 150, 5, 1),
        launch(95, 2),
        kernel("b", 165, 5, 2),  # launched in CPU step 1, but inside GPU step 2's range
    ]
    trace, _ = _load(tmp_path, events)
    assert trace.events.set_index("name")["step"].to_dict() == {"a": 1, "b": 2}
    assert trace.meta["step_source"] == "GPU step ranges"


def test_nested_annotations_innermost_and_inclusive(tmp_path: Path) -> None:
    events = [
        event("user_annotation", "layer", 0, 100),
        event("user_annotation", "attention", 10, 30),
        launch(20, 1),
        kernel("qk", 200, 10, 1),
        launch(50, 2),
        kernel("mlp", 220, 30, 2),
        launch(60, 3, tid=2),  # another thread: not inside this thread's ranges
        kernel("other", 260, 5, 3),
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
        event("user_annotation", "ProfilerStep#1", 0, 1000),
        launch(1, 1),
        launch(2, 2),
        kernel("a", 100, 50, 1),
        {**kernel("b", 120, 50, 2), "tid": 8, "args": {"device": 0, "stream": 8, "correlation": 2}},
    ]
    _, tables = _load(tmp_path, events)
    step = tables.steps.iloc[0]
    assert step["span_us"] == 70.0 and step["busy_us"] == 70.0 and step["kernel_us"] == 100.0
    assert step["idle_us"] == 0.0


def test_unnumbered_step_ranges_are_numbered_in_time_order(tmp_path: Path) -> None:
    """A file that lists its --steps ranges last first (as one real trace does): the warm-up step
    (number 0) is still the earliest."""
    events = [
        event("user_annotation", "graph", 200, 100),
        event("user_annotation", "graph", 0, 100),
        launch(10, 1),
        kernel("first", 20, 10, 1),
        launch(210, 2),
        kernel("second", 220, 10, 2),
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


def test_gpu_annotations_hold_only_their_own_streams_work(tmp_path: Path) -> None:
    """Kineto writes a gpu_user_annotation on the stream whose work it spans: a kernel of another
    stream that starts inside it keeps its own stream's annotation (or none)."""
    events = [
        event("gpu_user_annotation", "nccl:all_reduce", 100, 200, pid=0, tid=9),
        event("gpu_user_annotation", "gemm", 120, 30, pid=0, tid=7),
        {**kernel("allreduce", 100, 200, 1), "tid": 9, "args": {"device": 0, "stream": 9, "correlation": 1}},
        kernel("gemm_kernel", 125, 20, 2),
        kernel("unannotated", 200, 20, 3),  # stream 7, inside only stream 9's range
    ]
    trace, tables = _load(tmp_path, events)
    annotation = trace.events.set_index("name")["annotation"]
    assert annotation["allreduce"] == "nccl:all_reduce"
    assert annotation["gemm_kernel"] == "gemm"
    assert annotation.isna()["unannotated"]
    ann = tables.annotations.set_index("name")
    assert ann.loc["nccl:all_reduce", "kernels"] == 1 and ann.loc["nccl:all_reduce", "gpu_us"] == 200.0


def test_truncated_gpu_step_ranges_fall_back_to_the_launch(tmp_path: Path) -> None:
    """A GPU ProfilerStep copy far shorter than its step (as ROCm traces have): steps come from the
    launching call, and the trace says so."""
    events = [
        event("user_annotation", "ProfilerStep#1", 0, 1000),
        event("gpu_user_annotation", "ProfilerStep#1", 100, 5, pid=0, tid=7),
        *[e for i in range(4) for e in (launch(10 + i, i + 1), kernel(f"k{i}", 100 + 100 * i, 5, i + 1))],
    ]
    trace, _ = _load(tmp_path, events)
    assert trace.events["step"].tolist() == [1, 1, 1, 1]
    assert trace.meta["step_source"] == "CPU step range holding the launch (GPU step ranges truncated)"
    assert any("GPU step ranges cannot be the steps" in w for w in trace.warnings)


def test_work_launched_before_the_window_is_in_no_step(tmp_path: Path) -> None:
    """A kernel without a recorded launch whose correlation id precedes every recorded launch was
    launched before profiling began: its start inside step 1 must not pull it into step 1."""
    events = [
        event("user_annotation", "ProfilerStep#1", 0, 100),
        kernel("early", 5, 10, 3),  # no launch event; correlation 3 < 10
        launch(20, 10),
        kernel("k", 30, 10, 10),
        kernel("lost_launch", 50, 10, 11),  # launch missing but after the window opened: by start
    ]
    trace, _ = _load(tmp_path, events)
    step = trace.events.set_index("name")["step"]
    assert step.isna()["early"] and step["k"] == 1 and step["lost_launch"] == 1
    assert trace.meta["launched_before_window"] == 1
    assert any("launched before the profiling window" in w for w in trace.warnings)


def test_real_traces_annotate_per_stream() -> None:
    """The two real traces where per-device matching let nccl:all_reduce swallow compute kernels."""
    from conftest import real

    for name, calls, total_us in (
        ("tracelens_mi300_resnet_act_checkpoint.json.gz", 6, 47_137.038),
        ("hta_nccl_data.json.gz", 15, 46_762.159),
    ):
        trace = load_trace(real(name))
        mine = trace.events[trace.events["annotation"] == "nccl:all_reduce"]
        assert len(mine) == calls, name
        assert abs(mine["dur_ns"].sum() / 1e3 - total_us) < 1e-3, name
        row = trace_tables(trace, compile_step_pattern(None)).annotations.set_index("name").loc["nccl:all_reduce"]
        assert row["kernels"] == calls and abs(row["gpu_us"] - total_us) < 1e-3, name


def test_real_rocm_traces_with_truncated_gpu_steps() -> None:
    from conftest import real

    resnet = load_trace(real("tracelens_mi300_resnet_act_checkpoint.json.gz"))
    assert "GPU step ranges truncated" in resnet.meta["step_source"]
    assert resnet.events["step"].value_counts().to_dict() == {15: 895, 16: 895, 17: 895}
    toy = load_trace(real("hta_rocm_mi250_minitoy_train.json.gz"))
    assert "GPU step ranges truncated" in toy.meta["step_source"]
    assert toy.events["step"].notna().all()


def test_real_trace_with_work_from_before_the_window() -> None:
    """hta_negative_queue: 872 activities launched before profiling used to swell the first step."""
    from conftest import real

    trace = load_trace(real("hta_negative_queue_rank0.json.gz"))
    assert trace.meta["launched_before_window"] == 872
    assert set(trace.events["step"].value_counts()) == {1375}
