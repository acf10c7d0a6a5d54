"""Gated-DeltaNet decode step in Triton: the fused split + causal conv1d update and the packed
recurrent gated-delta-rule decode over an fp32 state pool, with the levers of the SGLang
"ROCm GDN decode tuning" PR as switches:

* ``REUSE_STATE`` (conv): keep the W−1 loaded state values in registers and shift them from
  there, instead of re-loading them after the output store. Same values → bit-exact.
* conv ``num_warps`` 8 → 4 (a launch parameter, the ``conv_warps`` lever). Elementwise → bit-exact.
* ``STREAM_STATE`` (recurrent): state loads ``evict_first``, stores ``.cs`` (streaming). Cache
  hints only → bit-exact.

One more recurrent switch, kprof's own and bit-exact: ``NC`` > 1 walks a program's rows in NC
chunks of BV with the next chunk's state load in flight while the current chunk is computed and
stored (the ``chunked_state`` lever).

The recurrent baseline is upstream's packed-decode kernel (vLLM / SGLang): the state load issued
right after the slot index, ahead of the q/k/v and gate loads; head and row offsets from the
constexpr shape; 32 value rows and one warp per program.

Slot indices that are negative or ≥ the pool size are padding: the conv passes x through and the
recurrent kernel writes zeros; neither touches any state (upstream semantics).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def gdn_conv_update_kernel(
    mixed_qkvz,
    ba,
    conv_state,
    weight,
    bias,
    indices,
    mixed_qkv,
    z_out,
    b_out,
    a_out,
    stride_xn,
    stride_ban,
    stride_cs_slot,
    stride_cs_f,
    stride_cs_t,
    stride_wf,
    stride_on,
    stride_zn,
    stride_bn,
    num_slots,
    QKV_DIM: tl.constexpr,
    V_DIM: tl.constexpr,
    NUM_V_HEADS: tl.constexpr,
    W: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    SILU: tl.constexpr,
    REUSE_STATE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    i_n, i_f = tl.program_id(0), tl.program_id(1)
    o_f = i_f * BLOCK + tl.arange(0, BLOCK)
    m_f = o_f < QKV_DIM
    # The slot is broadcast to the block before comparing: masks must be tensors of the block's shape.
    b_slot = tl.load(indices + i_n).to(tl.int64) + 0 * o_f
    valid = (b_slot >= 0) & (b_slot < num_slots)
    p_state = conv_state + tl.where(valid, b_slot, 0) * stride_cs_slot + o_f * stride_cs_f
    m_state = m_f & valid
    b_x = tl.load(mixed_qkvz + i_n * stride_xn + o_f, mask=m_f, other=0.0)
    b_acc = tl.zeros([BLOCK], tl.float32)
    if HAS_BIAS:
        b_acc += tl.load(bias + o_f, mask=m_f, other=0.0).to(tl.float32)
    # Products are formed in the activation dtype and accumulated in fp32, as upstream does.
    b_s0 = tl.load(p_state, mask=m_state, other=0.0)
    b_acc += (b_s0 * tl.load(weight + o_f * stride_wf, mask=m_f, other=0.0)).to(tl.float32)
    if W > 2:
        b_s1 = tl.load(p_state + stride_cs_t, mask=m_state, other=0.0)
        b_acc += (b_s1 * tl.load(weight + o_f * stride_wf + 1, mask=m_f, other=0.0)).to(tl.float32)
    if W > 3:
        b_s2 = tl.load(p_state + 2 * stride_cs_t, mask=m_state, other=0.0)
        b_acc += (b_s2 * tl.load(weight + o_f * stride_wf + 2, mask=m_f, other=0.0)).to(tl.float32)
    b_acc += (b_x * tl.load(weight + o_f * stride_wf + (W - 1), mask=m_f, other=0.0)).to(tl.float32)
    if SILU:
        b_acc = b_acc / (1.0 + tl.exp(-b_acc))
    b_y = tl.where(valid, b_acc.to(b_x.dtype), b_x)
    tl.store(mixed_qkv + i_n * stride_on + o_f, b_y, mask=m_f)
    # Shift the state window left by one and append x.
    if REUSE_STATE:
        if W > 2:
            tl.store(p_state, b_s1, mask=m_state)
        if W > 3:
            tl.store(p_state + stride_cs_t, b_s2, mask=m_state)
    else:
        for pos in tl.static_range(W - 2):
            b_next = tl.load(p_state + (pos + 1) * stride_cs_t, mask=m_state, other=0.0)
            tl.store(p_state + pos * stride_cs_t, b_next, mask=m_state)
    tl.store(p_state + (W - 2) * stride_cs_t, b_x, mask=m_state)
    # z, b and a are split out of the packed projections by the programs whose lanes cover them.
    m_z = o_f < V_DIM
    b_z = tl.load(mixed_qkvz + i_n * stride_xn + QKV_DIM + o_f, mask=m_z, other=0.0)
    tl.store(z_out + i_n * stride_zn + o_f, b_z, mask=m_z)
    m_h = o_f < NUM_V_HEADS
    tl.store(b_out + i_n * stride_bn + o_f, tl.load(ba + i_n * stride_ban + o_f, mask=m_h, other=0.0), mask=m_h)
    tl.store(
        a_out + i_n * stride_bn + o_f, tl.load(ba + i_n * stride_ban + NUM_V_HEADS + o_f, mask=m_h, other=0.0), mask=m_h
    )


@triton.jit
def _load_state(p_s, m_s, STREAM_STATE: tl.constexpr):
    if STREAM_STATE:
        return tl.load(p_s, mask=m_s, other=0.0, eviction_policy="evict_first")
    return tl.load(p_s, mask=m_s, other=0.0)


@triton.jit
def gdn_recurrent_decode_kernel(
    mixed_qkv,
    a,
    b,
    a_log,
    dt_bias,
    state,
    indices,
    out,
    stride_qn,
    stride_an,
    stride_s_slot,
    stride_on,
    stride_oh,
    scale,
    num_slots,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BV: tl.constexpr,
    STREAM_STATE: tl.constexpr,
    NC: tl.constexpr,
):
    """One program updates NC chunks of BV value rows of one (request, value head); with NC > 1 the
    next chunk's state rows are loaded while the current chunk is computed and stored."""
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_n, i_hv = i_nh // HV, i_nh % HV
    i_h = i_hv // (HV // H)
    o_k = tl.arange(0, K)
    o_v = i_v * NC * BV + tl.arange(0, BV)
    b_slot = tl.load(indices + i_n).to(tl.int64) + 0 * o_v  # [BV]
    valid = (b_slot >= 0) & (b_slot < num_slots)
    # Head and row offsets from the constexpr shape, as upstream's kernel computes them (the pool is
    # contiguous within a slot; the launcher checks).
    p_s = state + tl.where(valid, b_slot, 0)[:, None] * stride_s_slot + i_hv * (V * K)
    p_s = p_s + (o_v[:, None] * K + o_k[None, :])
    m_s = valid[:, None] & (o_k[None, :] < K)  # [BV, K]
    b_s = _load_state(p_s, m_s, STREAM_STATE)  # first, as upstream: overlaps the q/k/v and gate loads
    p_row = mixed_qkv + i_n * stride_qn
    b_q = tl.load(p_row + i_h * K + o_k).to(tl.float32)
    b_k = tl.load(p_row + H * K + i_h * K + o_k).to(tl.float32)
    b_v = tl.load(p_row + 2 * H * K + i_hv * V + o_v).to(tl.float32)
    b_q = b_q / tl.sqrt(tl.sum(b_q * b_q) + 1e-6) * scale
    b_k = b_k / tl.sqrt(tl.sum(b_k * b_k) + 1e-6)
    b_x = tl.load(a + i_n * stride_an + i_hv).to(tl.float32) + tl.load(dt_bias + i_hv).to(tl.float32)
    b_softplus = tl.where(b_x <= 20.0, tl.log(1.0 + tl.exp(b_x)), b_x)
    b_g = -tl.exp(tl.load(a_log + i_hv).to(tl.float32)) * b_softplus
    b_beta = tl.sigmoid(tl.load(b + i_n * stride_an + i_hv).to(tl.float32))
    for c in tl.static_range(NC):
        if c + 1 < NC:  # the next chunk in flight
            p_next = p_s + BV * K
            b_next = _load_state(p_next, m_s, STREAM_STATE)
            b_vnext = tl.load(p_row + 2 * H * K + i_hv * V + o_v + BV).to(tl.float32)
        b_s = b_s * tl.exp(b_g)
        b_vnew = b_beta * (b_v - tl.sum(b_s * b_k[None, :], axis=1))
        b_s = b_s + b_vnew[:, None] * b_k[None, :]
        b_o = tl.sum(b_s * b_q[None, :], axis=1)
        p_o = out + i_n * stride_on + i_hv * stride_oh + o_v
        tl.store(p_o, tl.where(valid, b_o, 0.0).to(out.dtype.element_ty))
        if STREAM_STATE:
            tl.store(p_s, b_s, mask=m_s, cache_modifier=".cs")
        else:
            tl.store(p_s, b_s, mask=m_s)
        if c + 1 < NC:
            b_s, b_v, p_s, o_v = b_next, b_vnext, p_next, o_v + BV


