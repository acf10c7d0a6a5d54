"""The git repository a revision run reads: commits of a range, with what a report says of each."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kprof.errors import KprofInputError
from kprof.report.text import cut_words

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

    def label(self, width: int = 48) -> str:
        """``sha subject``, the subject cut at a word boundary with "…" so that it fits ``width``."""
        return f"{self.short} {cut_words(self.subject, width - 8)}".strip()

    def record(self) -> dict[str, Any]:
        return asdict(self) | {"parents": list(self.parents)}

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> Commit:
        return cls(
            d["sha"], d.get("subject", ""), d.get("author_date", ""), tuple(d.get("parents", ())), d.get("diffstat", "")
        )


@dataclass(frozen=True)
class CommitRange:
    """A..B as a run uses it: the commits that are levers (or bisect points), and those that
    ``--paths`` left out (they are in the head's tree, but no leg switches them)."""

    base: Commit
    head: Commit
    commits: list[Commit]
    left_out: list[Commit] = field(default_factory=list)


class GitError(Exception):
    """A git command failed; ``stderr`` says why."""

    def __init__(self, args: list[str], stderr: str) -> None:
        self.stderr = stderr.strip()
        super().__init__(f"git {' '.join(args)}: {self.stderr.splitlines()[-1] if self.stderr else 'failed'}")


def git(cwd: Path, *args: str, check: bool = True, stdin: str | None = None) -> str:
    """A git command's output; GitError when it fails and ``check``. ``stdin``: text fed to it (a patch)."""
    done = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise GitError(list(args), done.stderr + (done.stdout if stdin is not None else ""))
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
        return self._log([self.resolve(rev)], "-1")[0]

    def _log(self, revs: list[str], *options: str) -> list[Commit]:
        """Commits of one ``git log`` (subject, date, parents and shortstat each), oldest first."""
        fmt = "--format=%x1e%H%x00%s%x00%aI%x00%P"  # a merge's stat is against its first parent
        text = git(self.root, "log", *options, fmt, "--shortstat", "--diff-merges=first-parent", *revs, "--")
        commits = []
        for record in filter(None, text.split("\x1e")):
            head, _, stat = record.partition("\n")
            sha, subject, date, parents = head.split("\x00")
            commits.append(Commit(sha, subject, date, tuple(parents.split()), stat.strip()))
        return commits

    def range(self, spec: str, paths: Sequence[str] = ()) -> CommitRange:
        """``A..B``: the base A, the head B, and the commits of B not in A, oldest first (first parent
        only: a merged branch counts as its merge commit). With ``paths``, only the commits that
        touch them (git's own path limiting, each commit against its first parent) are kept; the
        others are listed as left out."""
        if ".." not in spec:
            raise KprofInputError("--revisions", f"expected A..B (e.g. main..my-branch), got {spec!r}")
        a, b = spec.split("..", 1)
        base, head = self.commit(a or "HEAD"), self.commit(b or "HEAD")
        every = self._log([f"{base.sha}..{head.sha}"], "--first-parent", "--reverse")
        if not every:
            raise KprofInputError("--revisions", f"{spec} holds no commits")
        if not paths:
            return CommitRange(base, head, every)
        try:
            touching = set(
                git(self.root, "rev-list", "--first-parent", f"{base.sha}..{head.sha}", "--", *paths).split()
            )
        except GitError as e:
            raise KprofInputError("--paths", e.stderr.splitlines()[-1] if e.stderr else "git refused them") from None
        kept = [c for c in every if c.sha in touching]
        if not kept:
            raise KprofInputError("--paths", f"no commit of {spec} touches {' '.join(paths)}")
        return CommitRange(base, head, kept, [c for c in every if c.sha not in touching])

    def is_dirty(self) -> bool:
        return bool(git(self.root, "status", "--porcelain", "--untracked-files=no").strip())

    def relative(self, path: Path) -> str:
        """``path`` relative to the repository root (to find the same file in another revision)."""
        try:
            return str(path.resolve().relative_to(self.root.resolve()))
        except ValueError:
            raise KprofInputError(str(path), f"is not inside the repository {self.root}") from None
