"""A revision run described: which commits, the legs of the design, the tree of each leg (made in
the cache now, so a commit that does not apply is known before anything is timed)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from kprof.errors import KprofInputError
from kprof.revisions.design import listed_legs, range_legs
from kprof.revisions.git import Commit, Repo
from kprof.revisions.trees import TreeSpec, materialise
from kprof.run_model import FeatureRecord, Leg, RevisionTree


def find_repo(repo: str | None, workload: str | None) -> Repo:
    """``--repo``, else the repository holding the workload file, else the current directory's."""
    if repo:
        return Repo(Path(repo))
    if workload and workload.endswith(".py"):
        return Repo(Path(workload).resolve())
    return Repo(Path.cwd())


def revision_legs(
    repo: Repo, revisions: str | None, revs: list[str], design: str, aa_copies: int, rtol: float
) -> tuple[list[Leg], dict[str, RevisionTree], list[Commit], list[FeatureRecord]]:
    """Legs, their trees (materialised), the commits, and the commits as levers (range runs)."""
    if revisions and revs:
        raise KprofInputError("--rev", "give either --revisions A..B or repeated --rev, not both")
    features: list[FeatureRecord] = []
    if revisions:
        base, head, commits = repo.range(revisions)
        legs, specs = range_legs(base, head, commits, design, aa_copies)
        features = [FeatureRecord(c.short, "tolerance", rtol=rtol, doc=c.subject) for c in commits]
    else:
        legs, specs, commits = listed_legs(repo, revs, aa_copies)
    trees = {key: _tree(repo, spec) for key, spec in specs.items()}
    return legs, trees, commits, features


def _tree(repo: Repo, spec: TreeSpec) -> RevisionTree:
    made = materialise(repo, spec)
    return RevisionTree(
        path=str(made.path) if made.path else None,
        base=spec.base,
        ops=[list(op) for op in spec.ops],
        worktree=spec.worktree,
        refused=made.refused,
    )


def commit_records(commits: list[Commit]) -> list[dict[str, object]]:
    return [asdict(c) | {"parents": list(c.parents), "short": c.short} for c in commits]
