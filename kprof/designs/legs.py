"""The legs of a design: the lever sets it wants (kprof.designs), as legs with their roles and
names, plus what every run has — the baseline, the target, an A/A copy of the baseline (the
run measures its own noise and bias under exactly the protocol of the comparisons) — and what a
run may add: a sweep's forced values, the plain-PyTorch implementation, calibration spins."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kprof.designs import find
from kprof.errors import KprofInputError
from kprof.run_model import IMPL, PLANT, SPIN_PARAM, Leg, Role

Params = tuple[tuple[str, Any], ...]


def leg_name(features: Iterable[str], all_features: Sequence[str], params: Params = ()) -> str:
    on = [f for f in all_features if f in set(features)]
    if not on:
        base = "baseline"
    elif len(on) == len(all_features) and len(all_features) > 1:
        base = "all"
    else:
        base = "+".join(on)
    return base + "".join(f" {k}={v}" for k, v in params)


def aa_legs(
    copies: int,
    name: str = "baseline",
    features: frozenset[str] = frozenset(),
    params: Params = (),
    numbered: bool = False,
) -> list[Leg]:
    """The A/A copies of the reference: same configuration, set up and captured on their own."""
    numbered = numbered or copies > 1
    return [
        Leg(f"{name} (A/A {i})" if numbered else f"{name} (A/A)", features, params, frozenset({Role.AA}), replica=i)
        for i in range(1, copies + 1)
    ]


def design_legs(
    features: Sequence[str],
    design: str = "all",
    target: Iterable[str] | None = None,
    sweep: tuple[str, Sequence[Any]] | None = None,
    aa_copies: int = 1,
    torch_leg: bool = False,
    sweep_baseline: bool = False,
    commits: bool = False,
) -> list[Leg]:
    """The legs of ``design`` over ``features`` (in declared order; ``commits``: a range's commits,
    in order): the baseline, the target (``target``'s levers, default all), the design's lever sets.
    A sweep adds the target at each forced value, and with ``sweep_baseline`` the baseline too (the
    target's effect at every value: a mechanism sweep); ``torch_leg`` adds the plain-PyTorch
    implementation. The A/A leg (``aa_copies`` of them) is always added."""
    find(design, 0, commits)
    full = frozenset(target) if target is not None else frozenset(features)
    unknown = full - set(features)
    if unknown:
        raise KprofInputError("--target", f"unknown features {sorted(unknown)}")
    chosen = find(design, len(full), commits)
    wanted: dict[tuple[frozenset[str], Params], set[Role]] = {}

    def add(fs: Iterable[str], role: Role, params: Params = ()) -> None:
        wanted.setdefault((frozenset(fs), params), set()).add(role)

    add((), Role.BASELINE)
    add(full, Role.TARGET)
    for fs, role in chosen.wanted([f for f in features if f in full], commits):
        add(fs, role)
    if sweep is not None:
        name, values = sweep
        for v in values:
            add(full, Role.SWEEP, ((name, v),))
            if sweep_baseline:
                add((), Role.SWEEP_BASELINE, ((name, v),))
    legs = [Leg(leg_name(fs, features, params), fs, params, frozenset(roles)) for (fs, params), roles in wanted.items()]
    if torch_leg:
        legs.append(Leg("plain PyTorch", frozenset(), ((IMPL, "torch"),), frozenset({Role.TORCH})))
    return legs + aa_legs(max(aa_copies, 1))


def calibration_legs(features: Iterable[str], plants: Sequence[float], aa_copies: int) -> list[Leg]:
    """Calibration legs. The reference is the configuration followed by a zero-length spin, so every
    leg has the same number of kernels and the planted difference is the spin's length alone; each
    spin is also timed alone (and the zero-length one), which measures what was planted."""
    fs = frozenset(features)
    name = "+".join(sorted(fs)) or "baseline"
    zero = ((PLANT, 0.0),)
    legs = [Leg(f"{name} + spin 0", fs, zero, frozenset({Role.BASELINE}))]
    legs += aa_legs(aa_copies, f"{name} + spin 0", fs, zero, numbered=True)
    legs += [Leg(f"{name} + planted {p:g}%", fs, ((PLANT, p),), frozenset({Role.PLANTED})) for p in plants]
    legs += [Leg(f"spin {p:g}% alone", frozenset(), ((SPIN_PARAM, p),), frozenset({Role.SPIN})) for p in (0.0, *plants)]
    return legs
