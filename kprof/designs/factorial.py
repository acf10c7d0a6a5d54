"""factorial: every subset of the levers (2^n legs, n ≤ 6): exact Shapley values, which add up to
the total in every round, and the two-way interactions E_ij of the ±1-coded design."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd

from kprof.analysis import stats as S
from kprof.designs.base import Design, LegValues, Quantities, Quantity, Wanted
from kprof.run_model import Role

MAX_FACTORIAL = 6


def wanted(levers: Sequence[str], commits: bool) -> Wanted:
    ordered = sorted(levers)
    return [(frozenset(s), Role.FACTORIAL) for k in range(len(ordered) + 1) for s in combinations(ordered, k)]


def quantities(values: LegValues) -> Quantities:
    levers, n = values.levers, len(values.levers)
    subsets = [frozenset(f for i, f in enumerate(levers) if mask & (1 << i)) for mask in range(1 << n)]
    cells = [values.v(s) for s in subsets]
    if not n or any(c is None for c in cells):
        return {}
    matrix = np.stack([c.to_numpy() for c in cells if c is not None], axis=1)  # rounds × 2^n, bit i = lever i
    index = values.logs.index
    phi = S.shapley(matrix, n)
    out: Quantities = {Quantity("shapley", f): pd.Series(phi[:, i], index=index) for i, f in enumerate(levers)}
    _, inter = S.factorial_effects(matrix, n)
    for (i, j), series in inter.items():
        out[Quantity("interaction", f"{levers[i]}×{levers[j]}")] = pd.Series(series, index=index)
    return out


DESIGN = Design("factorial", "every subset of the levers", wanted, quantities, max_levers=MAX_FACTORIAL)
