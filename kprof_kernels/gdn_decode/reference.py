"""float64 reference of one Gated-DeltaNet decode step (conv update, then the gated delta rule)."""

from __future__ import annotations

import torch


def conv_update_reference(x, conv_state, weight, bias, indices, silu: bool):
    """Returns (y [B, qkv_dim] float64, new conv_state float64 copy). Padding rows pass x through."""
    state = conv_state.double().clone()
    width = weight.shape[1]
    y = x.double().clone()
    for n, slot in enumerate(indices.tolist()):
        if not 0 <= slot < state.shape[0]:
            continue
        window = torch.cat([state[slot, :, : width - 1], x[n].double()[:, None]], dim=1)  # [f, W]
        acc = (window * weight.double()).sum(dim=1)
        if bias is not None:
            acc = acc + bias.double()
        y[n] = acc / (1 + torch.exp(-acc)) if silu else acc
        state[slot, :, : width - 2] = window[:, 1 : width - 1]
        state[slot, :, width - 2] = x[n].double()
    return y, state


def recurrent_reference(mixed_qkv, a, b, a_log, dt_bias, ssm_state, indices, h: int, hv: int, k: int, v: int):
    """Returns (out [B, HV, V] float64, new ssm_state float64 copy [slots, HV, V, K])."""
    state = ssm_state.double().clone()
    batch = mixed_qkv.shape[0]
    out = torch.zeros(batch, hv, v, dtype=torch.float64, device=mixed_qkv.device)
    group = hv // h
    for n, slot in enumerate(indices.tolist()):
        if not 0 <= slot < state.shape[0]:
            continue
        row = mixed_qkv[n].double()
        for i_hv in range(hv):
            i_h = i_hv // group
            q = row[i_h * k : (i_h + 1) * k]
            kk = row[h * k + i_h * k : h * k + (i_h + 1) * k]
            vv = row[2 * h * k + i_hv * v : 2 * h * k + (i_hv + 1) * v]
            q = q / torch.sqrt((q * q).sum() + 1e-6) * k**-0.5
            kk = kk / torch.sqrt((kk * kk).sum() + 1e-6)
            x = a[n, i_hv].double() + dt_bias[i_hv].double()
            softplus = torch.log1p(torch.exp(x)) if x <= 20 else x
            g = -torch.exp(a_log[i_hv].double()) * softplus
            beta = torch.sigmoid(b[n, i_hv].double())
            s = state[slot, i_hv] * torch.exp(g)  # [V, K]
            s = s + torch.outer(beta * (vv - s @ kk), kk)
            state[slot, i_hv] = s
            out[n, i_hv] = s @ q
    return out, state
