"""The third set of real fixtures (a consumer AMD APU's rocprofv3 CSVs with a counter collection,
a 2021-schema Kineto trace), each checked against sums taken from the file here, not by kprof."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from kprof.cli import app
from kprof.commands.trace import run_trace
from kprof.errors import KprofInputError
from kprof.ingest.load import load_trace
from tests.conftest import real

runner = CliRunner()
PREFILL = "rocprofv3_strixhalo_llamacpp_prefill_kernel_trace.csv"
DECODE = "rocprofv3_strixhalo_llamacpp_decode_kernel_trace.csv"
COUNTERS = "rocprofv3_strixhalo_llamacpp_prefill_stall_counter_collection.csv"


@pytest.mark.parametrize("name", [PREFILL, DECODE])
def test_strix_halo_kernel_traces_match_the_csv(name: str) -> None:
    path = real(name)
    raw = pd.read_csv(path)
    expected = (raw["End_Timestamp"] - raw["Start_Timestamp"]).groupby(raw["Kernel_Name"]).agg(["size", "sum"])
    t = load_trace(path)
    got = t.events.groupby(t.events["name"].astype(str))["dur_ns"].agg(["size", "sum"])
    assert sorted(got["size"].tolist()) == sorted(expected["size"].tolist())
    assert int(got["sum"].sum()) == int(expected["sum"].sum())
    assert set(t.events["device"]) == {1}  # "Agent 1"


def test_legacy_2021_kineto_matches_its_kernel_events() -> None:
    path = real("kineto_legacy_v100_resnet50_tbplugin.pt.trace.json.gz")
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "Kernel"]
    t = load_trace(path)
    k = t.events[t.events["kind"] == "kernel"]
    assert len(k) == len(kernels) == 8868
    assert int(k["dur_ns"].sum()) == sum(round(e["dur"] * 1000) for e in kernels)
    assert sorted(k["step"].dropna().unique().tolist()) == [5, 6, 7, 8, 9, 10]


def test_a_counter_collection_alone_is_one_line() -> None:
    res = runner.invoke(app, ["trace", str(real(COUNTERS))])
    assert res.exit_code == 2
    assert "counter collection" in res.output and "not a kernel trace" in res.output
    with pytest.raises(KprofInputError, match="counter collection"):
        load_trace(real(COUNTERS))


def test_counters_join_the_kernel_trace_by_kernel_name() -> None:
    raw = pd.read_csv(real(COUNTERS))
    result = run_trace([real(PREFILL), real(COUNTERS)])
    assert len(result.ranks) == 1  # the counter file is not a rank
    kernels = result.ranks[0].tables.kernels
    assert int(kernels["calls"].sum()) == len(pd.read_csv(real(PREFILL)))  # not multiplied by counters
    c = result.counters.set_index("short_name")
    expected = raw[raw["Counter_Name"] == "OccupancyPercent"].groupby("Kernel_Name")["Counter_Value"].mean()
    assert len(result.counters) == raw["Kernel_Name"].nunique()
    assert c.loc["scale_f32", "OccupancyPercent"] == pytest.approx(
        expected[[n for n in expected.index if n.startswith("scale_f32(")][0]]
    )
    assert c.loc["scale_f32", "dispatches"] == 2 and c.loc["scale_f32", "calls_in_trace"] == 48
    res = runner.invoke(app, ["trace", str(real(PREFILL)), str(real(COUNTERS)), "--format", "json"])
    assert res.exit_code == 0
    rows = json.loads(res.output)["counters"]
    assert {"GRBM_GUI_ACTIVE", "L2CacheHit", "calls_in_trace"} <= set(rows[0])


def test_an_api_trace_alone_is_one_line() -> None:
    res = runner.invoke(app, ["trace", str(real("rocprofv3_strixhalo_llamacpp_decode_hip_api_trace.csv"))])
    assert res.exit_code == 2 and "API trace (host calls, no kernels)" in res.output
