"""Revision trees in a cache folder: each (base commit, commits added or reverted) materialised once,
as a detached ``git worktree`` of the user's repository; the user's own working tree is never
touched. A commit that does not apply cleanly gives a refusal naming the conflicting files.

The cache lives in ``$KPROF_CACHE`` (default ``~/.cache/kprof``) under ``trees/``; ``kprof cache
--clean`` removes it and prunes the worktree records git keeps in each repository. A run holds the
cache (a shared lock) while it builds or times revision trees, and the clean is refused meanwhile;
a resumed run makes again the trees a clean removed (kprof.revisions.plan.restore_trees).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from kprof.cache import cache_root
from kprof.errors import KprofInputError
from kprof.revisions.git import GitError, Repo, git
from kprof.run_model import Run
from kprof.store.locks import exclusive_lock, shared_lock, sole_lock

OK_MARK = ".kprof-tree.json"
BUILD_LOCK, IN_USE = ".lock", ".in-use"  # one tree built at a time; held by every run using the cache


@dataclass(frozen=True)
class TreeSpec:
    """A tree: ``base`` with each (``pick`` | ``revert``, sha) applied in order — with ``paths``, only
    the part of each commit under them; ``worktree``: the repository's working tree as it is (a
    copy of its files)."""

    base: str
    ops: tuple[tuple[str, str], ...] = ()
    worktree: bool = False
    paths: tuple[str, ...] = ()

    def key(self, repo: Repo) -> str:
        fields: list[object] = [str(repo.root), self.base, self.ops, self.worktree]
        if self.ops and self.paths:  # the same commits cut to other paths are another tree
            fields.append(self.paths)
        text = json.dumps(fields)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Tree:
    path: Path | None
    refused: str = ""  # why the tree could not be made (a conflict, in which files)


def _apply(path: Path, op: str, sha: str, paths: tuple[str, ...] = ()) -> str:
    """Apply one commit without committing (with ``paths``, only its diff under them: a changelog
    the commit also edits can no longer refuse it); "" on success, else the conflict in words."""
    what = "adding" if op == "pick" else "reverting"
    try:
        if paths:
            _apply_cut(path, op, sha, paths)
        else:
            git(path, *(["cherry-pick", "--no-commit", sha] if op == "pick" else ["revert", "--no-commit", sha]))
        return ""
    except GitError as e:
        files = git(path, "diff", "--name-only", "--diff-filter=U", check=False).split()
        where = f"conflict in {', '.join(files)}" if files else (e.stderr.splitlines() or ["git failed"])[-1]
        return f"{what} {sha[:7]} does not apply cleanly: {where}"


def _apply_cut(path: Path, op: str, sha: str, paths: tuple[str, ...]) -> None:
    """The commit's diff against its first parent under ``paths`` (reversed for a revert), applied
    with a three-way merge where its context moved; an empty diff applies as nothing."""
    ends = [f"{sha}^", sha] if op == "pick" else [sha, f"{sha}^"]
    patch = git(path, "diff", "--binary", "--full-index", *ends, "--", *paths)
    if patch.strip():
        git(path, "apply", "--3way", "--index", stdin=patch)


def _copy_worktree(repo: Repo, target: Path) -> None:
    listed = git(repo.root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for name in filter(None, listed):
        src = repo.root / name
        if src.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target / name)


def materialise(repo: Repo, spec: TreeSpec, root: Path | None = None) -> Tree:
    """The tree of ``spec``, from the cache when it was made before. Made under a lock on the cache:
    the shares of a bisect step on several GPUs ask for the revision they share at the same time,
    and two kprof processes may use one cache."""
    trees = _trees(root)
    with shared_lock(trees / IN_USE), exclusive_lock(trees / BUILD_LOCK):
        return _materialise(repo, spec, trees / spec.key(repo))


def _trees(root: Path | None) -> Path:
    trees = (root or cache_root()) / "trees"
    try:
        trees.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise KprofInputError(trees, f"cannot hold the revision cache ({e.strerror or e}; set KPROF_CACHE)") from None
    return trees


def cache_in_use(root: Path | None = None) -> AbstractContextManager[None]:
    """Held by a run for as long as it times in revision trees: ``kprof cache --clean`` waits for no
    one and is refused while any run holds it."""
    return shared_lock(_trees(root) / IN_USE)


def _materialise(repo: Repo, spec: TreeSpec, path: Path) -> Tree:
    if (path / OK_MARK).is_file() and not spec.worktree:
        return Tree(path)
    if path.exists():
        git(repo.root, "worktree", "remove", "--force", str(path), check=False)
        shutil.rmtree(path, ignore_errors=True)
    if spec.worktree:
        path.mkdir()
        _copy_worktree(repo, path)
    else:
        git(repo.root, "worktree", "add", "--detach", "--force", str(path), spec.base)
        for op, sha in spec.ops:
            refused = _apply(path, op, sha, spec.paths)
            if refused:
                git(repo.root, "worktree", "remove", "--force", str(path), check=False)
                shutil.rmtree(path, ignore_errors=True)
                return Tree(None, refused)
    (path / OK_MARK).write_text(json.dumps({"repo": str(repo.root), "base": spec.base, "ops": spec.ops}) + "\n")
    return Tree(path)


def clean(root: Path | None = None) -> list[Path]:
    """Remove every cached tree and prune the worktree records of the repositories they came from;
    refused in one line while a run uses the cache (its trees would vanish under it)."""
    trees = _trees(root)
    in_use = sole_lock(trees / IN_USE, trees, "is in use by a kprof run; clean it when the run has ended")
    with in_use, exclusive_lock(trees / BUILD_LOCK):
        repos = set()
        for mark in trees.glob(f"*/{OK_MARK}"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                repos.add(json.loads(mark.read_text())["repo"])
        removed = sorted(p for p in trees.iterdir() if p.name not in (BUILD_LOCK, IN_USE))
        for path in removed:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    for repo in repos:
        if Path(repo).is_dir():
            git(Path(repo), "worktree", "prune", check=False)
    return removed


def revision_env(run: Run, key: str) -> dict[str, str]:
    """The environment of a process that runs a revision's code: its own Triton cache (two
    revisions of one kernel must never share compiled binaries), the interpreter on a CPU."""
    env = dict(os.environ)
    if run.placement.device == "cpu":
        # One thread each: idle OpenMP threads of one host spin and slow the host timed next.
        env.update(TRITON_INTERPRET="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    tree = run.tree(key)
    if tree is not None and tree.path:
        env["TRITON_CACHE_DIR"] = str(Path(tree.path) / ".kprof-triton-cache")
    return env
