"""What a leg design is: the legs it needs over a run's levers, and the quantities it forms from
those legs' per-round times (kprof.analysis.attribution estimates each with its interval)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from kprof.run_model import Leg, Role

Wanted = list[tuple[frozenset[str], Role]]  # lever sets to time, each with the role it plays


class Quantity(NamedTuple):
    """An attribution quantity: a design's quantity and the lever it is of ("" for the whole change)."""

    design: str  # total, sequence, cumulative, add_one, leave_one_out, shapley, interaction, unexplained
    lever: str = ""

    @property
    def label(self) -> str:
        return f"{self.design}: {self.lever}" if self.lever else self.design


def legs_by_levers(legs: list[Leg]) -> dict[frozenset[str], str]:
    """Legs without forced parameters, keyed by their lever set (the first, non-A/A copy). A leg
    that is only a sequence point is left out: its tree is a commit as committed, not the base
    with those commits added, though its levers are the same."""
    out: dict[frozenset[str], str] = {}
    for leg in legs:
        if leg.params or leg.replica or leg.has(Role.AA) or leg.roles == {Role.SEQUENCE}:
            continue
        out.setdefault(leg.features, leg.name)
    return out


@dataclass(frozen=True)
class LegValues:
    """One case's per-round ln t of every leg (a column each), and the run's levers in order."""

    logs: pd.DataFrame
    legs: list[Leg]
    levers: tuple[str, ...]

    @property
    def full(self) -> frozenset[str]:
        return frozenset(self.levers)

    @property
    def base(self) -> str | None:
        """The baseline's leg (no lever), when it was timed."""
        name = legs_by_levers(self.legs).get(frozenset())
        return name if name is not None and name in self.logs else None

    def v(self, levers: frozenset[str]) -> pd.Series | None:
        """v(S) = ln t(S) − ln t(∅) per round, for the leg with exactly the levers S; None when the
        run has no such leg (or it was not timed)."""
        name, base = legs_by_levers(self.legs).get(levers), self.base
        if name is None or name not in self.logs or base is None:
            return None
        return self.logs[name] - self.logs[base]


Quantities = dict[Quantity, pd.Series]


def no_quantities(values: LegValues) -> Quantities:
    return {}


@dataclass(frozen=True)
class Design:
    """One design, found by name (kprof.designs.DESIGNS): ``wanted(levers, commits)`` gives the
    lever sets it times (``levers`` in declared or commit order; ``commits``: the levers are a
    range's commits, each set a tree and a process); ``quantities`` forms its per-round
    quantities from whichever legs a run has."""

    name: str
    summary: str
    wanted: Callable[[Sequence[str], bool], Wanted]
    quantities: Callable[[LegValues], Quantities] = no_quantities
    commits_only: bool = False  # a range's commits have an order; a workload's features do not
    max_levers: int | None = None
