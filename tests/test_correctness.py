from __future__ import annotations

import math

import pytest
import torch

from kprof.correctness import Rule, compare, poison, relative_error, rule_for, ulp_distance
from kprof.workload import Feature


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_ulp_distance_on_neighbours_and_signed_zero(dtype) -> None:
    x = torch.tensor([1.0, -1.0, 0.0, 3.5], dtype=dtype)
    up = torch.nextafter(x, torch.full_like(x, math.inf)) if dtype == torch.float32 else None
    if up is not None:
        assert ulp_distance(x, up) == 1
    assert ulp_distance(torch.tensor([0.0], dtype=dtype), torch.tensor([-0.0], dtype=dtype)) == 0
    # Crossing zero: the smallest positive and negative subnormals are 2 ulp apart.
    bits = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}[dtype]
    tiny = torch.tensor([1], dtype=bits).view(dtype)
    assert ulp_distance(tiny, -tiny) == 2


def test_ulp_distance_nan_rules() -> None:
    nan = torch.tensor([float("nan")])
    assert ulp_distance(nan, nan) == 0
    assert ulp_distance(nan, torch.tensor([1.0])) == math.inf


def test_rule_is_the_loosest_of_the_features() -> None:
    assert rule_for([Feature("a"), Feature("b")]).kind == "bitwise"
    assert rule_for([Feature("a"), Feature("b", "ulp", ulps=1)]) == Rule("ulp", ulps=1)
    assert rule_for([Feature("a", "ulp", ulps=2), Feature("b", "tolerance", rtol=1e-2)]).kind == "tolerance"


def test_poison_then_compare_catches_a_missing_write() -> None:
    out = {"o": torch.ones(4)}
    base = {"o": torch.ones(4)}
    poison(out)
    out["o"][:3] = 1.0  # the leg forgot the last element
    res = compare(out, base, {"o": torch.ones(4, dtype=torch.float64)}, Rule("bitwise"), 1e-2)
    assert not res.passed and not res.reference_ok


def test_tolerance_rule_and_reference() -> None:
    base = {"o": torch.tensor([1.0, 2.0, 4.0])}
    out = {"o": torch.tensor([1.0, 2.0, 4.01])}
    assert compare(out, base, None, Rule("tolerance", rtol=1e-2), 1e-2).passed
    assert not compare(out, base, None, Rule("bitwise"), 1e-2).passed
    assert relative_error(out["o"], base["o"]) == pytest.approx(0.0025, rel=1e-4)


def test_a_failed_check_says_how_many_elements_differ_where_and_by_how_much() -> None:
    x = torch.randn(4, 1024)
    y = x.clone()
    y.view(-1)[100:120] += 1.0
    res = compare({"y": y}, {"y": x}, None, Rule("bitwise"), 0.02)
    assert not res.passed
    assert res.detail.startswith("y: 20 of 4096 elements differ from the baseline by more than 0 (first at [0, 100];")
    assert "largest |Δ| 1 at [0, 1" in res.detail and res.detail.endswith("(bitwise)")
    off = compare({"y": x}, {"y": x}, {"y": x.double() * 3}, Rule("bitwise"), 0.02)
    assert "relative error 0.667 vs float64 > 0.02: y:" in off.detail and "elements differ from float64" in off.detail
