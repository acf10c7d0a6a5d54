"""Statistical bisect over a git range: where in A..B did the time change?

Revisions r0 = A, r1 … rn (ri = the tree after commit i). Each step times a few evenly spaced
revisions of the current span [lo, hi] (and the A/A leg) in interleaved rounds, one process per
revision, exactly as any revision run; per round, the log-time difference between neighbouring
probes is the effect of that segment's commits. The step moves into the one segment whose interval
excludes 0, lies on the side of the span's total effect and reaches the practical threshold; it
stops with a single commit, or with the segments that share the effect, or UNRESOLVED (no segment
resolved) with the rounds that would be needed.

A revision that cannot be timed (its tree does not build, its code does not import, or it fails the
correctness gate) is skipped as ``git bisect skip`` does: segments are formed between the
neighbouring revisions that were timed, the next step probes around it, and when only such
revisions are left inside the segment the change was found in, the verdict is RANGE: the change is
in those commits, and the report names the ones that could not be judged.

Error control: every interval of every step is at level 1 − α/(S·k), S the most steps the search
can take and k the segments per step (Bonferroni): the chance that any interval of the whole search
misses its true effect is at most α = 0.05, so the path is wrong with at most that probability when
each step's probes come from the same process protocol.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kprof.analysis import stats as S
from kprof.analysis.run_effects import per_round_logs, round_statistics
from kprof.bisect_model import Bisect, Segment, Step
from kprof.errors import KprofInputError
from kprof.revisions.git import Commit
from kprof.run_model import Role
from kprof.store.layout import bisect_step
from kprof.store.run_folder import RunFolder

ALPHA = 0.05
FANOUT = 4  # segments per step


def max_steps(n: int, fanout: int = FANOUT) -> int:
    return max(1, math.ceil(math.log(max(n, 2), fanout)))


def interval_alpha(n: int, gpus: int = 1) -> float:
    """The level of every interval of a search over ``n`` commits with ``gpus`` shares per step
    (Bonferroni over the most steps and the segments per step)."""
    fanout = FANOUT * gpus
    return ALPHA / (max_steps(n, fanout) * fanout)


def probes(lo: int, hi: int, fanout: int = FANOUT, skipped: Collection[int] = ()) -> list[int]:
    """lo, evenly spaced interior revisions, hi: at most fanout segments of at least one commit.
    Revisions known to be untimeable are never probed: each interior point moves to the nearest
    revision that may be timed (none left: just lo and hi)."""
    candidates = [r for r in range(lo + 1, hi) if r not in skipped]
    k = min(fanout, len(candidates) + 1)
    chosen: set[int] = set()
    for j in range(1, k):
        target = lo + j * (hi - lo) / k
        free = [r for r in candidates if r not in chosen]
        chosen.add(min(free, key=lambda r: (abs(r - target), r)))
    return [lo, *sorted(chosen), hi]


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


@dataclass
class Timed:
    """What one share's run folder says: per-round log times, and which of its points were timed."""

    logs: Any  # DataFrame: one column per timed leg
    points: list[int]  # the share's points that were timed, in order
    legs: list[str]  # their legs
    skipped: dict[int, str]  # the share's points that were not, and why
    aa: str | None


def _share_logs(share: Share, case: str) -> Timed:
    run = share.folder.read_run()
    # why a leg was not timed: its case's status, or (whole programs, one status for every case) any
    failed = {leg: why for status in run.case_status.values() for leg, why in status.failed.items()}
    status = run.case_status.get(case)
    if status and status.status == "failed":  # the whole case failed: the baseline could not run
        failed.setdefault(run.baseline.name, status.reason)
    samples = share.folder.read("samples")
    logs = per_round_logs(round_statistics(samples), case) if len(samples) else None
    revision_legs = [leg for leg in run.legs if not leg.has(Role.AA)]
    points, legs, skipped = [], [], {}
    for point, leg in zip(share.points, revision_legs):
        if leg.name in failed or logs is None or leg.name not in logs:
            skipped[point] = failed.get(leg.name, "not timed")
        else:
            points.append(point)
            legs.append(leg.name)
    if logs is not None:
        logs = logs[legs + [c for c in logs.columns if c not in legs]].dropna(subset=legs, how="any")
    aa = next((leg.name for leg in run.legs if leg.has(Role.AA)), None)
    return Timed(logs, points, legs, skipped, aa)