def gdn_conv_update(
    mixed_qkvz,
    ba,
    conv_state,
    conv_weight,
    conv_bias,
    indices,
    mixed_qkv,
    z_out,
    b_out,
    a_out,
    *,
    hv: int,
    v: int,
    silu: bool,
    reuse_state: bool,
    conv_warps: int,
    block: int = 256,
) -> None:
    """Split + causal conv1d update. mixed_qkvz: [B, qkv_dim + HV·V]; ba: [B, 2·HV]; conv_state:
    [slots, qkv_dim, ≥ W−1] (any strides); conv_weight: [qkv_dim, W]; conv_bias: [qkv_dim] or None;
    indices: [B] int32. Writes mixed_qkv [B, qkv_dim], z [B, HV·V], b and a [B, HV]."""
    qkv_dim, width = conv_weight.shape
    gdn_conv_update_kernel[(mixed_qkvz.shape[0], triton.cdiv(qkv_dim, block))](
        mixed_qkvz,
        ba,
        conv_state,
        conv_weight,
        conv_bias if conv_bias is not None else conv_weight,
        indices,
        mixed_qkv,
        z_out,
        b_out,
        a_out,
        mixed_qkvz.stride(0),
        ba.stride(0),
        conv_state.stride(0),
        conv_state.stride(1),
        conv_state.stride(2),
        conv_weight.stride(0),
        mixed_qkv.stride(0),
        z_out.stride(0),
        b_out.stride(0),
        conv_state.shape[0],
        QKV_DIM=qkv_dim,
        V_DIM=hv * v,
        NUM_V_HEADS=hv,
        W=width,
        HAS_BIAS=conv_bias is not None,
        SILU=silu,
        REUSE_STATE=reuse_state,
        BLOCK=block,
        num_warps=conv_warps,
        num_stages=2,
    )


