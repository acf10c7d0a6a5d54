"""Leg designs, found by name like trace formats: each is one module that says which legs it needs
over a run's levers (a workload's features or a range's commits) and how its quantities are formed
from those legs' per-round times. Adding a design is adding a module and its line here."""

from __future__ import annotations

from kprof.designs import add_one, endpoints, every, factorial, leave_one_out, sequence
from kprof.designs.base import Design, LegValues, Quantities, Quantity
from kprof.errors import KprofInputError

DESIGNS: dict[str, Design] = {
    d.name: d
    for d in (sequence.DESIGN, endpoints.DESIGN, add_one.DESIGN, leave_one_out.DESIGN, factorial.DESIGN, every.DESIGN)
}
QUANTITY_ORDER = (
    "total",
    "sequence",
    "cumulative",
    "add_one",
    "leave_one_out",
    "shapley",
    "interaction",
    "unexplained",
)


def names(commits: bool) -> tuple[str, ...]:
    """The designs a run over features (``commits`` False) or over a range's commits can take."""
    return tuple(name for name, d in DESIGNS.items() if commits or not d.commits_only)


def find(name: str, levers: int, commits: bool) -> Design:
    """The design ``name`` for ``levers`` levers, or a one-line error naming --design."""
    design = DESIGNS.get(name)
    if design is None or name not in names(commits):
        raise KprofInputError("--design", f"unknown design {name!r} (one of {', '.join(names(commits))})")
    if design.max_levers is not None and levers > design.max_levers:
        what = "commits" if commits else "features"
        raise KprofInputError("--design", f"{name} needs ≤ {design.max_levers} {what}, got {levers}")
    return design


def lever_values(values: LegValues) -> Quantities:
    """Every quantity the run's legs allow, whatever design chose them, from every design."""
    if values.base is None:
        return {}
    out: Quantities = {}
    for design in DESIGNS.values():
        out.update(design.quantities(values))
    return out


__all__ = ["DESIGNS", "QUANTITY_ORDER", "Design", "LegValues", "Quantity", "find", "lever_values", "names"]
