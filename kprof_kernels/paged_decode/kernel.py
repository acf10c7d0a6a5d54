"""Paged split-K GQA decode attention in Triton, with three levers as constexpr switches.

Stage 1 walks each split's KV tiles through the block table and writes a normalised partial
output and its log-sum-exp; stage 2 merges the splits. Levers:

* ``PREFETCH_PAGES``: the tile loop is ``tl.range(..., num_stages=3)`` so the block-table load of
  tile j+1 and its dependent K/V gathers are in flight while tile j computes (``cp.async`` on
  NVIDIA). Off: ``num_stages=1``. Same arithmetic → bit-exact.
* ``SKIP_MASKED_TILES``: with a sliding window, start the loop at the first tile that can hold an
  allowed key instead of visiting and masking the ones before it. Masked tiles add exact zeros, so
  skipping them is bit-exact.
* ``GROUPED``: one program per KV head with its G query heads packed as rows of a ``tl.dot``
  (KV read once per group), versus one program per query head with ``tl.sum`` reductions (KV read
  G times). Different summation order → tolerance.

Naming follows flash-linear-attention: ``i_*`` program ids, ``o_*`` offsets, ``p_*`` pointers,
``b_*`` register values, ``m_*`` masks.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _online_softmax_step(b_s, b_m, b_l):
    """One tile of the running max/sum: returns the new max, the rescale factor and probabilities."""
    b_m_new = tl.maximum(b_m, tl.max(b_s, axis=-1))
    # An all-masked prefix keeps the max at -inf; use 0 there so exp() sees -inf, not NaN.
    b_m_safe = tl.where(b_m_new == float("-inf"), 0.0, b_m_new)
    b_alpha = tl.exp(b_m - b_m_safe)
    b_p = tl.exp(b_s - b_m_safe[:, None])
    b_l = b_l * b_alpha + tl.sum(b_p, axis=-1)
    return b_m_new, b_alpha, b_p, b_l


@triton.jit
def _split_bounds(
    seq_lens,
    i_b,
    i_s,
    tokens_per_split,
    window,
    TILE_N: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
    SKIP_MASKED_TILES: tl.constexpr,
):
    """This split's [start, hi) token range and the first key the window allows."""
    seq_len = tl.load(seq_lens + i_b)
    lo = i_s * tokens_per_split
    hi = tl.minimum(lo + tokens_per_split, seq_len)
    first_allowed = tl.maximum(seq_len - window, 0) if HAS_WINDOW else 0
    start = lo
    if SKIP_MASKED_TILES:
        # First tile (on this split's tile grid) that can hold an allowed key.
        start = tl.maximum(lo, lo + ((first_allowed - lo) // TILE_N) * TILE_N)
    return start, hi, first_allowed


@triton.jit
def _kv_tile(
    k_cache,
    v_cache,
    block_table,
    i_b,
    i_hk,
    n0,
    hi,
    o_d,
    stride_bt,
    stride_kn,
    stride_ks,
    stride_kh,
    stride_vn,
    stride_vs,
    stride_vh,
    BLOCK_SIZE: tl.constexpr,
    TILE_N: tl.constexpr,
):
    """Token offsets, their mask, and the K and V rows of one tile, gathered through the block table."""
    o_n = n0 + tl.arange(0, TILE_N)
    m_n = o_n < hi
    b_blk = tl.load(block_table + i_b * stride_bt + o_n // BLOCK_SIZE, mask=m_n, other=0)
    o_slot = o_n % BLOCK_SIZE
    p_k = k_cache + b_blk[:, None] * stride_kn + o_slot[:, None] * stride_ks + i_hk * stride_kh + o_d[None, :]
    p_v = v_cache + b_blk[:, None] * stride_vn + o_slot[:, None] * stride_vs + i_hk * stride_vh + o_d[None, :]
    b_k = tl.load(p_k, mask=m_n[:, None], other=0.0)  # [TILE_N, D]
    b_v = tl.load(p_v, mask=m_n[:, None], other=0.0)
    return o_n, m_n, b_k, b_v


@triton.jit
def _normalised(b_acc, b_m, b_l):
    """Partial output divided by its softmax sum, and its log-sum-exp (-inf for an empty split)."""
    b_lpos = tl.where(b_l > 0, b_l, 1.0)
    b_out = tl.where(b_l[:, None] > 0, b_acc / b_lpos[:, None], 0.0)
    b_lse = tl.where(b_l > 0, b_m + tl.log(b_lpos), float("-inf"))
    return b_out, b_lse


@triton.jit
def paged_decode_stage1_grouped(
    q,
    k_cache,
    v_cache,
    block_table,
    seq_lens,
    o_part,
    lse_part,
    stride_qb,
    stride_qh,
    stride_kn,
    stride_ks,
    stride_kh,
    stride_vn,
    stride_vs,
    stride_vh,
    stride_bt,
    stride_ob,
    stride_oh,
    stride_os,
    stride_lb,
    stride_lh,
    scale,
    window,
    tokens_per_split,
    G: tl.constexpr,
    G_PAD: tl.constexpr,
    D: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    TILE_N: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
    PREFETCH_PAGES: tl.constexpr,
    SKIP_MASKED_TILES: tl.constexpr,
):
    i_b, i_hk, i_s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    start, hi, first_allowed = _split_bounds(
        seq_lens, i_b, i_s, tokens_per_split, window, TILE_N, HAS_WINDOW, SKIP_MASKED_TILES
    )
    o_g = tl.arange(0, G_PAD)
    o_d = tl.arange(0, D)
    m_g = o_g < G
    p_q = q + i_b * stride_qb + (i_hk * G + o_g)[:, None] * stride_qh + o_d[None, :]
    b_q = tl.load(p_q, mask=m_g[:, None], other=0.0)  # [G_PAD, D]
    b_m = tl.full([G_PAD], float("-inf"), tl.float32)
    b_l = tl.zeros([G_PAD], tl.float32)
    b_acc = tl.zeros([G_PAD, D], tl.float32)
    for n0 in tl.range(start, hi, TILE_N, num_stages=3 if PREFETCH_PAGES else 1):
        o_n, m_n, b_k, b_v = _kv_tile(
            k_cache,
            v_cache,
            block_table,
            i_b,
            i_hk,
            n0,
            hi,
            o_d,
            stride_bt,
            stride_kn,
            stride_ks,
            stride_kh,
            stride_vn,
            stride_vs,
            stride_vh,
            BLOCK_SIZE,
            TILE_N,
        )
        b_s = tl.dot(b_q, tl.trans(b_k)) * scale  # [G_PAD, TILE_N]
        m_ok = m_n & (o_n >= first_allowed)
        b_s = tl.where(m_ok[None, :], b_s, float("-inf"))
        b_m, b_alpha, b_p, b_l = _online_softmax_step(b_s, b_m, b_l)
        b_acc = b_acc * b_alpha[:, None] + tl.dot(b_p.to(b_v.dtype), b_v)
    b_out, b_lse = _normalised(b_acc, b_m, b_l)
    o_h = i_hk * G + o_g
    p_o = o_part + i_b * stride_ob + o_h[:, None] * stride_oh + i_s * stride_os + o_d[None, :]
    tl.store(p_o, b_out, mask=m_g[:, None])
    tl.store(lse_part + i_b * stride_lb + o_h * stride_lh + i_s, b_lse, mask=m_g)


@triton.jit
def paged_decode_stage1_per_head(
    q,
    k_cache,
    v_cache,
    block_table,
    seq_lens,
    o_part,
    lse_part,
    stride_qb,
    stride_qh,
    stride_kn,
    stride_ks,
    stride_kh,
    stride_vn,
    stride_vs,
    stride_vh,
    stride_bt,
    stride_ob,
    stride_oh,
    stride_os,
    stride_lb,
    stride_lh,
    scale,
    window,
    tokens_per_split,
    G: tl.constexpr,
    D: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    TILE_N: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
    PREFETCH_PAGES: tl.constexpr,
    SKIP_MASKED_TILES: tl.constexpr,
):
    i_b, i_h, i_s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_hk = i_h // G
    start, hi, first_allowed = _split_bounds(
        seq_lens, i_b, i_s, tokens_per_split, window, TILE_N, HAS_WINDOW, SKIP_MASKED_TILES
    )
    o_d = tl.arange(0, D)
    b_q = tl.load(q + i_b * stride_qb + i_h * stride_qh + o_d).to(tl.float32)  # [D]
    b_m = tl.full([1], float("-inf"), tl.float32)
    b_l = tl.zeros([1], tl.float32)
    b_acc = tl.zeros([1, D], tl.float32)
    for n0 in tl.range(start, hi, TILE_N, num_stages=3 if PREFETCH_PAGES else 1):
        o_n, m_n, b_k, b_v = _kv_tile(
            k_cache,
            v_cache,
            block_table,
            i_b,
            i_hk,
            n0,
            hi,
            o_d,
            stride_bt,
            stride_kn,
            stride_ks,
            stride_kh,
            stride_vn,
            stride_vs,
            stride_vh,
            BLOCK_SIZE,
            TILE_N,
        )
        b_k, b_v = b_k.to(tl.float32), b_v.to(tl.float32)
        b_s = tl.sum(b_k * b_q[None, :], axis=1)[None, :] * scale  # [1, TILE_N]
        m_ok = m_n & (o_n >= first_allowed)
        b_s = tl.where(m_ok[None, :], b_s, float("-inf"))
        b_m, b_alpha, b_p, b_l = _online_softmax_step(b_s, b_m, b_l)
        b_acc = b_acc * b_alpha[:, None] + tl.sum(b_p[:, :, None] * b_v[None, :, :], axis=1)
    b_out, b_lse = _normalised(b_acc, b_m, b_l)
    tl.store(o_part + i_b * stride_ob + i_h * stride_oh + i_s * stride_os + o_d[None, :], b_out)
    tl.store(lse_part + i_b * stride_lb + i_h * stride_lh + i_s + tl.arange(0, 1), b_lse)


@triton.jit
def paged_decode_stage2(
    o_part,
    lse_part,
    out,
    stride_ob,
    stride_oh,
    stride_os,
    stride_lb,
    stride_lh,
    stride_outb,
    stride_outh,
    S,
    D: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    """Merge the splits of one (request, head): all splits loaded as one tile, no serial chain."""
    i_b, i_h = tl.program_id(0), tl.program_id(1)
    o_s = tl.arange(0, BLOCK_S)
    o_d = tl.arange(0, D)
    m_s = o_s < S
    b_lse = tl.load(lse_part + i_b * stride_lb + i_h * stride_lh + o_s, mask=m_s, other=float("-inf"))
    b_max = tl.max(b_lse, axis=0)
    b_max = tl.where(b_max == float("-inf"), 0.0, b_max)
    b_w = tl.exp(b_lse - b_max)  # [BLOCK_S]
    p_o = o_part + i_b * stride_ob + i_h * stride_oh + o_s[:, None] * stride_os + o_d[None, :]
    b_o = tl.load(p_o, mask=m_s[:, None], other=0.0)
    b_sum = tl.sum(b_w, axis=0)
    b_out = tl.sum(b_o * b_w[:, None], axis=0) / tl.where(b_sum > 0, b_sum, 1.0)
    tl.store(out + i_b * stride_outb + i_h * stride_outh + o_d, b_out.to(out.dtype.element_ty))


def paged_decode(
    q,
    k_cache,
    v_cache,
    block_table,
    seq_lens,
    out,
    o_part,
    lse_part,
    *,
    scale: float,
    window: int | None,
    num_splits: int,
    max_seq_len: int,
    grouped: bool,
    prefetch_pages: bool,
    skip_masked_tiles: bool,
    tile_n: int = 32,
    num_warps: int = 4,
) -> None:
    """Decode attention over a paged KV cache.

    q: [B, Hq, D]; k_cache, v_cache: [num_blocks, block_size, Hkv, D]; block_table: [B, max_blocks]
    int32; seq_lens: [B] int32; out: [B, Hq, D]; o_part: [B, Hq, S, D] fp32; lse_part: [B, Hq, S]
    fp32, with S = num_splits. Tokens [0, seq_len) are attended, or the last ``window`` of them.
    """
    batch, hq, d = q.shape
    hkv = k_cache.shape[2]
    group = hq // hkv
    tokens_per_split = triton.cdiv(triton.cdiv(max_seq_len, num_splits), tile_n) * tile_n
    common = (
        q,
        k_cache,
        v_cache,
        block_table,
        seq_lens,
        o_part,
        lse_part,
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        v_cache.stride(0),
        v_cache.stride(1),
        v_cache.stride(2),
        block_table.stride(0),
        o_part.stride(0),
        o_part.stride(1),
        o_part.stride(2),
        lse_part.stride(0),
        lse_part.stride(1),
        scale,
        window or 0,
        tokens_per_split,
    )
    flags = dict(
        D=d,
        BLOCK_SIZE=k_cache.shape[1],
        TILE_N=tile_n,
        HAS_WINDOW=window is not None,
        PREFETCH_PAGES=prefetch_pages,
        SKIP_MASKED_TILES=skip_masked_tiles,
        num_warps=num_warps,
    )
    if grouped:
        g_pad = max(16, triton.next_power_of_2(group))
        paged_decode_stage1_grouped[(batch, hkv, num_splits)](*common, G=group, G_PAD=g_pad, **flags)
    else:
        paged_decode_stage1_per_head[(batch, hq, num_splits)](*common, G=group, **flags)
    paged_decode_stage2[(batch, hq)](
        o_part,
        lse_part,
        out,
        o_part.stride(0),
        o_part.stride(1),
        o_part.stride(2),
        lse_part.stride(0),
        lse_part.stride(1),
        out.stride(0),
        out.stride(1),
        num_splits,
        D=d,
        BLOCK_S=triton.next_power_of_2(num_splits),
        num_warps=4,
    )
