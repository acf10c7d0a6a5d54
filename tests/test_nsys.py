"""Nsight Systems SQLite exports: built from the documented schema here (two nsys generations), and
the real H200 export of the third fixture set, checked against sums taken straight from its tables."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kprof.cli import app
from kprof.errors import KprofInputError
from kprof.ingest.load import load_trace, load_traces
from tests.conftest import real
from tests.nsys_export import Call, Export, Kernel, Range, write_export

runner = CliRunner()
MANGLED = "_ZN2at6native18elementwise_kernelILi128ELi4EEEvi"  # void at::native::elementwise_kernel<128, 4>(int)


def _step_export(pid: int = 100, modern: bool = True, offset: int = 0) -> Export:
    """Two NVTX steps on one thread: a plain launch, a graph launch whose two kernels share its
    correlation id, a kernel launched before the capture (no call), a copy and a memset."""
    t = offset
    return Export(
        kernels=[
            Kernel("early_kernel", t + 900, t + 1_000, 1, pid=pid),
            Kernel("void gemm<float>(float*)", t + 10_500, t + 12_500, 5, pid=pid, mangled=None),
            Kernel("elementwise", t + 13_000, t + 13_400, 6, pid=pid, mangled=MANGLED),
            Kernel("graph_a", t + 21_000, t + 21_600, 9, pid=pid, stream=13),
            Kernel("graph_b", t + 21_700, t + 22_000, 9, pid=pid, stream=13),
        ],
        calls=[
            Call("cudaLaunchKernel_v7000", t + 10_100, t + 10_200, 5, pid=pid, tid=pid),
            Call("cuLaunchKernel", t + 10_300, t + 10_350, 6, pid=pid, tid=pid),
            Call("cudaGraphLaunch_v10000", t + 20_100, t + 20_300, 9, pid=pid, tid=pid),
            Call("cudaMemcpyAsync_v3020", t + 20_400, t + 20_450, 11, pid=pid, tid=pid),
        ],
        ranges=[
            Range("step 1", t + 10_000, t + 20_000, pid=pid, tid=pid),
            Range("step 2", t + 20_000, t + 30_000, pid=pid, tid=pid),
            Range("forward", t + 10_050, t + 10_400, pid=pid, tid=pid, registered=True),
            Range("graph replay", t + 20_050, t + 20_350, pid=pid, tid=pid, push_pop=False),
            Range("never ended", t + 25_000, None, pid=pid, tid=pid),
            Range("copy", t + 20_390, t + 20_460, pid=pid, tid=pid, domain=3),
        ],
        domains=[(pid, 3, "NCCL")],
        copies=[(t + 23_000, t + 23_500, 1, 11)] if modern else [],
        memsets=[(t + 24_000, t + 24_100, 11)] if modern else [],
        marks=2,
        modern=modern,
    )


STEPS = r"^step (\d+)$"


def test_kernels_copies_launches_and_nvtx_ranges(tmp_path: Path) -> None:
    path = write_export(tmp_path / "report.sqlite", _step_export())
    t = load_trace(path, step_pattern=STEPS)
    e = t.events.set_index("short_name")
    assert t.meta["format"] == "nsys" and t.meta["nsys_version"] == "2025.1.1.110"
    assert t.meta["session_start_utc_ns"] == 1741793819042497997
    assert sorted(e.index) == sorted(
        ["early_kernel", "gemm", "at::native::elementwise_kernel", "graph_a", "graph_b", "Memcpy HtoD", "Memset"]
    )
    assert e.loc["Memcpy HtoD", "kind"] == "memcpy" and e.loc["Memset", "kind"] == "memset"
    # the mangled name is demangled by kprof, as in every other format
    assert e.loc["at::native::elementwise_kernel", "name"] == "void at::native::elementwise_kernel<128, 4>(int)"
    gemm = e.loc["gemm"]
    assert (gemm["grid_x"], gemm["block_x"], gemm["registers"], gemm["shared_mem_bytes"]) == (4, 128, 32, 1024)
    assert (gemm["launch_ns"], gemm["launch_tid"], gemm["dur_ns"]) == (10_100, 100, 2_000)
    # a graph's kernels are placed by its cudaGraphLaunch; the early kernel has no launch
    assert list(e.loc[["graph_a", "graph_b"], "launch_ns"]) == [20_100, 20_100]
    assert e.loc["early_kernel", "launch_ns"] is pd_na()
    steps = e["step"].astype("object").where(e["step"].notna(), None).to_dict()
    assert steps == {
        "early_kernel": None,
        "gemm": 1,
        "at::native::elementwise_kernel": 1,
        "graph_a": 2,
        "graph_b": 2,
        "Memcpy HtoD": 2,
        "Memset": 2,
    }
    assert e.loc["gemm", "annotation"] == "forward"  # registered string, through textId
    assert e.loc["graph_a", "annotation"] == "graph replay"  # a start/end range
    names = set(t.ranges["name"])
    assert "never ended" not in names and "mark" not in names and "NCCL" not in names
    assert e.loc["Memcpy HtoD", "annotation"] == "NCCL:copy"  # a named NVTX domain prefixes its ranges
    assert any("before the profiling window" in w for w in t.warnings)


def pd_na():
    import pandas as pd

    return pd.NA


def test_an_older_export_without_process_ids_or_export_metadata(tmp_path: Path) -> None:
    path = write_export(tmp_path / "old.sqlite", _step_export(modern=False))
    t = load_trace(path, step_pattern=STEPS)
    e = t.events.set_index("short_name")
    assert t.meta["nsys_version"] is None
    assert e.loc["gemm", "launch_ns"] == 10_100  # joined on the correlation id alone
    assert e.loc["gemm", "step"] == 1 and e.loc["gemm", "annotation"] == "forward"
    assert {"step 1", "step 2", "forward"} <= set(t.ranges["name"])  # names only through textId


def test_each_process_with_gpu_work_is_a_rank(tmp_path: Path) -> None:
    """Two processes number their correlation ids alike: each kernel is joined to its own
    process's launch, and each rank gets its own steps."""
    export = _step_export(pid=100)
    other = _step_export(pid=200, offset=1_000_000)
    export.kernels += other.kernels
    export.calls += other.calls
    export.ranges += other.ranges
    path = write_export(tmp_path / "two.sqlite", export)
    traces = load_traces(path, step_pattern=STEPS)
    assert [t.meta["rank"] for t in traces] == [0, 1]
    assert traces[1].meta["processes"] == [100, 200] and traces[1].meta["ranks_in_file"] == 2
    for t, offset in zip(traces, (0, 1_000_000)):
        gemm = t.events.set_index("short_name").loc["gemm"]
        assert gemm["launch_ns"] == offset + 10_100 and gemm["step"] == 1
        assert set(t.ranges["pid"]) == {100 if offset == 0 else 200}
    with pytest.raises(KprofInputError, match="holds 2 ranks"):
        load_trace(path)
    res = runner.invoke(app, ["trace", str(path), "--steps", STEPS, "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert [r["rank"] for r in out["summary"]["ranks"]] == [0, 1]
    assert [r["step"] for r in out["rank_steps"]] == [2] and out["rank_steps"][0]["ranks"] == 2


def test_real_h200_export_matches_its_own_tables() -> None:
    """Per-kernel calls and device time equal sums taken from the export's tables by SQL here."""
    path = real("nsys_sqlite_h200_nvfuser_report1.sqlite")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    expected = {}
    for table, kind in (("KERNEL", "kernel"), ("MEMCPY", "memcpy"), ("MEMSET", "memset")):
        n, total = con.execute(f"SELECT COUNT(*), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_{table}").fetchone()
        expected[kind] = (n, total)
    launched = con.execute(
        "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = k.correlationId AND r.globalTid / 16777216 = k.globalPid / 16777216"
    ).fetchone()[0]
    con.close()
    t = load_trace(path)
    got = t.events.groupby(t.events["kind"].astype(str))["dur_ns"].agg(["size", "sum"])
    assert {k: (int(r["size"]), int(r["sum"])) for k, r in got.iterrows()} == expected
    kernels = t.events[t.events["kind"] == "kernel"]
    assert int(kernels["launch_ns"].notna().sum()) == launched == 18
    assert t.meta["nsys_export_schema"] == "3.17.1" and t.meta["gpus"] == ["0: NVIDIA H200"]
    assert len(t.ranges) == 13_513 and t.events["annotation"].notna().any()
    assert not any("<unnamed>" in n for n in t.events["name"].astype(str))


def test_nsys_files_compare_and_read_in_parallel(tmp_path: Path) -> None:
    a = write_export(tmp_path / "a.sqlite", _step_export())
    slow = _step_export()
    for k in slow.kernels:
        k.end = k.start + 2 * (k.end - k.start)
    b = write_export(tmp_path / "b.sqlite", slow)
    res = runner.invoke(app, ["compare", str(a), str(b), "--steps", STEPS, "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rows = {r["short_name"]: r for r in json.loads(res.output)["kernels"]}
    assert (rows["gemm"]["a"], rows["gemm"]["b"]) == (2.0, 4.0) and rows["gemm"]["effect_pct"] == -50.0
    res = runner.invoke(app, ["trace", str(a), str(b), "--jobs", "2", "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0 and len(json.loads(res.output)["summary"]["ranks"]) == 2


def _fake_nsys(folder: Path, source: Path | None) -> Path:
    """A stand-in ``nsys``: ``export ... --output OUT REPORT`` copies ``source`` to OUT (or fails)."""
    folder.mkdir()
    script = folder / "nsys"
    body = "import shutil, sys\nargs = sys.argv[1:]\nout = args[args.index('--output') + 1]\n" + (
        f"shutil.copy({str(source)!r}, out)\n" if source else "sys.exit('error: report is damaged')\n"
    )
    script.write_text(f"#!{sys.executable}\n{body}")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return folder


def test_a_report_is_exported_through_nsys_or_refused_in_one_line(tmp_path: Path, monkeypatch) -> None:
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"\x00binary nsys report")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    res = runner.invoke(app, ["trace", str(report)])
    assert res.exit_code == 2 and "nsys is not on PATH" in res.output and "nsys export --type sqlite" in res.output
    assert len(res.output.strip().splitlines()) == 1
    export = write_export(tmp_path / "made.sqlite", _step_export())
    monkeypatch.setenv("PATH", f"{_fake_nsys(tmp_path / 'bin', export)}{os.pathsep}{os.environ['PATH']}")
    t = load_trace(report, step_pattern=STEPS)
    assert t.meta["format"] == "nsys" and t.meta["file"] == str(report) and len(t.events) == 7
    monkeypatch.setenv("PATH", str(_fake_nsys(tmp_path / "broken", None)))
    with pytest.raises(KprofInputError, match="nsys export failed .*report is damaged"):
        load_trace(report)


def test_an_unknown_database_names_the_readers(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE things (x)")
    con.commit()
    con.close()
    with pytest.raises(KprofInputError, match="no trace format kprof reads .*Nsight Systems SQLite export"):
        load_trace(path)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            "UPDATE NVTX_EVENTS SET globalTid = 'x' WHERE text = 'step 2'",
            r"NVTX_EVENTS\.globalTid is not a number in NVTX_EVENTS range 2$",
        ),
        (
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon' WHERE correlationId = 6",
            r"CUPTI_ACTIVITY_KIND_KERNEL\.start is not a number",
        ),
    ],
)
def test_a_damaged_value_is_one_line_naming_table_and_row(tmp_path: Path, damage: str, message: str) -> None:
    path = write_export(tmp_path / "bad.sqlite", _step_export())
    con = sqlite3.connect(path)
    con.execute(damage)
    con.commit()
    con.close()
    with pytest.raises(KprofInputError, match=message):
        load_trace(path)


def test_shared_memory_parts_held_narrow_sum_without_wrapping(tmp_path: Path) -> None:
    """Columns are held in the narrowest width their values allow (30,000 fits int16); the parts'
    sum must be taken wider, and a small serialized thread id must still give its process."""
    kernel = Kernel("big_shared", 1_000, 2_000, 1, pid=0, static_shared=30_000, dynamic_shared=30_000)
    t = load_trace(write_export(tmp_path / "report.sqlite", Export(kernels=[kernel])))
    assert t.events["shared_mem_bytes"].tolist() == [60_000]
