"""gdn_decode at smoke shapes in fp16/fp32 (interpreter without a GPU): float64 reference, padding
and untouched slots, and bit-exactness of every lever over three consecutive steps."""

from __future__ import annotations

import pytest
import torch

from conftest import DEVICE
from kprof.correctness import poison, relative_error
from kprof_kernels.gdn_decode.workload import WORKLOAD, _case

LEVERS = WORKLOAD.feature_names
CASES = WORKLOAD.cases("smoke")


def _step(state, features: frozenset[str], steps: int = 1) -> dict[str, torch.Tensor]:
    poison({k: v for k, v in WORKLOAD.outputs(state).items() if not k.endswith("_state")})
    fn = WORKLOAD.launch(state, features, {})
    for _ in range(steps):
        fn()
    return {k: v.clone() for k, v in WORKLOAD.outputs(state).items()}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_one_step_matches_float64(case, dtype: str) -> None:
    state = WORKLOAD.setup(case, DEVICE, dtype, 0)
    out = _step(state, frozenset(LEVERS))
    ref = WORKLOAD.reference(state)
    for name, value in ref.items():
        assert relative_error(out[name], value) < (2e-2 if dtype == "float16" else 1e-4), name


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_padding_rows_and_untouched_slots(case) -> None:
    state = WORKLOAD.setup(case, DEVICE, "float32", 1)
    out = _step(state, frozenset())
    idx = state.indices.tolist()
    slots = state.ssm_state.shape[0]
    used = {s for s in idx if 0 <= s < slots}
    for s in range(slots):
        if s not in used:  # rows not in the batch stay bit-identical
            assert torch.equal(out["ssm_state"][s], state.ssm_state0[s])
            assert torch.equal(out["conv_state"][s], state.conv_state0[s])
    qkv_dim = state.weight.shape[0]
    for n, s in enumerate(idx):
        if not 0 <= s < slots:  # padding: x passed through, zeros out
            assert torch.equal(out["mixed_qkv"][n], state.mixed_qkvz[n, :qkv_dim])
            assert (out["out"][n] == 0).all()


# 3–8 s a lever in the interpreter: conv_warps (the quickest) by default, every lever in CI's slow step
@pytest.mark.parametrize(
    "lever", [lever if lever == "conv_warps" else pytest.param(lever, marks=pytest.mark.slow) for lever in LEVERS]
)
def test_each_lever_is_bit_exact_over_three_steps(lever: str) -> None:
    for case in CASES:
        off_state = WORKLOAD.setup(case, DEVICE, "float16", 2)
        on_state = WORKLOAD.setup(case, DEVICE, "float16", 2)
        off = _step(off_state, frozenset(), steps=3)
        on = _step(on_state, frozenset({lever}), steps=3)
        for name in off:
            a, b = off[name], on[name]
            assert torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)), (case.name, name)


@pytest.mark.parametrize("params", [{"block_v": 16}, {"block_v": 8}, {"recurrent_warps": 4}])
def test_forced_recurrent_tiling_gives_the_same_result(params) -> None:
    case = CASES[0]
    base = _step(WORKLOAD.setup(case, DEVICE, "float32", 4), frozenset())
    state = WORKLOAD.setup(case, DEVICE, "float32", 4)
    poison({k: v for k, v in WORKLOAD.outputs(state).items() if not k.endswith("_state")})
    WORKLOAD.launch(state, frozenset(), params)()
    for name, value in WORKLOAD.outputs(state).items():
        assert relative_error(value, base[name]) < 1e-5, name


@pytest.mark.parametrize(("dim", "rows", "chunk"), [(32, 32, 8), (32, 32, 4), (64, 64, 16)])
def test_chunked_walk_is_bit_identical_to_one_chunk_per_program(dim: int, rows: int, chunk: int) -> None:
    """The same chunk-sized tiles, walked by one program each or rows/chunk at a time with the next
    one in flight: every output and the whole pool (padding rows and untouched slots included)
    bit-equal."""
    case = _case("b4-rec-pad", 4, hv=4, h=2, dim=dim, pad=True, part="recurrent")  # inputs made at setup
    results = []
    for features, params in (
        (frozenset(), {"block_v": chunk}),
        ({"chunked_state"}, {"block_v": rows, "chunk_rows": chunk}),
    ):
        state = WORKLOAD.setup(case, DEVICE, "float32", 5)
        state.out.fill_(float("nan"))
        WORKLOAD.launch(state, frozenset(features), params)()
        results.append((state.out.clone(), state.ssm_state.clone()))
    for a, b in zip(results[0], results[1]):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))


def test_chunks_that_do_not_tile_v_are_refused() -> None:
    case = _case("b2-rec", 2, hv=4, h=2, dim=32, part="recurrent")
    state = WORKLOAD.setup(case, DEVICE, "float32", 0)
    with pytest.raises(ValueError, match="do not tile"):
        WORKLOAD.launch(state, frozenset({"chunked_state"}), {"block_v": 64})()


def test_a_pool_not_contiguous_within_a_slot_is_refused() -> None:
    """The kernel addresses heads and rows from the constexpr shape, so a pool whose slot is not a
    contiguous [HV, V, K] block must be refused, not read at the wrong offsets."""
    case = _case("b2-rec", 2, hv=4, h=2, dim=32, part="recurrent")
    state = WORKLOAD.setup(case, DEVICE, "float32", 0)
    state.ssm_state = state.ssm_state.transpose(2, 3).contiguous().transpose(2, 3)  # [.., V, K], K-major
    with pytest.raises(ValueError, match="contiguous within a slot"):
        WORKLOAD.launch(state, frozenset(), {})()
