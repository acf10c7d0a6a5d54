"""Statistical bisect over a git range: where in A..B did the time change — at every commit it did?

Revisions r0 = A, r1 … rn (ri = the tree after commit i). Each step times a few evenly spaced
revisions of one span [lo, hi] (and the A/A leg) in interleaved rounds, one process per revision,
exactly as any revision run; per round, the log-time difference between neighbouring probes is the
effect of that segment's commits. A history can hold several changes (a gain, then a fix a commit
later, or a regression and its revert), so every segment whose interval excludes 0 and reaches the
practical threshold is followed, in either direction, until each change is one commit (FOUND), a
run of commits that could not be timed (RANGE), or truly spread: a span whose total resolves while
none of its segments does (SPREAD). A span that no longer resolves when timed on its own is
UNRESOLVED, with the rounds that would resolve the effect seen.

A revision that cannot be timed (its tree does not build, its code does not import, or it fails the
correctness gate) is skipped as ``git bisect skip`` does: segments are formed between the
neighbouring revisions that were timed, the next step probes around it, and when only such
revisions are left inside a span, the verdict is RANGE.

Error control: every interval of every step is at level 1 − α/(C·S·k): S the most steps the search
of one change can take, k the segments per step and C the most changes one search follows
(MAX_CHANGES; the search takes at most C·S steps, and a span left over when they are spent is NOT
FOLLOWED). So by Bonferroni the chance that any interval of the whole search misses its true effect
is at most α = 0.05.
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
from kprof.bisect_model import Bisect, Change, Segment, Step
from kprof.errors import KprofInputError
from kprof.revisions.git import Commit
from kprof.run_model import Role
from kprof.store.layout import bisect_step
from kprof.store.run_folder import RunFolder

ALPHA = 0.05
FANOUT = 4  # segments per step
MAX_CHANGES = 3  # the most separate changes one search follows, each to its commit


def max_steps(n: int, fanout: int = FANOUT) -> int:
    return max(1, math.ceil(math.log(max(n, 2), fanout)))


def step_budget(n: int, gpus: int = 1) -> int:
    """The most steps a search over ``n`` commits takes: each change it follows takes at most
    max_steps (the first step is shared), and it follows at most MAX_CHANGES (or n) of them."""
    return min(MAX_CHANGES, n) * max_steps(n, FANOUT * gpus)


def interval_alpha(n: int, gpus: int = 1) -> float:
    """The level of every interval of a search over ``n`` commits with ``gpus`` shares per step
    (Bonferroni over the most steps and the segments per step)."""
    return ALPHA / (step_budget(n, gpus) * FANOUT * gpus)


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


def _segment(d: np.ndarray, lo: int, hi: int, alpha: float, threshold: float, gpu: int | None = None) -> Segment:
    """A segment's effect; resolved where its interval excludes 0 and its estimate reaches the
    threshold, in either direction (a history may hold a gain and a regression)."""
    est = S.estimate(d, alpha)
    excludes = est.low > 0 or est.high < 0
    resolved = bool(excludes and abs(est.estimate) >= threshold)
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
    run, statuses = share.folder.read_run(), share.folder.read_statuses()
    # why a leg was not timed: its case's status, or (whole programs, one status for every case) any
    failed = {leg: why for _, status in statuses.items() for leg, why in status.failed.items()}
    status = statuses.of(case)
    if status.status == "failed":  # the whole case failed: the baseline could not run
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
    total = _segment(total_d, lo, hi, alpha, threshold)
    segments, aa_pct = [], None
    for share, t in zip(shares, timed):
        segments += [
            _segment((t.logs[b] - t.logs[a]).to_numpy(), p, q, alpha, threshold, share.gpu)
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
    on_plan: Callable[[str], None] = lambda text: None,
) -> Bisect:
    """``time_revisions(shas, folder, gpu)`` times those revisions (the first as baseline) on one
    GPU and returns the run folder; this function decides where to look next: every span whose
    segments resolve is followed, oldest first. With several GPUs a step has FANOUT segments per
    GPU, its probes split in contiguous shares timed at once, one share per GPU: the same error
    control over more segments, fewer steps. ``case`` is the case followed (None: ``pick_case``
    names it from the first step's folder, e.g. a whole program's per-step busy time when its trace
    has steps). ``on_plan`` is told what each step is about to time."""
    n = len(commits)
    shas = [base.sha, *(c.sha for c in commits)]
    fanout = FANOUT * len(gpus)
    alpha = interval_alpha(n, len(gpus))
    result = Bisect(base.record(), [c.record() for c in commits], case or "", alpha)
    result.paths, result.left_out = list(paths), list(left_out)
    pending: list[Pending] = [Pending(0, n, None)]
    budget = step_budget(n, len(gpus))
    while pending:
        span = pending.pop(0)
        points = probes(span.lo, span.hi, fanout, result.skipped)
        if len(points) == 2 and span.hi - span.lo > 1:  # only untimeable revisions inside: as far as it goes
            result.add_change(_change(span, "RANGE"))
            continue
        if len(result.steps) >= budget:
            result.add_change(_change(span, "NOT FOLLOWED"))
            continue
        placed = list(zip(split_probes(points, len(gpus)), gpus))
        where = bisect_step(root, len(result.steps) + 1)
        on_plan(
            f"bisect step {len(result.steps) + 1}: {_commits_text(span.lo, span.hi)}, "
            f"{len(points)} revisions timed ({len(pending)} more span(s) waiting)"
        )
        shares = _time_shares(time_revisions, shas, placed, where)
        if not result.case:
            result.case = pick_case(shares[0].folder) if pick_case else shares[0].folder.read_run().cases[0].name
        try:
            step = judge_step(shares, span.lo, span.hi, alpha, threshold_pct, result.case)
        except StepBroken as broken:
            _refuse_ends(broken.skipped, span.lo, span.hi, shas)
            result.skipped.update(broken.skipped)
            _set_aside(where)
            pending.insert(0, span)
            continue
        result.skipped.update(step.skipped)
        result.steps.append(step)
        on_step(step)
        pending[:0] = _follow(result, span, step, shares[0].folder, threshold_pct, alpha)
        result.save(root)
    result.conclude(_same(result.steps[0], threshold_pct) if result.steps else False)
    result.save(root)
    return result


@dataclass
class Pending:
    """A span still to search, and the segment of an earlier step that sent the search there
    (None for the whole range)."""

    lo: int
    hi: int
    seen: Segment | None


def _commits_text(lo: int, hi: int) -> str:
    return f"commit {hi}" if hi - lo == 1 else f"commits {lo + 1}–{hi}"


def _change(span: Pending, verdict: str, segment: Segment | None = None, rounds_needed: int | None = None) -> Change:
    seen = segment or span.seen
    assert seen is not None
    return Change(span.lo, span.hi, verdict, seen.effect_pct, seen.ci_low_pct, seen.ci_high_pct, rounds_needed)


def _follow(
    result: Bisect, span: Pending, step: Step, folder: RunFolder, threshold_pct: float, alpha: float
) -> list[Pending]:
    """What a step found: a change for each resolved segment of one commit, a span to search for
    each longer one (oldest first); with no segment resolved, the span is SPREAD when its own total
    resolves, else UNRESOLVED (a span entered on an earlier step's evidence) or, for the whole
    range, nothing to report (NO CHANGE or UNRESOLVED, said by ``Bisect.conclude``)."""
    hits = [s for s in step.segments if s.resolved]
    if not hits:
        if step.total.resolved:
            result.add_change(_change(span, "SPREAD", step.total))
        elif span.seen is not None:
            sigma, seen = _aa_sigma(folder, result.case), abs(math.log1p(span.seen.effect_pct / 100))
            threshold = S.pct_threshold_to_log(threshold_pct)
            need = S.rounds_to_resolve(sigma, seen, alpha, threshold) if sigma else None
            result.add_change(_change(span, "UNRESOLVED", rounds_needed=need))
        else:
            result.rounds_needed = _rounds_needed(folder, threshold_pct, result.case, alpha)
        return []
    following = []
    for segment in hits:
        if segment.hi - segment.lo == 1:
            result.add_change(_change(Pending(segment.lo, segment.hi, segment), "FOUND"))
        else:
            following.append(Pending(segment.lo, segment.hi, segment))
    return following


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
    sigma = _aa_sigma(folder, case)
    return S.rounds_for_same(sigma, S.pct_threshold_to_log(threshold_pct), alpha) if sigma else None


def _aa_sigma(folder: RunFolder, case: str) -> float | None:
    """The rounds' noise (log units) as the step's A/A shows it; None without an A/A."""
    run = folder.read_run()
    logs = per_round_logs(round_statistics(folder.read("samples")), case).dropna(how="any")
    aa = next((leg.name for leg in run.legs if leg.has(Role.AA)), None)
    if aa is None or aa not in logs or run.baseline.name not in logs:
        return None
    return S.noise_sigma((logs[aa] - logs[run.baseline.name]).to_numpy())
