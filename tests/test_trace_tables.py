"""Per-kernel, per-step and per-annotation tables checked against independent computations."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from kineto_events import kernel, launch, step, write_trace

from conftest import EAGER, GRAPH, real
from kprof.analysis.trace_tables import trace_tables
from kprof.ingest.assign_ranges import compile_step_pattern
from kprof.ingest.load import load_trace


def _tables(path, steps=None):
    return trace_tables(load_trace(path, step_pattern=steps), compile_step_pattern(steps))


def test_kernel_stats_match_numpy_on_raw_events() -> None:
    with gzip.open(EAGER) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"]
    t = _tables(EAGER)
    for _, row in t.kernels.head(5).iterrows():
        durs = np.array([e["dur"] for e in events if e["name"] == row["name"]])
        assert row["calls"] == len(durs)
        assert row["total_us"] == pytest.approx(durs.sum(), abs=1e-6)
        assert row["median_us"] == pytest.approx(np.median(durs), abs=1e-6)
        assert row["p90_us"] == pytest.approx(np.quantile(durs, 0.9), abs=1e-6)
        assert row["std_us"] == pytest.approx(durs.std(ddof=1), abs=1e-6)
    assert t.kernels["calls"].sum() == len(events)
    assert t.kernels["pct_busy"].sum() == pytest.approx(100.0 * t.summary["kernel_total_us"] / t.summary["busy_us"])


@pytest.mark.parametrize(("path", "kernels_per_step"), [(EAGER, 187), (GRAPH, 62)])
def test_steps_from_profiler_step_ranges(path, kernels_per_step) -> None:
    t = _tables(path)
    assert t.steps["step"].tolist() == [2, 3, 4, 5, 6]  # schedule(wait=1, warmup=1, active=5)
    assert t.steps["warmup"].tolist() == [True, False, False, False, False]
    assert (t.steps["kernels"] == kernels_per_step).all()
    assert (t.steps["busy_us"] <= t.steps["span_us"] + 1e-9).all()
    assert np.allclose(t.steps["idle_us"], t.steps["span_us"] - t.steps["busy_us"])
    assert t.steady["steps"] == 4
    assert t.steady["busy_us"] == pytest.approx(t.steps["busy_us"][1:].median())


def test_graph_trace_annotations_hold_the_graph_replay() -> None:
    t = _tables(GRAPH)
    ann = t.annotations.set_index("name")
    assert ann.loc["decode_graph", "calls"] == 5
    assert ann.loc["decode_graph", "kernels"] == 300  # 60 kernels per replay
    assert ann.loc["sample", "calls"] == 5
    kernels = load_trace(GRAPH).events
    in_graph = kernels[kernels["annotation"] == "decode_graph"]
    assert ann.loc["decode_graph", "gpu_us"] == pytest.approx(in_graph["dur_ns"].sum() / 1000)


def test_busy_counts_overlap_once() -> None:
    t = _tables(real("rocprofv3_csv_kernel_trace_rocprofiler-sdk_docs.csv"))
    # Two queues run concurrently here: busy is less than the sum of kernel times.
    assert t.summary["busy_us"] < t.summary["kernel_total_us"]


def test_user_step_regex_on_sglang_decode_trace() -> None:
    t = _tables(real("kineto_rocm_mi300x_sglang_decode_tracelens.json.gz"), steps=r"step\[DECODE")
    assert len(t.steps) == 1
    assert t.steps["kernels"].iloc[0] > 500
    assert t.steady is None  # one step is warm-up only: no steady state to report


def test_no_two_rows_of_the_kernel_table_read_alike() -> None:
    """Rows are distinct kernels; the table names those that share a short name apart."""
    from kprof.report.trace_report import trace_document

    tables = _tables(EAGER)
    kernel_table = trace_document([tables], top=None).blocks[1]
    shown = [str(row[0]) for row in kernel_table.rows]
    assert len(shown) == len(tables.kernels) == len(set(shown))
    assert len(set(tables.kernels["short_name"])) < len(shown)  # the short names alone repeat


def test_a_rank_on_two_gpus_counts_idle_in_device_time(tmp_path: Path) -> None:
    """One process, two GPUs each busy the whole step: busy is twice the span, idle 0 (it printed
    −600 µs), and the table names the GPUs so the busy column does not read as impossible."""
    from typer.testing import CliRunner

    from kprof.cli import app

    events = [step(n, n * 1000, 900) for n in (1, 2, 3)]
    for dev in (0, 1):
        for n in (1, 2, 3):
            corr = n * 10 + dev
            events += [launch(n * 1000 + 10 + dev, corr, dur=5), kernel("k", n * 1000 + 100, 600, corr, device=dev)]
    path = write_trace(tmp_path / "two_gpus.json", events)
    steps = _tables(path).steps
    assert list(steps["devices"]) == [2, 2, 2]
    assert list(steps["busy_us"]) == [1200.0] * 3 and list(steps["span_us"]) == [600.0] * 3
    assert list(steps["idle_us"]) == [0.0] * 3
    out = CliRunner().invoke(app, ["trace", str(path)], catch_exceptions=False).output
    assert "GPUs" in out and "device time summed over the step's GPUs" in out
