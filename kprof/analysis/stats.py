"""Paired-round statistics: estimates, exact intervals, tests, multiplicity, verdicts, attribution.

Everything works on per-round log-ratios ``d_r = ln(t_leg,r / t_ref,r)``:
rounds are blocks, so slow drift cancels inside each ratio. Reported effects follow kprof's sign
convention, ``effect_pct = 100·(t_ref / t_leg − 1) = 100·(exp(−d) − 1)``: positive means faster.
The exact Wilcoxon null distribution gives both the test and the Hodges–Lehmann interval, so the
two always agree; scipy provides the tests that ties need, the sign test, quantiles and Page's
trend test. scipy.stats takes 1.4 s to import, so the common path (an untied signed-rank p, BH, t
and F tails) uses scipy.special and this module, and scipy.stats is imported only where needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import Any, NamedTuple

import numpy as np
from scipy import special

from kprof.cache import cached_array

ALPHA = 0.05
VERDICTS = ("FASTER", "SLOWER", "SAME", "UNRESOLVED")


@lru_cache(maxsize=128)
def signed_rank_null(n: int) -> np.ndarray:
    """P(T+ = t) for t = 0 … n(n+1)/2 under the null (no ties): subset sums of {1..n}, by DP."""
    dist = np.zeros(n * (n + 1) // 2 + 1)
    dist[0] = 1.0
    for k in range(1, n + 1):
        shifted = np.zeros_like(dist)
        shifted[k:] = dist[:-k]
        dist = (dist + shifted) / 2.0
    return dist


def walsh_index(n: int, alpha: float = ALPHA) -> int:
    """Largest c with P(T+ ≤ c − 1) ≤ α/2; the interval is [W(c), W(M+1−c)] (1-based). 0: none exists."""
    cdf = np.cumsum(signed_rank_null(n))
    # P(T+ <= c-1) = cdf[c-1]; c = 1 always has P(T+ <= 0) = 2^-n.
    ok = np.flatnonzero(cdf <= alpha / 2 + 1e-12)
    return int(ok[-1]) + 1 if len(ok) else 0


def walsh_averages(d: np.ndarray) -> np.ndarray:
    i, j = np.triu_indices(len(d))
    return np.sort((d[i] + d[j]) / 2.0)


def hodges_lehmann(d: Sequence[float], alpha: float = ALPHA) -> tuple[float, float, float]:
    """Hodges–Lehmann estimate with its exact distribution-free (Walsh-average) interval.

    Returns (estimate, low, high); the interval is (−inf, inf) when n is too small for level 1 − α.
    """
    x = np.asarray(d, dtype=float)
    w = walsh_averages(x)
    est = float(np.median(w))
    c = walsh_index(len(x), alpha)
    if c == 0:
        return est, -math.inf, math.inf
    return est, float(w[c - 1]), float(w[len(w) - c])


EXACT_WILCOXON_ROUNDS = 50  # scipy.stats.wilcoxon's exact limit (method="auto")
PERMUTATION_WILCOXON_ROUNDS = 13  # up to here scipy enumerates every sign flip when values tie


def wilcoxon_p(d: Sequence[float]) -> float:
    """Two-sided Wilcoxon signed-rank p with scipy.stats.wilcoxon's choices (zeros dropped): exact
    from :func:`signed_rank_null` up to 50 rounds when no |d| is zero or tied; the normal
    approximation with the tie correction above 50 rounds, or with ties or zeros above 13 (timer
    ticks make ties common). Both computed here, so a report never imports scipy.stats (1.4 s);
    tied values up to 13 rounds get scipy's own permutation p. A test holds these to scipy."""
    x = np.asarray(d, dtype=float)
    if len(x) == 0 or np.all(x == 0):
        return 1.0
    nonzero = x[x != 0]
    values, inverse, ties = np.unique(np.abs(nonzero), return_inverse=True, return_counts=True)
    ranks = (np.cumsum(ties) - (ties - 1) / 2.0)[inverse]  # average ranks of |d|
    t_plus = float(ranks[nonzero > 0].sum())
    untied = len(nonzero) == len(x) and len(values) == len(x)
    if untied and len(x) <= EXACT_WILCOXON_ROUNDS:
        null = signed_rank_null(len(x))
        return float(min(1.0, 2 * min(null[int(t_plus) :].sum(), null[: int(t_plus) + 1].sum())))
    if untied or len(x) > PERMUTATION_WILCOXON_ROUNDS:
        n = float(len(nonzero))
        se = math.sqrt((n * (n + 1.0) * (2.0 * n + 1.0) - float(np.sum(ties**3.0 - ties)) / 2) / 24)
        z = (t_plus - n * (n + 1.0) * 0.25) / se
        return float(min(1.0, 2 * special.ndtr(-abs(z))))
    from scipy import stats

    return float(stats.wilcoxon(x, zero_method="wilcox", alternative="two-sided").pvalue)


