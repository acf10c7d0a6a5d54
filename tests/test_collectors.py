"""Collectors: rocprofv3 command construction, process handling and ingest (with a stand-in
executable: no AMD GPU here), whole-program legs, and the torch collector on a GPU."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from conftest import HAS_GPU, ROOT
from kprof.cli import app
from kprof.collectors import nsys, rocprofv3
from kprof.collectors.torch_profile import kernel_times
from kprof.engine.program import parse_leg
from kprof.errors import KprofInputError

FAKE = ROOT / "tests" / "fake_bin"
runner = CliRunner()


def test_rocprofv3_command_asks_for_csv_in_a_named_place(tmp_path: Path) -> None:
    cmd = rocprofv3.command(["python", "bench.py", "--n", "3"], tmp_path, "leg0")
    assert cmd[:2] == ["rocprofv3", "--kernel-trace"]
    assert cmd[cmd.index("--output-format") + 1] == "csv"
    assert cmd[cmd.index("-d") + 1] == str(tmp_path) and cmd[cmd.index("-o") + 1] == "leg0"
    assert cmd[cmd.index("--") + 1 :] == ["python", "bench.py", "--n", "3"]
    with pytest.raises(KprofInputError):
        rocprofv3.command([], tmp_path, "x")


def test_leg_specs() -> None:
    assert parse_leg("fast:USE_FAST=1,BLOCK=64") == ("fast", (("USE_FAST", "1"), ("BLOCK", "64")))
    assert parse_leg("base") == ("base", ())
    with pytest.raises(KprofInputError):
        parse_leg("bad:NOVALUE")


@pytest.mark.slow  # a whole program run twice under the fake rocprofv3 (8 s)
def test_whole_program_under_rocprofv3_finds_a_planted_slowdown(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    program = [sys.executable, "-c", "print('working')"]
    res = runner.invoke(
        app,
        [
            "run",
            "--leg",
            "base",
            "--leg",
            "slow:FAKE_KERNEL_SCALE=1.03",
            "--collector",
            "rocprofv3",
            "--rounds",
            "8",
            "--out",
            str(tmp_path / "run"),
            "--format",
            "json",
            "--",
            *program,
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    rows = {(r["case"], r["leg"]): r for r in out["legs"]}
    slow = rows[("GPU busy per process", "slow")]
    assert slow["verdict"] == "SLOWER" and slow["ci_low_pct"] < -2.5 < slow["ci_high_pct"] + 0.5
    assert rows[("GPU busy per process", "base (A/A)")]["verdict"] in {"SAME", "UNRESOLVED"}
    assert ("attn_kernel (per call)", "slow") in rows  # per-kernel µs/call, short names from the CSV
    traces = list((tmp_path / "run" / "traces").rglob("*_kernel_trace.csv"))
    assert len(traces) == 3 * 9  # 3 legs (A/A included) × (8 rounds + burn-in)


@pytest.mark.slow  # a whole program run twice under the fake rocprofv3 (6 s)
def test_program_legs_keep_a_templates_instantiations_apart(tmp_path: Path, monkeypatch) -> None:
    """A leg that launches more of a template's fast instantiation changes no kernel's speed: each
    instantiation is its own case (grouped by short name, the mean per call moved by 80%)."""
    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    legs = ["--leg", "base:FAKE_HALF_CALLS=5", "--leg", "mix:FAKE_HALF_CALLS=15"]
    out = tmp_path / "run"
    args = ["run", *legs, "--collector", "rocprofv3", "--rounds", "6", "--out", str(out), "--format", "json"]
    res = runner.invoke(app, [*args, "--", sys.executable, "-c", "pass"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rows = {(r["case"], r["leg"]): r for r in json.loads(res.stdout)["legs"]}
    for label in ("attn_kernel<float> (per call)", "attn_kernel<__half> (per call)"):
        assert rows[(label, "mix")]["verdict"] in {"SAME", "UNRESOLVED"}, rows[(label, "mix")]
        assert abs(rows[(label, "mix")]["effect_pct"]) < 1
    assert ("triton_poi_fused_add_0 (per call)", "mix") in rows  # a name no other kernel shares stays short
    stored = set(pd.read_parquet(out / "samples").astype({"case": str})["case"])
    assert "void attn_kernel<__half>(__half*, int) (per call)" in stored  # the full name, stable across legs
    same = runner.invoke(app, ["compare", str(out), str(out), "--format", "json"], catch_exceptions=False)
    compared = {r["case"] for r in json.loads(same.stdout)["legs"]}
    assert {"attn_kernel<float> (per call)", "attn_kernel<__half> (per call)"} <= compared  # matched by full name


def test_torch_collector_kernel_times_keep_instantiations_apart(tmp_path: Path) -> None:
    def x(cat: str, name: str, ts: float, dur: float, **args) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}

    kernel = dict(device=0, stream=7)
    events = [
        x("gpu_user_annotation", "kprof|base|1", 0, 100),
        x("kernel", "void k<float>(float*)", 10, 20, correlation=1, **kernel),
        x("kernel", "void k<__half>(__half*)", 40, 5, correlation=2, **kernel),
        x("kernel", "void k<__half>(__half*)", 50, 5, correlation=3, **kernel),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    times = kernel_times(path, "c").set_index("kernel")
    assert times.loc["void k<float>(float*)", ["calls", "total_us"]].tolist() == [1, 20.0]
    assert times.loc["void k<__half>(__half*)", ["calls", "total_us"]].tolist() == [2, 10.0]


def test_program_errors(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    res = runner.invoke(app, ["run", "--leg", "base", "--collector", "torch", "--out", str(tmp_path / "a"), "--", "ls"])
    assert res.exit_code == 2 and "python SCRIPT" in res.stderr
    res = runner.invoke(
        app, ["run", "--leg", "base", "--collector", "events", "--out", str(tmp_path / "b"), "--", "python", "x.py"]
    )
    assert res.exit_code == 2 and "--collector" in res.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="the torch collector records CUDA kernels")
def test_torch_collector_gives_per_kernel_times_per_leg(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "run",
            "paged_decode",
            "--case",
            "b8-s8192",
            "--design",
            "endpoints",
            "--rounds",
            "6",
            "--collector",
            "torch",
            "--out",
            str(tmp_path / "r"),
            "--format",
            "json",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    kernels = json.loads(res.stdout)["kernels"]
    names = {r["case"].split(" · ")[1] for r in kernels}
    assert {"paged_decode_stage2"} <= names and any("stage1" in n for n in names)
    # every kernel of every leg: the grouped stage 1 runs only in the "all" leg (no baseline rounds)
    grouped = [r for r in kernels if r["case"].endswith("paged_decode_stage1_grouped")]
    assert grouped and {r["leg"] for r in grouped} == {"all"} and grouped[0]["verdict"] == "NO BASELINE"


def test_nsys_command_traces_cuda_and_nvtx_and_exports_sqlite(tmp_path: Path) -> None:
    cmd = nsys.command(["./bench", "--n", "3"], tmp_path / "r000-0")
    assert cmd[:2] == ["nsys", "profile"] and "--trace=cuda,nvtx" in cmd and "--export=sqlite" in cmd
    assert "--sample=none" in cmd and cmd[cmd.index("--output") + 1] == str(tmp_path / "r000-0")
    assert cmd[cmd.index("--") + 1 :] == ["./bench", "--n", "3"]
    with pytest.raises(KprofInputError):
        nsys.command([], tmp_path / "x")


def test_nsys_collector_reads_the_export_or_exports_the_report(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    env = dict(os.environ, FAKE_STEPS="4")
    path = nsys.run([sys.executable, "-c", "pass"], tmp_path / "a", "r000-0", env)
    assert path == tmp_path / "a" / "r000-0.sqlite"
    env["FAKE_NSYS_REPORT_ONLY"] = "1"
    path = nsys.run([sys.executable, "-c", "pass"], tmp_path / "b", "r000-0", env)
    assert path.suffix == ".sqlite" and (tmp_path / "b" / "r000-0.nsys-rep").exists()
    with pytest.raises(KprofInputError, match="exited with 3 under nsys"):
        nsys.run([sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "c", "r000-0", env)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(KprofInputError, match="nsys is not on PATH"):
        nsys.run(["true"], tmp_path / "d", "r000-0", env)


@pytest.mark.slow  # a whole program run 27 times under the fake nsys (10 s)
def test_whole_program_under_nsys_finds_a_planted_slowdown_per_step(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_STEPS", "4")
    legs = ["--leg", "base", "--leg", "slow:FAKE_KERNEL_SCALE=1.03"]
    args = ["run", *legs, "--collector", "nsys", "--steps", r"^step (\d+)$", "--rounds", "8"]
    res = runner.invoke(
        app,
        [*args, "--out", str(tmp_path / "run"), "--format", "json", "--", sys.executable, "-c", "pass"],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    rows = {(r["case"], r["leg"]): r for r in json.loads(res.stdout)["legs"]}
    slow = rows[("GPU busy per step", "slow")]
    assert slow["verdict"] == "SLOWER" and slow["ci_low_pct"] < -2.5 < slow["ci_high_pct"] + 0.5
    assert ("attn_kernel (per call)", "slow") in rows
    assert len(list((tmp_path / "run" / "traces").glob("*.sqlite"))) == 3 * 9


@pytest.mark.slow  # 5–12 s on the 2-core machine: CI's slow step runs it
def test_quiet_leaves_only_where_the_run_is_stored_on_stderr(tmp_path: Path, monkeypatch) -> None:
    """-q/--quiet: no phase or round lines (a pipe gets one per round otherwise), the result as ever."""
    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    said = {}
    for quiet in (False, True):
        out = tmp_path / f"run-{quiet}"
        args = ["run", "--leg", "base", "--collector", "rocprofv3", "--rounds", "6", "--out", str(out)]
        args += ["--format", "json", *(["-q"] if quiet else []), "--", sys.executable, "-c", "pass"]
        res = runner.invoke(app, args, catch_exceptions=False)
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["legs"]
        said[quiet] = res.stderr.splitlines()
    assert sum("round" in line for line in said[False]) >= 6
    assert said[True] == [f"run stored in {tmp_path / 'run-True'}"]
