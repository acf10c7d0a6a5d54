"""Decode steps of flash-linear-attention's Gated DeltaNet kernel as a whole program: each step in a
``decode_step`` range, the recurrent state carried from step to step, a small PyTorch op per step (the
beta gate) as a model's layer has. Kept outside fla's repository; run against its revisions with

    kprof run --rev A --rev B --repo PATH/TO/flash-linear-attention --collector torch \\
        --steps decode_step -- python benchmarks/fla_decode_steps.py

BATCH (default 32) sequences, STEPS (default 24) steps; H = 16, HV = 32, K = V = 128 (Qwen3-Next).
"""

import os

import torch
from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule
from torch.profiler import record_function

B, STEPS = int(os.environ.get("BATCH", "32")), int(os.environ.get("STEPS", "24"))
H, HV, D = 16, 32, 128

torch.manual_seed(0)
dev = "cuda"
q = torch.randn(B, 1, H, D, device=dev, dtype=torch.bfloat16)
k = torch.nn.functional.normalize(torch.randn(B, 1, H, D, device=dev), dim=-1).to(torch.bfloat16)
v = torch.randn(B, 1, HV, D, device=dev, dtype=torch.bfloat16)
g = -torch.rand(B, 1, HV, device=dev) * 0.5
b_logits = torch.randn(B, 1, HV, device=dev)
state = torch.randn(B, HV, D, D, device=dev) * 0.1
for _ in range(STEPS):
    with record_function("decode_step"):
        beta = torch.sigmoid(b_logits)
        o, state = fused_recurrent_gated_delta_rule(
            q=q, k=k, v=v, g=g, beta=beta, scale=D**-0.5, initial_state=state, output_final_state=True
        )
torch.cuda.synchronize()
print(f"{STEPS} steps, |o| = {o.float().abs().mean().item():.4f}")