def sign_test_p(d: Sequence[float]) -> float:
    """Two-sided sign test (ties dropped): 5 of 5 rounds on one side gives 0.0625."""
    x = np.asarray(d, dtype=float)
    pos, neg = int((x > 0).sum()), int((x < 0).sum())
    if pos + neg == 0:
        return 1.0
    # Binomial(n, ½) is symmetric: the two-sided p is twice the smaller tail, capped at 1
    # (scipy.stats.binomtest's value, without importing scipy.stats).
    return float(min(1.0, 2 * special.bdtr(min(pos, neg), pos + neg, 0.5)))


def median_interval(d: Sequence[float], alpha: float = ALPHA) -> tuple[float, float]:
    """Distribution-free interval for the median from order statistics: [d(k), d(n−k+1)]."""
    x = np.sort(np.asarray(d, dtype=float))
    n = len(x)
    k = 0
    while k + 1 <= n and special.bdtr(k, n, 0.5) <= alpha / 2:
        k += 1
    if k == 0:
        return -math.inf, math.inf
    return float(x[k - 1]), float(x[n - k])


def benjamini_hochberg(pvalues: Sequence[float], q: float = ALPHA) -> np.ndarray:
    """Which hypotheses BH rejects at false-discovery rate q: the adjusted p (the running minimum,
    from the largest p down, of p·m/rank, capped at 1) is ≤ q — scipy.stats.false_discovery_control's
    values, without importing scipy.stats (a test holds the two equal)."""
    p = np.asarray(pvalues, dtype=float)
    if len(p) == 0:
        return np.zeros(0, dtype=bool)
    # NaN (no test was possible) is never a discovery, and any rounding beyond [0, 1] is clipped
    p = np.where(np.isnan(p), 1.0, np.clip(p, 0.0, 1.0))
    order = np.argsort(p)
    scaled = p[order] * len(p) / np.arange(1, len(p) + 1)
    adjusted = np.empty(len(p))
    adjusted[order] = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    return adjusted <= q


def noise_sigma(d: Sequence[float]) -> float:
    """SD of per-round log-ratios (each round is already a trimmed mean, so one slow sample does not
    move it). Not 1.4826 × MAD: over 16 rounds that reads about 12% low at the median, and the
    resolvable effect printed from it was then found 66% of the time instead of the 80% promised
    (kprof.analysis.simulation); a slow round makes the SD larger, the promise more cautious."""
    x = np.asarray(d, dtype=float)
    return float(np.std(x, ddof=1)) if len(x) > 1 else 0.0


def noise_floor(sigma: float, rounds: int, alpha: float = ALPHA) -> float:
    """95% half-width of an A/A comparison: t(1−α/2, R−1)·σ/√R (log units)."""
    return float(t_quantile(1 - alpha / 2, rounds - 1) * sigma / math.sqrt(rounds)) if rounds > 1 else math.inf


def t_quantile(q: float, df: float) -> float:
    """Student's t quantile (scipy.stats.t.ppf's value, from scipy.special)."""
    return float(special.stdtrit(df, q))


EXACT_POWER_ROUNDS = 64  # up to here the resolvable effect comes from the exact interval itself
POWER_DRAWS = 2000


@dataclass(frozen=True)
class Widening:
    """What a case adds to a leg's rounds-only interval, as the power figures model it: the spread
    between its ``placements`` buffer sets taken as true (``sigma_p``, log units; the A/A's), whether
    the case counts every leg's spread (``case_wide``: the term is then always added, else only where
    the leg's own F-test finds it, as :func:`counted_spreads` does), how many ``legs`` the case's
    placement floor pools (:func:`case_placement`; 0: no floor), and a ``bound`` added to each side
    (A/A bias, timer rounding). Each power draw estimates and tests the spread from its own rounds,
    and pools it with those of ``legs`` − 1 other draws for the floor, so the resolvable effect and
    the rounds for SAME are those of the interval printed: computed with the placement term added
    only where the true spread lies, they promised 80% and delivered 69–73% (the test adds the term
    by chance to one clean leg in five); with the floor fixed at the run's value, 73–75%.
    ``between``: the half-width a known spread between fresh runs adds in quadrature
    (:func:`between_runs_half_width`), the same in every draw."""

    sigma_p: float = 0.0
    placements: int = 0
    bound: float = 0.0
    case_wide: bool = False
    legs: int = 0
    between: float = 0.0

    @classmethod
    def of(
        cls,
        sigma_p: float,
        placements: int,
        bound: float = 0.0,
        case_wide: bool = False,
        legs: int = 0,
        between: float = 0.0,
    ) -> Widening:
        return cls(max(sigma_p, 0.0), placements, bound, case_wide, legs, between)


