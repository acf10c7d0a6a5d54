"""A user's benchmark kept outside the repository it measures: flash-linear-attention's Gated DeltaNet
decode (``fla.ops.gated_delta_rule.fused_recurrent_gated_delta_rule``, one token per sequence, the
Qwen3-Next head layout) as a kprof workload. Each revision's ``fla`` is imported from its tree:

    kprof run benchmarks/fla_gdn_decode.py --revisions A..B --repo PATH/TO/flash-linear-attention \\
        --paths fla/ops/gated_delta_rule --design leave-one-out --case b32

Cases: B sequences, H = 16 query/key heads, HV = 32 value heads, K = V = 128; the recurrent state is
fp32 [B, HV, K, V] (2 MiB per sequence), read and written once per call. The float64 reference is
the recurrence itself (decay, delta-rule update, readout), written here from its definition.
"""

import torch
from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule

from kprof.workload import Case, Workload

H, HV, D = 16, 32, 128


def _case(b: int, h: int = H, hv: int = HV, d: int = D) -> Case:
    return Case(
        f"b{b}" + ("" if (h, hv, d) == (H, HV, D) else f"-h{h}-hv{hv}-d{d}"), {"B": b, "H": h, "HV": hv, "D": d}
    )


class FlaGdnDecode(Workload):
    name = "fla_gdn_decode"
    description = "flash-linear-attention fused_recurrent_gated_delta_rule, T = 1 (decode)"
    presets = {"smoke": (_case(2, 2, 4, 16),), "pr": (_case(1), _case(32), _case(128))}
    reference_rtol = 2e-2

    def setup(self, case, device, dtype, seed):
        p = case.params
        b, h, hv, d = p["B"], p["H"], p["HV"], p["D"]
        g = torch.Generator(device="cpu").manual_seed(seed)
        dt = getattr(torch, dtype)

        def rand(*shape, scale=1.0):
            return (torch.randn(*shape, generator=g) * scale).to(device)

        k = torch.nn.functional.normalize(rand(b, 1, h, d), dim=-1)
        return {
            "q": rand(b, 1, h, d).to(dt),
            "k": k.to(dt),
            "v": rand(b, 1, hv, d).to(dt),
            "g": -torch.rand(b, 1, hv, generator=g).to(device) * 0.5,  # log decay, fp32
            "beta": torch.rand(b, 1, hv, generator=g).to(device),  # fp32
            "h0": rand(b, hv, d, d, scale=0.1),  # [B, HV, K, V] fp32
            "scale": d**-0.5,
        }

    def launch(self, state, features, params):
        def run():
            o, ht = fused_recurrent_gated_delta_rule(
                q=state["q"],
                k=state["k"],
                v=state["v"],
                g=state["g"],
                beta=state["beta"],
                scale=state["scale"],
                initial_state=state["h0"],
                output_final_state=True,
            )
            state["o"], state["ht"] = o, ht  # what this call wrote (a graph replay rewrites them)

        return run

    def outputs(self, state):
        return {name: state[name] for name in ("o", "ht") if name in state}

    def reference(self, state):
        q, k, v = (state[n][:, 0].double() for n in ("q", "k", "v"))  # [B, H|HV, D]
        groups = v.shape[1] // q.shape[1]
        q, k = q.repeat_interleave(groups, 1), k.repeat_interleave(groups, 1)  # value head hv reads k head hv // groups
        s = state["h0"].double() * state["g"][:, 0].double().exp()[..., None, None]  # [B, HV, K, V]
        beta = state["beta"][:, 0].double()[..., None]
        delta = beta * (v - torch.einsum("bhkv,bhk->bhv", s, k))
        s = s + torch.einsum("bhk,bhv->bhkv", k, delta)
        o = torch.einsum("bhkv,bhk->bhv", s, q * state["scale"])
        return {"o": o[:, None], "ht": s}

    def bytes_per_call(self, case):
        p = case.params
        state = p["B"] * p["HV"] * p["D"] * p["D"] * 4
        return {"logical": 2 * state + p["B"] * (2 * p["H"] + 2 * p["HV"]) * p["D"] * 2}


WORKLOAD = FlaGdnDecode()
