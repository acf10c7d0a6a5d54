"""Split-K MLA decode in Triton with the three levers of aiter PR #4758 as switches.

Each cache row is [ckv (512) | kpe (64)]; K is the whole row and V its first 512 values. Stage 1
walks each split's tokens through the page table (page size 1) and writes a normalised partial
output and its log-sum-exp; stage 2 merges the splits. Levers:

* ``PIPELINED_LOADS``: the stage-1 loop is ``tl.range(..., num_stages=3)``: page indices and the
  KV gathers of the next tiles stay in flight (``cp.async`` on NVIDIA). Off: ``num_stages=1``.
  Bit-exact.
* ``SPLIT_MAJOR``: grid axes swapped so all requests' programs for one split are adjacent in
  launch order (on AMD they share an XCD's L2). Relabelling only: bit-exact; expected ~0 on H200.
* ``tiled_reduce`` (``D_SPLIT`` > 1): stage 2 split over the 512-wide value dimension while the
  grid leaves SMs idle, with 4 warps instead of 8; each slice re-derives the same scalar weights.
* ``wave_fit_splits`` (host side, ``wave_fit_splits()``): upstream's ~256-program budget is one
  wave on a 256-CU MI355X; on another device its grid can leave most of a last wave idle. The split
  count is raised to the smallest one whose last wave of resident programs is ≥ 95% full.
* ``shared_prefix`` (kprof's own, host side + ``mla_prefix_stage1``): requests that share a prefix
  through the page table (prefix caching) each re-read it from L2 or HBM. The prefix kernel reads
  each shared row once for up to 64 query rows — the heads of several requests of a group — and
  writes one partial per split and request; stage 1 then walks only each request's own tokens,
  and stage 2 merges both kinds of partials by log-sum-exp like any splits. Its loop walks tiles
  of 64 prefix rows, 2 in flight, or the next tile of PREFIX_TILES that fits the device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import triton
import triton.language as tl

from kprof_kernels.mla_decode import KV_LORA, ROPE


@triton.jit
def _attend(
    b_q,
    b_qpe,
    kv,
    p_rows,
    lo,
    hi,
    stride_kv,
    sm_scale,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    D_V: tl.constexpr,
    D_PE: tl.constexpr,
    STAGES: tl.constexpr,
):
    """Online softmax of BLOCK_M query rows over the cache rows ``p_rows[lo:hi]`` (page size 1),
    STAGES tiles in flight: returns the running max, the sum of weights and the unnormalised
    output, all fp32."""
    o_v = tl.arange(0, D_V)
    o_pe = tl.arange(0, D_PE)
    b_m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    b_l = tl.zeros([BLOCK_M], tl.float32)
    b_acc = tl.zeros([BLOCK_M, D_V], tl.float32)
    for n0 in tl.range(lo, hi, BLOCK_N, num_stages=STAGES):
        o_n = n0 + tl.arange(0, BLOCK_N)
        m_n = o_n < hi
        b_row = tl.load(p_rows + o_n, mask=m_n, other=0).to(tl.int64)
        p_kv = kv + b_row[:, None] * stride_kv
        b_k = tl.load(p_kv + o_v[None, :], mask=m_n[:, None], other=0.0)  # [BLOCK_N, 512] = V too
        b_kpe = tl.load(p_kv + D_V + o_pe[None, :], mask=m_n[:, None], other=0.0)  # [BLOCK_N, 64]
        b_s = tl.dot(b_q, tl.trans(b_k)) + tl.dot(b_qpe, tl.trans(b_kpe))
        b_s = tl.where(m_n[None, :], b_s * sm_scale, float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, axis=1))
        b_m_safe = tl.where(b_m_new == float("-inf"), 0.0, b_m_new)
        b_alpha = tl.exp(b_m - b_m_safe)
        b_p = tl.exp(b_s - b_m_safe[:, None])
        b_l = b_l * b_alpha + tl.sum(b_p, axis=1)
        b_acc = b_acc * b_alpha[:, None] + tl.dot(b_p.to(b_k.dtype), b_k)
        b_m = b_m_new
    return b_m, b_l, b_acc


@triton.jit
def _store_partial(b_m, b_l, b_acc, p_o, p_lse, mask):
    """A split's normalised output and log-sum-exp (an empty split: zeros and −inf)."""
    b_lpos = tl.where(b_l > 0, b_l, 1.0)
    b_out = tl.where(b_l[:, None] > 0, b_acc / b_lpos[:, None], 0.0)
    b_lse = tl.where(b_l > 0, b_m + tl.log(b_lpos), float("-inf"))
    tl.store(p_o, b_out, mask=mask[:, None])
    tl.store(p_lse, b_lse, mask=mask)


