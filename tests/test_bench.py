"""The benchmark in a few lines (kprof.bench.Bench, docs/workloads.md): the file the docs open with,
written to a temporary folder and run as a workload, over a built repository's revisions (kept
outside it, as a user's benchmark is), and with --gpus 2 on the CPU; any Python value as an output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import ROOT
from kprof.cli import app

runner = CliRunner()


def docs_benchmark() -> str:
    """The first Python block of docs/workloads.md: the fifteen-line benchmark users copy."""
    text = (ROOT / "docs" / "workloads.md").read_text()
    block = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(block.strip().splitlines()) <= 15, block
    return block


def _run(*args: str) -> dict:
    res = runner.invoke(app, [*args, "--device", "cpu", "--rounds", "6", "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.slow  # 10 s of interpreter rounds on the 2-core machine: CI's slow step runs it
def test_the_docs_benchmark_runs_as_a_workload_and_under_gpus(tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text(docs_benchmark())
    report = _run("run", str(bench), "--out", str(tmp_path / "run"))
    legs = {row["leg"] for row in report["legs"]}
    assert {"baseline", "baseline (A/A)"} <= legs and len(legs) >= 3  # its lever and the A/A copy
    assert "plain Python and PyTorch, no Triton kernel" in report["timer"]  # what was timed, said
    assert report["output_check"].startswith("outputs checked before timing: each leg against the baseline's")
    assert "no float64 reference given" in report["output_check"]  # which check ran, and which did not
    sharded = _run("run", str(bench), "--preset", "pr", "--gpus", "2", "--out", str(tmp_path / "sharded"))
    assert len({row["case"] for row in sharded["legs"]}) == 2  # both cases, on two CPU workers


@pytest.mark.slow  # a revision run: three leg hosts under the CPU (about 10 s)
def test_the_same_file_times_a_repositorys_revisions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from own_benchmark_repo import git, init_repo

    monkeypatch.setenv("KPROF_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "lib"
    work = "import time\n\ndef work(x):\n    time.sleep({})\n    return x * 2\n"
    init_repo(repo, {"mylib.py": work.format(0.002)}, "base")
    (repo / "mylib.py").write_text(work.format(0.004))
    git(repo, "commit", "-q", "-am", "twice the work")
    bench = tmp_path / "bench" / "bench.py"
    bench.parent.mkdir()
    bench.write_text(
        "import torch\nfrom kprof.bench import Bench\nimport mylib\n\n"
        "def setup(n, device, dtype):\n    return torch.randn(n, device=device)\n\n"
        'WORKLOAD = Bench("lib", setup, mylib.work, cases={"n": {"n": 256}})\n'
    )
    # host-clock sleeps on a loaded 2-core machine: a CI run read the A/A copy −13.4% [−23.5, −1.9] from its
    # baseline and rightly refused every verdict (exit 4) at the default 0.5%; the planted change is 2×
    args = ["--repo", str(repo), "--rev", "HEAD~1", "--rev", "HEAD", "--samples", "2", "--threshold", "20"]
    report = _run("run", str(bench), *args)
    head = next(row for row in report["legs"] if "twice the work" in row["leg"])
    assert head["verdict"] == "SLOWER" and head["effect_pct"] < -30


def test_any_python_value_is_an_output_compared_for_equality(tmp_path: Path) -> None:
    bench = tmp_path / "text.py"
    bench.write_text(
        "from kprof.bench import Bench\n\n"
        "def setup(n):\n    return list(range(n))\n\n"
        'def render(xs, on):\n    return ",".join(map(str, reversed(xs) if "wrong" in on else xs))\n\n'
        'WORKLOAD = Bench("text", setup, render, cases={"n": {"n": 50}}, features=["wrong"])\n'
    )
    report = _run("run", str(bench), "--out", str(tmp_path / "run"))
    refused = {m["leg"]: m["reason"] for m in report["missing"] if m["refused"]}
    assert "wrong" in refused and "out" in refused["wrong"]  # a different value fails the check
    assert any(row["leg"] == "baseline (A/A)" for row in report["legs"])  # the same value passes it


@pytest.mark.slow  # 5–12 s on the 2-core machine: CI's slow step runs it
def test_the_report_says_which_output_check_ran(tmp_path: Path) -> None:
    """With a float64 reference, without one, and with a call that returns nothing."""
    head = (
        "import torch\nfrom kprof.bench import Bench\n\ndef setup(n, device, dtype):\n    return torch.ones(n)\n\n"
        "def cos(x):\n    return torch.cos(x)\n\ndef cos64(x):\n    return torch.cos(x.double())\n\n"
    )
    said = {}
    for name, tail in (
        ("reference", 'WORKLOAD = Bench("r", setup, cos, cases={"n": {"n": 64}}, reference=cos64)\n'),
        ("nothing", 'def nothing(x):\n    x.sum()\n\nWORKLOAD = Bench("z", setup, nothing, cases={"n": {"n": 64}})\n'),
    ):  # fmt: skip
        bench = tmp_path / f"{name}.py"
        bench.write_text(head + tail)
        said[name] = _run("run", str(bench), "--out", str(tmp_path / name))["output_check"]
    assert said["reference"].endswith("the outputs against a float64 reference too"), said
    assert said["nothing"].startswith("outputs: none checked, the call returns nothing"), said
