"""Statistical bisect over a git range: where in A..B did the time change?

Revisions r0 = A, r1 … rn (ri = the tree after commit i). Each step times a few evenly spaced
revisions of the current span [lo, hi] (and the A/A leg) in interleaved rounds, one process per
revision, exactly as any revision run; per round, the log-time difference between neighbouring
probes is the effect of that segment's commits. The step moves into the one segment whose interval
excludes 0, lies on the side of the span's total effect and reaches the practical threshold; it
stops with a single commit, or with the segments that share the effect, or UNRESOLVED (no segment
resolved) with the rounds that would be needed.

Error control: every interval of every step is at level 1 − α/(S·k), S the most steps the search
can take and k the segments per step (Bonferroni): the chance that any interval of the whole search
misses its true effect is at most α = 0.05, so the path is wrong with at most that probability when
each step's probes come from the same process protocol.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kprof.analysis import stats as S
from kprof.analysis.run_effects import per_round_logs, round_statistics
from kprof.revisions.git import Commit
from kprof.run_model import Role
from kprof.store.run_folder import RunFolder

ALPHA = 0.05
FANOUT = 4  # segments per step
BISECT_FILE = "bisect.json"


def max_steps(n: int, fanout: int = FANOUT) -> int:
    return max(1, math.ceil(math.log(max(n, 2), fanout)))


@dataclass
class Segment:
    lo: int
    hi: int
    effect_pct: float
    ci_low_pct: float
    ci_high_pct: float
    resolved: bool  # interval excludes 0, on the total's side, beyond the threshold


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


@dataclass
class Bisect:
    base: dict[str, Any]
    commits: list[dict[str, Any]]
    case: str
    alpha_per_interval: float
    steps: list[Step] = field(default_factory=list)
    culprits: list[int] = field(default_factory=list)  # commit numbers 1 … n
    verdict: str = "UNRESOLVED"  # FOUND, SPREAD (several segments), NO CHANGE, UNRESOLVED
    rounds_needed: int | None = None

    def save(self, root: Path) -> None:
        (root / BISECT_FILE).write_text(json.dumps(asdict(self), indent=2, default=str) + "\n")

    @classmethod
    def load(cls, root: Path) -> Bisect:
        d = json.loads((root / BISECT_FILE).read_text())
        steps = [
            Step(**{**s, "total": Segment(**s["total"]), "segments": [Segment(**g) for g in s["segments"]]})
            for s in d.pop("steps")
        ]
        return cls(**d, steps=steps)


def probes(lo: int, hi: int, fanout: int = FANOUT) -> list[int]:
    """lo, evenly spaced interior revisions, hi: at most fanout segments of at least one commit."""
    k = min(fanout, hi - lo)
    return sorted({lo + round(j * (hi - lo) / k) for j in range(k + 1)})


def _segment(d: np.ndarray, lo: int, hi: int, alpha: float, threshold: float, sign: float) -> Segment:
    est = S.estimate(d, alpha)
    excludes = est.low > 0 or est.high < 0
    same_side = sign == 0 or np.sign(est.estimate) == sign
    resolved = bool(excludes and same_side and abs(est.estimate) >= threshold)
    return Segment(lo, hi, est.effect_pct, est.ci_low_pct, est.ci_high_pct, resolved)


def judge_step(folder: RunFolder, lo: int, hi: int, points: list[int], alpha: float, threshold_pct: float) -> Step:
    """The segments of one step from its run folder (legs in the order of ``points``)."""
    run = folder.read_run()
    rounds = round_statistics(folder.read("samples"))
    case = run.cases[0].name
    logs = per_round_logs(rounds, case).dropna(how="any")
    names = [leg.name for leg in run.legs if not leg.has(Role.AA)]
    threshold = S.pct_threshold_to_log(threshold_pct)
    total_d = (logs[names[-1]] - logs[names[0]]).to_numpy()
    total = _segment(total_d, lo, hi, alpha, threshold, 0.0)
    sign = float(np.sign(S.estimate(total_d, alpha).estimate))
    segments = [
        _segment((logs[b] - logs[a]).to_numpy(), points[i], points[i + 1], alpha, threshold, sign)
        for i, (a, b) in enumerate(zip(names, names[1:]))
    ]
    aa = next((leg.name for leg in run.legs if leg.has(Role.AA)), None)
    aa_pct = None
    if aa is not None and aa in logs:
        e = S.estimate((logs[aa] - logs[names[0]]).to_numpy())
        aa_pct = (e.effect_pct, e.ci_low_pct, e.ci_high_pct)
    return Step(str(folder.root), lo, hi, points, len(logs), total, segments, aa_pct)


def run_bisect(
    base: Commit,
    commits: list[Commit],
    case: str,
    threshold_pct: float,
    time_revisions: Callable[[list[str], Path], RunFolder],
    root: Path,
    on_step: Callable[[Step], None] = lambda s: None,
) -> Bisect:
    """``time_revisions(shas, folder)`` times those revisions (the first as baseline) and returns the
    run folder; this function decides where to look next."""
    n = len(commits)
    shas = [base.sha, *(c.sha for c in commits)]
    alpha = ALPHA / (max_steps(n) * FANOUT)
    result = Bisect(base.record(), [c.record() for c in commits], case, alpha)
    lo, hi = 0, n
    while True:
        points = probes(lo, hi)
        folder = time_revisions([shas[p] for p in points], root / f"step-{len(result.steps) + 1}")
        step = judge_step(folder, lo, hi, points, alpha, threshold_pct)
        result.steps.append(step)
        on_step(step)
        result.save(root)
        if not step.total.resolved:
            result.verdict = "NO CHANGE" if len(result.steps) == 1 and _same(step, threshold_pct) else "UNRESOLVED"
            result.rounds_needed = _rounds_needed(folder, threshold_pct)
            break
        hits = [s for s in step.segments if s.resolved]
        if len(hits) != 1:
            result.verdict = "SPREAD" if hits else "UNRESOLVED"
            result.culprits = [c for s in hits for c in range(s.lo + 1, s.hi + 1)]
            if not hits:
                result.rounds_needed = _rounds_needed(folder, threshold_pct)
            break
        lo, hi = hits[0].lo, hits[0].hi
        if hi - lo == 1:
            result.verdict, result.culprits = "FOUND", [hi]
            break
    result.save(root)
    return result


def _same(step: Step, threshold_pct: float) -> bool:
    return -threshold_pct < step.total.ci_low_pct and step.total.ci_high_pct < threshold_pct


def _rounds_needed(folder: RunFolder, threshold_pct: float) -> int | None:
    run = folder.read_run()
    logs = per_round_logs(round_statistics(folder.read("samples")), run.cases[0].name).dropna(how="any")
    aa = next((leg.name for leg in run.legs if leg.has(Role.AA)), None)
    if aa is None or aa not in logs:
        return None
    sigma = S.noise_sigma((logs[aa] - logs[run.baseline.name]).to_numpy())
    return S.rounds_needed(sigma, S.pct_threshold_to_log(threshold_pct))
