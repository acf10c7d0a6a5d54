"""leave-one-out: the target with one lever taken away, v(N) − v(N∖{f}) — the lever's effect in
the full change's context ("revert one commit")."""

from __future__ import annotations

from collections.abc import Sequence

from kprof.designs.base import Design, LegValues, Quantities, Quantity, Wanted
from kprof.run_model import Role


def wanted(levers: Sequence[str], commits: bool) -> Wanted:
    full = frozenset(levers)
    return [(full - {f}, Role.LEAVE_ONE_OUT) for f in sorted(levers)]


def quantities(values: LegValues) -> Quantities:
    total = values.v(values.full)
    if total is None:
        return {}
    out: Quantities = {}
    for f in values.levers:
        without = values.v(values.full - {f})
        if without is not None:
            out[Quantity("leave_one_out", f)] = total - without
    return out


DESIGN = Design("leave-one-out", "the target with each lever taken away", wanted, quantities)
