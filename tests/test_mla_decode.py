"""mla_decode at smoke shapes in fp16/fp32 (interpreter without a GPU): float64 reference, forced split
counts (empty leading splits included), and lever exactness."""

from __future__ import annotations

import pytest
import torch

from conftest import DEVICE, HAS_GPU
from kernels.mla_decode.workload import WORKLOAD
from kprof.correctness import relative_error

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
    state = _run(CASES[1], LEVERS, "float32", params)
    assert relative_error(state.out, WORKLOAD.reference(state)["out"]) < (5e-3 if HAS_GPU else 1e-5)
