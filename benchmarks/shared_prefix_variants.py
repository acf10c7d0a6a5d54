"""Variants of mla_decode's ``shared_prefix`` lever on a GPU, and a device copy of gdn's state bytes.

A quick screen, not a kprof run: each variant is timed with ``triton.testing.do_bench`` (L2
flushed before each call; times include the launch of the call's two or three kernels), checked
against the float64 reference in bf16, and described by its compile metadata (registers, spills,
resident programs per SM). The figures chose the lever's defaults; the lever's effect itself is
measured by ``kprof run`` (docs/benchmarks.md, "H200, session 7").

    PYTHONPATH=$PWD OUT=out python benchmarks/shared_prefix_variants.py [CASE ...]

Writes one JSON line per variant to $OUT/explore.jsonl.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import torch
from triton.testing import do_bench

from kprof.compile_info import compile_metadata
from kprof.correctness import relative_error
from kprof_kernels.gdn_decode.workload import WORKLOAD as GDN
from kprof_kernels.mla_decode.workload import WORKLOAD as MLA

OTHER_LEVERS = ["pipelined_loads", "split_major_grid", "tiled_reduce", "wave_fit_splits"]
SHARED = [*OTHER_LEVERS, "shared_prefix"]
CASES = ["h12-c16", "h16-c16", "h12-c8", "h12-c24", "h12-c48", "h12-c4", "h12-c2"]
META = ("kernel", "registers", "spills", "shared_bytes", "programs_per_sm", "num_warps")


def log(out: str, **row: Any) -> None:
    print(json.dumps(row), flush=True)
    with open(os.path.join(out, "explore.jsonl"), "a") as f:
        f.write(json.dumps(row) + "\n")


def microseconds(fn: Callable[[], Any]) -> float:
    return do_bench(fn, warmup=20, rep=150) * 1e3


def mla_variants(name: str) -> list[tuple[str, list[str], dict[str, int]]]:
    variants = [("other levers", OTHER_LEVERS, {}), ("+ shared_prefix", SHARED, {})]
    if name in ("h12-c8", "h12-c16"):  # the prefix loop's tile and depth
        variants += [
            (f"shared prefix_block_n={n} prefix_stages={k}", SHARED, {"prefix_block_n": n, "prefix_stages": k})
            for n, k in ((16, 4), (32, 2), (32, 4), (64, 2))
        ]
    if name.startswith("h16"):  # 16 heads: 2, 3 or 4 requests (32, 48 or 64 query rows) per prefix program
        variants += [(f"shared prefix_requests={r}", SHARED, {"prefix_requests": r}) for r in (2, 3, 4)]
    if name == "h12-c16":  # requests per prefix program × warps, then the split counts
        variants += [
            (f"shared r{r} w{w}", SHARED, {"prefix_requests": r, "prefix_warps": w})
            for r in (1, 2, 4, 8)
            for w in (4, 8)
        ]
        variants += [(f"shared prefix_splits={n}", SHARED, {"prefix_splits": n}) for n in (16, 66, 128)]
        variants += [(f"shared num_splits={n}", SHARED, {"num_splits": n}) for n in (8, 32)]
    return variants


def main() -> None:
    out = os.environ["OUT"]
    for name in sys.argv[1:] or CASES:
        case = next(c for c in MLA.cases("pr") if c.name == name)
        state = MLA.setup(case, "cuda", "bfloat16", 0)
        ref = MLA.reference(state)["out"]
        for label, features, params in mla_variants(name):
            try:
                fn = MLA.launch(state, frozenset(features), params)
                state.out.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                err = float(relative_error(state.out, ref))
                meta = [{k: m.get(k) for k in META} for m in compile_metadata(fn, ("kprof_kernels.",))]
                log(out, case=name, leg=label, us=round(microseconds(fn), 2), err=err, compile=meta)
            except Exception as e:  # a variant that does not fit (shared memory) is a result too
                log(out, case=name, leg=label, error=repr(e)[:300])
        del state, ref
        torch.cuda.empty_cache()
    # gdn recurrent at batch 32 next to a device copy of the bytes its state pool moves
    case = next(c for c in GDN.cases("pr") if c.name == "recurrent-b32-hv32")
    state = GDN.setup(case, "cuda", "bfloat16", 0)
    for label, features, params in [("chunked_state", ["chunked_state"], {}), ("upstream", [], {})]:
        fn = GDN.launch(state, frozenset(features), params)
        log(out, case=case.name, leg=label, us=round(microseconds(fn), 2))
    state_bytes = state.ssm_state[: case.params["batch"]].numel() * 4
    for nbytes in (state_bytes, 1 << 30):
        src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda")
        dst = torch.empty_like(src)
        us = microseconds(lambda: dst.copy_(src))  # noqa: B023 - timed before the next iteration
        log(out, case="copy", leg=f"{nbytes / 2**20:.0f} MiB", us=round(us, 2), gbps=round(2 * nbytes / us / 1e3, 1))


if __name__ == "__main__":
    main()
