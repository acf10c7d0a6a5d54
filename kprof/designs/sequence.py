"""sequence: every revision of a range as it was committed, each commit against its parent —
ln t(revision i) − ln t(revision before it) — and against the base (cumulative). No cherry-pick
or revert, so every leg can be made; a revision that was not timed (it does not build or import)
is stepped over, and the next commit's effect spans it. Only a range's commits have an order."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kprof.designs.base import Design, LegValues, Quantities, Quantity, Wanted
from kprof.run_model import Leg, Role

QUANTITIES = ("sequence", "cumulative")  # each commit against its parent, and against the base
LIMIT = 16  # the most commits a range is timed whole by default (beyond: a bisect)


def wanted(levers: Sequence[str], commits: bool) -> Wanted:
    """Point i (0: the base) is the tree commit i left: its levers are the commits up to it."""
    return [(frozenset(levers[:i]), Role.SEQUENCE) for i in range(len(levers) + 1)]


def points(legs: list[Leg]) -> dict[int, str]:
    """The sequence legs of a range run by point: 0 the base, i the tree commit i left."""
    return {len(leg.features): leg.name for leg in legs if leg.has(Role.SEQUENCE) and not leg.has(Role.AA)}


def since(legs: list[Leg], levers: Sequence[str], timed: Collection[str]) -> dict[str, tuple[str, str]]:
    """Each commit whose revision was timed (its leg in ``timed``) → (its leg, the leg of the timed
    revision before it): its effect against its parent, or against the last revision before it that
    could be timed (the effect then spans the commits between)."""
    timed_points = {i: name for i, name in points(legs).items() if name in timed}
    out: dict[str, tuple[str, str]] = {}
    for i in sorted(timed_points):
        earlier = [j for j in timed_points if j < i]
        if i and earlier:
            out[levers[i - 1]] = (timed_points[i], timed_points[max(earlier)])
    return out


def spanned(legs: list[Leg], levers: Sequence[str], lever: str, parent: str) -> list[str]:
    """The commits a sequence effect of ``lever`` measured against the leg ``parent`` covers."""
    start = next(i for i, name in points(legs).items() if name == parent)
    return list(levers[start : list(levers).index(lever) + 1])


def quantities(values: LegValues) -> Quantities:
    base = values.base
    if base is None:
        return {}
    out: Quantities = {}
    for lever, (leg, parent) in since(values.legs, values.levers, values.logs.columns).items():
        out[Quantity("sequence", lever)] = values.logs[leg] - values.logs[parent]
        out[Quantity("cumulative", lever)] = values.logs[leg] - values.logs[base]
    return out


DESIGN = Design("sequence", "each commit against its parent", wanted, quantities, commits_only=True)
