"""A decode loop as a whole program with step markers, for kprof's per-step headline: each of STEPS
steps (default 20) in a ``decode_step`` range runs an MLP-like GEMM (bf16, [32, 4096] × [4096, WIDTH],
WIDTH default 14336), a Triton elementwise kernel and a softmax. The Triton kernel is autotuned over
six configurations on its first call, inside the first step: that step's device time (and so GPU
busy per process) holds the autotuner's benchmarking, as a real program's first step does.

    kprof run --leg a --leg b --leg narrow:WIDTH=12288 --collector torch --steps decode_step \\
        --rounds 8 -- python benchmarks/decode_steps.py

``a`` and ``b`` are the same program (a second null comparison beside the A/A); ``narrow`` does
12288/14336 of the GEMM's work.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from torch.profiler import record_function


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (512, 1024, 2048) for w in (4, 8)],
    key=["n"],
    do_bench=lambda fn, **kw: triton.testing.do_bench(fn, warmup=5, rep=20, **kw),  # a short tune: fewer events
)
@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o_x = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask_x = o_x < n
    b_x = tl.load(x_ptr + o_x, mask=mask_x, other=0.0).to(tl.float32)
    b_y = 0.5 * b_x * (1 + tl.math.erf(b_x * 0.7071067811865476))
    tl.store(y_ptr + o_x, b_y.to(y_ptr.dtype.element_ty), mask=mask_x)


def main() -> None:
    steps, width = int(os.environ.get("STEPS", "20")), int(os.environ.get("WIDTH", "14336"))
    torch.manual_seed(0)
    x = torch.randn(32, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, width, device="cuda", dtype=torch.bfloat16) * 0.02
    logits = torch.randn(32, 32000, device="cuda")
    for _ in range(steps):
        with record_function("decode_step"):
            h = x @ w
            g = torch.empty_like(h)
            n = h.numel()
            _gelu_kernel[lambda meta, n=n: (triton.cdiv(n, meta["BLOCK"]),)](h, g, n)
            torch.softmax(logits, dim=-1)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
