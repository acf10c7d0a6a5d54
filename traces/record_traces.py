"""Record the real traces kprof ships, on a GPU, with the PyTorch profiler.

Three programs, each profiled with a schedule so that ``ProfilerStep#N`` ranges exist:

* ``llama_eager_decode``: greedy decode of a Llama-architecture model built from a config with
  random weights (transformers), eager mode, one ``record_function`` range per phase.
* ``gqa_graph_decode``: a decode step of a GQA transformer stack written in plain PyTorch, captured
  once as a CUDA graph and replayed every step, with eager sampling around it, each part inside a
  ``record_function`` range.

* ``two_streams`` (and ``two_streams_wide``, the same with GEMMs 1.5× as long): per step, 16
  GEMMs on one stream inside ``record_function("gemms")`` overlap a Triton kernel and a
  host-to-device copy on a second stream inside ``record_function("triton_and_copy")``; 12 active
  steps, so a single trace holds enough steady steps to be compared on its own.

Usage (on a machine with a GPU): ``python traces/record_traces.py OUT_DIR [NAME ...]`` (the names
to record again; all when none are given).
The traces are small on purpose: they are test fixtures and demo inputs.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

STEPS = schedule(wait=1, warmup=1, active=5, repeat=1)
TOTAL_STEPS = 7


def record_llama_eager(out: Path) -> dict:
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=32000,
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=4,
        num_attention_heads=16,
        num_key_value_heads=4,
        max_position_embeddings=4096,
    )
    model = LlamaForCausalLM(config).to(device="cuda", dtype=torch.bfloat16).eval()
    prompt = torch.randint(0, config.vocab_size, (4, 256), device="cuda")
    with torch.inference_mode():
        cache = DynamicCache()
        logits = model(input_ids=prompt, past_key_values=cache, use_cache=True).logits
        token = logits[:, -1].argmax(-1, keepdim=True)
        torch.cuda.synchronize()
        path = out / "llama_eager_decode.pt.trace.json.gz"
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=STEPS) as prof:
            for _ in range(TOTAL_STEPS):
                with record_function("decode_forward"):
                    logits = model(input_ids=token, past_key_values=cache, use_cache=True).logits
                with record_function("sample"):
                    token = logits[:, -1].argmax(-1, keepdim=True)
                prof.step()
            torch.cuda.synchronize()
        prof.export_chrome_trace(str(path))
    return {"file": path.name, "model": "LlamaForCausalLM (random weights)", "config": config.to_dict()}


class GqaDecodeStack(torch.nn.Module):
    """A Llama-style decode step over a static KV cache: RMSNorm, QKV, GQA attention, SwiGLU."""

    def __init__(self, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, max_len: int, batch: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.qkv = torch.nn.ModuleList(
            torch.nn.Linear(hidden, (heads + 2 * kv_heads) * self.head_dim, bias=False) for _ in range(layers)
        )
        self.out = torch.nn.ModuleList(torch.nn.Linear(hidden, hidden, bias=False) for _ in range(layers))
        self.up = torch.nn.ModuleList(torch.nn.Linear(hidden, 2 * ffn, bias=False) for _ in range(layers))
        self.down = torch.nn.ModuleList(torch.nn.Linear(ffn, hidden, bias=False) for _ in range(layers))
        self.norm = torch.nn.ModuleList(torch.nn.RMSNorm(hidden) for _ in range(2 * layers))
        shape = (layers, batch, kv_heads, max_len, self.head_dim)
        self.register_buffer("k_cache", torch.randn(shape))
        self.register_buffer("v_cache", torch.randn(shape))

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        for i, (qkv, out, up, down) in enumerate(zip(self.qkv, self.out, self.up, self.down)):
            h = self.norm[2 * i](x)
            q, k, v = qkv(h).split(
                [self.heads * self.head_dim, self.kv_heads * self.head_dim, self.kv_heads * self.head_dim],
                dim=-1,
            )
            q = q.view(b, self.heads, 1, self.head_dim)
            self.k_cache[i].index_copy_(2, pos, k.view(b, self.kv_heads, 1, self.head_dim))
            self.v_cache[i].index_copy_(2, pos, v.view(b, self.kv_heads, 1, self.head_dim))
            attn = torch.nn.functional.scaled_dot_product_attention(
                q, self.k_cache[i], self.v_cache[i], enable_gqa=True
            )
            x = x + out(attn.reshape(b, -1))
            gate, lin = up(self.norm[2 * i + 1](x)).chunk(2, dim=-1)
            x = x + down(torch.nn.functional.silu(gate) * lin)
        return x


def record_gqa_graph(out: Path) -> dict:
    torch.manual_seed(0)
    dims = dict(layers=4, hidden=2048, heads=16, kv_heads=4, ffn=5632, max_len=2048, batch=8)
    model = GqaDecodeStack(**dims).to(device="cuda", dtype=torch.bfloat16).eval()
    x = torch.randn(dims["batch"], dims["hidden"], device="cuda", dtype=torch.bfloat16)
    pos = torch.tensor([dims["max_len"] - 1], device="cuda")
    y = torch.empty_like(x)
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                y.copy_(model(x, pos))
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y.copy_(model(x, pos))
        graph.replay()
        torch.cuda.synchronize()
        path = out / "gqa_graph_decode.pt.trace.json.gz"
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=STEPS) as prof:
            for _ in range(TOTAL_STEPS):
                with record_function("decode_graph"):
                    graph.replay()
                with record_function("sample"):
                    x.copy_(y / y.norm(dim=-1, keepdim=True))
                prof.step()
            torch.cuda.synchronize()
        prof.export_chrome_trace(str(path))
    return {"file": path.name, "model": "GQA decode stack in plain PyTorch (random weights)", "dims": dims}


TWO_STREAM_STEPS = schedule(wait=1, warmup=1, active=12, repeat=1)


def _scale_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def scale_add(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, x * 2.0 + 1.0, mask=mask)

    return scale_add


def record_two_streams(out: Path, name: str, k: int) -> dict:
    """GEMMs on stream 1 run while a Triton kernel and a copy run on stream 2, each stream's work
    inside its own ``record_function`` range, so the GPU-side ranges of the two streams overlap."""
    import triton

    torch.manual_seed(0)
    scale_add = _scale_kernel()
    a = torch.randn(2048, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, 2048, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(2048, 2048, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(1 << 25, device="cuda")
    y = torch.empty_like(x)
    host = torch.randn(1 << 23, pin_memory=True)
    dev = torch.empty(1 << 23, device="cuda")
    gemm_stream, side_stream = torch.cuda.Stream(), torch.cuda.Stream()
    grid = (triton.cdiv(x.numel(), 4096),)

    def step() -> None:
        # The side stream's ~0.7 ms of work is queued first: the GEMMs, launched one by one behind
        # it, then run while the copy engine and the Triton kernel are still busy (queued the other
        # way round, each GEMM finished before the host launched the next and nothing overlapped).
        with torch.cuda.stream(side_stream), record_function("triton_and_copy"):
            scale_add[grid](x, y, x.numel(), BLOCK=4096)
            dev.copy_(host, non_blocking=True)
        with torch.cuda.stream(gemm_stream), record_function("gemms"):
            for _ in range(16):
                torch.mm(a, b, out=c)

    step()  # compiles the Triton kernel and warms cuBLAS before the profiler starts
    torch.cuda.synchronize()
    path = out / f"{name}.pt.trace.json.gz"
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=TWO_STREAM_STEPS) as prof:
        for _ in range(14):
            step()
            torch.cuda.synchronize()
            prof.step()
    prof.export_chrome_trace(str(path))
    return {
        "file": path.name,
        "program": f"16 GEMMs (2048x{k}x2048, bf16) on one stream; Triton scale_add over 32M fp32 and "
        "a 32 MiB pinned host-to-device copy on another",
    }


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    import triton

    provenance = {
        "recorded": time.strftime("%Y-%m-%d"),
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "traces": [],
    }
    recorders = (
        record_llama_eager,
        record_gqa_graph,
        lambda o: record_two_streams(o, "two_streams", 2048),
        lambda o: record_two_streams(o, "two_streams_wide", 3072),
    )
    only = set(sys.argv[2:])  # names to record again; all when none are given
    old = out / "PROVENANCE.json"
    if only and old.exists():
        provenance["traces"] = [t for t in json.loads(old.read_text())["traces"] if t["file"].split(".")[0] not in only]
    names = ("llama_eager_decode", "gqa_graph_decode", "two_streams", "two_streams_wide")
    for name, recorder in zip(names, recorders):
        if only and name not in only:
            continue
        provenance["traces"].append(dict(recorder(out), recorded=provenance["recorded"]))
        print("recorded", provenance["traces"][-1]["file"], flush=True)
    (out / "PROVENANCE.json").write_text(json.dumps(provenance, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
