"""endpoints: the baseline and the target (every lever on); its quantity is the total change."""

from __future__ import annotations

from collections.abc import Sequence

from kprof.designs.base import Design, LegValues, Quantities, Quantity, Wanted


def wanted(levers: Sequence[str], commits: bool) -> Wanted:
    return []  # the baseline and the target are in every design's legs


def quantities(values: LegValues) -> Quantities:
    total = values.v(values.full)
    return {} if total is None else {Quantity("total"): total}


DESIGN = Design("endpoints", "the baseline against the target", wanted, quantities)
