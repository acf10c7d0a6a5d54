"""mla_decode as a kprof workload: the aiter PR #4758 workload (68,000-token contexts, a 63,240-token
prefix shared by every 8 requests through the page table) and small CPU shapes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kprof.workload import Case, Feature, Sweep, Workload
from kprof_kernels.mla_decode import KV_LORA, ROPE

if TYPE_CHECKING:  # torch, triton and the kernels are imported where they run: `kprof kernels` lists without them
    import torch

    from kprof_kernels.mla_decode.kernel import SharedPrefix

ROW = KV_LORA + ROPE
BLOCK_N = 32
BLOCK_H = 16  # heads per stage-1 program (the kernel's default)
MAX_SPLITS = 256
PREFIX, CONTEXT, SHARE = 63_240, 68_000, 8
# shared_prefix acts where a group holds at least this many requests: on the H200 a prefix program
# serving 2 requests (24 of 32 query rows) made concurrency 2 slower (73 → 103 µs), 4 paid (+7%).
MIN_SHARING = 4


def _case(name: str, batch: int, heads: int, context: int = CONTEXT, prefix: int = PREFIX, share: int = SHARE) -> Case:
    return Case(name, dict(batch=batch, heads=heads, context=context, prefix=prefix, share=share))


def programs_per_split(batch: int, heads: int) -> int:
    """Stage-1 programs of one split: one per request and block of BLOCK_H heads."""
    return batch * -(-heads // BLOCK_H)


def default_splits(batch: int, heads: int, context: int) -> int:
    """Upstream's policy: about 256 programs per call (256 // (B · head blocks)), bounded by the tiles."""
    return int(max(1, min(256 // programs_per_split(batch, heads), -(-context // BLOCK_N), MAX_SPLITS)))


def split_walk(batch: int, heads: int, context: int, splits: int, block_n: int = BLOCK_N) -> dict[str, int]:
    """What a split count means for stage 1: tokens per split, loop trips per program (the variable
    the pipelining lever acts on, as the MLA PR's mechanism table has it) and programs launched."""
    from kprof_kernels.mla_decode.kernel import tokens_per_split

    tokens = tokens_per_split(context, splits, block_n)
    return {
        "tokens/split": tokens,
        "trips": tokens // block_n,
        "programs": splits * programs_per_split(batch, heads),
    }


@dataclass
class State:
    case: Case
    q: torch.Tensor
    kv: torch.Tensor
    page_table: torch.Tensor
    seq_lens: torch.Tensor
    out: torch.Tensor
    o_part: torch.Tensor
    lse_part: torch.Tensor
    num_sms: int


class MlaDecode(Workload):
    name = "mla_decode"
    description = "split-K MLA decode (kv_lora 512 + rope 64, page size 1, shared-prefix page table)"
    features = (
        Feature(
            "pipelined_loads",
            "bitwise",
            doc="stage-1 loop as tl.range(num_stages=3): page indices and KV gathers in flight",
        ),
        Feature(
            "split_major_grid",
            "bitwise",
            doc="stage-1 grid (S, B, heads) instead of (B, S, heads); a negative control on an H200",
        ),
        # Tiling changes how many splits are summed per step, which can flip the bf16 rounding of an
        # output element: one bf16 ulp is up to 2^-8 of an element, hence 1e-2 (seen on an H200).
        Feature(
            "tiled_reduce",
            "tolerance",
            rtol=1e-2,
            doc="stage 2 split over the 512-wide value dim while SMs idle, 4 warps instead of 8",
        ),
        # More splits reorder the softmax merge: the same bf16 rounding argument as tiled_reduce.
        Feature(
            "wave_fit_splits",
            "tolerance",
            rtol=1e-2,
            doc="split count raised until the stage-1 grid's last wave of resident programs is ≥ 95% full",
        ),
        # The prefix's softmax is merged with the suffix's as one more split: bf16 rounding as above.
        Feature(
            "shared_prefix",
            "tolerance",
            rtol=1e-2,
            doc="each group's shared prefix read once for up to 64 query rows (requests × heads) of the "
            "group, merged with each request's own tokens as extra splits",
        ),
    )
    presets = {
        "smoke": (
            _case("b2-h4-c80", 2, 4, context=80, prefix=50, share=2),
            _case("b3-h16-c45", 3, 16, context=45, prefix=20, share=2),
        ),
        "pr": tuple(_case(f"h{h}-c{c}", c, h) for h in (12, 16) for c in (1, 2, 4, 8, 16, 24, 48)),
        "sweep": (_case("h12-c8", 8, 12), _case("h12-c48", 48, 12)),
    }
    sweeps = (
        Sweep(
            "num_splits",
            "KV splits per request (2 … 256)",
            lambda case, v: 1 <= int(v) <= MAX_SPLITS,
            lambda case, v: split_walk(case.params["batch"], case.params["heads"], case.params["context"], int(v)),
        ),
        Sweep("block_n", "stage 1: tokens per tile", lambda case, v: int(v) in (16, 32, 64)),
        Sweep("stage1_warps", "stage 1: warps per program", lambda case, v: int(v) in (2, 4, 8)),
        Sweep(
            "prefix_splits",
            "shared_prefix: splits of each group's prefix (1 … 128)",
            lambda case, v: 1 <= int(v) <= MAX_SPLITS // 2,
        ),
        Sweep("prefix_warps", "shared_prefix: warps per prefix program", lambda case, v: int(v) in (4, 8, 16)),
        Sweep("prefix_block_n", "shared_prefix: prefix rows per tile", lambda case, v: int(v) in (16, 32, 64)),
        Sweep("prefix_stages", "shared_prefix: prefix tiles in flight", lambda case, v: 1 <= int(v) <= 4),
        Sweep(
            "prefix_requests",
            "shared_prefix: requests of a group per prefix program (their heads are its query rows)",
            lambda case, v: 1 <= int(v) <= case.params["share"],
        ),
    )
    reference_rtol = 2e-2

    def setup(self, case: Case, device: str, dtype: str, seed: int) -> State:
        import torch

        p = case.params
        gen = torch.Generator(device="cpu").manual_seed(seed)
        dt = getattr(torch, dtype)
        batch, ctx, prefix, share = p["batch"], p["context"], p["prefix"], p["share"]
        groups = -(-batch // share)
        suffix = ctx - prefix
        rows = groups * prefix + batch * suffix
        # Rows are placed in random order in the pool, as an allocator leaves them; requests of one
        # group point at the same prefix rows (prefix caching).
        perm = torch.randperm(rows, generator=gen).to(torch.int32)
        table = torch.empty(batch, ctx, dtype=torch.int32)
        for b in range(batch):
            g = b // share
            table[b, :prefix] = perm[g * prefix : (g + 1) * prefix]
            start = groups * prefix + b * suffix
            table[b, prefix:] = perm[start : start + suffix]
        # The pool is up to 0.7 GB: draw it on the device (seeded there) rather than on the host.
        dev_gen = torch.Generator(device=device).manual_seed(seed)
        kv = torch.randn(rows, ROW, generator=dev_gen, device=device).to(dt)
        q = torch.randn(batch, p["heads"], ROW, generator=dev_gen, device=device).to(dt)
        # On the CPU, pretend to be an H200 (132 SMs) so every lever's gate opens under the interpreter.
        num_sms = torch.cuda.get_device_properties(device).multi_processor_count if device.startswith("cuda") else 132
        to = dict(device=device)
        return State(
            case=case,
            q=q.to(**to),
            kv=kv.to(**to),
            page_table=table.to(**to),
            seq_lens=torch.full((batch,), ctx, dtype=torch.int32, device=device),
            out=torch.empty(batch, p["heads"], KV_LORA, dtype=dt, **to),
            o_part=torch.empty(batch, p["heads"], MAX_SPLITS, KV_LORA, dtype=torch.float32, **to),
            lse_part=torch.empty(batch, p["heads"], MAX_SPLITS, dtype=torch.float32, **to),
            num_sms=num_sms,
        )

    def launch(self, state: State, features: frozenset[str], params: Mapping[str, Any]) -> Callable[[], None]:
        from kprof.compile_info import programs_per_sm
        from kprof_kernels.mla_decode.kernel import mla_decode, wave_fit_splits

        p = state.case.params
        splits = int(params.get("num_splits", default_splits(p["batch"], p["heads"], p["context"])))
        kwargs = dict(
            sm_scale=ROW**-0.5,
            max_seq_len=p["context"],
            num_sms=state.num_sms,
            pipelined_loads="pipelined_loads" in features,
            split_major_grid="split_major_grid" in features,
            tiled_reduce="tiled_reduce" in features,
            block_n=int(params.get("block_n", BLOCK_N)),
            stage1_warps=int(params.get("stage1_warps", 4)),
        )
        s = state

        def call(num_splits: int, compile_only: bool = False) -> Any:
            return mla_decode(
                s.q,
                s.kv,
                s.page_table,
                s.seq_lens,
                s.out,
                s.o_part,
                s.lse_part,
                num_splits=num_splits,
                compile_only=compile_only,
                **kwargs,
            )

        own_tokens, room = p["context"], MAX_SPLITS  # tokens stage 1 walks per request; splits o_part holds
        if "shared_prefix" in features and min(p["share"], p["batch"]) >= MIN_SHARING and p["prefix"] > 0:
            plan = self._prefix_plan(s, params, "pipelined_loads" in features)
            if plan is not None:  # None: no prefix tile fits this device's shared memory
                kwargs["prefix"] = plan
                own_tokens, room = p["context"] - p["prefix"], MAX_SPLITS // 2  # half the partials each
                splits = min(int(params.get("num_splits", default_splits(p["batch"], p["heads"], own_tokens))), room)
        if "wave_fit_splits" in features and "num_splits" not in params:
            # Compiling stage 1 (nothing is launched) tells its resident programs per SM; one per
            # SM where that is unknown (interpreter, ROCm).
            per_sm = programs_per_sm(call(splits, compile_only=True)) or 1
            most = min(-(-own_tokens // kwargs["block_n"]), room)
            splits = wave_fit_splits(splits, programs_per_split(p["batch"], p["heads"]), s.num_sms * per_sm, most)
        return lambda: call(splits)

    @staticmethod
    def _prefix_plan(s: State, params: Mapping[str, Any], pipelined: bool) -> SharedPrefix | None:
        """The shared_prefix plan: requests per program, splits and warps from prefix_plan or the
        sweeps; the prefix loop's tile forced by the sweeps or the fastest that fits the device."""
        from kprof.compile_info import fits_shared_memory
        from kprof_kernels.mla_decode.kernel import fitting_prefix_tile, prefix_plan, prefix_stage1

        p = s.case.params
        per_program = int(params["prefix_requests"]) if "prefix_requests" in params else None
        plan = prefix_plan(p["batch"], p["heads"], p["prefix"], p["share"], s.num_sms, MAX_SPLITS // 2, per_program)
        plan = replace(
            plan,
            splits=int(params.get("prefix_splits", plan.splits)),
            warps=int(params.get("prefix_warps", plan.warps)),
        )
        if "prefix_block_n" in params or "prefix_stages" in params:
            return replace(
                plan,
                block_n=int(params.get("prefix_block_n", plan.block_n)),
                stages=int(params.get("prefix_stages", plan.stages)),
            )

        def compile_tile(candidate: SharedPrefix) -> Any:
            return prefix_stage1(
                s.q, s.kv, s.page_table, s.o_part, s.lse_part, ROW**-0.5, candidate, pipelined, compile_only=True
            )

        return fitting_prefix_tile(plan, compile_tile, fits_shared_memory)

    def launch_torch(self, state: State) -> Callable[[], None]:
        from kprof_kernels.mla_decode.plain_torch import mla_decode_torch

        s = state
        return lambda: mla_decode_torch(s.q, s.kv, s.page_table, s.seq_lens, s.out, ROW**-0.5)

    def outputs(self, state: State) -> dict[str, torch.Tensor]:
        return {"out": state.out}

    def reference(self, state: State) -> dict[str, torch.Tensor]:
        from kprof_kernels.mla_decode.reference import mla_decode_reference

        s = state
        return {"out": mla_decode_reference(s.q, s.kv, s.page_table, s.seq_lens, ROW**-0.5)}

    def bytes_per_call(self, case: Case) -> dict[str, int]:
        """logical: every request's KV (aiter test_mla.py convention); unique: shared prefixes once.
        Partials are counted at upstream's split count: a leg with more splits (wave_fit_splits, a
        sweep) moves a little more (at most 0.4% of the logical bytes in the pr preset)."""
        p = case.params
        batch, heads, ctx = p["batch"], p["heads"], p["context"]
        groups = -(-batch // p["share"])
        q_o = batch * heads * (ROW + KV_LORA) * 2
        splits = default_splits(batch, heads, ctx)
        partials = 2 * batch * heads * splits * (KV_LORA + 1) * 4 if splits > 1 else 0
        table = batch * ctx * 4
        unique_kv = (groups * p["prefix"] + batch * (ctx - p["prefix"])) * ROW * 2
        return {"unique": unique_kv + q_o + partials + table, "logical": batch * ctx * ROW * 2 + q_o + partials + table}

    def flops_per_call(self, case: Case) -> int:
        p = case.params
        return 2 * p["batch"] * p["heads"] * p["context"] * (ROW + KV_LORA)


WORKLOAD = MlaDecode()
