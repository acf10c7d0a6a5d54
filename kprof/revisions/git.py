"""The git repository a revision run reads: commits of a range, with what a report says of each."""

from __future__ import annotations

import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kprof.errors import KprofInputError

WORKTREE = "WORKTREE"  # --rev WORKTREE: the working tree as it is, uncommitted changes included


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str = ""
    author_date: str = ""
    parents: tuple[str, ...] = ()
    diffstat: str = ""

    @property
    def short(self) -> str:
        return self.sha[:7]

    def record(self) -> dict[str, Any]:
        return asdict(self) | {"parents": list(self.parents)}

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> Commit:
        return cls(
            d["sha"], d.get("subject", ""), d.get("author_date", ""), tuple(d.get("parents", ())), d.get("diffstat", "")
        )


class GitError(Exception):
    """A git command failed; ``stderr`` says why."""

    def __init__(self, args: list[str], stderr: str) -> None:
        self.stderr = stderr.strip()
        super().__init__(f"git {' '.join(args)}: {self.stderr.splitlines()[-1] if self.stderr else 'failed'}")


def git(cwd: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise GitError(list(args), done.stderr)
    return done.stdout


class Repo:
    """A git repository found from any path inside it."""

    def __init__(self, path: Path) -> None:
        start = path if path.is_dir() else path.parent
        try:
            self.root = Path(git(start, "rev-parse", "--show-toplevel").strip())
        except (GitError, OSError):
            raise KprofInputError("--repo", f"{path} is not inside a git repository") from None

    def resolve(self, rev: str) -> str:
        try:
            return git(self.root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()
        except GitError:
            raise KprofInputError("--revisions", f"{rev!r} is not a commit of {self.root}") from None

    def commit(self, rev: str) -> Commit:
        sha = self.resolve(rev)
        fields = git(self.root, "show", "-s", "--format=%H%x00%s%x00%aI%x00%P", sha).strip().split("\x00")
        stat = git(self.root, "show", "--shortstat", "--format=", sha).strip()
        return Commit(fields[0], fields[1], fields[2], tuple(fields[3].split()), stat)

    def range(self, spec: str) -> tuple[Commit, Commit, list[Commit]]:
        """``A..B``: the base A, the head B, and the commits of B not in A, oldest first (first parent
        only: a merged branch counts as its merge commit)."""
        if ".." not in spec:
            raise KprofInputError("--revisions", f"expected A..B (e.g. main..my-branch), got {spec!r}")
        a, b = spec.split("..", 1)
        base, head = self.commit(a or "HEAD"), self.commit(b or "HEAD")
        shas = git(self.root, "rev-list", "--reverse", "--first-parent", f"{base.sha}..{head.sha}").split()
        if not shas:
            raise KprofInputError("--revisions", f"{spec} holds no commits")
        return base, head, [self.commit(s) for s in shas]

    def is_dirty(self) -> bool:
        return bool(git(self.root, "status", "--porcelain", "--untracked-files=no").strip())

    def relative(self, path: Path) -> str:
        """``path`` relative to the repository root (to find the same file in another revision)."""
        try:
            return str(path.resolve().relative_to(self.root.resolve()))
        except ValueError:
            raise KprofInputError(str(path), f"is not inside the repository {self.root}") from None
