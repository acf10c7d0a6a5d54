"""float64 reference of absorbed MLA decode: gather each request's rows, softmax, weighted sum of V."""

from __future__ import annotations

import torch

from kprof_kernels.mla_decode import KV_LORA


def mla_decode_reference(q, kv, page_table, seq_lens, sm_scale: float) -> torch.Tensor:
    """[B, H, 512] float64. K is the whole 576-wide row, V its first 512 values."""
    batch, heads, _ = q.shape
    out = torch.empty(batch, heads, KV_LORA, dtype=torch.float64, device=q.device)
    for b in range(batch):
        rows = kv[page_table[b, : int(seq_lens[b])].long()].double()  # [n, 576]
        s = (q[b].double() @ rows.T) * sm_scale  # [H, n]
        out[b] = torch.softmax(s, dim=-1) @ rows[:, :KV_LORA]
    return out