class StepBroken(Exception):
    """A revision two shares meet at, or an end of the span, could not be timed: the step is
    planned again without it."""

    def __init__(self, skipped: dict[int, str]) -> None:
        self.skipped = skipped
        super().__init__(f"revisions {sorted(skipped)} could not be timed")


def judge_step(
    shares: list[Share], lo: int, hi: int, alpha: float, threshold_pct: float, case: str | None = None
) -> Step:
    """The segments of one step from its shares' run folders (legs in the order of their points),
    between the revisions that were timed. The span's total, per round, is the sum of the shares'
    totals (each formed on its own GPU; rounds of different shares are independent and paired by
    number). Raises StepBroken when the span's ends or a revision shared by two shares were not
    timed: the chain of differences would have a gap."""
    threshold = S.pct_threshold_to_log(threshold_pct)
    case = case or shares[0].folder.read_run().cases[0].name
    timed = [_share_logs(share, case) for share in shares]
    skipped = {p: why for t in timed for p, why in t.skipped.items()}
    joints = {lo, hi} | {share.points[0] for share in shares} | {share.points[-1] for share in shares}
    if joints & set(skipped) or any(len(t.points) < 2 for t in timed):
        raise StepBroken(skipped)
    rounds = min(len(t.logs) for t in timed)
    total_d = np.sum([(t.logs[t.legs[-1]] - t.logs[t.legs[0]]).to_numpy()[:rounds] for t in timed], axis=0)
    total = _segment(total_d, lo, hi, alpha, threshold, 0.0)
    sign = float(np.sign(S.estimate(total_d, alpha).estimate))
    segments, aa_pct = [], None
    for share, t in zip(shares, timed):
        segments += [
            _segment((t.logs[b] - t.logs[a]).to_numpy(), p, q, alpha, threshold, sign, share.gpu)
            for (a, b), (p, q) in zip(zip(t.legs, t.legs[1:]), zip(t.points, t.points[1:]))
        ]
        if t.aa is not None and t.aa in t.logs:
            e = S.estimate((t.logs[t.aa] - t.logs[t.legs[0]]).dropna().to_numpy())
            if aa_pct is None or abs(e.effect_pct) > abs(aa_pct[0]):  # the share whose A/A is farthest off
                aa_pct = (e.effect_pct, e.ci_low_pct, e.ci_high_pct)
    folder = shares[0].folder.root if len(shares) == 1 else shares[0].folder.root.parent
    points = sorted({p for t in timed for p in t.points})
    return Step(str(folder), lo, hi, points, rounds, total, segments, aa_pct, skipped)


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
    case: str | None,
    threshold_pct: float,
    time_revisions: Callable[[list[str], Path, int | None], RunFolder],
    root: Path,
    on_step: Callable[[Step], None] = lambda s: None,
    gpus: Sequence[int | None] = (None,),
    pick_case: Callable[[RunFolder], str] | None = None,
    paths: Sequence[str] = (),
    left_out: Sequence[dict[str, Any]] = (),
) -> Bisect:
    """``time_revisions(shas, folder, gpu)`` times those revisions (the first as baseline) on one
    GPU and returns the run folder; this function decides where to look next. With several GPUs a
    step has FANOUT segments per GPU, its probes split in contiguous shares timed at once, one share
    per GPU: the same error control over more segments, fewer steps. ``case`` is the case followed
    (None: ``pick_case`` names it from the first step's folder, e.g. a whole program's per-step
    busy time when its trace has steps)."""
    n = len(commits)
    shas = [base.sha, *(c.sha for c in commits)]
    fanout = FANOUT * len(gpus)
    alpha = interval_alpha(n, len(gpus))
    result = Bisect(base.record(), [c.record() for c in commits], case or "", alpha)
    result.paths, result.left_out = list(paths), list(left_out)
    lo, hi = 0, n
    while True:
        points = probes(lo, hi, fanout, result.skipped)
        if len(points) == 2 and hi - lo > 1:  # only untimeable revisions inside: as far as it goes
            result.verdict = "RANGE"
            result.name_culprits(list(range(lo + 1, hi + 1)))
            break
        placed = list(zip(split_probes(points, len(gpus)), gpus))
        where = bisect_step(root, len(result.steps) + 1)
        shares = _time_shares(time_revisions, shas, placed, where)
        if not result.case:
            result.case = pick_case(shares[0].folder) if pick_case else shares[0].folder.read_run().cases[0].name
        try:
            step = judge_step(shares, lo, hi, alpha, threshold_pct, result.case)
        except StepBroken as broken:
            _refuse_ends(broken.skipped, lo, hi, shas)
            result.skipped.update(broken.skipped)
            _set_aside(where)
            continue
        result.skipped.update(step.skipped)
        result.steps.append(step)
        on_step(step)
        result.save(root)
        span = _next_span(result, step, shares[0].folder, threshold_pct, alpha)
        if span is None:
            break
        lo, hi = span
    result.save(root)
    return result


