"""Step and annotation attribution rules, on small hand-made Kineto traces."""

from __future__ import annotations

import json
from pathlib import Path

from kprof.analysis.trace_tables import trace_tables
from kprof.ingest.assign_ranges import compile_step_pattern
from kprof.ingest.load import load_trace
from tests.kineto_events import event, kernel, launch, write_trace


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


def _two_gpu_steps(b_launched_at: float) -> list[dict]:
    """Two steps with GPU copies on stream 7; kernel b runs inside GPU step 2's range."""
    return [
        event("user_annotation", "ProfilerStep#1", 0, 100),
        event("user_annotation", "ProfilerStep#2", 100, 100),
        event("gpu_user_annotation", "ProfilerStep#1", 140, 20, pid=0, tid=7),
        event("gpu_user_annotation", "ProfilerStep#2", 160, 40, pid=0, tid=7),
        launch(90, 1),
        kernel("a", 150, 5, 1),
        launch(b_launched_at, 2),
        kernel("b", 165, 5, 2),
    ]


def test_gpu_step_ranges_are_the_steps_when_the_launches_agree(tmp_path: Path) -> None:
    trace, _ = _load(tmp_path, _two_gpu_steps(105))
    assert trace.events.set_index("name")["step"].to_dict() == {"a": 1, "b": 2}
    assert trace.meta["step_source"] == "GPU step ranges" and not trace.warnings


def test_the_launch_wins_over_a_gpu_step_copy_that_disagrees(tmp_path: Path) -> None:
    events = _two_gpu_steps(95)  # b launched in CPU step 1, but inside GPU step 2's range
    trace, _ = _load(tmp_path, events)
    assert trace.events.set_index("name")["step"].to_dict() == {"a": 1, "b": 1}
    assert trace.meta["step_source"] == "CPU step range holding the launch (GPU step ranges disagree with the launches)"
    assert any("1 activities (5.0 µs of device time)" in w for w in trace.warnings), trace.warnings


def test_work_on_a_stream_without_gpu_step_copies_is_in_its_launching_step(tmp_path: Path) -> None:
    """The merged ROCm file's shape: each step's GPU copy on stream 0 only, a collective kernel on
    stream 4 launched inside the CPU step; it once got no step (step busy -48%), with no warning."""
    events = [
        event("user_annotation", "ProfilerStep#1", 0, 100),
        event("user_annotation", "ProfilerStep#2", 100, 100),
        event("gpu_user_annotation", "ProfilerStep#1", 10, 90, pid=0, tid=0),
        event("gpu_user_annotation", "ProfilerStep#2", 110, 90, pid=0, tid=0),
        launch(20, 1),
        kernel("gemm", 30, 20, 1, stream=0),
        launch(25, 2),
        kernel("rccl", 35, 50, 2, stream=4),
        launch(120, 3),
        kernel("gemm", 130, 20, 3, stream=0),
        launch(125, 4),
        kernel("rccl", 135, 50, 4, stream=4),
    ]
    trace, tables = _load(tmp_path, events)
    assert trace.events["step"].tolist() == [1, 1, 2, 2]
    assert tables.steps.set_index("step")["busy_us"].round(3).to_dict() == {1: 55.0, 2: 55.0}
    assert (
        trace.meta["step_source"]
        == "CPU step range holding the launch (GPU step ranges widened to launches on 2 streams)"
    )
    assert any("lie on stream 0 only: 2 activities (100.0 µs of device time)" in w for w in trace.warnings)


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
    assert any("the GPU step ranges end before the work their steps launched" in w for w in trace.warnings)


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


def test_a_cross_rank_step_table_that_cannot_be_made_says_why(tmp_path: Path) -> None:
    """Eight ranks of one (warm-up) step each printed no slowest-rank table and no word why."""
    from typer.testing import CliRunner

    from kprof.cli import app

    files = []
    for rank in range(2):
        events = [event("user_annotation", "ProfilerStep#1", 0, 100), launch(10, 1), kernel("k", 20, 30, 1)]
        files.append(str(write_trace(tmp_path / f"rank{rank}.json", events, distributedInfo={"rank": rank})))
    res = CliRunner().invoke(app, ["trace", *files, "--format", "md"])
    assert res.exit_code == 0, res.output
    assert "no slowest rank per step: every rank's trace holds only its first step" in res.stdout
    doc = json.loads(CliRunner().invoke(app, ["trace", *files, "--format", "json"]).stdout)
    assert doc["rank_steps"] == []


def test_the_merged_rocm_ranks_count_every_stream_in_each_step() -> None:
    """The four-rank ROCm file merged by TraceLens: each step's GPU copy lies on stream 0, its 7 RCCL
    kernels on stream 4. Per-step busy is the time-union of every kernel its CPU step launched
    (computed independently from the raw JSON: rank 0 34,149.0 / 32,623.2 / 24,417.1 µs; it read
    17,807 / 17,594 / 15,630), and the slowest rank of step 11 is rank 2 (it read rank 1)."""
    from conftest import real
    from kprof.analysis.cross_rank import cross_rank_tables
    from kprof.ingest.load import load_traces

    traces = load_traces(real("kineto_rocm_4ranks_merged_tracelens_amd_hpctraining.json.gz"))
    tables = [trace_tables(t, compile_step_pattern(None)) for t in traces]
    busy = tables[0].steps.set_index("step")["busy_us"].round(1).to_dict()
    assert busy == {9: 34_149.0, 10: 32_623.2, 11: 24_417.1}
    assert all("widened to launches on 2 streams" in t.meta["step_source"] for t in traces)
    cross = cross_rank_tables(tables, [[] for _ in tables])
    assert cross.steps.set_index("step").loc[11, "slowest_rank"] == 2