@triton.jit
def mla_decode_stage1(
    q,
    kv,
    page_table,
    seq_lens,
    o_part,
    lse_part,
    stride_qb,
    stride_qh,
    stride_kv,
    stride_pt,
    stride_ob,
    stride_oh,
    stride_os,
    stride_lb,
    stride_lh,
    sm_scale,
    tokens_per_split,
    seq_offset,
    num_heads,
    batch,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    D_V: tl.constexpr,
    D_PE: tl.constexpr,
    PIPELINED_LOADS: tl.constexpr,
    SPLIT_MAJOR: tl.constexpr,
):
    """Split i_s of request i_b's tokens from ``seq_offset`` on, for one block of BLOCK_H heads."""
    if SPLIT_MAJOR:
        i_s, i_b = tl.program_id(0), tl.program_id(1)
    else:
        i_b, i_s = tl.program_id(0), tl.program_id(1)
    i_hb = tl.program_id(2)
    seq_len = tl.load(seq_lens + i_b) - seq_offset
    lo = i_s * tokens_per_split
    hi = tl.minimum(lo + tokens_per_split, seq_len)
    o_h = i_hb * BLOCK_H + tl.arange(0, BLOCK_H)
    m_h = o_h < num_heads
    o_v = tl.arange(0, D_V)
    p_q = q + i_b * stride_qb + o_h[:, None] * stride_qh
    b_q = tl.load(p_q + o_v[None, :], mask=m_h[:, None], other=0.0)  # [BLOCK_H, 512]
    b_qpe = tl.load(p_q + D_V + tl.arange(0, D_PE)[None, :], mask=m_h[:, None], other=0.0)  # [BLOCK_H, 64]
    p_rows = page_table + i_b * stride_pt + seq_offset
    b_m, b_l, b_acc = _attend(
        b_q, b_qpe, kv, p_rows, lo, hi, stride_kv, sm_scale, BLOCK_H, BLOCK_N, D_V, D_PE, 3 if PIPELINED_LOADS else 1
    )
    p_o = o_part + i_b * stride_ob + o_h[:, None] * stride_oh + i_s * stride_os + o_v[None, :]
    _store_partial(b_m, b_l, b_acc, p_o, lse_part + i_b * stride_lb + o_h * stride_lh + i_s, m_h)


