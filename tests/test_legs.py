from __future__ import annotations

from collections import Counter

import pytest

from kprof.designs.legs import design_legs
from kprof.engine.schedule import round_orders, williams_rows
from kprof.errors import KprofInputError

F = ("a", "b", "c")


def _by_features(legs):
    return {(frozenset(leg.features), leg.replica): leg for leg in legs}


def test_all_design_has_every_role_and_one_leg_per_configuration() -> None:
    legs = design_legs(F, "all")
    assert len(legs) == 2**3 + 1  # factorial covers every subset; plus the A/A copy
    by = _by_features(legs)
    assert by[(frozenset(), 0)].roles == {"baseline", "factorial"}
    assert by[(frozenset(F), 0)].roles == {"target", "factorial"}
    assert "add_one" in by[(frozenset({"b"}), 0)].roles
    assert "leave_one_out" in by[(frozenset({"a", "c"}), 0)].roles
    assert by[(frozenset(), 1)].roles == {"aa"}
    assert len({leg.name for leg in legs}) == len(legs)


def test_endpoints_and_sweep() -> None:
    legs = design_legs(F, "endpoints", sweep=("num_splits", [1, 2, 4]))
    names = [leg.name for leg in legs]
    assert names == ["baseline", "all", "all num_splits=1", "all num_splits=2", "all num_splits=4", "baseline (A/A)"]


def test_mechanism_sweep_forces_the_baseline_too() -> None:
    legs = design_legs(F, "endpoints", target={"a"}, sweep=("num_splits", [2, 4]), sweep_baseline=True)
    assert [leg.name for leg in legs] == [
        "baseline",
        "a",
        "a num_splits=2",
        "baseline num_splits=2",
        "a num_splits=4",
        "baseline num_splits=4",
        "baseline (A/A)",
    ]
    assert legs[3].roles == {"sweep_baseline"} and legs[3].features == frozenset()


def test_design_errors() -> None:
    with pytest.raises(KprofInputError, match="--design"):
        design_legs(F, "everything")
    with pytest.raises(KprofInputError, match="factorial"):
        design_legs(tuple("abcdefg"), "factorial")
    with pytest.raises(KprofInputError, match="--target"):
        design_legs(F, "endpoints", target={"z"})


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_williams_rows_balance_first_order_carry_over(n: int) -> None:
    rows = williams_rows(n)
    assert all(sorted(r) == list(range(n)) for r in rows)
    pairs = Counter((r[i], r[i + 1]) for r in rows for i in range(n - 1))
    assert len(pairs) == n * (n - 1) and len(set(pairs.values())) == 1


def test_round_orders_are_seeded_and_balanced_in_position() -> None:
    a, b = round_orders(4, 16, seed=7), round_orders(4, 16, seed=7)
    assert a == b and round_orders(4, 16, seed=8) != a
    firsts = Counter(order[0] for order in a)
    assert set(firsts.values()) == {4}  # each leg leads equally often over whole blocks
