"""gdn_decode as a kprof workload (Qwen3-Next / Qwen3.5 shapes).

A case's ``part`` is ``step`` (conv update then recurrent decode, one GDN layer's decode step),
``recurrent`` (the packed recurrent decode alone; its input is prepared once at setup) or ``conv``.
Outputs checked: every written tensor and both whole state pools, untouched slots included; the
pools are restored to their initial contents before each checked launch (``reset``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kprof.workload import Case, Feature, Sweep, Workload

if TYPE_CHECKING:  # torch, triton and the kernels are imported where they run: `kprof kernels` lists without them
    import torch

BLOCK = 256
BV = 32
CHUNK_ROWS = 8  # rows per chunk under chunked_state


def _case(
    name: str,
    batch: int,
    hv: int = 32,
    h: int = 16,
    dim: int = 128,
    width: int = 4,
    bias: bool = False,
    silu: bool = True,
    part: str = "step",
    pad: bool = False,
    strided: bool = False,
) -> Case:
    return Case(
        name,
        dict(
            batch=batch,
            h=h,
            hv=hv,
            k=dim,
            v=dim,
            width=width,
            bias=bias,
            silu=silu,
            part=part,
            pad=pad,
            strided=strided,
        ),
    )


@dataclass
class State:
    case: Case
    mixed_qkvz: torch.Tensor
    ba: torch.Tensor
    conv_state: torch.Tensor
    conv_state0: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor | None
    ssm_state: torch.Tensor
    ssm_state0: torch.Tensor
    a_log: torch.Tensor
    dt_bias: torch.Tensor
    indices: torch.Tensor
    mixed_qkv: torch.Tensor
    z: torch.Tensor
    b: torch.Tensor
    a: torch.Tensor
    out: torch.Tensor
    inputs0: dict[str, torch.Tensor]


class GdnDecode(Workload):
    name = "gdn_decode"
    description = "Gated-DeltaNet decode: fused split + causal conv1d update, packed recurrent decode (fp32 state)"
    features = (
        Feature("reuse_state", "bitwise", doc="conv: shift the state from registers instead of re-loading it"),
        Feature("conv_warps", "bitwise", doc="conv: 4 warps per 256-feature block instead of 8"),
        Feature("stream_state", "bitwise", doc="recurrent: state loads evict_first, stores .cs (streaming)"),
        Feature(
            "chunked_state",
            "bitwise",
            doc=f"recurrent: walk each program's {BV} value rows in {CHUNK_ROWS}-row chunks, the next chunk's state"
            " load in flight while the current one is computed and stored",
        ),
    )
    # Tuning knobs for the recurrent kernel, to explore with --sweep (upstream: BV 32, one warp).
    sweeps = (
        Sweep("block_v", "recurrent: value rows per program", lambda case, v: int(v) in (8, 16, 32, 64, 128)),
        Sweep("recurrent_warps", "recurrent: warps per program", lambda case, v: int(v) in (1, 2, 4, 8)),
        Sweep(
            "chunk_rows", "recurrent, with chunked_state: value rows per chunk", lambda case, v: int(v) in (4, 8, 16)
        ),
    )
    presets = {
        "smoke": (
            _case("b3-w4-silu-pad", 3, hv=4, h=2, dim=32, pad=True),
            _case("b4-w3-bias-strided", 4, hv=4, h=2, dim=32, width=3, bias=True, pad=True, strided=True),
            _case("b2-w2-linear", 2, hv=4, h=2, dim=32, width=2, silu=False),
        ),
        "pr": (
            _case("step-b1-hv32", 1),
            _case("step-b32-hv32", 32),
            _case("step-b256-hv32", 256),
            _case("step-b32-hv48", 32, hv=48),
            _case("recurrent-b32-hv32", 32, part="recurrent"),
            _case("recurrent-b128-hv32", 128, part="recurrent"),
            _case("recurrent-b256-hv48", 256, hv=48, part="recurrent"),
            _case("conv-b256-hv32", 256, part="conv"),
        ),
    }
    reference_rtol = 2e-2

    def setup(self, case: Case, device: str, dtype: str, seed: int) -> State:
        import torch

        p = case.params
        gen = torch.Generator(device="cpu").manual_seed(seed)
        dt = getattr(torch, dtype)
        batch, h, hv, k, v, width = p["batch"], p["h"], p["hv"], p["k"], p["v"], p["width"]
        qkv_dim = 2 * h * k + hv * v
        slots = batch + 5
        indices = torch.randperm(slots, generator=gen)[:batch].to(torch.int32)  # non-monotonic slots
        if p["pad"]:
            indices[-1] = -1
            if batch > 3:
                indices[1] = slots + 3  # out of range: padding too
        if p["strided"]:  # feature stride 2 and a physical state length of 5, as upstream tests do
            conv_state = torch.randn(slots, 5, 2 * qkv_dim, generator=gen)[:, :, ::2].transpose(1, 2)
        else:
            conv_state = torch.randn(slots, qkv_dim, width - 1, generator=gen)

        def rand(*shape: int, scale: float = 1.0) -> torch.Tensor:
            return (torch.randn(*shape, generator=gen) * scale).to(dt).to(device)

        conv_state = conv_state.to(dt).to(device)
        ssm_state = (torch.randn(slots, hv, v, k, generator=gen) * 0.1).to(device)
        state = State(
            case=case,
            mixed_qkvz=rand(batch, qkv_dim + hv * v),
            ba=rand(batch, 2 * hv),
            conv_state=conv_state,
            conv_state0=conv_state.clone(),
            weight=rand(qkv_dim, width, scale=0.5),
            bias=rand(qkv_dim, scale=0.1) if p["bias"] else None,
            ssm_state=ssm_state,
            ssm_state0=ssm_state.clone(),
            a_log=(torch.rand(hv, generator=gen) * 2 - 1).to(device),
            dt_bias=torch.rand(hv, generator=gen).to(device),
            indices=indices.to(device),
            mixed_qkv=torch.empty(batch, qkv_dim, dtype=dt, device=device),
            z=torch.empty(batch, hv * v, dtype=dt, device=device),
            b=torch.empty(batch, hv, dtype=dt, device=device),
            a=torch.empty(batch, hv, dtype=dt, device=device),
            out=torch.empty(batch, hv, v, dtype=dt, device=device),
            inputs0={},
        )
        if p["part"] == "recurrent":  # the recurrent kernel's inputs come from one conv update, made once
            self._conv(state, frozenset())
            state.conv_state0 = state.conv_state.clone()
            state.inputs0 = {n: getattr(state, n).clone() for n in ("mixed_qkv", "a", "b")}
        return state

    def reset(self, state: State) -> None:
        state.conv_state.copy_(state.conv_state0)
        state.ssm_state.copy_(state.ssm_state0)
        for name, value in state.inputs0.items():
            getattr(state, name).copy_(value)

    def _conv(self, s: State, features: frozenset[str]) -> None:
        from kprof_kernels.gdn_decode.kernel import gdn_conv_update

        p = s.case.params
        gdn_conv_update(
            s.mixed_qkvz,
            s.ba,
            s.conv_state,
            s.weight,
            s.bias,
            s.indices,
            s.mixed_qkv,
            s.z,
            s.b,
            s.a,
            hv=p["hv"],
            v=p["v"],
            silu=p["silu"],
            reuse_state="reuse_state" in features,
            conv_warps=4 if "conv_warps" in features else 8,
            block=BLOCK,
        )

    def _recurrent(self, s: State, features: frozenset[str], params: Mapping[str, Any]) -> None:
        from kprof_kernels.gdn_decode.kernel import gdn_recurrent_decode

        p = s.case.params
        gdn_recurrent_decode(
            s.mixed_qkv,
            s.a,
            s.b,
            s.a_log,
            s.dt_bias,
            s.ssm_state,
            s.indices,
            s.out,
            h=p["h"],
            hv=p["hv"],
            k=p["k"],
            v=p["v"],
            stream_state="stream_state" in features,
            **self._tiling(features, params),
            num_warps=int(params.get("recurrent_warps", 1)),
        )

    @staticmethod
    def _tiling(features: frozenset[str], params: Mapping[str, Any]) -> dict[str, int]:
        """Rows per chunk and chunks per program of the recurrent kernel: a program owns ``block_v``
        value rows, in one chunk or, under chunked_state, in chunks of ``chunk_rows``."""
        rows = int(params.get("block_v", BV))
        if "chunked_state" not in features:
            return {"bv": rows, "chunks": 1}
        chunk = min(int(params.get("chunk_rows", CHUNK_ROWS)), rows)
        return {"bv": chunk, "chunks": rows // chunk}

    def launch(self, state: State, features: frozenset[str], params: Mapping[str, Any]) -> Callable[[], None]:
        part = state.case.params["part"]

        def step() -> None:
            if part != "recurrent":
                self._conv(state, features)
            if part != "conv":
                self._recurrent(state, features, params)

        return step

    def launch_torch(self, state: State) -> Callable[[], None]:
        from kprof_kernels.gdn_decode.plain_torch import conv_update_torch, recurrent_torch

        s, p = state, state.case.params
        part = p["part"]

        def step() -> None:
            if part != "recurrent":
                conv_update_torch(
                    s.mixed_qkvz,
                    s.ba,
                    s.conv_state,
                    s.weight,
                    s.bias,
                    s.indices,
                    s.mixed_qkv,
                    s.z,
                    s.b,
                    s.a,
                    hv=p["hv"],
                    v=p["v"],
                    silu=p["silu"],
                )
            if part != "conv":
                recurrent_torch(
                    s.mixed_qkv,
                    s.a,
                    s.b,
                    s.a_log,
                    s.dt_bias,
                    s.ssm_state,
                    s.indices,
                    s.out,
                    h=p["h"],
                    hv=p["hv"],
                    k=p["k"],
                    v=p["v"],
                )

        return step

    def outputs(self, state: State) -> dict[str, torch.Tensor]:
        part = state.case.params["part"]
        conv = {"mixed_qkv": state.mixed_qkv, "z": state.z, "b": state.b, "a": state.a, "conv_state": state.conv_state}
        rec = {"out": state.out, "ssm_state": state.ssm_state}
        return {**conv, **rec} if part == "step" else rec if part == "recurrent" else conv

    def reference(self, state: State) -> dict[str, torch.Tensor]:
        from kprof_kernels.gdn_decode.reference import conv_update_reference, recurrent_reference

        s, p = state, state.case.params
        qkv_dim = s.weight.shape[0]
        x = s.mixed_qkvz[:, :qkv_dim]
        hv_v = p["hv"] * p["v"]
        ref: dict[str, torch.Tensor] = {}
        if p["part"] == "recurrent":
            mixed, a, b = s.inputs0["mixed_qkv"], s.inputs0["a"], s.inputs0["b"]
        else:
            y, conv_state = conv_update_reference(x, s.conv_state0, s.weight, s.bias, s.indices.cpu(), p["silu"])
            mixed = y
            b, a = s.ba[:, : p["hv"]], s.ba[:, p["hv"] :]
            ref.update(
                mixed_qkv=y,
                z=s.mixed_qkvz[:, qkv_dim : qkv_dim + hv_v].double(),
                b=b.double(),
                a=a.double(),
                conv_state=conv_state,
            )
        if p["part"] != "conv":
            out, ssm = recurrent_reference(
                mixed, a, b, s.a_log, s.dt_bias, s.ssm_state0, s.indices.cpu(), p["h"], p["hv"], p["k"], p["v"]
            )
            ref.update(out=out, ssm_state=ssm)
        return ref

    def bytes_per_call(self, case: Case) -> dict[str, int]:
        """unique bytes: state pools read and written once, activations read/written once."""
        p = case.params
        batch, hv, k, v, width = p["batch"], p["hv"], p["k"], p["v"], p["width"]
        qkv_dim = 2 * p["h"] * k + hv * v
        recurrent = batch * (2 * hv * v * k * 4 + qkv_dim * 2 + 2 * hv * 2 + hv * v * 2 + 4)
        conv = batch * (qkv_dim * 2 + 2 * hv * v * 2 + 4 * hv * 2 + 2 * (width - 1) * qkv_dim * 2 + qkv_dim * 2)
        conv += qkv_dim * (width + 1) * 2
        part = p["part"]
        total = recurrent + conv if part == "step" else recurrent if part == "recurrent" else conv
        return {"unique": total}


WORKLOAD = GdnDecode()
