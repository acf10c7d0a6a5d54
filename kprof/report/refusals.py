"""Legs refused for one reason, said once: a wrong lever in a factorial run fails every leg that
holds it with the same correctness error, which was printed once per leg (16 times for five
levers). Legs of a case refused for the same reason become one line that names the lever they
share, when they share one, and every leg."""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce

from kprof.run_model import Leg, Role

SHOWN_LEGS = 6  # legs named in a line; the rest are counted (the JSON lists every one)


def refusal_lines(refused: Iterable[tuple[str, str, str]], legs: list[Leg]) -> list[str]:
    """One line per (case, reason) of ``refused`` (case, leg, reason) triples, in first-seen order."""
    groups: dict[tuple[str, str], list[str]] = {}
    for case, leg, reason in refused:
        groups.setdefault((case, reason), []).append(leg)
    return [_line(case, names, reason, legs) for (case, reason), names in groups.items()]


def _line(case: str, names: list[str], reason: str, legs: list[Leg]) -> str:
    where = f"{case} · " if case else ""
    if len(names) == 1:
        return f"{where}{names[0]} not timed: {reason}"
    lever = _shared_lever(names, legs)
    shown = ", ".join(names[:SHOWN_LEGS]) + (f", and {len(names) - SHOWN_LEGS} more" if len(names) > SHOWN_LEGS else "")
    who = f"{len(names)} legs with lever {lever}" if lever else f"{len(names)} legs"
    return f"{where}{who} not timed ({shown}): {reason}"


def _shared_lever(names: list[str], legs: list[Leg]) -> str:
    """The levers every named leg holds and the baseline does not, joined by '+' ('' when none)."""
    by_name = {leg.name: leg for leg in legs}
    held = [by_name[n].features for n in names if n in by_name]
    if len(held) != len(names):
        return ""
    base = next((leg.features for leg in legs if leg.has(Role.BASELINE)), frozenset())
    common = reduce(frozenset.intersection, held) - base
    order = [f for leg in legs for f in sorted(leg.features)]
    return "+".join(sorted(common, key=order.index))