def gdn_recurrent_decode(
    mixed_qkv,
    a,
    b,
    a_log,
    dt_bias,
    ssm_state,
    indices,
    out,
    *,
    h: int,
    hv: int,
    k: int,
    v: int,
    stream_state: bool,
    bv: int = 32,
    chunks: int = 1,
    num_warps: int = 1,
) -> None:
    """Packed gated-delta-rule decode. mixed_qkv: [B, 2·H·K + HV·V]; a, b: [B, HV]; ssm_state:
    [slots, HV, V, K] fp32, updated in place; out: [B, HV, V]. Each program walks ``chunks``
    chunks of ``bv`` value rows (upstream: one chunk of 32)."""
    if ssm_state.stride()[1:] != (v * k, k, 1):
        raise ValueError(f"ssm_state must be contiguous within a slot ([HV, V, K]); strides {ssm_state.stride()}")
    if v % (bv * chunks):
        raise ValueError(f"{chunks} chunks of {bv} value rows do not tile V = {v}")
    gdn_recurrent_decode_kernel[(v // (bv * chunks), mixed_qkv.shape[0] * hv)](
        mixed_qkv,
        a,
        b,
        a_log,
        dt_bias,
        ssm_state,
        indices,
        out,
        mixed_qkv.stride(0),
        a.stride(0),
        ssm_state.stride(0),
        out.stride(0),
        out.stride(1),
        k**-0.5,
        ssm_state.shape[0],
        H=h,
        HV=hv,
        K=k,
        V=v,
        BV=bv,
        STREAM_STATE=stream_state,
        NC=chunks,
        num_warps=num_warps,
        num_stages=3,
    )