@triton.jit
def mla_prefix_stage1(
    q,
    kv,
    page_table,
    o_part,
    lse_part,
    stride_qb,
    stride_qh,
    stride_kv,
    stride_pt,
    stride_ob,
    stride_oh,
    stride_os,
    stride_lb,
    stride_lh,
    sm_scale,
    tokens_per_split,
    prefix_len,
    num_heads,
    batch,
    share,
    requests_per_program,
    programs_per_group,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    D_V: tl.constexpr,
    D_PE: tl.constexpr,
    STAGES: tl.constexpr,
):
    """Split i_s of a group's shared prefix for up to ``requests_per_program`` of the group's
    requests at once: all their heads are the rows of one query tile (row m: request m // H, head
    m % H), so each prefix row is read once for all of them. The group's prefix rows are its first
    request's first ``prefix_len`` page-table entries (every request of a group has the same)."""
    i_p, i_s = tl.program_id(0), tl.program_id(1)
    i_g = i_p // programs_per_group
    b_first = i_g * share + (i_p % programs_per_group) * requests_per_program
    b_end = tl.minimum(tl.minimum(b_first + requests_per_program, (i_g + 1) * share), batch)
    o_m = tl.arange(0, BLOCK_M)
    o_b = b_first + o_m // num_heads
    o_h = o_m % num_heads
    m_m = o_b < b_end
    lo = i_s * tokens_per_split
    hi = tl.minimum(lo + tokens_per_split, prefix_len)
    o_v = tl.arange(0, D_V)
    p_q = q + o_b[:, None] * stride_qb + o_h[:, None] * stride_qh
    b_q = tl.load(p_q + o_v[None, :], mask=m_m[:, None], other=0.0)  # [BLOCK_M, 512]
    b_qpe = tl.load(p_q + D_V + tl.arange(0, D_PE)[None, :], mask=m_m[:, None], other=0.0)  # [BLOCK_M, 64]
    p_rows = page_table + (i_g * share).to(tl.int64) * stride_pt
    b_m, b_l, b_acc = _attend(b_q, b_qpe, kv, p_rows, lo, hi, stride_kv, sm_scale, BLOCK_M, BLOCK_N, D_V, D_PE, STAGES)
    p_o = o_part + o_b[:, None] * stride_ob + o_h[:, None] * stride_oh + i_s * stride_os + o_v[None, :]
    _store_partial(b_m, b_l, b_acc, p_o, lse_part + o_b * stride_lb + o_h * stride_lh + i_s, m_m)