def _next_span(
    result: Bisect, step: Step, folder: RunFolder, threshold_pct: float, alpha: float
) -> tuple[int, int] | None:
    """Where the search goes after a step: the one segment that resolved, or None with the verdict
    set (no change, a change spread over segments, one commit found, or too few rounds to tell)."""
    if not step.total.resolved:
        result.verdict = "NO CHANGE" if len(result.steps) == 1 and _same(step, threshold_pct) else "UNRESOLVED"
        result.rounds_needed = _rounds_needed(folder, threshold_pct, result.case, alpha)
        return None
    hits = [s for s in step.segments if s.resolved]
    if len(hits) != 1:
        result.verdict = "SPREAD" if hits else "UNRESOLVED"
        result.name_culprits([c for s in hits for c in range(s.lo + 1, s.hi + 1)])
        if not hits:
            result.rounds_needed = _rounds_needed(folder, threshold_pct, result.case, alpha)
        return None
    if hits[0].hi - hits[0].lo == 1:
        result.verdict = "FOUND"
        result.name_culprits([hits[0].hi])
        return None
    return hits[0].lo, hits[0].hi


def _refuse_ends(skipped: dict[int, str], lo: int, hi: int, shas: list[str]) -> None:
    """The span's own ends were timed before (or are the range's base and head): if one of them
    cannot be timed, no bisect of this range can be made."""
    for end in (lo, hi):
        if end in skipped:
            what = "base" if end == 0 else "head" if end == len(shas) - 1 else f"revision {end}"
            raise KprofInputError("--revisions", f"the {what} {shas[end][:7]} cannot be timed: {skipped[end]}")


def _set_aside(where: Path) -> None:
    """A step that is planned again keeps its folder, renamed, so its files stay for the record."""
    n = 1
    while where.with_name(f"{where.name}-redone-{n}").exists():
        n += 1
    where.rename(where.with_name(f"{where.name}-redone-{n}"))


def _same(step: Step, threshold_pct: float) -> bool:
    return -threshold_pct < step.total.ci_low_pct and step.total.ci_high_pct < threshold_pct


def _rounds_needed(folder: RunFolder, threshold_pct: float, case: str, alpha: float) -> int | None:
    """Rounds at which an unchanged step would read SAME (its interval inside the threshold) 80% of
    the time at this A/A noise, at the search's own interval level; None beyond 64 rounds."""
    run = folder.read_run()
    logs = per_round_logs(round_statistics(folder.read("samples")), case).dropna(how="any")
    aa = next((leg.name for leg in run.legs if leg.has(Role.AA)), None)
    if aa is None or aa not in logs:
        return None
    if run.baseline.name not in logs:
        return None
    sigma = S.noise_sigma((logs[aa] - logs[run.baseline.name]).to_numpy())
    return S.rounds_for_same(sigma, S.pct_threshold_to_log(threshold_pct), alpha)
