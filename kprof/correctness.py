"""The correctness gate: poisoned outputs, comparison with the baseline leg and the float64 reference.

Rules per feature (kprof.workload.Feature): ``bitwise`` — same bytes; ``ulp`` — every element
within N units in the last place; ``tolerance`` — max |leg − baseline| / max |baseline| ≤ rtol. A
leg with several features is held to the loosest rule among them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from kprof.workload import Feature, exactness_text

_INT_VIEW = {2: torch.int16, 4: torch.int32, 8: torch.int64}


@dataclass(frozen=True)
class Rule:
    kind: str  # bitwise | ulp | tolerance
    ulps: int = 0
    rtol: float = 0.0

    def describe(self) -> str:
        return exactness_text(self.kind, self.ulps, self.rtol)


def rule_for(features: Iterable[Feature]) -> Rule:
    feats = list(features)
    tol = [f for f in feats if f.exactness == "tolerance"]
    if tol:
        return Rule("tolerance", rtol=max(f.rtol for f in tol))
    ulp = [f for f in feats if f.exactness == "ulp"]
    if ulp:
        return Rule("ulp", ulps=max(f.ulps for f in ulp))
    return Rule("bitwise")


def poison(tensors: dict[str, torch.Tensor]) -> None:
    """Fill outputs with NaN (floats) or a sentinel (ints) so a leg that skips a write is caught."""
    for t in tensors.values():
        t.fill_(float("nan") if t.is_floating_point() else -1)


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """Max ULP distance between two float tensors of one dtype; NaN vs NaN is 0, NaN vs a number inf."""
    if a.dtype != b.dtype or not a.is_floating_point():
        raise TypeError("ulp_distance needs two float tensors of the same dtype")
    bits = a.element_size() * 8
    ia = a.contiguous().view(_INT_VIEW[a.element_size()]).to(torch.int64)
    ib = b.contiguous().view(_INT_VIEW[b.element_size()]).to(torch.int64)
    if bits == 64:  # int64 cannot hold the mapped range; compare in float
        ia, ib = ia.double(), ib.double()
    sign = -(2 ** (bits - 1))
    # Monotone map of the bit pattern: negatives mirrored below zero, so +0 and -0 both map to 0.
    oa = torch.where(ia >= 0, ia, sign - ia)
    ob = torch.where(ib >= 0, ib, sign - ib)
    dist = (oa - ob).abs().double()
    na, nb = torch.isnan(a), torch.isnan(b)
    dist = torch.where(na & nb, torch.zeros_like(dist), dist)
    dist = torch.where(na ^ nb, torch.full_like(dist, float("inf")), dist)
    return float(dist.max()) if dist.numel() else 0.0


def relative_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    """max |x − ref| / max |ref| in float64 (inf when x has NaN where ref does not)."""
    xd, rd = x.double(), ref.double().to(x.device)
    if torch.isnan(xd).any() and not torch.isnan(rd).any():
        return float("inf")
    scale = rd.abs().max().item()
    diff = (xd - rd).abs().max().item() if xd.numel() else 0.0
    return diff / scale if scale > 0 else diff


@dataclass(frozen=True)
class CheckResult:
    rule: str
    passed: bool
    vs_baseline: float  # ulp for bitwise/ulp rules, relative error for tolerance
    vs_reference: float  # relative error against float64
    reference_ok: bool
    detail: str = ""


def compare(
    outputs: dict[str, torch.Tensor],
    baseline: dict[str, torch.Tensor],
    reference: dict[str, torch.Tensor] | None,
    rule: Rule,
    reference_rtol: float,
) -> CheckResult:
    worst_base = 0.0
    worst_ref = 0.0
    ok = True
    detail = []
    for name, out in outputs.items():
        base = baseline[name]
        if rule.kind == "tolerance":
            err = relative_error(out, base)
            ok &= err <= rule.rtol
        elif out.is_floating_point():
            err = ulp_distance(out, base)
            ok &= err <= (rule.ulps if rule.kind == "ulp" else 0)
        else:
            err = 0.0 if torch.equal(out, base) else float("inf")
            ok &= err == 0.0
        if rule.kind == "bitwise" and out.is_floating_point():
            ok &= torch.equal(out.contiguous().view(torch.uint8), base.contiguous().view(torch.uint8))
        worst_base = max(worst_base, err)
        if reference is not None and name in reference:
            worst_ref = max(worst_ref, relative_error(out, reference[name]))
        if not ok and not detail:
            detail.append(f"{name}: {err:g} vs baseline ({rule.describe()})")
    ref_ok = worst_ref <= reference_rtol
    if not ref_ok:
        detail.append(f"relative error {worst_ref:.3g} vs float64 > {reference_rtol:g}")
    return CheckResult(rule.describe(), ok and ref_ok, worst_base, worst_ref, ref_ok, "; ".join(detail))