@triton.jit
def mla_decode_stage2(
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
    num_splits,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """Merge the splits of one (request, head) for one slice of BLOCK_D value columns, BLOCK_S
    splits per step (one tile per step, not one dependent rescale per split)."""
    i_b, i_h, i_d = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    o_d = i_d * BLOCK_D + tl.arange(0, BLOCK_D)
    p_lse = lse_part + i_b * stride_lb + i_h * stride_lh
    b_max = tl.full([BLOCK_S], float("-inf"), tl.float32)
    for s0 in range(0, num_splits, BLOCK_S):
        o_s = s0 + tl.arange(0, BLOCK_S)
        b_max = tl.maximum(b_max, tl.load(p_lse + o_s, mask=o_s < num_splits, other=float("-inf")))
    m_all = tl.max(b_max, axis=0)
    m_all = tl.where(m_all == float("-inf"), 0.0, m_all)
    b_sum = tl.zeros([BLOCK_S], tl.float32)
    b_acc = tl.zeros([BLOCK_D], tl.float32)
    for s0 in range(0, num_splits, BLOCK_S):
        o_s = s0 + tl.arange(0, BLOCK_S)
        m_s = o_s < num_splits
        b_w = tl.exp(tl.load(p_lse + o_s, mask=m_s, other=float("-inf")) - m_all)
        p_o = o_part + i_b * stride_ob + i_h * stride_oh + o_s[:, None] * stride_os + o_d[None, :]
        b_o = tl.load(p_o, mask=m_s[:, None], other=0.0)
        b_acc += tl.sum(b_o * b_w[:, None], axis=0)
        b_sum += b_w
    total = tl.sum(b_sum, axis=0)
    b_out = b_acc / tl.where(total > 0, total, 1.0)
    tl.store(out + i_b * stride_outb + i_h * stride_outh + o_d, b_out.to(out.dtype.element_ty))


def stage2_tiling(batch: int, heads: int, num_sms: int, tiled: bool) -> tuple[int, int]:
    """(D_SPLIT, num_warps): split the value dimension only while the grid leaves SMs idle (max 8)."""
    if not tiled:
        return 1, 8
    d_split = 1
    while d_split < 8 and batch * heads * d_split * 2 <= num_sms and KV_LORA // (d_split * 2) >= 16:
        d_split *= 2
    return d_split, (8 if d_split == 1 else 4)


def tokens_per_split(max_seq_len: int, num_splits: int, block_n: int) -> int:
    """Each split walks a whole number of BLOCK_N tiles; the last split takes what is left."""
    return triton.cdiv(triton.cdiv(max_seq_len, num_splits), block_n) * block_n


WAVE_FILL = 0.95


def wave_fill(splits: int, programs_per_split: int, slots: int) -> float:
    """Fraction of the last wave that a grid of splits · programs_per_split programs keeps busy."""
    waves = splits * programs_per_split / slots
    return waves / math.ceil(waves)


def wave_fit_splits(base: int, programs_per_split: int, slots: int, most: int) -> int:
    """The smallest split count in base … min(4·base, most) whose last wave is ≥ WAVE_FILL full
    (``slots`` = SMs × resident programs per SM); failing that, the fullest (fewest splits on ties)."""
    candidates = range(base, max(base, min(4 * base, most)) + 1)
    for s in candidates:
        if wave_fill(s, programs_per_split, slots) >= WAVE_FILL:
            return s
    return max(candidates, key=lambda s: (wave_fill(s, programs_per_split, slots), -s))


@dataclass(frozen=True)
class SharedPrefix:
    """The ``shared_prefix`` lever's plan: every ``share`` consecutive requests (a group) share their
    first ``length`` tokens; the prefix is split ``splits`` ways per group, each program serving
    ``requests_per_program`` requests of a group (``block_m`` query rows = requests × heads, padded)."""

    length: int
    share: int
    splits: int
    requests_per_program: int
    block_m: int
    warps: int = 8
    block_n: int = 64  # prefix rows per tile
    stages: int = 2  # tiles in flight (1 without pipelined_loads)

    @property
    def programs_per_group(self) -> int:
        return triton.cdiv(self.share, self.requests_per_program)

    def grid(self, batch: int) -> tuple[int, int]:
        """The prefix kernel's grid: a program per (group, requests_per_program of it) and split."""
        return (triton.cdiv(batch, self.share) * self.programs_per_group, self.splits)


# (rows per tile, tiles in flight) of the prefix loop, fastest first on the H200 at 64 query rows:
# 64 × 2 asks 221,184 bytes of shared memory in bf16 (the H200 allows 232,448), 32 × 3 147,712.
PREFIX_TILES = ((64, 2), (32, 3), (16, 2))


def prefix_plan(
    batch: int, heads: int, length: int, share: int, slots: int, most_splits: int, per_program: int | None = None
) -> SharedPrefix:
    """Requests per program: as many of a group as fit 64 query rows (at least one), in even shares
    of the group; splits per group: enough programs to fill ``slots`` (one wave), at most
    ``most_splits`` and the prefix's tiles."""
    share = max(1, min(share, batch))
    per_program = max(1, min(share, per_program or 64 // heads))
    per_program = triton.cdiv(share, triton.cdiv(share, per_program))
    block_m = max(16, triton.next_power_of_2(per_program * heads))
    plan = SharedPrefix(length, share, 1, per_program, block_m)
    programs = plan.grid(batch)[0]
    return replace(plan, splits=max(1, min(triton.cdiv(slots, programs), most_splits, triton.cdiv(length, 32))))


def _partial_strides(o_part, lse_part) -> tuple[int, ...]:
    """The partials' strides as the stage kernels take them: o_part (request, head, split), lse_part
    (request, head)."""
    return (o_part.stride(0), o_part.stride(1), o_part.stride(2), lse_part.stride(0), lse_part.stride(1))


def _stage1_strides(q, kv, page_table, o_part, lse_part) -> tuple[int, ...]:
    """The stride arguments both stage-1 kernels take, in their order."""
    return (q.stride(0), q.stride(1), kv.stride(0), page_table.stride(0), *_partial_strides(o_part, lse_part))


def mla_decode(
    q,
    kv,
    page_table,
    seq_lens,
    out,
    o_part,
    lse_part,
    *,
    sm_scale: float,
    num_splits: int,
    max_seq_len: int,
    num_sms: int,
    pipelined_loads: bool,
    split_major_grid: bool,
    tiled_reduce: bool,
    block_h: int = 16,
    block_n: int = 32,
    stage1_warps: int = 4,
    prefix: SharedPrefix | None = None,
    compile_only: bool = False,
):
    """q: [B, H, 576]; kv: [rows, 576]; page_table: [B, ≥ max_seq] int32 (token → row); seq_lens: [B];
    out: [B, H, 512]; o_part: [B, H, ≥ S, 512] fp32; lse_part: [B, H, ≥ S] fp32 (S = num_splits,
    plus ``prefix.splits`` with a shared prefix: its partials first, then ``num_splits`` of each
    request's own tokens after it). ``compile_only``: compile stage 1 without launching anything and
    return it (None under the interpreter), for its occupancy."""
    batch, heads, _ = q.shape
    offset = prefix.length if prefix else 0
    own_part, own_lse = o_part, lse_part  # where stage 1 writes the partials of each request's own tokens
    if prefix:
        if not compile_only:
            prefix_stage1(q, kv, page_table, o_part, lse_part, sm_scale, prefix, pipelined_loads)
        own_part, own_lse = o_part[:, :, prefix.splits :], lse_part[:, :, prefix.splits :]
    tokens = tokens_per_split(max_seq_len - offset, num_splits, block_n)
    head_blocks = triton.cdiv(heads, block_h)
    grid = (num_splits, batch, head_blocks) if split_major_grid else (batch, num_splits, head_blocks)
    stage1_kernel = mla_decode_stage1.warmup if compile_only else mla_decode_stage1[grid]
    stage1 = stage1_kernel(
        q,
        kv,
        page_table,
        seq_lens,
        own_part,
        own_lse,
        *_stage1_strides(q, kv, page_table, own_part, own_lse),
        sm_scale,
        tokens,
        offset,
        heads,
        batch,
        BLOCK_H=block_h,
        BLOCK_N=block_n,
        D_V=KV_LORA,
        D_PE=ROPE,
        PIPELINED_LOADS=pipelined_loads,
        SPLIT_MAJOR=split_major_grid,
        num_warps=stage1_warps,
        **({"grid": grid} if compile_only else {}),
    )
    if compile_only:
        return stage1
    num_splits += prefix.splits if prefix else 0  # stage 2 merges the prefix's partials with the request's own
    d_split, warps = stage2_tiling(batch, heads, num_sms, tiled_reduce)
    mla_decode_stage2[(batch, heads, d_split)](
        o_part,
        lse_part,
        out,
        *_partial_strides(o_part, lse_part),
        out.stride(0),
        out.stride(1),
        num_splits,
        BLOCK_S=min(triton.next_power_of_2(num_splits), 8192 // (KV_LORA // d_split)),
        BLOCK_D=KV_LORA // d_split,
        num_warps=warps,
    )


def prefix_stage1(
    q,
    kv,
    page_table,
    o_part,
    lse_part,
    sm_scale: float,
    plan: SharedPrefix,
    pipelined: bool,
    compile_only: bool = False,
):
    """Each group's shared prefix, once for several of its requests (``mla_prefix_stage1``);
    ``compile_only``: compile it without launching and return it (None under the interpreter)."""
    batch, heads, _ = q.shape
    grid = plan.grid(batch)
    kernel = mla_prefix_stage1.warmup if compile_only else mla_prefix_stage1[grid]
    return kernel(
        q,
        kv,
        page_table,
        o_part,
        lse_part,
        *_stage1_strides(q, kv, page_table, o_part, lse_part),
        sm_scale,
        tokens_per_split(plan.length, plan.splits, plan.block_n),
        plan.length,
        heads,
        batch,
        plan.share,
        plan.requests_per_program,
        plan.programs_per_group,
        BLOCK_M=plan.block_m,
        BLOCK_N=plan.block_n,
        D_V=KV_LORA,
        D_PE=ROPE,
        STAGES=plan.stages if pipelined else 1,
        num_warps=plan.warps,
        **({"grid": grid} if compile_only else {}),
    )


def fitting_prefix_tile(
    plan: SharedPrefix, compile_tile: Callable[[SharedPrefix], Any], fits: Callable[[Any], bool]
) -> SharedPrefix | None:
    """``plan`` with the first of PREFIX_TILES whose compiled prefix kernel fits the device's shared
    memory (fp32 inputs double what a tile asks); None when none does."""
    for block_n, stages in PREFIX_TILES:
        candidate = replace(plan, block_n=block_n, stages=stages)
        if fits(compile_tile(candidate)):
            return candidate
    return None
