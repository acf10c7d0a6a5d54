"""A revision run described: which commits, the legs of the design, the tree of each leg (made in
the cache now, so a commit that does not apply is known before anything is timed) and, with
``--setup``, each tree built once."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kprof.designs import sequence
from kprof.errors import KprofInputError
from kprof.events import Event, Note, Phase, RevisionRefused
from kprof.revisions.benchmark import differs_in_trees
from kprof.revisions.design import listed_legs, range_legs, sequence_stand_ins, with_sequence
from kprof.revisions.git import Commit, CommitRange, Repo
from kprof.revisions.tree_setup import refusal, run_setup
from kprof.revisions.trees import OK_MARK, TreeSpec, materialise
from kprof.run_model import BenchmarkRecord, FeatureRecord, Leg, RevisionSet, RevisionTree, Run
from kprof.store.run_folder import RunFolder


def find_repo(repo: str | None, workload: str | None) -> Repo:
    """``--repo``, else the repository holding the workload file, else the current directory's."""
    if repo:
        return Repo(Path(repo))
    if workload and workload.endswith(".py"):
        found = _repo_of(Path(workload).resolve())
        if found is not None:
            return found
    return Repo(Path.cwd())


def _repo_of(path: Path) -> Repo | None:
    """The repository a file lies in, if any (a benchmark kept outside every repository has none)."""
    try:
        return Repo(path)
    except KprofInputError:
        return None


def refuse_revision_options(setup: str, paths: Sequence[str], in_tree: bool) -> None:
    """--setup, --paths and --in-tree mean something only when the legs are revisions."""
    for option, given in (("--setup", setup), ("--paths", paths), ("--in-tree", in_tree)):
        if given:
            raise KprofInputError(option, "is for revision runs (--revisions A..B or --rev)")


@dataclass
class RevisionPlan:
    """What a revision run times: its legs, the tree of each, the commits (levers of a range run)
    and the range's commits that ``--paths`` left out."""

    legs: list[Leg]
    trees: dict[str, RevisionTree]
    commits: list[Commit]
    features: list[FeatureRecord] = field(default_factory=list)
    left_out: list[Commit] = field(default_factory=list)
    design: str = "endpoints"  # the design the legs follow (a range's default: sequence)

    def revision_set(
        self, repo: Repo, paths: Sequence[str], bench: BenchmarkRecord | None, setup: str, allow_changed: bool = False
    ) -> RevisionSet:
        """The run's description of its revisions."""
        return RevisionSet(
            repo=str(repo.root),
            trees=self.trees,
            commits=commit_records(self.commits),
            benchmark=bench,
            paths=list(paths),
            left_out=commit_records(self.left_out),
            setup_command=setup,
            allow_changed_outputs=allow_changed,
        )


def revision_legs(
    repo: Repo,
    revisions: str | None,
    revs: list[str],
    design: str | None,
    aa_copies: int,
    rtol: float,
    paths: Sequence[str] = (),
    setup: str = "",
    on_event: Callable[[Event], None] = lambda e: None,
) -> RevisionPlan:
    """Legs, their trees (materialised, and set up), the commits, and the commits as levers (range runs)."""
    if revisions and revs:
        raise KprofInputError("--rev", "give either --revisions A..B or repeated --rev, not both")
    if paths and not revisions:
        raise KprofInputError("--paths", "keeps the commits of a range that touch them: give --revisions A..B")
    if revisions:
        span: CommitRange = repo.range(revisions, paths)
        design = design or default_design(span.commits)
        legs, specs = range_legs(span.base, span.head, span.commits, design, aa_copies, paths)
        features = [FeatureRecord(c.short, "tolerance", rtol=rtol, doc=c.subject) for c in span.commits]
        plan = RevisionPlan(legs, {}, span.commits, features, span.left_out, design)
    else:
        legs, specs, commits = listed_legs(repo, revs, aa_copies)
        plan = RevisionPlan(legs, {}, commits, design=design or "endpoints")
    _make_trees(plan, specs, repo, setup, on_event)
    if revisions:  # a commit whose patch does not apply is given its effect against its parent
        refused = {key for key, tree in plan.trees.items() if tree.refused}
        points = sequence_stand_ins(plan.legs, refused, span.commits)
        if points:
            plan.legs = with_sequence(plan.legs, specs, span.base, span.commits, points)
            _make_trees(plan, specs, repo, setup, on_event)
    return plan


