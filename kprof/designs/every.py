"""all: add-one and leave-one-out together and, for a workload's features when there are few
enough (≤ 6), the factorial cells with Shapley values (for commits each cell is a tree and a
process, so they are left to ``--design factorial``)."""

from __future__ import annotations

from collections.abc import Sequence

from kprof.designs import add_one, factorial, leave_one_out
from kprof.designs.base import Design, Wanted


def wanted(levers: Sequence[str], commits: bool) -> Wanted:
    cells = factorial.wanted(levers, commits) if not commits and len(levers) <= factorial.MAX_FACTORIAL else []
    return add_one.wanted(levers, commits) + leave_one_out.wanted(levers, commits) + cells


DESIGN = Design("all", "add-one, leave-one-out and (features, ≤ 6) factorial", wanted)
