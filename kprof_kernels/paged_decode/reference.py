"""float64 reference for paged decode attention: gather each request's keys, softmax, weighted sum."""

from __future__ import annotations

import torch


def paged_decode_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    window: int | None,
) -> torch.Tensor:
    """[B, Hq, D] float64 output; shapes as in ``kernel.paged_decode``."""
    batch, hq, _ = q.shape
    block_size, hkv = k_cache.shape[1], k_cache.shape[2]
    group = hq // hkv
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    for b in range(batch):
        n = int(seq_lens[b])
        t = torch.arange(n, device=q.device)
        rows = block_table[b, t // block_size].long() * block_size + t % block_size
        k = k_cache.flatten(0, 1)[rows].double()  # [n, Hkv, D]
        v = v_cache.flatten(0, 1)[rows].double()
        k = k.repeat_interleave(group, dim=1)  # [n, Hq, D]
        v = v.repeat_interleave(group, dim=1)
        s = torch.einsum("hd,nhd->hn", q[b].double(), k) * scale
        if window is not None:
            s[:, t < n - window] = float("-inf")
        out[b] = torch.einsum("hn,nhd->hd", torch.softmax(s, dim=-1), v)
    return out
