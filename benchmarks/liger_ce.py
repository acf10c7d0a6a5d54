"""A user's benchmark kept outside the repository it measures: Liger-Kernel's fused cross-entropy
kernel (``liger_kernel.ops.cross_entropy.liger_cross_entropy_kernel``: the loss and, in place, the
gradient of the logits) as a kprof workload. Liger-Kernel keeps its package under ``src/``; each
revision's ``liger_kernel`` is imported from its tree:

    kprof run benchmarks/liger_ce.py --revisions A..B --repo PATH/TO/Liger-Kernel \\
        --paths src/liger_kernel/ops/cross_entropy.py --case n8192-v32000

The kernel is called directly, as Liger's ``cross_entropy_forward`` calls it (one program per row,
BLOCK_SIZE = min(32768, next power of two of V), 32 warps, mean reduction, no weight, no z-loss):
the forward function reads ``n_non_ignore`` with ``.item()``, a host sync a CUDA graph cannot
capture. The kernel overwrites the logits with their gradient, so every call first copies the
logits from a pristine buffer (both included in the time; the copy is the same in every revision).
The float64 reference is the loss from its definition, a block of rows at a time.
"""

import torch
import triton
from liger_kernel.ops.cross_entropy import liger_cross_entropy_kernel

from kprof.workload import Case, Workload


def _case(n: int, v: int) -> Case:
    return Case(f"n{n}-v{v}", {"N": n, "V": v})


class LigerCrossEntropy(Workload):
    name = "liger_ce"
    description = "Liger-Kernel liger_cross_entropy_kernel: mean loss and logits' gradient, bf16"
    presets = {"smoke": (_case(8, 64),), "pr": (_case(8192, 32000),)}
    reference_rtol = 2e-2

    def setup(self, case, device, dtype, seed):
        n, v = case.params["N"], case.params["V"]
        g = torch.Generator(device="cpu").manual_seed(seed)
        logits = torch.randn(n, v, generator=g).to(device=device, dtype=getattr(torch, dtype))
        target = torch.randint(0, v, (n,), generator=g).to(device)
        return {"x0": logits, "x": torch.empty_like(logits), "y": target, "loss": torch.empty(n, device=device)}

    def launch(self, state, features, params):
        x0, x, y, loss = state["x0"], state["x"], state["y"], state["loss"]
        n, v = x.shape

        def run():
            x.copy_(x0)
            liger_cross_entropy_kernel[(n,)](
                X_ptr=x, X_stride=x.stride(-2), Y_ptr=y, Y_stride=y.stride(-1), weight_ptr=x,
                loss_ptr=loss, z_loss_ptr=loss, loss_stride=loss.stride(-1),
                token_accuracy_ptr=loss, token_accuracy_stride=0, predicted_tokens_ptr=loss,
                predicted_tokens_stride=0, n_cols=v, n_non_ignore=n, sum_non_ignore_weight=n,
                weight_sum=0.0, ignore_index=-100, lse_square_scale=0.0, label_smoothing=0.0,
                reduction="mean", softcap=None, RETURN_Z_LOSS=False, RETURN_TOKEN_ACCURACY=False,
                RETURN_PREDICTED_TOKENS=False, BLOCK_SIZE=min(32768, triton.next_power_of_2(v)),
                HAS_WEIGHT=False, HAS_SOFTCAPPING=False, HAS_GRADIENTS=True, num_warps=32,
            )  # fmt: skip

        return run

    def outputs(self, state):
        return {"loss": state["loss"]}

    def reference(self, state):
        x0, y = state["x0"], state["y"]
        rows = []
        for start in range(0, x0.shape[0], 512):  # float64 a block at a time: 2 GiB whole at the PR's shape
            block = x0[start : start + 512].double()
            picked = block.gather(1, y[start : start + 512, None])[:, 0]
            rows.append((torch.logsumexp(block, dim=1) - picked) / x0.shape[0])
        return {"loss": torch.cat(rows)}

    def bytes_per_call(self, case):
        n, v = case.params["N"], case.params["V"]
        return {"logical": 2 * n * v * 2 + 2 * n * v * 2}  # the copy (read + write), then read x, write grad


WORKLOAD = LigerCrossEntropy()
