"""paged_decode as a kprof workload: cases, levers, buffers, reference, bytes."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kprof.workload import Case, Feature, Sweep, Workload

if TYPE_CHECKING:  # torch, triton and the kernels are imported where they run: `kprof kernels` lists without them
    import torch

TILE_N = 32
MAX_SPLITS = 32


def _case(
    name: str,
    batch: int,
    seq: int,
    hq: int = 32,
    hkv: int = 8,
    d: int = 128,
    window: int | None = None,
    block_size: int = 16,
    ragged: bool = True,
) -> Case:
    return Case(
        name, dict(batch=batch, seq=seq, hq=hq, hkv=hkv, d=d, window=window, block_size=block_size, ragged=ragged)
    )


def ragged_lengths(batch: int, seq: int) -> torch.Tensor:
    """Lengths between 3/4 of seq and seq (the first is seq), so tails are partial tiles. They are
    the case's shape, not the seed's: drawn from a fixed generator, the same in every buffer set and
    every run, so two runs of a case time the same amount of work (when each seed drew its own, the
    baseline of b8-s32768-w4096 moved by 5% between runs with the sum of the lengths)."""
    import torch

    lens = torch.full((batch,), seq, dtype=torch.int32)
    if batch > 1:
        gen = torch.Generator(device="cpu").manual_seed(0)
        lens[1:] = torch.randint(max(1, 3 * seq // 4), seq + 1, (batch - 1,), generator=gen, dtype=torch.int32)
    return lens


WAVES = 4


def default_splits(batch: int, hkv: int, max_seq: int, num_sms: int) -> int:
    """About four programs per SM (one wave left SMs idle: the H200 split sweep in docs/benchmarks.md),
    never more splits than tiles."""
    wanted = max(1, WAVES * num_sms // max(batch * hkv, 1))
    return int(min(wanted, MAX_SPLITS, -(-max_seq // TILE_N)))


@dataclass
class State:
    case: Case
    q: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    block_table: torch.Tensor
    seq_lens: torch.Tensor
    out: torch.Tensor
    o_part: torch.Tensor
    lse_part: torch.Tensor
    scale: float
    num_sms: int


class PagedDecode(Workload):
    name = "paged_decode"
    description = "paged split-K GQA decode attention (Llama-style 32/8 heads, D 128/256)"
    features = (
        Feature(
            "prefetch_pages",
            "bitwise",
            doc="tile loop as tl.range(num_stages=3): next tile's page ids and K/V gathers in flight",
        ),
        Feature("skip_masked_tiles", "bitwise", doc="sliding window: never visit tiles before the window"),
        Feature(
            "grouped_heads",
            "tolerance",
            rtol=2e-2,
            doc="one program per KV head, query heads packed into a tl.dot, instead of one program per query head",
        ),
    )
    presets = {
        "smoke": (
            _case("b2-s100-h8/2-d64", 2, 100, hq=8, hkv=2, d=64),
            _case("b3-s77-h8/2-d64-w40", 3, 77, hq=8, hkv=2, d=64, window=40),
        ),
        "pr": (
            _case("b1-s32768", 1, 32768),
            _case("b8-s8192", 8, 8192),
            _case("b32-s4096", 32, 4096),
            _case("b64-s2048", 64, 2048),
            _case("b8-s32768-w4096", 8, 32768, window=4096),
            _case("b16-s4096-d256", 16, 4096, hq=32, hkv=8, d=256),
        ),
    }
    sweeps = (Sweep("num_splits", "KV splits per (request, head)", lambda case, v: 1 <= int(v) <= MAX_SPLITS),)
    reference_rtol = 2e-2

    def setup(self, case: Case, device: str, dtype: str, seed: int) -> State:
        import torch

        p = case.params
        gen = torch.Generator(device="cpu").manual_seed(seed)
        torch_dtype = getattr(torch, dtype)
        batch, seq, bs = p["batch"], p["seq"], p["block_size"]
        lens = ragged_lengths(batch, seq) if p["ragged"] else torch.full((batch,), seq, dtype=torch.int32)
        blocks_per_req = -(-seq // bs)
        pool = batch * blocks_per_req + 7
        # Random, non-monotonic page placement, as a serving engine's allocator leaves it.
        table = torch.randperm(pool, generator=gen)[: batch * blocks_per_req].view(batch, blocks_per_req)
        shape = (pool, bs, p["hkv"], p["d"])
        k = torch.randn(shape, generator=gen).to(torch_dtype)
        v = torch.randn(shape, generator=gen).to(torch_dtype)
        q = torch.randn((batch, p["hq"], p["d"]), generator=gen).to(torch_dtype)
        num_sms = torch.cuda.get_device_properties(device).multi_processor_count if device.startswith("cuda") else 4
        splits = MAX_SPLITS
        to = dict(device=device)
        return State(
            case=case,
            q=q.to(**to),
            k_cache=k.to(**to),
            v_cache=v.to(**to),
            block_table=table.to(dtype=torch.int32, **to),
            seq_lens=lens.to(**to),
            out=torch.empty((batch, p["hq"], p["d"]), dtype=torch_dtype, **to),
            o_part=torch.empty((batch, p["hq"], splits, p["d"]), dtype=torch.float32, **to),
            lse_part=torch.empty((batch, p["hq"], splits), dtype=torch.float32, **to),
            scale=1.0 / math.sqrt(p["d"]),
            num_sms=num_sms,
        )

    def splits(self, state: State, params: Mapping[str, Any]) -> int:
        if "num_splits" in params:
            return int(params["num_splits"])
        p = state.case.params
        return default_splits(p["batch"], p["hkv"], p["seq"], state.num_sms)

    def launch(self, state: State, features: frozenset[str], params: Mapping[str, Any]) -> Callable[[], None]:
        s = state
        splits = self.splits(s, params)
        kwargs = dict(
            scale=s.scale,
            window=s.case.params["window"],
            num_splits=splits,
            max_seq_len=s.case.params["seq"],
            grouped="grouped_heads" in features,
            prefetch_pages="prefetch_pages" in features,
            skip_masked_tiles="skip_masked_tiles" in features,
            tile_n=TILE_N,
        )

        from kprof_kernels.paged_decode.kernel import paged_decode

        def run() -> None:
            paged_decode(s.q, s.k_cache, s.v_cache, s.block_table, s.seq_lens, s.out, s.o_part, s.lse_part, **kwargs)

        return run

    def launch_torch(self, state: State) -> Callable[[], None]:
        from kprof_kernels.paged_decode.plain_torch import paged_decode_torch

        s = state
        return lambda: paged_decode_torch(
            s.q, s.k_cache, s.v_cache, s.block_table, s.seq_lens, s.out, s.scale, s.case.params["window"]
        )

    def outputs(self, state: State) -> dict[str, torch.Tensor]:
        return {"out": state.out}

    def reference(self, state: State) -> dict[str, torch.Tensor]:
        from kprof_kernels.paged_decode.reference import paged_decode_reference

        s = state
        return {
            "out": paged_decode_reference(
                s.q, s.k_cache, s.v_cache, s.block_table, s.seq_lens, s.scale, s.case.params["window"]
            )
        }

    def bytes_per_call(self, case: Case) -> dict[str, int]:
        """unique: K and V of every attended token read once (grouped kernel); logical: per query head."""
        p = case.params
        attended = min(p["seq"], p["window"]) if p["window"] else p["seq"]
        kv = p["batch"] * attended * p["hkv"] * p["d"] * 2 * 2
        qo = 2 * p["batch"] * p["hq"] * p["d"] * 2
        table = p["batch"] * -(-p["seq"] // p["block_size"]) * 4
        group = p["hq"] // p["hkv"]
        return {"unique": kv + qo + table, "logical": kv * group + qo + table}

    def flops_per_call(self, case: Case) -> int:
        p = case.params
        attended = min(p["seq"], p["window"]) if p["window"] else p["seq"]
        return 4 * p["batch"] * p["hq"] * attended * p["d"]


WORKLOAD = PagedDecode()
