"""add-one: each lever alone on the baseline, v({f}) — its effect in the baseline's context.
With the total, what an additive story leaves out: unexplained = v(N) − Σ add-one."""

from __future__ import annotations

from collections.abc import Sequence

from kprof.designs.base import Design, LegValues, Quantities, Quantity, Wanted
from kprof.run_model import Role


def wanted(levers: Sequence[str], commits: bool) -> Wanted:
    return [(frozenset({f}), Role.ADD_ONE) for f in sorted(levers)]


def quantities(values: LegValues) -> Quantities:
    out: Quantities = {}
    add = {f: values.v(frozenset({f})) for f in values.levers}
    for f, s in add.items():
        if s is not None:
            out[Quantity("add_one", f)] = s
    total = values.v(values.full)
    if total is not None and all(s is not None for s in add.values()):
        out[Quantity("unexplained")] = total - sum(add.values())
    return out


DESIGN = Design("add-one", "each lever alone on the baseline", wanted, quantities)
