"""copy: a bf16 device-to-device copy (``Tensor.copy_``): the bandwidth every other workload is measured against.

No levers: it is the 100%-bandwidth reference and the simplest kernel to plant delays into
(``kprof calibrate copy``). Bytes counted as read + written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kprof.workload import Case, Workload

if TYPE_CHECKING:  # torch is imported where a buffer is made: `kprof kernels` lists without it
    import torch

MIB = 1 << 20


@dataclass
class State:
    src: torch.Tensor
    dst: torch.Tensor


class Copy(Workload):
    name = "copy"
    description = "bf16 device-to-device copy (Tensor.copy_): bandwidth reference and calibration target"
    features = ()
    presets = {
        "smoke": (Case("64KiB", {"bytes": 64 << 10}),),
        "pr": (Case("8MiB", {"bytes": 8 * MIB}), Case("256MiB", {"bytes": 256 * MIB})),
        # the copy's own rate by size: a small kernel moves its bytes at less than the 1 GiB rate
        "sizes": tuple(Case(f"{m}MiB", {"bytes": m * MIB}) for m in (16, 64, 256, 1024)),
    }
    reference_rtol = 0.0

    def setup(self, case: Case, device: str, dtype: str, seed: int) -> State:
        import torch

        n = case.params["bytes"] // 2
        gen = torch.Generator(device="cpu").manual_seed(seed)
        src = torch.randn(n, generator=gen).to(getattr(torch, dtype)).to(device)
        return State(src=src, dst=torch.empty_like(src))

    def launch(self, state: State, features: frozenset[str], params: Mapping[str, Any]) -> Callable[[], None]:
        return lambda: state.dst.copy_(state.src)

    def outputs(self, state: State) -> dict[str, torch.Tensor]:
        return {"dst": state.dst}

    def reference(self, state: State) -> dict[str, torch.Tensor]:
        return {"dst": state.src.double()}

    def bytes_per_call(self, case: Case) -> dict[str, int]:
        return {"unique": 2 * case.params["bytes"]}


WORKLOAD = Copy()
