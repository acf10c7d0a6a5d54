"""The correctness gate: poisoned outputs, comparison with the baseline leg and the float64 reference.

Rules per feature (kprof.workload.Feature): ``bitwise`` — same bytes; ``ulp`` — every element
within N units in the last place; ``tolerance`` — max |leg − baseline| / max |baseline| ≤ rtol. A
leg with several features is held to the loosest rule among them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from kprof.store.run_tables import NO_OUTPUTS
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


def _where(flat: int, shape: torch.Size) -> str:
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return "[" + ", ".join(str(i) for i in reversed(index)) + "]"


def mismatch_text(name: str, out: torch.Tensor, expected: torch.Tensor, atol: float, what: str) -> str:
    """``y: 20 of 4096 elements differ from the baseline by more than 0 (first at [100]; largest
    |Δ| 1 at [100]: 1.5 vs 0.5)``: how many, where, and by how much, for a failed check."""
    o, e = out.double().reshape(-1), expected.double().to(out.device).reshape(-1)
    both_nan = torch.isnan(o) & torch.isnan(e)
    delta = torch.where(both_nan, torch.zeros_like(o), (o - e).abs())
    delta = torch.where(torch.isnan(delta), torch.full_like(delta, float("inf")), delta)
    bad = delta > atol
    if not bool(bad.any()):  # same values, different bits (-0.0 against 0.0, NaN payloads)
        bad = ~both_nan & (o.view(torch.int64) != e.view(torch.int64)) if o.numel() else bad
    count = int(bad.sum())
    if count == 0:
        return f"{name}: differs from {what}"
    first = int(torch.nonzero(bad)[0])
    worst = int(torch.argmax(torch.where(bad, delta, torch.full_like(delta, -1.0))))
    return (
        f"{name}: {count} of {o.numel()} elements differ from {what} by more than {atol:.3g} "
        f"(first at {_where(first, out.shape)}; largest |Δ| {float(delta[worst]):.3g} at {_where(worst, out.shape)}: "
        f"{float(o[worst]):.6g} vs {float(e[worst]):.6g})"
    )


@dataclass(frozen=True)
class CheckResult:
    rule: str
    passed: bool
    vs_baseline: float  # ulp for bitwise/ulp rules, relative error for tolerance
    vs_reference: float  # relative error against float64 (NaN: no reference to check against)
    reference_ok: bool
    detail: str = ""


def compare(
    outputs: dict[str, torch.Tensor],
    baseline: dict[str, torch.Tensor],
    reference: dict[str, torch.Tensor] | None,
    rule: Rule,
    reference_rtol: float,
) -> CheckResult:
    if not outputs:  # a benchmark that returns nothing: nothing to check, said as such
        return CheckResult(NO_OUTPUTS, True, math.nan, math.nan, True)
    worst_base = 0.0
    worst_ref = math.nan  # stays NaN when no output has a reference
    ok = True
    detail = []
    ref_name = ""  # the first output off the float64 reference
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
            ref_err = relative_error(out, reference[name])
            worst_ref = ref_err if math.isnan(worst_ref) else max(worst_ref, ref_err)
            ref_name = ref_name or (name if ref_err > reference_rtol else "")
        if not ok and not detail:
            atol = rule.rtol * float(base.double().abs().max()) if rule.kind == "tolerance" and base.numel() else 0.0
            worst = f", {err:g} ulp at most" if rule.kind == "ulp" else ""
            detail.append(f"{mismatch_text(name, out, base, atol, 'the baseline')} ({rule.describe()}{worst})")
    ref_ok = math.isnan(worst_ref) or worst_ref <= reference_rtol
    if not ref_ok:
        ref = reference[ref_name] if reference is not None and ref_name else None
        where = ""
        if ref is not None:
            atol = reference_rtol * float(ref.double().abs().max())
            where = f": {mismatch_text(ref_name, outputs[ref_name], ref, atol, 'float64')}"
        detail.append(f"relative error {worst_ref:.3g} vs float64 > {reference_rtol:g}{where}")
    return CheckResult(rule.describe(), ok and ref_ok, worst_base, worst_ref, ref_ok, "; ".join(detail))
