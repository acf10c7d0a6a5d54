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
    culprits: list[int] = field(default_factory=list)  # commit numbers 1 … n
    verdict: str = "UNRESOLVED"  # FOUND, RANGE (only skipped revisions inside), SPREAD, NO CHANGE, UNRESOLVED
    rounds_needed: int | None = None
    culprit_commits: list[dict[str, Any]] = field(default_factory=list)  # number, sha, subject of each culprit
    skipped: dict[int, str] = field(default_factory=dict)  # revisions that could not be timed, and why
    paths: list[str] = field(default_factory=list)  # --paths: the commits above are those that touch them
    left_out: list[dict[str, Any]] = field(default_factory=list)  # the range's commits that --paths left out

    def name_culprits(self, numbers: list[int]) -> None:
        self.culprits = numbers
        self.culprit_commits = [
            {"number": c, "sha": self.commits[c - 1]["sha"], "subject": self.commits[c - 1].get("subject", "")}
            for c in numbers
        ]

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
        return cls(**d, steps=steps, skipped=skipped)
