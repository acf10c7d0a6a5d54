"""mla_decode at smoke shapes in fp16/fp32 (interpreter without a GPU): float64 reference, forced split
counts (empty leading splits included), and lever exactness."""

from __future__ import annotations

import pytest
import torch

from conftest import DEVICE, HAS_GPU
from kprof.correctness import relative_error
from kprof_kernels.mla_decode.kernel import wave_fit_splits
from kprof_kernels.mla_decode.workload import WORKLOAD, _case

LEVERS = WORKLOAD.feature_names
CASES = WORKLOAD.cases("smoke")


def _run(case, features, dtype="float32", params=None, seed=0):
    state = WORKLOAD.setup(case, DEVICE, dtype, seed)
    state.out.fill_(float("nan"))
    WORKLOAD.launch(state, frozenset(features), params or {})()
    return state


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("features", [(), LEVERS], ids=["baseline", "all"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_matches_float64(case, features, dtype) -> None:
    state = _run(case, features, dtype)
    tol = 5e-3 if dtype == "float16" or HAS_GPU else 1e-5
    assert relative_error(state.out, WORKLOAD.reference(state)["out"]) < tol


@pytest.mark.parametrize("splits", [1, 2, 3, 7, 64])
def test_forced_splits_including_empty_ones(splits: int) -> None:
    state = _run(CASES[1], LEVERS, "float32", {"num_splits": splits})
    assert relative_error(state.out, WORKLOAD.reference(state)["out"]) < (5e-3 if HAS_GPU else 1e-5)


@pytest.mark.parametrize("lever", LEVERS)
def test_lever_bytes(lever: str) -> None:
    for case in CASES:
        off = _run(case, ()).out
        on = _run(case, (lever,)).out
        if WORKLOAD.feature(lever).exactness == "bitwise":
            assert torch.equal(off.view(torch.int32), on.view(torch.int32)), case.name
        else:
            assert relative_error(on, off) <= WORKLOAD.feature(lever).rtol


def test_prefix_is_shared_through_the_page_table() -> None:
    state = WORKLOAD.setup(CASES[0], DEVICE, "float32", 0)
    p = CASES[0].params
    assert torch.equal(state.page_table[0, : p["prefix"]], state.page_table[1, : p["prefix"]])
    assert not torch.equal(state.page_table[0, p["prefix"] :], state.page_table[1, p["prefix"] :])


@pytest.mark.parametrize("params", [{"block_n": 16}, {"block_n": 64}, {"stage1_warps": 8}])
def test_forced_stage1_tiling_matches_float64(params) -> None:
    # fp32 tiles of 64 rows, 3 stages deep, need 245 KiB of shared memory: more than an H200 has
    state = _run(CASES[1], LEVERS, "float16" if HAS_GPU else "float32", params)
    assert relative_error(state.out, WORKLOAD.reference(state)["out"]) < (5e-3 if HAS_GPU else 1e-5)


# H200: 132 SMs, stage 1 (4 warps, 214 registers) holds 2 programs per SM, so 264 slots; the
# grids are B · S programs (one head block). Upstream's S = 256 // B leaves 24 of 264 slots idle at
# B = 24 (S 10) and B = 48 (S 5); 11 splits fill whole waves there. At B = 8 and 16 the last wave
# is 97% full already, and B = 1 is bounded by the 256-split cap.
@pytest.mark.parametrize(
    ("batch", "base", "expected"), [(1, 256, 256), (8, 32, 32), (16, 16, 16), (24, 10, 11), (48, 5, 11)]
)
def test_wave_fit_splits_on_h200_grids(batch: int, base: int, expected: int) -> None:
    assert wave_fit_splits(base, batch, 264, 256) == expected


def test_wave_fit_splits_falls_back_to_the_fullest_wave() -> None:
    # 7 programs per split on 10 slots: splits 2 … 4 fill 0.7, 0.7 (2.1 of 3 waves), 0.933 → 4;
    # allowed up to 8 (4 · base), 7 splits fill 4.9 of 5 waves (0.98)
    assert wave_fit_splits(2, 7, 10, 4) == 4
    assert wave_fit_splits(2, 7, 10, 100) == 7
    assert wave_fit_splits(3, 7, 10, 3) == 3  # bounded by the tile count: nothing to choose


@pytest.mark.slow  # two interpreted decodes (14 s); the H200 tests run the lever on every pr case
def test_wave_fit_lever_changes_the_split_count_and_stays_within_tolerance() -> None:
    """32 requests of 320 tokens: upstream gives 8 splits (256 programs); on a device of 100 SMs
    (one program per SM under the interpreter) 9 splits fill 2.88 of 3 waves. The ninth split's
    log-sum-exp is written only when the lever is on."""
    case = _case("b32-h4-c320", 32, 4, context=320, prefix=200, share=8)
    outs = {}
    for features in ((), ("wave_fit_splits",)):
        state = WORKLOAD.setup(case, DEVICE, "float32", 0)
        state.num_sms = 100
        state.lse_part.fill_(float("nan"))
        WORKLOAD.launch(state, frozenset(features), {})()
        written = (~torch.isnan(state.lse_part[0, 0])).sum().item()
        assert written == (9 if features else 8)
        outs[features] = state.out.clone()
        assert relative_error(state.out, WORKLOAD.reference(state)["out"]) < (5e-3 if HAS_GPU else 1e-5)
    assert relative_error(outs[("wave_fit_splits",)], outs[()]) <= WORKLOAD.feature("wave_fit_splits").rtol


# Nine requests in groups of four (the last group holds one) sharing a 50-token prefix: the prefix
# kernel serves up to four requests per program, over 1 … 7 splits (some empty at 7).
SHARED = _case("b9-h4-c80", 9, 4, context=80, prefix=50, share=4)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"prefix_splits": 1},
        {"prefix_splits": 7},
        {"prefix_requests": 1},
        {"prefix_requests": 3},
        {"prefix_block_n": 16, "prefix_stages": 2},
        {"num_splits": 3, "prefix_splits": 2},
    ],
    ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "default",
)
def test_shared_prefix_matches_float64(params) -> None:
    state = WORKLOAD.setup(SHARED, DEVICE, "float32", 0)
    state.lse_part.fill_(float("nan"))
    WORKLOAD.launch(state, frozenset({"shared_prefix", "pipelined_loads"}), params)()
    assert relative_error(state.out, WORKLOAD.reference(state)["out"]) < (5e-3 if HAS_GPU else 1e-5)
    # the prefix's partials come first: exactly prefix_splits of them, then the requests' own splits
    prefix_splits = params.get("prefix_splits")
    if prefix_splits is not None:
        own = params.get("num_splits")
        written = (~torch.isnan(state.lse_part[0, 0])).sum().item()
        assert own is None or written == prefix_splits + own


