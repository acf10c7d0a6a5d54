"""GPU checks (skipped without CUDA): bf16 kernels at realistic shapes, lever bytes, the event timer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _paged():
    from kprof_kernels.paged_decode.workload import WORKLOAD

    return WORKLOAD


@pytest.mark.parametrize("case_name", ["b8-s8192", "b8-s32768-w4096", "b16-s4096-d256"])
@pytest.mark.parametrize("features", [frozenset(), frozenset({"prefetch_pages", "skip_masked_tiles", "grouped_heads"})])
def test_paged_decode_bf16_matches_reference(case_name: str, features: frozenset[str]) -> None:
    w = _paged()
    case = next(c for c in w.cases("pr") if c.name == case_name)
    state = w.setup(case, "cuda", "bfloat16", 0)
    state.out.fill_(float("nan"))
    w.launch(state, features, {})()
    torch.cuda.synchronize()
    ref = w.reference(state)["out"]
    err = ((state.out.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < w.reference_rtol


@pytest.mark.parametrize("lever", ["prefetch_pages", "skip_masked_tiles"])
@pytest.mark.parametrize("grouped", [False, True])
def test_paged_decode_bitwise_levers_on_gpu(lever: str, grouped: bool) -> None:
    w = _paged()
    base = frozenset({"grouped_heads"}) if grouped else frozenset()
    for case in w.cases("pr"):
        state = w.setup(case, "cuda", "bfloat16", 1)
        w.launch(state, base, {})()
        off = state.out.clone()
        state.out.fill_(float("nan"))
        w.launch(state, base | {lever}, {})()
        torch.cuda.synchronize()
        assert torch.equal(off.view(torch.int16), state.out.view(torch.int16)), case.name


def test_event_timer_sees_a_planted_spin() -> None:
    from kprof.timer.cuda import CudaEventTimer

    timer = CudaEventTimer()
    x = torch.ones(1 << 20, device="cuda")
    timer.prepare("plain", lambda: x.mul_(1.0))
    timer.prepare("spin", lambda: (x.mul_(1.0), torch.cuda._sleep(100_000)))
    times = timer.time_round(["plain", "spin", "plain", "spin"], 10)
    plain, spin = sorted(times["plain"])[5], sorted(times["spin"])[5]
    assert spin > plain + 10_000  # 100k cycles at ≤ 2 GHz is ≥ 50 µs


def _gdn():
    from kprof_kernels.gdn_decode.workload import WORKLOAD

    return WORKLOAD


@pytest.mark.parametrize("case_name", ["step-b32-hv32", "step-b32-hv48"])
def test_gdn_decode_bf16_matches_reference(case_name: str) -> None:
    from kprof.correctness import relative_error

    w = _gdn()
    case = next(c for c in w.cases("pr") if c.name == case_name)
    state = w.setup(case, "cuda", "bfloat16", 0)
    w.launch(state, frozenset(w.feature_names), {})()
    torch.cuda.synchronize()
    for name, ref in w.reference(state).items():
        assert relative_error(w.outputs(state)[name], ref) < w.reference_rtol, name


@pytest.mark.parametrize("lever", ["reuse_state", "conv_warps", "stream_state", "chunked_state"])
def test_gdn_decode_levers_bit_exact_on_gpu_over_three_steps(lever: str) -> None:
    w = _gdn()
    for case in w.cases("pr"):
        results = []
        for features in (frozenset(), frozenset({lever})):
            state = w.setup(case, "cuda", "bfloat16", 3)
            fn = w.launch(state, features, {})
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            results.append({k: v.clone() for k, v in w.outputs(state).items()})
        for name in results[0]:
            a, b = results[0][name], results[1][name]
            assert torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)), (case.name, name)


def _mla():
    from kprof_kernels.mla_decode.workload import WORKLOAD

    return WORKLOAD


@pytest.mark.parametrize("case_name", ["h12-c1", "h16-c8", "h12-c48"])
def test_mla_decode_bf16_matches_reference(case_name: str) -> None:
    from kprof.correctness import relative_error

    w = _mla()
    case = next(c for c in w.cases("pr") if c.name == case_name)
    state = w.setup(case, "cuda", "bfloat16", 0)
    w.launch(state, frozenset(w.feature_names), {})()
    torch.cuda.synchronize()
    assert relative_error(state.out, w.reference(state)["out"]) < w.reference_rtol


@pytest.mark.parametrize("lever", ["pipelined_loads", "split_major_grid", "tiled_reduce", "wave_fit_splits"])
def test_mla_decode_lever_bytes_on_gpu(lever: str) -> None:
    from kprof.correctness import relative_error

    w = _mla()
    for name in ("h12-c1", "h12-c8", "h16-c48"):
        case = next(c for c in w.cases("pr") if c.name == name)
        state = w.setup(case, "cuda", "bfloat16", 1)
        w.launch(state, frozenset(), {})()
        off = state.out.clone()
        state.out.fill_(float("nan"))
        w.launch(state, frozenset({lever}), {})()
        torch.cuda.synchronize()
        if w.feature(lever).exactness == "bitwise":
            assert torch.equal(off.view(torch.int16), state.out.view(torch.int16)), name
        else:
            assert relative_error(state.out, off) <= w.feature(lever).rtol, name


def test_mla_wave_fit_reads_the_stage1_occupancy() -> None:
    """On an H200 stage 1 holds 2 programs per SM (264 slots): 24 requests get 11 splits, not 10."""
    w = _mla()
    case = next(c for c in w.cases("pr") if c.name == "h12-c24")
    state = w.setup(case, "cuda", "bfloat16", 0)
    state.lse_part.fill_(float("nan"))
    w.launch(state, frozenset({"wave_fit_splits"}), {})()
    torch.cuda.synchronize()
    written = int((~torch.isnan(state.lse_part[0, 0])).sum().item())
    if torch.cuda.get_device_properties(0).multi_processor_count == 132:
        assert written == 11
    else:  # another GPU: at least upstream's count
        assert written >= 10


@pytest.mark.parametrize(
    ("module", "case_name"),
    [("gdn_decode", "step-b32-hv32"), ("paged_decode", "b8-s8192"), ("mla_decode", "h12-c8")],
)
def test_plain_torch_leg_is_captured_in_a_cuda_graph(module: str, case_name: str) -> None:
    """kprof times every leg as a graph replay: the plain-PyTorch leg must not synchronise the host."""
    import importlib

    from kprof.correctness import relative_error

    w = importlib.import_module(f"kprof_kernels.{module}.workload").WORKLOAD
    case = next(c for c in w.cases("pr") if c.name == case_name)
    state = w.setup(case, "cuda", "bfloat16", 0)
    fn = w.launch_torch(state)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()  # warm-up outside the capture (allocator, library handles)
    stream.synchronize()
    w.reset(state)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    w.reset(state)
    graph.replay()
    torch.cuda.synchronize()
    for name, ref in w.reference(state).items():
        assert relative_error(w.outputs(state)[name], ref) < w.reference_rtol, name


@pytest.mark.parametrize(("rows", "chunk"), [(32, 4), (32, 16), (64, 16), (128, 32)])
def test_gdn_chunked_recurrent_walk_matches_reference(rows: int, chunk: int) -> None:
    from kprof.correctness import relative_error

    w = _gdn()
    case = next(c for c in w.cases("pr") if c.name == "recurrent-b32-hv32")
    state = w.setup(case, "cuda", "bfloat16", 0)
    w.launch(state, frozenset({"chunked_state"}), {"block_v": rows, "chunk_rows": chunk})()
    torch.cuda.synchronize()
    for name, ref in w.reference(state).items():
        assert relative_error(w.outputs(state)[name], ref) < w.reference_rtol, name


def test_kernel_times_time_the_kernels_without_the_launch() -> None:
    """The same graphs timed both ways: the kernel time is shorter than the event time by the launch (a few
    µs) and still sees a planted spin; the label says which timer ran."""
    from kprof.timer.cuda import CudaEventTimer
    from kprof.timer.kernel_time import KERNEL_TIME_LABEL

    timer = CudaEventTimer()
    x = torch.ones(1 << 22, device="cuda")
    timer.prepare("plain", lambda: x.mul_(1.0))
    timer.prepare("spin", lambda: (x.mul_(1.0), torch.cuda._sleep(100_000)))
    events = timer.time_round(["plain", "spin"], 20)
    timer.kernel_time = True
    assert timer.label == KERNEL_TIME_LABEL
    spans = timer.time_round(["plain", "spin", "plain"], 20)
    assert len(spans["plain"]) == 40 and len(spans["spin"]) == 20
    ev_plain, sp_plain = sorted(events["plain"])[10], sorted(spans["plain"])[20]
    assert 0 < sp_plain < ev_plain
    assert sorted(spans["spin"])[10] > sp_plain + 10_000


def test_recapture_replaces_each_graph_and_keeps_its_work() -> None:
    """``--captures per-round``: every recaptured item is a new graph that does the same work."""
    from kprof.timer.cuda import CudaEventTimer

    timer = CudaEventTimer()
    x = torch.zeros(1 << 20, device="cuda")
    timer.prepare("add", lambda: x.add_(1.0))
    first = timer.graphs["add"]
    timer.recapture(["add"])
    assert timer.graphs["add"] is not first
    x.zero_()
    timer.replay("add")
    torch.cuda.synchronize()
    assert float(x[0]) == 1.0


def test_planted_spins_add_what_they_were_asked_for() -> None:
    """The spin ladder, measured in kernel time: a 500 ns spin adds 500 ns (± 20%)."""
    from kprof.timer.cuda import CudaEventTimer
    from kprof.timer.spins import cycles_for, ladder, ladder_fit, measure_ladder

    timer = CudaEventTimer()
    timer.kernel_time = True
    rungs = ladder(4000)
    added = measure_ladder(timer, rungs, seed=0)
    cycles = cycles_for(500.0, ladder_fit(rungs, added))
    timer.prepare("zero", lambda: torch.cuda._sleep(0))
    timer.prepare("planted", lambda: torch.cuda._sleep(cycles))
    times = timer.time_round(["zero", "planted"] * 5, 40)
    delta = float(np.mean(times["planted"]) - np.mean(times["zero"]))
    assert 400 < delta < 600


SYNCING_WORKLOAD = """
import torch
from kprof.workload import Case, Workload


