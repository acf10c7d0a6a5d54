"""paged_decode as a user would write it in plain PyTorch: gather the pages, then SDPA with a mask."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def paged_decode_torch(q, k_cache, v_cache, block_table, seq_lens, out, scale: float, window: int | None) -> None:
    batch, hq, d = q.shape
    blocks, bs, hkv = block_table.shape[1], k_cache.shape[1], k_cache.shape[2]
    k = k_cache[block_table.long()].reshape(batch, blocks * bs, hkv, d).transpose(1, 2)  # [B, Hkv, T, D]
    v = v_cache[block_table.long()].reshape(batch, blocks * bs, hkv, d).transpose(1, 2)
    t = torch.arange(blocks * bs, device=q.device)
    keep = t[None, :] < seq_lens[:, None].long()
    if window is not None:
        keep &= t[None, :] >= (seq_lens[:, None].long() - window)
    o = F.scaled_dot_product_attention(
        q[:, :, None, :], k, v, attn_mask=keep[:, None, None, :], scale=scale, enable_gqa=True
    )
    out.copy_(o[:, :, 0])