@dataclass(frozen=True)
class _Draws:
    """POWER_DRAWS standard-normal samples of n rounds, round r in buffer set r mod K: their
    Hodges–Lehmann estimates and exact interval ends (shift- and scale-equivariant, so for rounds
    δ + σ·z they are δ + σ·these), each set's mean of z, the within-set mean square of z, and a
    standard normal per set for where its buffers lie."""

    est: np.ndarray
    low: np.ndarray
    high: np.ndarray
    within: np.ndarray  # (draws,)
    set_means: np.ndarray  # (draws, K)
    placed: np.ndarray  # (draws, K)
    sizes: np.ndarray  # rounds per set (K,)


def _set_sizes(n: int, placements: int) -> np.ndarray:
    return np.bincount(np.arange(n) % max(placements, 1), minlength=max(placements, 1))


@lru_cache(maxsize=128)
def _power_draws(n: int, placements: int, alpha: float = ALPHA) -> _Draws:
    """The draws for n rounds over K placements: exact up to EXACT_POWER_ROUNDS (kept in kprof's
    cache folder: a report asks for up to 59 sizes, 1.7 s to draw on two cores, milliseconds to
    read back), a normal approximation of the same beyond."""
    k = max(placements, 1)
    sizes = _set_sizes(n, k)
    if n > EXACT_POWER_ROUNDS:
        return _normal_draws(n, k, sizes, alpha)
    name = f"power-draws-n{n}-k{k}-alpha{alpha}-draws{POWER_DRAWS}-numpy{np.__version__}"
    rows = cached_array(name, (4 + 2 * k, POWER_DRAWS), lambda: _exact_draws(n, k, sizes, alpha))
    return _Draws(rows[0], rows[1], rows[2], rows[3], rows[4 : 4 + k].T, rows[4 + k :].T, sizes)


