"""The plain-PyTorch implementations kprof times beside the Triton kernels agree with float64."""

from __future__ import annotations

import pytest

from conftest import DEVICE
from kprof.correctness import poison, relative_error
from kprof_kernels.gdn_decode.workload import WORKLOAD as GDN
from kprof_kernels.mla_decode.workload import WORKLOAD as MLA
from kprof_kernels.paged_decode.workload import WORKLOAD as PAGED


@pytest.mark.parametrize("workload", [PAGED, MLA, GDN], ids=lambda w: w.name)
def test_plain_torch_matches_the_float64_reference(workload) -> None:
    for case in workload.cases("smoke"):
        state = workload.setup(case, DEVICE, "float32", 0)
        poison({k: v for k, v in workload.outputs(state).items() if not k.endswith("_state")})
        workload.launch_torch(state)()
        for name, ref in workload.reference(state).items():
            assert relative_error(workload.outputs(state)[name], ref) < 1e-4, (case.name, name)


def test_scatter_rows_leaves_padding_and_unused_slots_alone() -> None:
    import torch

    from kprof_kernels.gdn_decode.plain_torch import scatter_rows

    pool = torch.arange(12.0).view(6, 2)
    rows = torch.tensor([[100.0, 101.0], [200.0, 201.0], [300.0, 301.0]])
    slots = torch.tensor([4, 0, 2])  # padding rows are clamped to a real slot before this call
    scatter_rows(pool, slots, torch.tensor([False, True, False]), rows)
    expected = torch.arange(12.0).view(6, 2)
    expected[0] = rows[1]
    assert torch.equal(pool, expected)
    scatter_rows(pool, slots, torch.tensor([False, False, False]), rows)  # no valid row: nothing moves
    assert torch.equal(pool, expected)
