"""The typed record of a statistical bisect (``bisect.json`` in its folder): each step's probes and
segment intervals, the verdict and the culprits. The search writes it (kprof.revisions.bisect);
the report reads it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kprof.store.layout import BISECT_FILE


@dataclass
class Segment:
    lo: int
    hi: int
    effect_pct: float
    ci_low_pct: float
    ci_high_pct: float
    resolved: bool  # interval excludes 0, on the total's side, beyond the threshold
    gpu: int | None = None  # the GPU its two ends were timed on, when the search ran on several


@dataclass
class Change:
    """One change the search followed to its end: commits lo+1 … hi, how far it got (FOUND: one
    commit; RANGE: commits that could not be timed; SPREAD: no single segment carries it;
    UNRESOLVED: the span did not resolve on its own; NOT FOLLOWED: the search's steps were spent),
    and the effect of the segment that showed it."""

    lo: int
    hi: int
    verdict: str
    effect_pct: float
    ci_low_pct: float
    ci_high_pct: float
    rounds_needed: int | None = None  # UNRESOLVED: rounds at which an effect this size is found 80% of the time


# Overall verdicts, from the most settled: a search that found each change to one commit is FOUND.
CHANGE_ORDER = ("FOUND", "RANGE", "SPREAD", "NOT FOLLOWED", "UNRESOLVED")


@dataclass
class Step:
    folder: str
    lo: int
    hi: int
    probes: list[int]
    rounds: int
    total: Segment
    segments: list[Segment] = field(default_factory=list)
    aa_pct: tuple[float, float, float] | None = None
    skipped: dict[int, str] = field(default_factory=dict)  # revision number → why it was not timed


@dataclass
class Bisect:
    base: dict[str, Any]
    commits: list[dict[str, Any]]
    case: str
    alpha_per_interval: float
    steps: list[Step] = field(default_factory=list)
    culprits: list[int] = field(default_factory=list)  # commit numbers 1 … n, of every change
    verdict: str = "UNRESOLVED"  # NO CHANGE, or the least settled of its changes' (CHANGE_ORDER)
    rounds_needed: int | None = None
    culprit_commits: list[dict[str, Any]] = field(default_factory=list)  # number, sha, subject of each culprit
    skipped: dict[int, str] = field(default_factory=dict)  # revisions that could not be timed, and why
    paths: list[str] = field(default_factory=list)  # --paths: the commits above are those that touch them
    left_out: list[dict[str, Any]] = field(default_factory=list)  # the range's commits that --paths left out
    changes: list[Change] = field(default_factory=list)  # every change found, oldest commit first

    def add_change(self, change: Change) -> None:
        self.changes = sorted([*self.changes, change], key=lambda c: c.lo)
        numbers = [n for c in self.changes for n in range(c.lo + 1, c.hi + 1)]
        self.culprits = numbers
        self.culprit_commits = [
            {"number": c, "sha": self.commits[c - 1]["sha"], "subject": self.commits[c - 1].get("subject", "")}
            for c in numbers
        ]

    def conclude(self, same: bool) -> None:
        """The overall verdict once the search has ended: the least settled of its changes'; with
        none, NO CHANGE where the first step's total was SAME, else UNRESOLVED."""
        if self.changes:
            self.verdict = max((c.verdict for c in self.changes), key=CHANGE_ORDER.index)
            needed = [c.rounds_needed for c in self.changes if c.rounds_needed]
            self.rounds_needed = max(needed) if needed else self.rounds_needed
        else:
            self.verdict = "NO CHANGE" if same else "UNRESOLVED"

    def save(self, root: Path) -> None:
        (root / BISECT_FILE).write_text(json.dumps(asdict(self), indent=2, default=str) + "\n")

    @classmethod
    def load(cls, root: Path) -> Bisect:
        d = json.loads((root / BISECT_FILE).read_text())
        steps = [
            Step(
                **{
                    **s,
                    "total": Segment(**s["total"]),
                    "segments": [Segment(**g) for g in s["segments"]],
                    "skipped": {int(k): v for k, v in (s.get("skipped") or {}).items()},  # JSON keys are text
                }
            )
            for s in d.pop("steps")
        ]
        skipped = {int(k): v for k, v in (d.pop("skipped", None) or {}).items()}
        changes = [Change(**c) for c in d.pop("changes", None) or ()]
        return cls(**d, steps=steps, skipped=skipped, changes=changes)