class Syncing(Workload):
    name = "syncing"
    presets = {"pr": (Case("n", {"n": 1 << 20}),), "smoke": (Case("n", {"n": 1 << 10}),)}

    def setup(self, case, device, dtype, seed):
        x = torch.randn(case.params["n"], device=device, dtype=getattr(torch, dtype))
        return {"x": x, "y": torch.empty_like(x)}

    def launch(self, state, features, params):
        x, y = state["x"], state["y"]

        def run():
            scale = float((x.abs().sum() > 0).item()) + 1.0  # a host sync, as a public API's .item()
            torch.mul(x, scale, out=y)

        return run

    def outputs(self, state):
        return {"y": state["y"]}

    def reference(self, state):
        return {"y": state["x"].double() * 2.0}


WORKLOAD = Syncing()
"""


def test_a_host_syncing_launch_is_refused_in_one_line_and_timed_eagerly(tmp_path) -> None:
    """Graph capture of a call that runs .item(): one line naming the call and the ways out; with
    --captures none the same workload is timed, labelled eager."""
    import json

    from typer.testing import CliRunner

    from kprof.cli import app

    bench = tmp_path / "syncing.py"
    bench.write_text(SYNCING_WORKLOAD)
    runner = CliRunner()
    args = ["run", str(bench), "--design", "endpoints", "--rounds", "6", "--format", "json"]
    graphs = runner.invoke(app, [*args, "--out", str(tmp_path / "graphs")])
    said = graphs.output
    assert "cannot be captured in a CUDA graph: the call synchronises with the host (" in said, said[-2000:]
    assert "syncing.py" in said and "--captures none" in said
    eager = runner.invoke(app, [*args, "--captures", "none", "--out", str(tmp_path / "eager")])
    assert eager.exit_code == 0, eager.output[-2000:]
    report = json.loads(eager.stdout)
    assert report["timer"].startswith("cuda-events (device time, eager calls") or "eager calls" in report["timer"]
    assert {r["verdict"] for r in report["legs"] if r["leg"].endswith("(A/A)")} <= {"SAME", "UNRESOLVED"}
