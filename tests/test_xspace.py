"""JAX/XLA XSpace profiles (kprof.ingest.formats.xspace), read through XProf's reader: each GPU
plane a rank, its stream lines the activities (derived lines left out), copies told from kernels,
launches found by correlation id; and the one-line refusals when no reader is installed or the
file is not an XSpace. Real profiles recorded on MI300X (TraceLens's test files) agree with XProf's
own trace viewer to the nanosecond: benchmarks/xspace_truth.py, figures in docs/benchmarks.md."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner
from xspace_proto import Event, Line, plane, xspace

from kprof.cli import app
from kprof.errors import KprofInputError
from kprof.ingest.load import load_traces

runner = CliRunner()


def _profile(path: Path) -> Path:
    gpu0 = [
        Line("Stream #14(Kernel)", [Event("fusion.kd", 1_000, 40, {"correlation_id": 7}), Event("gemm", 1_100, 60)]),
        Line("Stream #15(MemcpyD2D)", [Event("CopyDeviceToDevice", 1_200, 10, {"memcpy_details": 1})]),
        Line("XLA Ops", [Event("fusion", 1_000, 40), Event("gemm", 1_100, 60)]),  # derived: not activities
    ]
    gpu1 = [Line("Stream #20(Kernel)", [Event("fusion.kd", 2_000, 50, {"correlation_id": 9})])]
    host = [Line("Host Threads/583", [Event("hipModuleLaunchKernel", 950, 30, {"correlation_id": 7})])]
    planes = [plane(1, "/device:GPU:0", gpu0), plane(2, "/device:GPU:1", gpu1), plane(3, "/host:CPU", host)]
    path.write_bytes(xspace(planes))
    return path


def test_each_gpu_plane_is_a_rank_of_its_stream_activities(tmp_path: Path) -> None:
    pytest.importorskip("xprof.profile_data")
    traces = load_traces(_profile(tmp_path / "host.xplane.pb"))
    assert [t.meta["rank"] for t in traces] == [0, 1] and all(t.meta["format"] == "xspace" for t in traces)
    first = traces[0].events.sort_values("start_ns")
    assert first["name"].tolist() == ["fusion.kd", "gemm", "CopyDeviceToDevice"]  # not the XLA Ops copies
    assert first["kind"].tolist() == ["kernel", "kernel", "memcpy"]
    assert first["dur_ns"].tolist() == [40, 60, 10] and first["stream"].tolist() == [14, 14, 15]
    assert first["launch_ns"].iloc[0] == 950 and first["launch_tid"].iloc[0] == 583  # the host launch
    assert traces[1].events["dur_ns"].tolist() == [50]
    assert "not read as ranges" in traces[0].warnings[0]  # what it does not read, said


def test_a_gzipped_profile_reads_alike_and_trace_prints_it(tmp_path: Path) -> None:
    pytest.importorskip("xprof.profile_data")
    plain = _profile(tmp_path / "host.xplane.pb")
    packed = tmp_path / "host.xplane.pb.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert load_traces(packed)[0].events["dur_ns"].sum() == 110
    res = runner.invoke(app, ["trace", str(packed), "--format", "json"])
    assert res.exit_code == 0, res.output


def test_without_a_reader_the_refusal_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    from kprof.ingest.formats import xspace as module

    monkeypatch.setattr(module, "_reader", lambda: None)
    with pytest.raises(KprofInputError) as e:
        load_traces(_profile(tmp_path / "host.xplane.pb"))
    assert "JAX/XLA profile" in e.value.problem and "pip install 'kprof[jax]'" in e.value.problem


def test_a_damaged_profile_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("xprof.profile_data")
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(b"\x0a\xff\xff\xff\x0fnot a protobuf")
    res = runner.invoke(app, ["trace", str(bad)])
    assert res.exit_code == 2 and res.stderr.startswith(f"kprof: error: {bad}: ") and res.stderr.count("\n") == 1


def test_the_format_is_found_by_content_whatever_the_name(tmp_path: Path) -> None:
    """Detection needs no reader (a profile is named as such where XProf is not installed) and no
    suffix; a file that merely ends in .xplane.pb is not taken for one."""
    from kprof.ingest.registry import probe

    for name in ("host.xplane.pb", "profile.bin"):
        with probe(_profile(tmp_path / name)) as (fmt, _):
            assert fmt.name == "xspace"
    other = tmp_path / "notes.xplane.pb"
    other.write_text("step,time\n1,2\n")
    with pytest.raises(KprofInputError), probe(other):
        pass


def test_jax_steps_are_ranges_the_warning_says_how_to_count(tmp_path: Path) -> None:
    """Host events with a step number (jax.profiler.StepTraceAnnotation) become ranges NAME#N on
    every device's rank; with the pattern the warning gives, each kernel counts in the step whose
    range holds its launch, whatever thread launched it."""
    pytest.importorskip("xprof.profile_data")
    kernels = [Event("fusion", 1_000 + 1_000 * i, 50, {"correlation_id": i + 1}) for i in range(4)]
    launches = [Event("hipModuleLaunchKernel", 950 + 1_000 * i, 20, {"correlation_id": i + 1}) for i in range(4)]
    steps = [Event("train", 900, 1_900, {"step_num": 1}), Event("train", 2_900, 1_900, {"step_num": 2})]
    planes = [
        plane(1, "/device:GPU:0", [Line("Stream #3(Kernel)", kernels)]),
        plane(2, "/host:CPU", [Line("Host Threads/77", launches), Line("python3", steps)]),
    ]
    path = tmp_path / "steps.xplane.pb"
    path.write_bytes(xspace(planes))
    (trace,) = load_traces(path)
    assert sorted(trace.ranges["name"]) == ["train#1", "train#2"]
    assert "2 JAX steps read as ranges train#N: --steps '^train#(\\d+)$' counts them" in trace.warnings[0]
    res = runner.invoke(app, ["trace", str(path), "--steps", r"^train#(\d+)$", "--format", "json"])
    assert res.exit_code == 0, res.output
    steps_out = json.loads(res.stdout)["steps"]
    assert [(s["step"], s["kernels"]) for s in steps_out] == [(1, 2), (2, 2)], steps_out


def test_one_profile_per_host_numbers_the_hosts_devices_in_turn(tmp_path: Path) -> None:
    """Two hosts' profiles (each with GPU:0 and GPU:1) given together: ranks 0–1 and 2–3, not a
    refusal for two files claiming rank 0."""
    pytest.importorskip("xprof.profile_data")
    hosts = [_profile(tmp_path / f"host{i}.xplane.pb") for i in range(2)]
    res = runner.invoke(app, ["trace", *map(str, hosts), "--format", "json"])
    assert res.exit_code == 0, res.output
    ranks = [(r["rank"], r["kernels"]) for r in json.loads(res.stdout)["summary"]["ranks"]]
    assert ranks == [(0, 2), (1, 1), (2, 2), (3, 1)], ranks
