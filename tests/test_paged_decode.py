"""paged_decode at smoke shapes in fp16/fp32 (under the Triton interpreter without a GPU): reference
and lever exactness. bf16 and realistic shapes are in test_gpu.py."""

from __future__ import annotations

import pytest
import torch

from conftest import DEVICE, HAS_GPU
from kprof.workload import Case
from kprof_kernels.paged_decode.workload import WORKLOAD

LEVERS = WORKLOAD.feature_names


def _run(case: Case, features: frozenset[str], dtype: str = "float16", params=None, seed: int = 0):
    state = WORKLOAD.setup(case, DEVICE, dtype, seed)
    state.out.fill_(float("nan"))
    WORKLOAD.launch(state, features, params or {})()
    return state


@pytest.mark.parametrize("case", WORKLOAD.cases("smoke"), ids=lambda c: c.name)
@pytest.mark.parametrize("features", [frozenset(), frozenset(LEVERS)], ids=["baseline", "all"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_matches_float64_reference(case: Case, features: frozenset[str], dtype: str) -> None:
    state = _run(case, features, dtype)
    ref = WORKLOAD.reference(state)["out"]
    err = (state.out.double() - ref).abs().max() / ref.abs().max()
    assert not torch.isnan(state.out).any()
    # fp32 tl.dot runs as TF32 on NVIDIA GPUs (10-bit mantissa products), exact fp32 in the interpreter.
    fp32_tol = 5e-3 if HAS_GPU else 1e-5
    assert err < (2e-3 if dtype == "float16" else fp32_tol)


@pytest.mark.parametrize("lever", ["prefetch_pages", "skip_masked_tiles"])
# ungrouped: 7 s each in the interpreter, run in CI's slow step (the grouped ones keep both levers
# in the default run under its 5 minutes)
@pytest.mark.parametrize("grouped", [pytest.param(False, marks=pytest.mark.slow), True])
def test_bitwise_levers_change_no_byte(lever: str, grouped: bool) -> None:
    base = frozenset({"grouped_heads"}) if grouped else frozenset()
    for case in WORKLOAD.cases("smoke"):
        off = _run(case, base).out
        on = _run(case, base | {lever}).out
        assert torch.equal(off.view(torch.int16), on.view(torch.int16)), case.name


def test_grouped_heads_is_within_its_declared_tolerance() -> None:
    case = WORKLOAD.cases("smoke")[0]
    per_head = _run(case, frozenset(), "float32").out.double()
    grouped = _run(case, frozenset({"grouped_heads"}), "float32").out.double()
    rel = (per_head - grouped).abs().max() / per_head.abs().max()
    assert rel < WORKLOAD.feature("grouped_heads").rtol


@pytest.mark.parametrize("splits", [1, 2, 3, 8])
def test_forced_split_counts_agree(splits: int) -> None:
    case = WORKLOAD.cases("smoke")[1]
    state = _run(case, frozenset({"grouped_heads"}), "float32", {"num_splits": splits})
    ref = WORKLOAD.reference(state)["out"]
    assert ((state.out.double() - ref).abs().max() / ref.abs().max()) < (5e-3 if HAS_GPU else 1e-5)


def test_window_smaller_than_a_tile_and_short_sequences() -> None:
    case = Case("tiny", dict(batch=2, seq=5, hq=4, hkv=1, d=32, window=3, block_size=4, ragged=False))
    for features in (frozenset(), frozenset(LEVERS)):
        state = _run(case, features, "float32")
        ref = WORKLOAD.reference(state)["out"]
        assert ((state.out.double() - ref).abs().max() / ref.abs().max()) < (5e-3 if HAS_GPU else 1e-5)


def test_ragged_lengths_are_the_cases_shape_not_the_seeds() -> None:
    """Two runs (other seeds) and every buffer set time the same work: the lengths come from the
    case; the seed still varies the page table and the values."""
    case = WORKLOAD.cases("smoke")[0]
    a, b = WORKLOAD.setup(case, DEVICE, "float32", 11_000), WORKLOAD.setup(case, DEVICE, "float32", 12_003)
    assert torch.equal(a.seq_lens, b.seq_lens)
    assert not torch.equal(a.block_table, b.block_table)
    assert not torch.equal(a.q, b.q)
    lens = WORKLOAD.setup(Case("b8", dict(case.params, batch=8, seq=512)), "cpu", "float32", 0).seq_lens
    assert lens[0] == 512 and len(set(lens.tolist())) > 4 and int(lens.min()) >= 3 * 512 // 4
