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
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
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


def interval_alpha(n: int, gpus: int = 1) -> float:
    """The level of every interval of a search over ``n`` commits with ``gpus`` shares per step
    (Bonferroni over the most steps and the segments per step)."""
    fanout = FANOUT * gpus
    return ALPHA / (max_steps(n, fanout) * fanout)


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


def _segment(
    d: np.ndarray, lo: int, hi: int, alpha: float, threshold: float, sign: float, gpu: int | None = None
) -> Segment:
    est = S.estimate(d, alpha)
    excludes = est.low > 0 or est.high < 0
    same_side = sign == 0 or np.sign(est.estimate) == sign
    resolved = bool(excludes and same_side and abs(est.estimate) >= threshold)
    return Segment(lo, hi, est.effect_pct, est.ci_low_pct, est.ci_high_pct, resolved, gpu)


def split_probes(points: list[int], parts: int) -> list[list[int]]:
    """A step's probes in contiguous shares, one per GPU, neighbouring shares sharing their end
    revision: every segment is timed inside one share, so no difference mixes two GPUs."""
    segments = len(points) - 1
    parts = max(1, min(parts, segments))
    bounds = [round(j * segments / parts) for j in range(parts + 1)]
    return [points[bounds[j] : bounds[j + 1] + 1] for j in range(parts)]


@dataclass
class Share:
    """One GPU's part of a step: its probes (revision numbers) and the run folder that timed them."""

    folder: RunFolder
    points: list[int]
    gpu: int | None = None


def _share_logs(share: Share) -> tuple[Any, list[str], str | None]:
    run = share.folder.read_run()
    logs = per_round_logs(round_statistics(share.folder.read("samples")), run.cases[0].name).dropna(how="any")
    names = [leg.name for leg in run.legs if not leg.has(Role.AA)]
    aa = next((leg.name for leg in run.legs if leg.has(Role.AA)), None)
    return logs, names, aa


def judge_step(shares: list[Share], lo: int, hi: int, alpha: float, threshold_pct: float) -> Step:
    """The segments of one step from its shares' run folders (legs in the order of their points).
    The span's total, per round, is the sum of the shares' totals (each formed on its own GPU;
    rounds of different shares are independent and paired by number)."""
    threshold = S.pct_threshold_to_log(threshold_pct)
    timed = [_share_logs(share) for share in shares]
    rounds = min(len(logs) for logs, _, _ in timed)
    total_d = np.sum([(logs[names[-1]] - logs[names[0]]).to_numpy()[:rounds] for logs, names, _ in timed], axis=0)
    total = _segment(total_d, lo, hi, alpha, threshold, 0.0)
    sign = float(np.sign(S.estimate(total_d, alpha).estimate))
    segments, aa_pct = [], None
    for share, (logs, names, aa) in zip(shares, timed):
        ends = zip(share.points, share.points[1:])
        segments += [
            _segment((logs[b] - logs[a]).to_numpy(), p, q, alpha, threshold, sign, share.gpu)
            for (a, b), (p, q) in zip(zip(names, names[1:]), ends)
        ]
        if aa is not None and aa in logs:
            e = S.estimate((logs[aa] - logs[names[0]]).to_numpy())
            if aa_pct is None or abs(e.effect_pct) > abs(aa_pct[0]):  # the share whose A/A is farthest off
                aa_pct = (e.effect_pct, e.ci_low_pct, e.ci_high_pct)
    folder = shares[0].folder.root if len(shares) == 1 else shares[0].folder.root.parent
    points = sorted({p for share in shares for p in share.points})
    return Step(str(folder), lo, hi, points, rounds, total, segments, aa_pct)


def _time_shares(
    time_revisions: Callable[[list[str], Path, int | None], RunFolder],
    shas: list[str],
    placed: list[tuple[list[int], int | None]],
    where: Path,
) -> list[Share]:
    """Each share of a step timed on its GPU, all at once (``where/gpu-G``); one share in this thread,
    under ``where`` itself, so Ctrl-C reaches its run directly."""

    def timed(points: list[int], gpu: int | None) -> Share:
        folder = where if len(placed) == 1 else where / f"gpu-{gpu}"
        return Share(time_revisions([shas[p] for p in points], folder, gpu), points, gpu)

    if len(placed) == 1:
        return [timed(*placed[0])]
    with ThreadPoolExecutor(len(placed)) as pool:
        return [f.result() for f in [pool.submit(timed, *share) for share in placed]]


def run_bisect(
    base: Commit,
    commits: list[Commit],
    case: str,
    threshold_pct: float,
    time_revisions: Callable[[list[str], Path, int | None], RunFolder],
    root: Path,
    on_step: Callable[[Step], None] = lambda s: None,
    gpus: Sequence[int | None] = (None,),
) -> Bisect:
    """``time_revisions(shas, folder, gpu)`` times those revisions (the first as baseline) on one
    GPU and returns the run folder; this function decides where to look next. With several GPUs a
    step has FANOUT segments per GPU, its probes split in contiguous shares timed at once, one share
    per GPU: the same error control over more segments, fewer steps."""
    n = len(commits)
    shas = [base.sha, *(c.sha for c in commits)]
    fanout = FANOUT * len(gpus)
    alpha = interval_alpha(n, len(gpus))
    result = Bisect(base.record(), [c.record() for c in commits], case, alpha)
    lo, hi = 0, n
    while True:
        placed = list(zip(split_probes(probes(lo, hi, fanout), len(gpus)), gpus))
        shares = _time_shares(time_revisions, shas, placed, root / f"step-{len(result.steps) + 1}")
        step = judge_step(shares, lo, hi, alpha, threshold_pct)
        result.steps.append(step)
        on_step(step)
        result.save(root)
        if not step.total.resolved:
            result.verdict = "NO CHANGE" if len(result.steps) == 1 and _same(step, threshold_pct) else "UNRESOLVED"
            result.rounds_needed = _rounds_needed(shares[0].folder, threshold_pct)
            break
        hits = [s for s in step.segments if s.resolved]
        if len(hits) != 1:
            result.verdict = "SPREAD" if hits else "UNRESOLVED"
            result.culprits = [c for s in hits for c in range(s.lo + 1, s.hi + 1)]
            if not hits:
                result.rounds_needed = _rounds_needed(shares[0].folder, threshold_pct)
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