def test_shared_prefix_plan_fills_64_rows_in_even_shares_of_a_group() -> None:
    from kprof_kernels.mla_decode.kernel import prefix_plan

    h12 = prefix_plan(16, 12, 63_240, 8, 132, 128)  # 8 requests × 12 heads: two programs of 4 (48 rows)
    assert (h12.requests_per_program, h12.block_m, h12.splits) == (4, 64, 33)
    h16 = prefix_plan(48, 16, 63_240, 8, 132, 128)  # 4 × 16 = 64 rows; 12 programs, 11 splits
    assert (h16.requests_per_program, h16.block_m, h16.splits) == (4, 64, 11)
    assert prefix_plan(16, 12, 63_240, 8, 132, 128, per_program=3).requests_per_program == 3  # 3+3+2
    assert prefix_plan(1, 12, 63_240, 8, 132, 128).requests_per_program == 1


def test_shared_prefix_is_a_no_op_where_no_prefix_is_shared() -> None:
    from test_levers import launches

    for lone in (
        _case("b1-h4-c80", 1, 4, context=80, prefix=50, share=8),  # one request: nothing to share
        _case("b2-h4-c80", 2, 4, context=80, prefix=50, share=8),  # two: too few to pay (MIN_SHARING)
    ):
        state = WORKLOAD.setup(lone, DEVICE, "float32", 0)
        assert launches(WORKLOAD, state, frozenset({"shared_prefix"})) == launches(WORKLOAD, state, frozenset())
    state = WORKLOAD.setup(SHARED, DEVICE, "float32", 0)
    kernels = [x.kernel for x in launches(WORKLOAD, state, frozenset({"shared_prefix"}))]
    assert kernels[0] == "mla_prefix_stage1" and "mla_decode_stage1" in kernels


def test_the_prefix_tile_falls_back_to_one_that_fits_the_device() -> None:
    """The fastest tile first; a device with less shared memory (or fp32 inputs, which double a
    tile's bytes) gets the next one that fits, and none when none fits (the lever does nothing)."""
    from kprof_kernels.mla_decode.kernel import PREFIX_TILES, fitting_prefix_tile, prefix_plan

    plan = prefix_plan(16, 12, 63_240, 8, 132, 128)
    asked = {(64, 2): 221_184, (32, 3): 147_712, (16, 2): 90_000}  # bytes each tile asks (bf16, H200)
    tried: list[tuple[int, int]] = []

    def compile_tile(candidate):  # type: ignore[no-untyped-def]
        tried.append((candidate.block_n, candidate.stages))
        return asked[(candidate.block_n, candidate.stages)]

    def fits(limit: int):  # type: ignore[no-untyped-def]
        return lambda need: need <= limit

    assert [t for t in PREFIX_TILES] == list(asked)
    chosen = fitting_prefix_tile(plan, compile_tile, fits(232_448))  # an H200
    assert chosen is not None and (chosen.block_n, chosen.stages) == (64, 2) and tried == [(64, 2)]
    chosen = fitting_prefix_tile(plan, compile_tile, fits(166_912))  # an A100
    assert chosen is not None and (chosen.block_n, chosen.stages) == (32, 3)
    assert fitting_prefix_tile(plan, compile_tile, fits(65_536)) is None  # 64 KiB of LDS: nothing fits
