"""Traces recorded on the H200 with two overlapping streams (traces/record_traces.py two_streams):
16 GEMMs on one stream inside ``gemms`` overlap a Triton kernel and a host-to-device copy on another
stream inside ``triton_and_copy``. Each GPU-side range must hold its own stream's work only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from kprof.analysis.trace_tables import annotation_table
from kprof.cli import app
from kprof.commands.compare import compare
from kprof.ingest.assign_ranges import compile_step_pattern
from kprof.ingest.load import load_trace

TRACES = Path(__file__).resolve().parent.parent / "traces"
NARROW, WIDE = TRACES / "two_streams.pt.trace.json.gz", TRACES / "two_streams_wide.pt.trace.json.gz"
STEPS = 12  # active profiler steps in each trace


@pytest.fixture(scope="module")
def trace():
    return load_trace(NARROW)


def test_the_two_ranges_overlap_on_the_gpu(trace) -> None:
    """Without overlap the trace could not catch a per-device match: check the recording does overlap."""
    gpu = trace.ranges[trace.ranges["domain"] == "gpu"]
    gemms = gpu[gpu["name"] == "gemms"].sort_values("start_ns")
    side = gpu[gpu["name"] == "triton_and_copy"].sort_values("start_ns")
    assert len(gemms) == len(side) == STEPS
    assert gemms["tid"].nunique() == side["tid"].nunique() == 1 and set(gemms["tid"]) != set(side["tid"])
    overlapping = sum(
        bool(((side["start_ns"] < g_end) & (side["end_ns"] > g_start)).any())
        for g_start, g_end in zip(gemms["start_ns"], gemms["end_ns"])
    )
    assert overlapping >= STEPS // 2


def test_each_range_holds_exactly_its_own_streams_work(trace) -> None:
    ev = trace.events
    by_range = ev.groupby("annotation", observed=True)["stream"].agg(lambda s: set(s.unique()))
    gemm_stream, side_stream = next(iter(by_range["gemms"])), next(iter(by_range["triton_and_copy"]))
    assert by_range["gemms"] == {gemm_stream} and by_range["triton_and_copy"] == {side_stream}
    # and every event of each stream is in its range: nothing lost to the other one, nothing unassigned
    for stream, name in ((gemm_stream, "gemms"), (side_stream, "triton_and_copy")):
        on_stream = ev[ev["stream"] == stream]
        assert (on_stream["annotation"] == name).all()
    kernels = ev[ev["kind"] == "kernel"]
    assert (kernels["annotation"] == "gemms").sum() == 16 * STEPS
    assert set(kernels.loc[kernels["annotation"] == "triton_and_copy", "short_name"]) == {"scale_add"}
    assert (ev.loc[ev["annotation"] == "triton_and_copy", "kind"] == "memcpy").sum() == STEPS


def test_annotation_table_times_are_each_streams_own(trace) -> None:
    table = annotation_table(trace, compile_step_pattern(None)).set_index("name")
    ev = trace.events
    for name in ("gemms", "triton_and_copy"):
        own_ns = ev.loc[ev["annotation"] == name, "dur_ns"].astype("int64").sum()
        assert table.loc[name, "gpu_us"] == pytest.approx(own_ns / 1e3)
    assert table.loc["gemms", "kernels"] == 16 * STEPS
    assert table.loc["triton_and_copy", "kernels"] == STEPS


def test_one_trace_per_side_gives_verdicts_from_its_steps() -> None:
    """The wide trace's GEMMs are 1.5x as long (K 2048 -> 3072): SLOWER with an interval, from the
    steady steps of one trace per side; the copy, unchanged, is not called SLOWER. The GPU's busy
    time per step does not grow: the GEMMs stay hidden behind the copy on the other stream."""
    c = compare(NARROW, WIDE)
    assert c.replicates == "steps"
    k = c.kernels.set_index("short_name")
    gemm = k.loc[[n for n in k.index if n.startswith("nvjet")][0]]
    assert gemm["verdict"] == "SLOWER" and gemm["ci_high_pct"] < -20
    assert k.loc["Memcpy HtoD (Pinned -> Device)", "verdict"] != "SLOWER"
    busy = c.steps.iloc[0]
    assert busy["verdict"] != "SLOWER" and abs(busy["effect_pct"]) < 2
    assert isinstance(c.kernels, pd.DataFrame) and (c.kernels["n_a"].dropna() == STEPS - 1).all()


def test_the_ci_gate_fails_on_the_wider_trace() -> None:
    result = CliRunner().invoke(app, ["compare", str(NARROW), str(WIDE), "--fail-on", "credibly-slower>5%"])
    assert result.exit_code == 1, result.output
    same = CliRunner().invoke(app, ["compare", str(NARROW), str(NARROW), "--fail-on", "slower>2%"])
    assert same.exit_code == 0, same.output
