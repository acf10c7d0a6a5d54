"""Legs over commits: each commit of a range is a lever, so the designs, the attribution (add-one,
leave-one-out, Shapley) and the reports are the same as for a workload's features.

A leg with the commit set S runs the tree: the base (S empty), the head (every commit), the head
with one commit reverted (leave-one-out), or the base with the commits of S added in order; a
sequence leg runs a commit of the range as it was committed (S: the commits up to it).
Repeated ``--rev`` gives plain legs instead: each revision against the first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from kprof.designs.legs import design_legs
from kprof.errors import KprofInputError
from kprof.revisions.git import WORKTREE, Commit, Repo
from kprof.revisions.trees import TreeSpec
from kprof.run_model import Leg, Role

Paths = tuple[str, ...]


def _spec(features: frozenset[str], commits: list[Commit], base: Commit, head: Commit, paths: Paths) -> TreeSpec:
    shorts = [c.short for c in commits]
    if not features:
        return TreeSpec(base.sha)
    if len(features) == len(shorts):
        return TreeSpec(head.sha)
    missing = [c for c in commits if c.short not in features]
    if len(missing) == 1:
        return TreeSpec(head.sha, (("revert", missing[0].sha),), paths=paths)
    return TreeSpec(base.sha, tuple(("pick", c.sha) for c in commits if c.short in features), paths=paths)


def range_legs(
    base: Commit, head: Commit, commits: list[Commit], design: str, aa_copies: int = 1, paths: Paths = ()
) -> tuple[list[Leg], dict[str, TreeSpec]]:
    """Legs of a design (kprof.designs) over the commits of a range (levers named by short SHA), and
    the tree each leg runs, keyed by the leg's ``revision``. A sequence point is a commit as it was
    committed; any other lever set is the base with its commits added, or the head with one
    reverted. A commit added or reverted applies only its part under ``paths`` (a changelog or CI
    file never keeps a leg from being made)."""
    shorts = tuple(c.short for c in commits)
    legs = design_legs(shorts, design, aa_copies=aa_copies, commits=True)
    specs: dict[str, TreeSpec] = {}
    out = []
    for leg in legs:
        if leg.roles == {Role.SEQUENCE}:  # a commit between the base and the head, as committed
            commit = commits[len(leg.features) - 1]
            spec, name = TreeSpec(commit.sha), commit.label()
        else:
            spec, name = _spec(leg.features, commits, base, head, tuple(paths)), _name(leg, shorts, base, head)
        # Each A/A copy gets a process of its own: the same tree, run again.
        key = _key(spec) + (f"#aa{leg.replica}" if leg.has(Role.AA) else "")
        specs[key] = spec
        out.append(replace(leg, name=name, revision=key))
    if design == "sequence" and commits and commits[-1].sha != head.sha:
        # The range's head is a later commit outside --paths: the last commit is a point of its own.
        out = [replace(leg, roles=leg.roles - {Role.SEQUENCE}) if leg.has(Role.TARGET) else leg for leg in out]
        out = with_sequence(out, specs, base, commits, [len(commits)])
    return out, specs


def with_sequence(
    legs: list[Leg], specs: dict[str, TreeSpec], base: Commit, commits: list[Commit], points: Iterable[int]
) -> list[Leg]:
    """``legs`` with the range's revisions at ``points`` (0: the base, i: the tree commit i left) as
    sequence legs: a revision some leg already runs (the base, the head) takes the role; another is
    a leg of its own, its features the commits up to it. ``specs`` gains their trees."""
    out = list(legs)
    by_key = {leg.revision: i for i, leg in enumerate(out)}
    for point in sorted(set(points)):
        spec = TreeSpec(base.sha if point == 0 else commits[point - 1].sha)
        key = _key(spec)
        if key in by_key:
            i = by_key[key]
            out[i] = replace(out[i], roles=out[i].roles | {Role.SEQUENCE})
            continue
        commit = commits[point - 1]
        features = frozenset(c.short for c in commits[:point])
        specs[key] = spec
        by_key[key] = len(out)
        out.append(Leg(commit.label(), features, roles=frozenset({Role.SEQUENCE}), revision=key))
    return out


def sequence_stand_ins(legs: list[Leg], refused: set[str], commits: list[Commit]) -> list[int]:
    """The points a sequence must time so that every add-one or leave-one-out leg whose patch did
    not apply (its revision in ``refused``) still gives its commit an effect: that commit's
    revision and the one before it."""
    shorts = [c.short for c in commits]
    points: set[int] = set()
    for leg in legs:
        if leg.revision not in refused or not (leg.has(Role.ADD_ONE) or leg.has(Role.LEAVE_ONE_OUT)):
            continue
        (lever,) = leg.features if leg.has(Role.ADD_ONE) else set(shorts) - leg.features
        i = shorts.index(lever) + 1
        points |= {i - 1, i}
    return sorted(points)


def _key(spec: TreeSpec) -> str:
    if spec.worktree:
        return WORKTREE
    return spec.base[:7] + "".join(("+" if op == "pick" else "−") + sha[:7] for op, sha in spec.ops)


def _name(leg: Leg, shorts: tuple[str, ...], base: Commit, head: Commit) -> str:
    if leg.has(Role.AA):
        return leg.name.replace("baseline", f"base {base.short}", 1)
    if not leg.features:
        return f"base {base.short}"
    if len(leg.features) == len(shorts):
        return f"head {head.short}"
    if len(shorts) - len(leg.features) == 1:
        (gone,) = [s for s in shorts if s not in leg.features]
        return f"head − {gone}"
    return "base + " + " + ".join(s for s in shorts if s in leg.features)


def listed_legs(repo: Repo, revs: list[str], aa_copies: int = 1) -> tuple[list[Leg], dict[str, TreeSpec], list[Commit]]:
    """Repeated ``--rev``: the first is the baseline, each other a leg compared with it."""
    if len(revs) < 2:
        raise KprofInputError("--rev", "give at least two revisions (the first is the baseline)")
    legs: list[Leg] = []
    specs: dict[str, TreeSpec] = {}
    commits: list[Commit] = []
    for i, rev in enumerate(revs):
        if rev == WORKTREE:
            spec, name = TreeSpec(repo.commit("HEAD").sha, worktree=True), "working tree"
        else:
            commit = repo.commit(rev)
            commits.append(commit)
            spec, name = TreeSpec(commit.sha), commit.label()
        key = _key(spec)
        if key in specs:
            raise KprofInputError("--rev", f"{rev!r} is given twice")
        specs[key] = spec
        legs.append(Leg(name, roles=frozenset({Role.BASELINE if i == 0 else Role.LEG}), revision=key))
    base = legs[0]
    for i in range(1, aa_copies + 1):
        key = f"{base.revision}#aa{i}"
        specs[key] = specs[base.revision or ""]
        label = f"{base.name} (A/A {i})" if aa_copies > 1 else f"{base.name} (A/A)"
        legs.append(Leg(label, roles=frozenset({Role.AA}), replica=i, revision=key))
    return legs, specs, commits
