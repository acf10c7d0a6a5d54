"""Legs (feature sets, optionally with forced parameters) and the designs that choose them.

Every design includes the baseline (no features) and an A/A leg: the baseline again, set up and
captured independently, so the run measures its own noise and bias under exactly the same
protocol as the comparisons.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from kprof.errors import KprofInputError

DESIGNS = ("endpoints", "add-one", "leave-one-out", "factorial", "all")
IMPL = "impl"  # leg parameter: "torch" times the workload's plain-PyTorch implementation instead
MAX_FACTORIAL = 6


@dataclass(frozen=True)
class Leg:
    """One configuration timed in every round. ``roles`` says why it is in the run."""

    name: str
    features: frozenset[str]
    params: tuple[tuple[str, Any], ...] = ()
    roles: frozenset[str] = field(default_factory=frozenset)
    replica: int = 0  # 1 for the A/A copy of the baseline

    @property
    def key(self) -> tuple[frozenset[str], tuple[tuple[str, Any], ...], int]:
        return self.features, self.params, self.replica

    def record(self) -> dict[str, Any]:
        """The leg as meta.json stores it (and as the analysis reads it back)."""
        return {
            "name": self.name,
            "features": sorted(self.features),
            "params": [list(p) for p in self.params],
            "roles": sorted(self.roles),
            "replica": self.replica,
        }

    def mask(self, order: Sequence[str]) -> int:
        return sum(1 << i for i, f in enumerate(order) if f in self.features)


def leg_name(features: Iterable[str], all_features: Sequence[str], params: tuple[tuple[str, Any], ...] = ()) -> str:
    on = [f for f in all_features if f in set(features)]
    if not on:
        base = "baseline"
    elif len(on) == len(all_features) and len(all_features) > 1:
        base = "all"
    else:
        base = "+".join(on)
    return base + "".join(f" {k}={v}" for k, v in params)


def design_legs(
    features: Sequence[str],
    design: str = "all",
    target: Iterable[str] | None = None,
    sweep: tuple[str, Sequence[Any]] | None = None,
    aa_copies: int = 1,
    torch_leg: bool = False,
    sweep_baseline: bool = False,
) -> list[Leg]:
    """The legs of a design over ``features`` (in declared order).

    endpoints: baseline and target; add-one: baseline + f; leave-one-out: target − f; factorial:
    every subset (≤ 6 features); all: add-one, leave-one-out and, when small enough, factorial.
    A sweep adds the target at each forced value, and with ``sweep_baseline`` the baseline too (the
    target's effect at every value: a mechanism sweep); ``torch_leg`` adds the plain-PyTorch
    implementation.
    The A/A leg (``aa_copies`` of them) is always added.
    """
    if design not in DESIGNS:
        raise KprofInputError("--design", f"unknown design {design!r} (one of {', '.join(DESIGNS)})")
    full = frozenset(target) if target is not None else frozenset(features)
    unknown = full - set(features)
    if unknown:
        raise KprofInputError("--target", f"unknown features {sorted(unknown)}")
    wanted: dict[tuple[frozenset[str], tuple[tuple[str, Any], ...]], set[str]] = {}

    def add(fs: Iterable[str], role: str, params: tuple[tuple[str, Any], ...] = ()) -> None:
        wanted.setdefault((frozenset(fs), params), set()).add(role)

    add((), "baseline")
    add(full, "target")
    if design in ("add-one", "all"):
        for f in sorted(full):
            add({f}, "add_one")
    if design in ("leave-one-out", "all"):
        for f in sorted(full):
            add(full - {f}, "leave_one_out")
    if design == "factorial" or (design == "all" and len(full) <= MAX_FACTORIAL):
        if len(full) > MAX_FACTORIAL:
            raise KprofInputError("--design", f"factorial needs ≤ {MAX_FACTORIAL} features, got {len(full)}")
        for k in range(len(full) + 1):
            for subset in combinations(sorted(full), k):
                add(subset, "factorial")
    if sweep is not None:
        name, values = sweep
        for v in values:
            add(full, "sweep", ((name, v),))
            if sweep_baseline:
                add((), "sweep_baseline", ((name, v),))
    legs = [Leg(leg_name(fs, features, params), fs, params, frozenset(roles)) for (fs, params), roles in wanted.items()]
    if torch_leg:
        legs.append(Leg("plain PyTorch", frozenset(), ((IMPL, "torch"),), frozenset({"torch"})))
    copies = max(aa_copies, 1)
    legs += [
        Leg("baseline (A/A)" if copies == 1 else f"baseline (A/A {i})", frozenset(), (), frozenset({"aa"}), replica=i)
        for i in range(1, copies + 1)
    ]
    return legs


def calibration_legs(features: Iterable[str], plants: Sequence[float], aa_copies: int) -> list[Leg]:
    """Calibration legs. The reference is the configuration followed by a zero-length spin, so every
    leg has the same number of kernels and the planted difference is the spin's length alone; each
    spin is also timed alone (and the zero-length one), which measures what was planted."""
    fs = frozenset(features)
    name = "+".join(sorted(fs)) or "baseline"
    zero = (("plant_pct", 0.0),)
    legs = [Leg(f"{name} + spin 0", fs, zero, frozenset({"baseline"}))]
    legs += [Leg(f"{name} + spin 0 (A/A {i})", fs, zero, frozenset({"aa"}), replica=i) for i in range(1, aa_copies + 1)]
    legs += [Leg(f"{name} + planted {p:g}%", fs, (("plant_pct", p),), frozenset({"planted"})) for p in plants]
    legs += [Leg(f"spin {p:g}% alone", frozenset(), (("spin_pct", p),), frozenset({"spin"})) for p in (0.0, *plants)]
    return legs
