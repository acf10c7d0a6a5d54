"""mla_decode as a user would write it in plain PyTorch: gather every request's rows, two matmuls."""

from __future__ import annotations

import torch

from kprof_kernels.mla_decode import KV_LORA


def mla_decode_torch(q, kv, page_table, seq_lens, out, sm_scale: float) -> None:
    """All requests of a case share one context length (the pr workload), so no length mask."""
    rows = kv[page_table.long()]  # [B, T, 576]
    s = torch.matmul(q, rows.transpose(1, 2)).float() * sm_scale  # [B, H, T]
    p = torch.softmax(s, dim=-1).to(kv.dtype)
    out.copy_(torch.matmul(p, rows[..., :KV_LORA]))