def _make_trees(
    plan: RevisionPlan, specs: dict[str, TreeSpec], repo: Repo, setup: str, on_event: Callable[[Event], None]
) -> None:
    """The tree of every leg that has none yet, made and set up once per distinct tree (an A/A copy
    runs its baseline's tree)."""
    names = {leg.revision: leg.name for leg in plan.legs}
    made = {spec: plan.trees[key] for key, spec in specs.items() if key in plan.trees}
    for key, spec in specs.items():
        if key in plan.trees:
            continue
        if spec not in made:
            made[spec] = _tree(repo, spec, setup, names.get(key, key), on_event)
        plan.trees[key] = made[spec]


def default_design(commits: list[Commit]) -> str:
    """Which commit bought it, by default: every commit against its parent, for a range small enough
    to time whole; a longer one is refused with the ways to narrow it."""
    if len(commits) > sequence.LIMIT:
        raise KprofInputError(
            "--revisions",
            f"{len(commits)} commits are too many to time whole by default (at most {sequence.LIMIT}): "
            "give --design bisect, narrow them with --paths, or --design sequence to time them all",
        )
    return "sequence"


def note_benchmark(
    plan: RevisionPlan, bench: BenchmarkRecord | None, repo: Repo, on_event: Callable[[Event], None]
) -> None:
    """Say once when the benchmark is a repository file that some revisions hold in another version."""
    if bench is None:
        return
    trees = {k: Path(t.path) for k, t in plan.trees.items() if t.path and "#aa" not in k}
    names = {leg.revision or "": leg.name for leg in plan.legs}
    note = differs_in_trees(bench, repo.root, trees, names)
    if note:
        on_event(Note(text=note))


def _tree(repo: Repo, spec: TreeSpec, setup: str, name: str, on_event: Callable[[Event], None]) -> RevisionTree:
    made = materialise(repo, spec)
    tree = RevisionTree(
        path=str(made.path) if made.path else None,
        base=spec.base,
        ops=[list(op) for op in spec.ops],
        worktree=spec.worktree,
        refused=made.refused,
        paths=list(spec.paths) if spec.ops else [],
    )
    if setup and made.path is not None:
        said = Phase(case=name, step="tree_setup")
        tree.setup = run_setup(made.path, setup, dict(os.environ), lambda: on_event(said))
        if tree.setup["exit_code"] != 0:
            tree.refused = refusal(tree.setup)
    return tree


def commit_records(commits: list[Commit]) -> list[dict[str, object]]:
    return [asdict(c) | {"parents": list(c.parents), "short": c.short} for c in commits]


def restore_trees(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    """Make again the trees of a run's revisions that are gone from the cache (``kprof cache --clean``,
    another KPROF_CACHE) before it is resumed: the same commits, the same --setup. A copy of the
    uncommitted working tree cannot be made again as it was: a one-line refusal."""
    revisions = folder.read_run().revisions
    trees = revisions.trees if revisions is not None else {}
    lost = {key: t for key, t in trees.items() if t.path and not (Path(t.path) / OK_MARK).is_file()}
    if revisions is None or not lost:
        return
    repo = Repo(Path(revisions.repo))
    for key, old in lost.items():
        if old.worktree:
            gone = f"the tree of {key} (a copy of the working tree as it was then) is gone from the cache"
            raise KprofInputError(folder.root, f"{gone}: it cannot be made again; start a new run")
        spec = TreeSpec(old.base, tuple((op, sha) for op, sha in old.ops), paths=tuple(old.paths))
        tree = _tree(repo, spec, revisions.setup_command, key, on_event)
        folder.update_revision(key, path=tree.path, refused=tree.refused, setup=tree.setup)
        on_event(Note(text=f"made the tree of {key} again (it was gone from the cache)"))


def say_refused(run: Run, on_event: Callable[[Event], None]) -> None:
    """One line per revision that cannot be run (a commit that does not apply, a failed --setup, code
    that does not import): said once, before any round, and left out of every case."""
    for key, tree in run.revisions.trees.items() if run.revisions is not None else ():
        legs = [leg.name for leg in run.legs if leg.revision == key]
        if tree.refused and legs and "#aa" not in key:
            on_event(RevisionRefused(leg=", ".join(legs), reason=tree.refused))
