"""`kprof compare` on traces (single and repeated) and on stored H200 run folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import EAGER, GRAPH, ROOT
from kprof.cli import app
from tests.kineto_events import kernel, launch, step, write_trace

runner = CliRunner()
RUNS = ROOT / "docs" / "runs" / "h200-2026-11-30"


def _json(*args: str) -> dict:
    res = runner.invoke(app, ["compare", *args, "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_one_trace_per_side_gives_deltas_and_no_verdict() -> None:
    """The recorded traces have 4 steady steps: too few to be replicates."""
    out = _json(str(EAGER), str(GRAPH))
    assert out["replicates"] == "none" and "no verdict" in out["note"]
    both = [k for k in out["kernels"] if not k["verdict"].startswith("ONLY")]
    assert both and all(k["verdict"] == "ONE SAMPLE" for k in both)
    busy = out["steps"][0]
    assert busy["effect_pct"] == pytest.approx(100 * (busy["a"] / busy["b"] - 1))


def test_repeated_identical_traces_are_the_same(tmp_path: Path) -> None:
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        for i in range(4):
            shutil.copy(GRAPH, tmp_path / side / f"rep{i}.json.gz")
    out = _json(str(tmp_path / "a"), str(tmp_path / "b"))
    assert out["replicates"] == "traces"
    verdicts = {k["verdict"] for k in out["kernels"]}
    assert verdicts <= {"SAME"}  # zero shift, interval [0, 0]


def test_saved_parquet_side(tmp_path: Path) -> None:
    assert runner.invoke(app, ["trace", str(GRAPH), "--save", str(tmp_path / "g")]).exit_code == 0
    out = _json(str(tmp_path / "g"), str(GRAPH))
    kernel = next(k for k in out["kernels"] if k["verdict"] == "ONE SAMPLE")
    assert abs(kernel["effect_pct"]) < 1e-9  # the same trace, read two ways


def test_runs_compare_per_leg_and_fail_on() -> None:
    a, b = RUNS / "cal_paged_decode_b64-s2048", RUNS / "prm_paged_decode_b64-s2048"
    out = _json(str(a), str(b))
    assert out["replicates"] == "rounds" and out["legs"]
    for row in out["legs"]:
        assert row["ci_low_pct"] <= row["effect_pct"] <= row["ci_high_pct"]
    res = runner.invoke(app, ["compare", str(a), str(a), "--fail-on", "slower>3%"])
    assert res.exit_code == 0  # a run against itself breaks nothing
    # ... but at 1% its intervals (two samples of rounds, up to [-2.35, +2.40]) cannot rule a
    # regression out: the gate fails closed, apart from a break (exit 3, not 0)
    res = runner.invoke(app, ["compare", str(a), str(a), "--fail-on", "slower>1%"])
    assert res.exit_code == 3 and "cannot decide" in res.stderr and "UNRESOLVED" in res.stderr
    bad = runner.invoke(app, ["compare", str(a), str(b), "--fail-on", "slower>0.1%"])
    assert bad.exit_code == 1 and "--fail-on" in bad.stderr


LOOP_KERNELS = (("gemm", 300.0), ("rmsnorm", 20.0))


def _loop_trace(path: Path, steps: int, scale: float, seed: int, kernels=LOOP_KERNELS) -> Path:
    """A Kineto trace of a decode loop: ``steps`` ProfilerSteps, each launching ``kernels`` (a GEMM
    and a small kernel) whose times jitter by about 1%; ``scale`` multiplies the workload."""
    rng = np.random.default_rng(seed)
    events, t, corr = [], 0.0, 0
    for number in range(steps):
        events.append(step(number, t, 1000.0 * scale))
        for name, us in kernels:
            corr += 1
            dur = round(us * scale * (1 + 0.01 * rng.standard_normal()), 3)
            events.append(launch(t + corr % 7, corr, dur=2))
            events.append(kernel(name, t + 10 + corr % 7, dur, corr))
        t += 1000.0 * scale + 50
    return write_trace(path, events)


def test_one_loop_trace_per_side_uses_its_steps_as_replicates(tmp_path: Path) -> None:
    """With one trace per side, the steady steps are the samples: the same loop traced twice passes
    the gate; a 40× larger workload is SLOWER and fails it (exit 1), as CI needs."""
    base = _loop_trace(tmp_path / "base.json", 12, 1.0, seed=1)
    same = _loop_trace(tmp_path / "same.json", 12, 1.0, seed=2)
    big = _loop_trace(tmp_path / "big.json", 12, 40.0, seed=3)
    out = _json(str(base), str(same))
    assert out["replicates"] == "steps" and "within-process replicates" in out["note"]
    busy = out["steps"][0]
    assert busy["n_a"] == busy["n_b"] == 11  # the first step is warm-up
    assert busy["ci_low_pct"] <= busy["effect_pct"] <= busy["ci_high_pct"]
    assert {k["verdict"] for k in out["kernels"]} <= {"SAME", "UNRESOLVED"}
    assert runner.invoke(app, ["compare", str(base), str(same), "--fail-on", "slower>2%"]).exit_code == 0
    worse = _json(str(base), str(big))
    assert worse["steps"][0]["verdict"] == "SLOWER" and worse["steps"][0]["effect_pct"] < -90
    assert {k["verdict"] for k in worse["kernels"]} == {"SLOWER"}
    gate = runner.invoke(app, ["compare", str(base), str(big), "--fail-on", "slower>2%"])
    assert gate.exit_code == 1 and "gemm" in gate.stderr


def test_a_kernel_on_one_side_keeps_its_calls(tmp_path: Path) -> None:
    """ONLY IN rows show the calls of the side that has them, per step or per trace."""
    base = _loop_trace(tmp_path / "base.json", 12, 1.0, seed=1)
    more = _loop_trace(tmp_path / "more.json", 12, 1.0, seed=2, kernels=(*LOOP_KERNELS, ("rope", 5.0), ("rope", 5.0)))
    only = next(k for k in _json(str(base), str(more))["kernels"] if k["name"] == "rope")
    assert only["verdict"] == "ONLY IN B" and only["calls_b"] == 2 and only.get("calls_a") is None
    assert only["b"] == pytest.approx(10.0, rel=0.05)  # µs per step
    out = _json(str(EAGER), str(GRAPH))  # one trace a side, too few steps: calls per trace
    eager = _json_trace(EAGER)
    for k in out["kernels"]:
        if k["verdict"] == "ONLY IN A":
            assert k["calls_a"] == eager[k["name"]] and k.get("calls_b") is None


def _json_trace(path: Path) -> dict[str, int]:
    res = runner.invoke(app, ["trace", str(path), "--format", "json"], catch_exceptions=False)
    return {k["name"]: k["calls"] for k in json.loads(res.stdout)["kernels"]}


def test_credibly_slower_gates_on_the_interval(tmp_path: Path) -> None:
    """A 3% slower loop: 'slower>2%' fires on the estimate; 'credibly-slower>2%' fires only when the
    whole interval is beyond 2%, and not for a 1% threshold it cannot clear by 10%."""
    base = _loop_trace(tmp_path / "base.json", 12, 1.0, seed=1)
    worse = _loop_trace(tmp_path / "worse.json", 12, 1.03, seed=2)
    row = _json(str(base), str(worse))["steps"][0]
    assert row["verdict"] == "SLOWER" and row["ci_high_pct"] < 0

    def gate(rule: str) -> int:
        return runner.invoke(app, ["compare", str(base), str(worse), "--fail-on", rule]).exit_code

    assert gate("slower>2%") == 1
    assert gate(f"credibly-slower>{-row['ci_high_pct'] - 0.05:.2f}%") == 1
    assert gate(f"credibly-slower>{-row['ci_high_pct'] + 0.05:.2f}%") == 0  # the interval reaches inside it
    assert gate("credibly-faster>0%") == 0
    short = _loop_trace(tmp_path / "short.json", 5, 1.5, seed=3)  # ONE SAMPLE: no interval to judge
    assert runner.invoke(app, ["compare", str(base), str(short), "--fail-on", "credibly-slower>1%"]).exit_code == 3


def test_a_gate_that_cannot_decide_fails_closed(tmp_path: Path) -> None:
    """One trace a side with too few steps: no interval anywhere. 'slower>2%' cannot judge a 4.8x
    slower B and exits 3 (it exited 0); the point rule judges the estimate: 1 on 4.8x, 0 on a copy."""
    a = _loop_trace(tmp_path / "a.json", 5, 1.0, seed=1)
    slow = _loop_trace(tmp_path / "slow.json", 5, 4.8, seed=2)
    copy = tmp_path / "copy.json"
    copy.write_bytes(a.read_bytes())

    def gate(b: Path, rule: str):
        return runner.invoke(app, ["compare", str(a), str(b), "--fail-on", rule])

    for rule in ("slower>2%", "credibly-slower>2%"):
        res = gate(slow, rule)
        assert res.exit_code == 3 and "one sample per side" in res.stderr and "point-slower>2%" in res.stderr
    assert gate(copy, "slower>2%").exit_code == 3  # equal, but nothing shows it: still undecided
    res = gate(slow, "point-slower>2%")
    assert res.exit_code == 1 and "gemm" in res.stderr
    assert gate(copy, "point-slower>2%").exit_code == 0
    assert gate(slow, "point-faster>2%").exit_code == 0


def test_a_short_trace_stays_one_sample(tmp_path: Path) -> None:
    a = _loop_trace(tmp_path / "a.json", 5, 1.0, seed=1)
    b = _loop_trace(tmp_path / "b.json", 5, 40.0, seed=2)
    out = _json(str(a), str(b))
    assert out["replicates"] == "none" and {k["verdict"] for k in out["kernels"]} == {"ONE SAMPLE"}


def test_compare_errors() -> None:
    run = RUNS / "gdn_pr"
    for args, word in [
        ([str(run), str(GRAPH)], "compare like with like"),
        ([str(GRAPH), "/no/such/trace.json"], "no such"),
        ([str(GRAPH), str(GRAPH), "--fail-on", "worse"], "--fail-on"),
    ]:
        res = runner.invoke(app, ["compare", *args])
        assert res.exit_code == 2 and res.stderr.count("\n") == 1 and word in res.stderr, (args, res.stderr)


@pytest.mark.slow  # 5–12 s on the 2-core machine: CI's slow step runs it
def test_a_control_leg_takes_a_machine_wide_shift_out(tmp_path: Path) -> None:
    """B's machine is 1% slower for every leg and leg x is a further 3% slower: alone, every leg is
    SLOWER; against the control leg, the shift shows on the CONTROL row and only x is SLOWER."""
    from fake_runs import write_run

    from kprof.run_model import Leg, Role

    legs = [
        Leg("baseline", frozenset(), (), frozenset({Role.BASELINE})),
        Leg("x", frozenset({"x"}), ()),
        Leg("y", frozenset({"y"}), ()),
    ]
    write_run(tmp_path / "a", legs, lambda leg, case: 0.0, seed=1, noise=0.001)
    write_run(tmp_path / "b", legs, lambda leg, case: 0.01 + (0.03 if leg.name == "x" else 0.0), seed=2, noise=0.001)
    plain = {r["leg"]: r for r in _json(str(tmp_path / "a"), str(tmp_path / "b"))["legs"]}
    assert {r["verdict"] for r in plain.values()} == {"SLOWER"}
    out = _json(str(tmp_path / "a"), str(tmp_path / "b"), "--control", "baseline")
    legs_out = {r["leg"]: r for r in out["legs"]}
    assert out["control"] == "baseline" and legs_out["baseline"]["role"] == "CONTROL"
    shift = legs_out["baseline"]  # the run-level shift itself, with its interval: about -1%
    assert shift["verdict"] == "SLOWER" and -1.3 < shift["effect_pct"] < -0.7
    assert legs_out["x"]["verdict"] == "SLOWER" and -3.5 < legs_out["x"]["effect_pct"] < -2.5
    assert legs_out["y"]["verdict"] != "SLOWER" and abs(legs_out["y"]["effect_pct"]) < 0.5
    # the gate judges the legs, not the yardstick: the control's own -1% never fails it
    args = ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--control", "baseline"]
    gated = runner.invoke(app, [*args, "--fail-on", "slower>0.6%"])
    assert gated.exit_code == 1 and "x:" in gated.stderr and "baseline" not in gated.stderr
    assert runner.invoke(app, [*args, "--fail-on", "slower>5%"]).exit_code == 0
    bad = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--control", "nope"])
    assert bad.exit_code == 2 and "--control: leg 'nope' is not timed in every case" in bad.output


def test_an_unbounded_interval_is_undecided_for_every_rule() -> None:
    """A side with 1-3 rounds gives [-inf, +inf]: 'credibly-slower>2%' once passed a 10% regression
    read that way (the undecided test looked for NaN only)."""
    import pandas as pd

    from kprof.analysis.compare import parse_gate

    row = pd.Series({"effect_pct": -11.05, "ci_low_pct": -np.inf, "ci_high_pct": np.inf, "verdict": "UNRESOLVED"})
    for rule in ("credibly-slower>2%", "slower>2%"):
        gate = parse_gate(rule)
        assert not gate.breaks(row) and gate.undecided(row), rule
    assert not parse_gate("credibly-faster>2%").undecided(row)  # the estimate is not beyond +2%
    assert parse_gate("point-slower>2%").breaks(row)


def _fresh_runs(root: Path, runs: int, slower_x: float, seed: int) -> Path:
    """``runs`` run folders under ``root``, each leg of each run shifted by what that run adds
    (SD 0.5%, drawn anew per run): the between-run spread a single run cannot see."""
    from fake_runs import write_run

    from kprof.run_model import Leg, Role

    legs = [
        Leg("baseline", frozenset(), (), frozenset({Role.BASELINE})),
        Leg("x", frozenset({"x"}), ()),
        Leg("y", frozenset({"y"}), ()),
    ]
    rng = np.random.default_rng(seed)
    for i in range(runs):
        offset = {leg.name: rng.normal(0, 0.005) for leg in legs}
        write_run(
            root / f"run{i}",
            legs,
            lambda leg, case, offset=offset: offset[leg.name] + (slower_x if leg.name == "x" else 0.0),
            seed=seed * 100 + i,
            noise=0.001,
        )
    return root


def test_folders_of_fresh_runs_compare_run_against_run(tmp_path: Path) -> None:
    """Each run one value (its mean over rounds), Welch's interval over the runs: the spread between
    runs is in every interval, so a leg that only moves from run to run is not called SLOWER, while
    one 4% slower in every run of B is; the gate judges it."""
    a = _fresh_runs(tmp_path / "a", 4, 0.0, seed=1)
    b = _fresh_runs(tmp_path / "b", 4, 0.04, seed=2)
    out = _json(str(a), str(b))
    assert out["replicates"] == "runs" and "Timer: cuda-events (device time" in out["note"]  # what timed them
    legs = {r["leg"]: r for r in out["legs"]}
    assert legs["x"]["verdict"] == "SLOWER" and -5 < legs["x"]["effect_pct"] < -3 and legs["x"]["n_a"] == 4
    assert legs["y"]["ci_low_pct"] < 0 < legs["y"]["ci_high_pct"]  # moved between runs only: holds 0
    one_pair = {r["leg"]: r for r in _json(str(a / "run0"), str(b / "run0"))["legs"]}
    width = lambda r: r["ci_high_pct"] - r["ci_low_pct"]  # noqa: E731
    assert width(legs["y"]) > width(one_pair["y"])  # the run-to-run spread a single pair leaves out
    gated = runner.invoke(app, ["compare", str(a), str(b), "--fail-on", "credibly-slower>1%"])
    assert gated.exit_code == 1 and "x:" in gated.stderr


def test_a_side_of_one_run_cannot_be_judged_between_runs(tmp_path: Path) -> None:
    a = _fresh_runs(tmp_path / "a", 1, 0.0, seed=3)
    b = _fresh_runs(tmp_path / "b", 3, 0.04, seed=4)
    for side in (str(a), str(a / "run0")):  # a folder holding one run, or the run folder itself
        res = runner.invoke(app, ["compare", side, str(b), "--fail-on", "credibly-slower>1%"])
        assert res.exit_code == 3, res.output
        assert "1 and 3 fresh run(s) a side: judging between runs needs at least 2 a side" in res.stderr


@pytest.mark.slow  # 5–12 s on the 2-core machine: CI's slow step runs it
def test_fresh_runs_measure_the_spread_a_single_pair_is_then_told(tmp_path: Path) -> None:
    """A side of fresh runs says how far a leg's effect moves between them beyond each run's own
    interval (each leg's time here moves by SD 0.5% per run, so an effect by 0.71%); that figure,
    passed to a comparison of one run a side as --between-runs, widens every interval in quadrature
    by 1.96 × it. A side of fresh runs measures its own and refuses the option."""
    a = _fresh_runs(tmp_path / "a", 8, 0.0, seed=5)
    b = _fresh_runs(tmp_path / "b", 2, 0.0, seed=6)
    out = _json(str(a), str(b))
    spread = {s["side"]: s for s in out["spread_between_runs"]}[str(a)]
    assert spread["runs"] == 8 and spread["legs"] == 2 and 0.35 < spread["sd_pct"] < 1.2, spread
    res = runner.invoke(app, ["compare", str(a), str(b)], env={"COLUMNS": "250"})
    assert f"between the 8 fresh runs of {a}: a leg's effect against its baseline varies by ±" in res.stdout
    plain = {r["leg"]: r for r in _json(str(a / "run0"), str(b / "run0"))["legs"]}
    told = _json(str(a / "run0"), str(b / "run0"), "--between-runs", "0.71")
    assert "±0.71% SD per leg's effect (--between-runs) is in every interval" in told["note"]
    row, wide = plain["y"], {r["leg"]: r for r in told["legs"]}["y"]
    log_side = lambda r: np.log1p(r["effect_pct"] / 100) - np.log1p(r["ci_low_pct"] / 100)  # noqa: E731
    assert np.sqrt(log_side(wide) ** 2 - log_side(row) ** 2) == pytest.approx(1.959964 * np.log1p(0.0071), rel=1e-4)
    refused = runner.invoke(app, ["compare", str(a), str(b), "--between-runs", "0.71"])
    assert refused.exit_code == 2 and "--between-runs: is for one run folder a side" in refused.stderr


def test_a_side_whose_runs_agree_is_told_it_needs_no_between_runs_term() -> None:
    """Ten H200 runs of copy pr agreed within each run's interval: "--between-runs 0.00 carries it"
    told the user to pass an option that adds nothing."""
    from kprof.report.compare_report import spread_line

    quiet = spread_line({"side": "base", "runs": 5, "legs": 2, "sd_pct": 0.001})
    assert quiet.endswith("one run's intervals need no --between-runs") and "±" not in quiet
    moved = spread_line({"side": "base", "runs": 5, "legs": 2, "sd_pct": 0.3})
    assert "varies by ±0.30% SD" in moved and moved.endswith("--between-runs 0.30 carries it into one run's intervals")


@pytest.mark.slow  # two passes over six splits of stored runs
def test_the_stored_runs_gate_check_passes_identical_code_and_fails_a_planted_leg() -> None:
    """benchmarks/gate_stored_runs.py on four stored H200 runs of one command: every split of
    identical code passes `credibly-slower>1%`; with the head's `all` made 2% slower by its stored
    times, every split fails on that leg and on no other."""
    import subprocess
    import sys

    runs = [str(ROOT / "docs" / "runs" / "h200-2026-12-02-s17" / f"mla_end_{i}") for i in range(1, 5)]
    script = str(ROOT / "benchmarks" / "gate_stored_runs.py")

    def check(*extra: str) -> dict:
        res = subprocess.run(
            [sys.executable, script, *runs, "--per-side", "2", *extra], capture_output=True, text=True, check=True
        )
        return json.loads(res.stdout)

    null = check()
    assert (null["splits"], null["pass"], null["fail"]) == (6, 6, 0), null
    planted = check("--plant", "all:2")
    assert (planted["fail"], planted["fail_elsewhere"], planted["caught_rows"]) == (6, 0, 6), planted