def _exact_draws(n: int, k: int, sizes: np.ndarray, alpha: float) -> np.ndarray:
    rng = np.random.default_rng(n)
    z = rng.standard_normal((POWER_DRAWS, n))
    m = n * (n + 1) // 2
    # Walsh averages built a diagonal at a time (contiguous slices, not a fancy index) and sorted in
    # place: the same values as walsh_averages, in half the time.
    w = np.empty((POWER_DRAWS, m))
    at = 0
    for i in range(n):
        np.add(z[:, : n - i], z[:, i:], out=w[:, at : at + n - i])
        at += n - i
    w *= 0.5
    w.sort(axis=1)
    c = walsh_index(n, alpha)
    # copies, not views: a column view would keep all of w (33 MB at 64 rounds) alive
    low = w[:, c - 1].copy() if c else np.full(POWER_DRAWS, -math.inf)
    high = w[:, m - c].copy() if c else np.full(POWER_DRAWS, math.inf)
    median = w[:, [(m - 1) // 2, m // 2]].mean(axis=1)  # the rows are sorted: no second partition
    sets = np.arange(n) % k
    means = np.stack([z[:, sets == j].sum(axis=1) for j in range(k)], axis=1) / np.maximum(sizes, 1)
    within = ((z - means[:, sets]) ** 2).sum(axis=1) / max(n - k, 1)
    return np.vstack([median, low, high, within, means.T, rng.standard_normal((k, POWER_DRAWS))])


def _normal_draws(n: int, k: int, sizes: np.ndarray, alpha: float) -> _Draws:
    """Beyond EXACT_POWER_ROUNDS: set means normal, the within-set mean square χ², the estimate
    their mean and the interval t·1.02/√n about it (the Hodges–Lehmann estimate's efficiency)."""
    rng = np.random.default_rng(n * 1000 + k)
    means = rng.standard_normal((POWER_DRAWS, k)) / np.sqrt(sizes)
    est = 1.02 * (means @ sizes) / n
    half = t_quantile(1 - alpha / 2, n - 1) * 1.02 / math.sqrt(n)
    within = rng.chisquare(max(n - k, 1), POWER_DRAWS) / max(n - k, 1)
    return _Draws(est, est - half, est + half, within, means, rng.standard_normal((POWER_DRAWS, k)), sizes)


def _modelled_rounds(sigma: float, n: int, widening: Widening, alpha: float) -> tuple[np.ndarray, ...]:
    """Per draw, for rounds of SD σ with no effect: the estimate, the distances from it to the
    printed interval's low and high ends. Each draw's sets are placed (SD ``widening.sigma_p``), its
    spread estimated and tested as a run's is, and the placement term added where a run would."""
    k = widening.placements
    draws = _power_draws(n, k, alpha)
    if k < 2 or n <= k:
        b, w = widening.bound, widening.between
        low, high = np.hypot(sigma * (draws.est - draws.low), w), np.hypot(sigma * (draws.high - draws.est), w)
        return _run_moved(sigma * draws.est, w, alpha), low + b, high + b
    shifts = widening.sigma_p * draws.placed
    means = sigma * draws.set_means + shifts
    sizes = draws.sizes
    grand = means @ sizes / n
    ms_between = ((means - grand[:, None]) ** 2) @ sizes / (k - 1)
    ms_within = sigma**2 * draws.within
    with np.errstate(divide="ignore", invalid="ignore"):
        p = special.fdtrc(k - 1, n - k, ms_between / ms_within)
    counted = widening.case_wide | (np.nan_to_num(p, nan=1.0) < PLACEMENT_ALPHA)
    excess = (ms_between - ms_within) / sizes.mean()
    w = np.where(counted, placement_half_width(1.0, k, alpha) * np.sqrt(np.maximum(0.0, excess)), 0.0)
    if widening.legs:  # the case's floor: this draw's excess pooled with the next legs − 1 draws' (other legs)
        pooled = np.mean([np.roll(excess, -i) for i in range(widening.legs)], axis=0)
        w = np.maximum(w, _floor_half_width(np.sqrt(np.maximum(0.0, pooled)), widening.legs, k, alpha))
    w = np.hypot(w, widening.between)
    moved = _run_moved(sigma * draws.est + shifts @ sizes / n, widening.between, alpha)
    return (
        moved,
        np.hypot(sigma * (draws.est - draws.low), w) + widening.bound,
        np.hypot(sigma * (draws.high - draws.est), w) + widening.bound,
    )


def _run_moved(estimates: np.ndarray, between: float, alpha: float) -> np.ndarray:
    """Each draw's estimate moved by its run's own offset, where a spread between fresh runs is
    known (``between``: its half-width, z·SD): the resolvable effect is then found in 80% of fresh
    runs, each with its offset. Fixed normals (seeded), so that a report prints the same figure twice."""
    if between <= 0:
        return estimates
    offsets = np.random.default_rng(len(estimates)).standard_normal(len(estimates))
    return estimates + between / float(special.ndtri(1 - alpha / 2)) * offsets


def minimum_detectable_effect(
    sigma: float,
    rounds: int,
    threshold: float = 0.0,
    alpha: float = ALPHA,
    power: float = 0.8,
    widening: Widening = Widening(),
) -> float:
    """Smallest true shift δ called FASTER (or SLOWER) with probability ``power`` under kprof's rule:
    the printed interval (the exact one, ``widening`` added) must exclude 0 and the estimate reach
    ``threshold``. For normal rounds of SD σ a draw's estimate is δ + m and its low end that less
    its low distance (:func:`_modelled_rounds`): δ is the ``power`` quantile of what each draw needs."""
    if rounds < 2 or walsh_index(min(rounds, EXACT_POWER_ROUNDS), alpha) == 0:
        return math.inf
    moved, below, _ = _modelled_rounds(sigma, rounds, widening, alpha)
    needed = np.maximum(below - moved, threshold - moved)
    return float(np.quantile(needed, power))


def rounds_for_same(
    sigma: float, threshold: float, alpha: float = ALPHA, power: float = 0.8, widening: Widening = Widening()
) -> int | None:
    """Fewest rounds at which a leg with no effect is called SAME with probability ``power``: its
    printed interval lies inside ±threshold, so the run rules out any effect beyond it. None when no
    number of rounds up to EXACT_POWER_ROUNDS does (the widening alone reaches the threshold)."""
    if threshold <= 0 or widening.bound >= threshold:
        return None  # every printed interval is at least 2·bound wide: none fits inside ±threshold

    def enough(rounds: int) -> bool:
        moved, below, above = _modelled_rounds(sigma, rounds, widening, alpha)
        return bool(np.mean((moved - below > -threshold) & (moved + above < threshold)) >= power)

    # more rounds narrow every part of the interval but the bound: a bisection finds the fewest
    # (seven looks, where a scan took up to 59: a report asks this of every case)
    low, high = fewest_rounds(), EXACT_POWER_ROUNDS
    if not enough(high):
        return None
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    return high


def rounds_to_resolve(
    sigma: float, effect: float, alpha: float = ALPHA, threshold: float = 0.0, power: float = 0.8
) -> int | None:
    """Fewest rounds at which a true shift of ``effect`` (log units) is called FASTER or SLOWER with
    probability ``power`` (``minimum_detectable_effect`` at most the effect); None when no number of
    rounds up to EXACT_POWER_ROUNDS does."""
    if not math.isfinite(sigma) or effect <= 0:
        return None

    def enough(rounds: int) -> bool:
        return minimum_detectable_effect(sigma, rounds, threshold, alpha, power) <= effect

    low, high = fewest_rounds(), EXACT_POWER_ROUNDS
    if not enough(high):
        return None
    while low < high:  # the detectable effect shrinks with rounds: a bisection finds the fewest
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    return high


def fewest_rounds(family: int = 1, alpha: float = ALPHA) -> int:
    """Fewest rounds at which the exact signed-rank test can reach a verdict for one comparison
    among ``family`` controlled by Benjamini–Hochberg: its smallest p, 2/2^R, must be ≤ α/family
    (a lone effect). One comparison: 6 rounds (2/64 = 0.031)."""
    r = 1
    while 2.0 / 2**r > alpha / family:
        r += 1
    return r


PLACEMENT_ALPHA = 0.2  # a leg's own between-set spread counts below this F-test p (see placement_spread)


class Spread(NamedTuple):
    """One leg's spread between buffer sets: ``sigma`` (log units, the SD beyond the rounds' noise,
    0 where the sets differ no more than that), the one-way ANOVA's ``p`` that they differ, and
    ``excess``, the between-set variance beyond the rounds' noise before it is cut at 0 (what the
    case's pooled spread averages, so legs without a spread pull the pool down as they should)."""

    sigma: float
    p: float
    excess: float = 0.0


def placement_spread(d: Sequence[float], groups: Sequence[int]) -> Spread:
    """The spread of d between groups (buffer sets: placements) beyond what the rounds' own noise
    explains — one-way random effects by the method of moments, (MS_between − MS_within) / m, m
    the mean group size — and the one-way ANOVA p that the groups differ. Nothing with fewer than
    two groups or no replicate within a group."""
    x, g = np.asarray(d, dtype=float), np.asarray(groups)
    parts = [x[g == label] for label in np.unique(g)]
    k, n = len(parts), len(x)
    if k < 2 or n <= k:
        return Spread(0.0, 1.0)
    means = np.array([p.mean() for p in parts])
    sizes = np.array([len(p) for p in parts])
    ms_between = float((sizes * (means - x.mean()) ** 2).sum() / (k - 1))
    ms_within = float(sum(((p - m) ** 2).sum() for p, m in zip(parts, means)) / (n - k))
    with np.errstate(divide="ignore", invalid="ignore"):  # no spread within: F is inf (or nan if none at all)
        p = float(special.fdtrc(k - 1, n - k, np.float64(ms_between) / ms_within))  # F's survival function
    excess = (ms_between - ms_within) / float(sizes.mean())
    return Spread(math.sqrt(max(0.0, excess)), p if math.isfinite(p) else 1.0, excess)


def counted_spreads(spreads: dict[str, Spread], alpha: float = ALPHA) -> dict[str, float]:
    """Which legs' placement spreads (σ_p, p) are folded into their intervals. All of a case's legs
    where one leg's spread is beyond doubt (Bonferroni over the case's legs at α): buffers that move
    one kernel's time move its neighbours' by amounts four placements cannot test. Otherwise a leg's
    own, where its F-test gives p < PLACEMENT_ALPHA. At α = 0.05 per leg alone the test missed real
    spreads (synthetic runs with placement effects: coverage 86.5–91%; pairs of H200 pr runs: 90.0%
    of estimates inside the other run's rerun interval); counting every positive estimate widened
    clean legs too (the printed resolvable effect was then found 65% of the time). This rule: 91.8–94.5%
    and 92.9% (docs/benchmarks.md, "H200, session 9")."""
    wide = case_wide(spreads, alpha)
    return {leg: s.sigma if wide or s.p < PLACEMENT_ALPHA else 0.0 for leg, s in spreads.items()}


def case_wide(spreads: dict[str, Spread], alpha: float = ALPHA) -> bool:
    """Whether some leg's spread (σ_p, p) is beyond doubt (Bonferroni over the case's legs at α), so
    that every leg's spread is counted (:func:`counted_spreads`)."""
    return bool(spreads) and min(s.p for s in spreads.values()) * len(spreads) < alpha


def placement_half_width(sigma_p: float, placements: int, alpha: float = ALPHA) -> float:
    """What the placement part adds to each side of an interval (in quadrature): t(1−α/2, K−1)·σ_p/√K."""
    return float(t_quantile(1 - alpha / 2, placements - 1) * sigma_p / math.sqrt(placements))


FLOOR_ALPHA_SHARE = 0.1  # the pooled floor is at level 1 − α/10 (99.5% beside the 95% intervals)


@dataclass(frozen=True)
class PlacementTerm:
    """What a leg's interval carries for where its buffers lay: the spread counted for it
    (``sigma``, log units: its own or the case's pooled one, whichever gave the wider term) and
    ``half_width``, what that adds to each side of its interval in quadrature."""

    sigma: float = 0.0
    half_width: float = 0.0


@dataclass(frozen=True)
class CasePlacement:
    """A case's placement terms: each leg's (``terms``), the spread pooled over its legs (``pooled``,
    log units) and how many legs the floor pools (``legs``; 0: no floor, fewer than two placements)."""

    terms: dict[Any, PlacementTerm]
    pooled: float = 0.0
    legs: int = 0


def case_placement(spreads: dict[Any, Spread], placements: int, alpha: float = ALPHA) -> CasePlacement:
    """Each leg's placement term from the case's spreads (:func:`placement_spread`): the larger of
    its own counted spread's term (:func:`counted_spreads`, t(1−α/2, K−1)) and the case's floor,
    counted for every leg: the legs' excess variances between sets averaged (L legs, cut at 0) and
    taken at level 1 − α/10 with t(L·(K−1)).

    Why the floor: a leg's own spread comes from K = 4 set means, 3 degrees of freedom; where those
    four happen to lie close together its estimate is near 0 (or its F-test misses) while their
    mean is as far off as ever. With a 1% spread between sets, null legs were then called FASTER or
    SLOWER 3.7–3.9% of the time in quiet synthetic runs (6.0% in noisy ones); pooled over the
    case's legs the spread is known well enough to bound, and at 99.5% that rate is 0.1–0.5% (1.1%
    noisy, where the rounds alone give 2.1%). The legs share
    the baseline's placements, so the pool has fewer degrees of freedom than L·(K−1) says: at 99%
    it was 0.9%. On the H200, run k+1's estimate fell inside run k's interval 86% of the time,
    now 92% (docs/benchmarks.md, "Placement pooled over a case's legs")."""
    if placements < 2 or not spreads:
        return CasePlacement({leg: PlacementTerm() for leg in spreads})
    pooled = pooled_spread(spreads)
    floor = float(_floor_half_width(pooled, len(spreads), placements, alpha))
    terms = {}
    for leg, own in counted_spreads(spreads, alpha).items():
        w = placement_half_width(own, placements, alpha)
        terms[leg] = PlacementTerm(own, w) if w >= floor else PlacementTerm(pooled, floor)
    return CasePlacement(terms, pooled, len(spreads))


def _floor_half_width(pooled: Any, legs: int, placements: int, alpha: float) -> Any:
    """The floor's half-width for a spread pooled over ``legs`` legs: t(1 − α/20, L·(K−1))·σ_pool/√K."""
    return t_quantile(1 - alpha * FLOOR_ALPHA_SHARE / 2, legs * (placements - 1)) * pooled / math.sqrt(placements)


def pooled_spread(spreads: dict[Any, Spread]) -> float:
    """The case's spread between buffer sets (log units): its legs' excess variances averaged, cut at 0."""
    return math.sqrt(max(0.0, sum(s.excess for s in spreads.values()) / len(spreads))) if spreads else 0.0


def between_runs_half_width(sigma_pct: float, weight: float = 1.0, alpha: float = ALPHA) -> float:
    """What a known spread between fresh runs adds to each side of an interval, in quadrature (log
    units): z(1 − α/2)·σ·w, with ``sigma_pct`` the SD of one leg's effect between runs (percent of
    time) and ``weight`` the quantity's size in such effects (1 for a leg against its baseline;
    √(Σw²/2) for a combination Σ w·ln t of legs whose offsets are independent). No run can see
    this spread from inside: every round of a run shares it, so it comes from fresh runs measured
    before (``kprof run --between-runs``). Known, not estimated: the normal quantile."""
    if sigma_pct <= 0:
        return 0.0
    return float(special.ndtri(1 - alpha / 2) * math.log1p(sigma_pct / 100) * weight)


def with_placement(effect: Effect, half_width: float) -> Effect:
    """The interval widened by the placement term (:func:`case_placement`) added in quadrature to
    each side, so it covers the effect averaged over where buffers may lie, not only over these K."""
    if half_width <= 0:
        return effect
    low = effect.estimate - math.hypot(effect.estimate - effect.low, half_width)
    high = effect.estimate + math.hypot(effect.high - effect.estimate, half_width)
    return Effect(effect.rounds, effect.estimate, low, high, effect.p, effect.p_sign, effect.verdict)


def with_bias_bound(effect: Effect, bound: float) -> Effect:
    """The interval widened by ``bound`` (log units) on each side: a bias of up to that size, of
    either sign, which the case's A/A control showed (kprof.analysis.run_effects.bias_bound)."""
    if bound <= 0:
        return effect
    return Effect(effect.rounds, effect.estimate, effect.low - bound, effect.high + bound, effect.p, effect.p_sign)


def to_pct(d: float) -> float:
    """Log-ratio ln(t_leg/t_ref) → effect in percent, positive = faster."""
    return 100.0 * (math.exp(-d) - 1.0) if math.isfinite(d) else (-math.inf if d > 0 else math.inf)


@dataclass(frozen=True)
class Effect:
    """One comparison (leg vs reference, or a derived per-round quantity) with its verdict."""

    rounds: int
    estimate: float  # Hodges–Lehmann, log units (ln t_leg/t_ref)
    low: float
    high: float
    p: float
    p_sign: float
    verdict: str = "UNRESOLVED"

    @property
    def effect_pct(self) -> float:
        return to_pct(self.estimate)

    @property
    def ci_low_pct(self) -> float:  # the faster end of the log interval is its low end
        return to_pct(self.high)

    @property
    def ci_high_pct(self) -> float:
        return to_pct(self.low)

    @property
    def rerun_low_pct(self) -> float:
        """Where a fresh run's estimate lands (95%): the interval widened √2 about the estimate, since
        both runs' estimates vary; the interval itself holds another run's estimate only ~83% of
        the time even when it is exact."""
        return to_pct(self.estimate + math.sqrt(2) * (self.high - self.estimate))

    @property
    def rerun_high_pct(self) -> float:
        return to_pct(self.estimate - math.sqrt(2) * (self.estimate - self.low))

    def row(self) -> dict[str, Any]:
        """The columns every result table carries for an effect (EFFECT_COLUMNS)."""
        return dict(
            effect_pct=self.effect_pct,
            ci_low_pct=self.ci_low_pct,
            ci_high_pct=self.ci_high_pct,
            rerun_low_pct=self.rerun_low_pct,
            rerun_high_pct=self.rerun_high_pct,
            p=self.p,
            verdict=self.verdict,
        )


EFFECT_COLUMNS = ("effect_pct", "ci_low_pct", "ci_high_pct", "rerun_low_pct", "rerun_high_pct", "p", "verdict")


def estimate(d: Sequence[float], alpha: float = ALPHA) -> Effect:
    x = np.asarray(d, dtype=float)
    hl, lo, hi = hodges_lehmann(x, alpha)
    return Effect(len(x), hl, lo, hi, wilcoxon_p(x), sign_test_p(x))


def verdict(effect: Effect, threshold: float) -> str:
    """FASTER / SLOWER when the interval excludes 0 and |estimate| ≥ threshold; SAME when the whole
    interval lies inside ±threshold (equivalence); UNRESOLVED otherwise. ``threshold`` in log units:
    the user's practical threshold, never widened by the noise (a noisy run says UNRESOLVED)."""
    if -threshold < effect.low and effect.high < threshold:
        return "SAME"
    excludes_zero = effect.low > 0 or effect.high < 0
    if excludes_zero and abs(effect.estimate) >= threshold:
        return "FASTER" if effect.estimate < 0 else "SLOWER"
    return "UNRESOLVED"


def with_verdict(effect: Effect, threshold: float) -> Effect:
    return Effect(
        effect.rounds,
        effect.estimate,
        effect.low,
        effect.high,
        effect.p,
        effect.p_sign,
        verdict(effect, threshold),
    )


def pct_threshold_to_log(pct: float) -> float:
    """A practical threshold in percent (0.5) → log units, symmetric: ln(1 + pct/100)."""
    return math.log1p(pct / 100.0)


# --- attribution over lever subsets ------------------------------------------------------------


def shapley(values: np.ndarray, n: int) -> np.ndarray:
    """Exact Shapley values from v(S) for every subset S, indexed by bitmask (lever i ↔ bit i).

    ``values`` has shape (2**n,) or (rounds, 2**n); v(∅) is values[..., 0]. The result sums to
    v(N) − v(∅) over levers (efficiency).
    """
    v = np.asarray(values, dtype=float)
    out = np.zeros(v.shape[:-1] + (n,))
    fact = [math.factorial(k) for k in range(n + 1)]
    for i in range(n):
        bit = 1 << i
        for s in range(1 << n):
            if s & bit:
                continue
            size = bin(s).count("1")
            weight = fact[size] * fact[n - size - 1] / fact[n]
            out[..., i] += weight * (v[..., s | bit] - v[..., s])
    return out


def factorial_effects(values: np.ndarray, n: int) -> tuple[np.ndarray, dict[tuple[int, int], np.ndarray]]:
    """±1-coded 2^n main effects E_i = mean(y|on) − mean(y|off) and two-way interactions E_ij."""
    y = np.asarray(values, dtype=float)
    masks = np.arange(1 << n)
    x = np.array([np.where(masks & (1 << i), 1.0, -1.0) for i in range(n)])  # [n, 2^n]
    scale = 2.0 / (1 << n)
    main = scale * (y @ x.T)
    inter = {(i, j): scale * (y @ (x[i] * x[j])) for i, j in combinations(range(n), 2)}
    return main, inter


def trend_test(blocks: np.ndarray) -> float:
    """Page's L test for an ordered trend across doses (columns) with rounds as blocks (rows)."""
    data = np.asarray(blocks, dtype=float)
    if data.shape[0] < 2 or data.shape[1] < 3:
        return 1.0
    from scipy import stats

    increasing = stats.page_trend_test(data).pvalue
    decreasing = stats.page_trend_test(data[:, ::-1]).pvalue
    return float(min(1.0, 2 * min(increasing, decreasing)))


# --- two independent samples (runs or traces of A vs B, no pairing) ---------------------------


def welch(la: Sequence[float], lb: Sequence[float], alpha: float = ALPHA) -> Effect:
    """Shift of the mean of ``lb`` against the mean of ``la`` (both already logs: one value per
    fresh run), with Welch's t interval and p. Fewer than two values on a side give no interval
    ((−inf, inf), p 1): one run says nothing about how runs differ."""
    a, b = np.asarray(la, dtype=float), np.asarray(lb, dtype=float)
    est = float(b.mean() - a.mean()) if len(a) and len(b) else math.nan
    if len(a) < 2 or len(b) < 2:
        return Effect(rounds=min(len(a), len(b)), estimate=est, low=-math.inf, high=math.inf, p=1.0, p_sign=math.nan)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0.0:  # identical runs to the last digit: the shift is exact
        p = 1.0 if est == 0.0 else 0.0
        return Effect(rounds=min(len(a), len(b)), estimate=est, low=est, high=est, p=p, p_sign=math.nan)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = float(special.stdtrit(df, 1 - alpha / 2)) * se
    p = float(2 * special.stdtr(df, -abs(est) / se))
    return Effect(rounds=min(len(a), len(b)), estimate=est, low=est - half, high=est + half, p=p, p_sign=math.nan)


def two_sample(a: Sequence[float], b: Sequence[float], alpha: float = ALPHA) -> Effect:
    """Shift of ln b against ln a: Hodges–Lehmann (median of pairwise differences) with Lehmann's
    distribution-free interval and the Mann–Whitney p. The interval is (−inf, inf) when the samples
    are too small to reach level 1 − α (3 against 3 cannot)."""
    la, lb = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    diffs = np.sort((lb[None, :] - la[:, None]).ravel())
    est = float(np.median(diffs))
    n, m = len(la), len(lb)
    z = special.ndtri(1 - alpha / 2)
    k = int(math.floor(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12.0)))
    lo, hi = (float(diffs[k - 1]), float(diffs[len(diffs) - k])) if k >= 1 else (-math.inf, math.inf)
    from scipy import stats

    p = float(stats.mannwhitneyu(lb, la, alternative="two-sided").pvalue) if n and m else 1.0
    if math.isnan(p):  # every value tied across both samples: scipy 1.18 gives NaN (no variance), no shift
        p = 1.0
    return Effect(rounds=min(n, m), estimate=est, low=lo, high=hi, p=p, p_sign=float("nan"))
