"""gdn_decode as a user would write it in plain PyTorch: gather the slots' states, compute, scatter
back. No host synchronisation (no boolean-mask indexing), so it can be captured in a CUDA graph."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def scatter_rows(pool: torch.Tensor, slots: torch.Tensor, valid: torch.Tensor, rows: torch.Tensor) -> None:
    """pool[slots[i]] = rows[i] for the valid i, without a host sync: padding rows are redirected to
    the first valid row's slot with that row's value, so duplicate writes agree; with no valid row,
    the first row's (clamped) slot is rewritten with its own contents."""
    first = torch.argmax(valid.to(torch.int32)).view(1)  # a 1-element index: a 0-d one would sync
    dest = torch.where(valid, slots, slots[first])
    keep = valid.view(-1, *([1] * (rows.dim() - 1)))
    src = torch.where(keep, rows, rows[first])
    src = torch.where(valid.any(), src, pool[dest])
    pool.index_copy_(0, dest, src.to(pool.dtype))


def conv_update_torch(
    mixed_qkvz, ba, conv_state, weight, bias, indices, mixed_qkv, z, b, a, *, hv: int, v: int, silu: bool
) -> None:
    qkv_dim, width = weight.shape
    x = mixed_qkvz[:, :qkv_dim]
    valid = (indices >= 0) & (indices < conv_state.shape[0])
    slots = indices.long().clamp(0, conv_state.shape[0] - 1)
    window = torch.cat([conv_state[slots, :, : width - 1], x[:, :, None]], dim=2)  # [B, f, W]
    y = (window * weight).float().sum(dim=2)
    if bias is not None:
        y = y + bias.float()
    if silu:
        y = F.silu(y)
    mixed_qkv.copy_(torch.where(valid[:, None], y.to(x.dtype), x))
    scatter_rows(conv_state[:, :, : width - 1], slots, valid, window[:, :, 1:])
    z.copy_(mixed_qkvz[:, qkv_dim : qkv_dim + hv * v])
    b.copy_(ba[:, :hv])
    a.copy_(ba[:, hv:])


def recurrent_torch(
    mixed_qkv, a, b, a_log, dt_bias, ssm_state, indices, out, *, h: int, hv: int, k: int, v: int
) -> None:
    batch = mixed_qkv.shape[0]
    valid = (indices >= 0) & (indices < ssm_state.shape[0])
    slots = indices.long().clamp(0, ssm_state.shape[0] - 1)
    x = mixed_qkv.float()
    q = x[:, : h * k].view(batch, h, k).repeat_interleave(hv // h, dim=1)
    kk = x[:, h * k : 2 * h * k].view(batch, h, k).repeat_interleave(hv // h, dim=1)
    vv = x[:, 2 * h * k :].view(batch, hv, v)
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6) * k**-0.5
    kk = kk / torch.sqrt((kk * kk).sum(-1, keepdim=True) + 1e-6)
    g = -torch.exp(a_log.float()) * F.softplus(a.float() + dt_bias.float())  # [B, HV]
    beta = torch.sigmoid(b.float())
    s = ssm_state[slots] * torch.exp(g)[:, :, None, None]  # [B, HV, V, K]
    v_new = beta[:, :, None] * (vv - torch.einsum("bhvk,bhk->bhv", s, kk))
    s = s + v_new[:, :, :, None] * kk[:, :, None, :]
    o = torch.einsum("bhvk,bhk->bhv", s, q)
    out.copy_(torch.where(valid[:, None, None], o, 0.0).to(out.dtype))
    scatter_rows(ssm_state, slots, valid, s)
