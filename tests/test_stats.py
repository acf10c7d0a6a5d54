"""Statistics against published test vectors, scipy, and brute force."""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from kprof.analysis import stats as S

D = [0.012, 0.008, -0.003, 0.015, 0.011, 0.009, 0.004, 0.013, 0.010, 0.007]


def test_reference_vector_hl_and_intervals() -> None:
    hl, lo, hi = S.hodges_lehmann(D)
    assert hl == pytest.approx(0.0095)
    assert (lo, hi) == pytest.approx((0.0045, 0.012))
    assert S.median_interval(D) == pytest.approx((0.004, 0.013))
    assert S.sign_test_p(D) == pytest.approx(0.021484375)
    assert S.sign_test_p([1, 2, 3, 4, 5]) == pytest.approx(0.0625)


@pytest.mark.parametrize(("n", "c"), [(8, 4), (10, 9), (12, 14), (16, 30), (20, 53), (30, 138)])
def test_walsh_index(n: int, c: int) -> None:
    assert S.walsh_index(n) == c


def test_no_95_interval_below_six_rounds() -> None:
    assert S.walsh_index(5) == 0
    assert S.hodges_lehmann([1, 2, 3, 4, 5])[1:] == (-math.inf, math.inf)
    assert S.median_interval([1, 2, 3, 4, 5]) == (-math.inf, math.inf)


def test_null_distribution_by_brute_force() -> None:
    n = 7
    counts = np.zeros(n * (n + 1) // 2 + 1)
    for signs in product([0, 1], repeat=n):
        counts[sum(r + 1 for r, s in enumerate(signs) if s)] += 1
    assert np.allclose(S.signed_rank_null(n), counts / 2**n)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(-1, 1, allow_nan=False).filter(lambda v: abs(v) > 1e-6), min_size=6, max_size=25, unique=True)
)
def test_wilcoxon_matches_exact_null_and_interval_agrees_with_test(d: list[float]) -> None:
    x = np.array(d)
    if len(np.unique(np.abs(x))) < len(x):
        return  # ties in |d|: exact null does not apply
    ranks = sps.rankdata(np.abs(x))
    t_plus = ranks[x > 0].sum()
    null = S.signed_rank_null(len(x))
    lower = null[: int(t_plus) + 1].sum()
    upper = null[int(t_plus) :].sum()
    assert S.wilcoxon_p(x) == pytest.approx(min(1.0, 2 * min(lower, upper)), rel=1e-9)
    _, lo, hi = S.hodges_lehmann(x)
    # Duality: the interval excludes 0 exactly when the exact test rejects at the interval's own level.
    c = S.walsh_index(len(x))
    attained = 2 * null[:c].sum()
    assert (lo > 0 or hi < 0) == (S.wilcoxon_p(x) <= attained + 1e-12)


@pytest.mark.slow  # scipy.stats against every exact table (16 s on two cores: the default suite's 5 minutes)
def test_p_values_and_quantiles_are_scipys() -> None:
    """kprof computes the signed-rank p (exact, or normal with the tie correction), the sign test,
    BH and the t/F/normal tails without scipy.stats (1.4 s to import): the values must be scipy's,
    over tied, zero-holding, small and large samples."""
    rng = np.random.default_rng(7)
    for trial in range(600):
        n = int(rng.integers(1, 80))
        x = rng.standard_normal(n) + rng.uniform(-1, 1)
        if trial % 2:
            x = np.round(x, 1)  # ties, as timer ticks make them
        if trial % 5 == 0:
            x[: min(3, n)] = 0.0
        if np.all(x == 0):
            continue
        assert S.wilcoxon_p(x) == pytest.approx(sps.wilcoxon(x, zero_method="wilcox").pvalue, rel=1e-12, abs=1e-300)
        pos, neg = int((x > 0).sum()), int((x < 0).sum())
        assert S.sign_test_p(x) == pytest.approx(sps.binomtest(pos, pos + neg, 0.5).pvalue, rel=1e-12)
        p = rng.uniform(0, 1, n) ** 3
        p[: n // 3] = p[0]  # tied p-values
        assert (S.benjamini_hochberg(p) == (sps.false_discovery_control(p, method="bh") <= S.ALPHA)).all()
    for df in (1, 5, 15, 63):
        assert S.t_quantile(0.975, df) == pytest.approx(sps.t.ppf(0.975, df), rel=1e-14)
    assert S.placement_spread([0, 0.1, 1, 1.1, 2, 2.2], [0, 0, 1, 1, 2, 2])[1] == pytest.approx(
        sps.f_oneway([0, 0.1], [1, 1.1], [2, 2.2]).pvalue, rel=1e-12
    )


def test_interval_coverage_by_simulation() -> None:
    rng = np.random.default_rng(0)
    hits = sum(
        lo <= 0.003 <= hi
        for lo, hi in (S.hodges_lehmann(0.003 + 0.01 * rng.standard_t(3, 16))[1:] for _ in range(2000))
    )
    assert 0.93 <= hits / 2000 <= 0.98


def test_benjamini_hochberg_vector() -> None:
    assert S.benjamini_hochberg([0.001, 0.01, 0.02, 0.04, 0.2]).tolist() == [True, True, True, True, False]


def test_tied_samples_and_nan_p_values_are_no_discovery(monkeypatch) -> None:
    """scipy 1.18 gives Mann–Whitney p = NaN when every value of both samples is tied (two identical
    traces), and its BH refuses NaN: kprof compare crashed there. Tied samples mean no shift."""
    assert not S.benjamini_hochberg([float("nan"), 1.0 + 1e-15]).any()
    assert S.benjamini_hochberg([float("nan"), 1e-6]).tolist() == [False, True]

    class NoVariance:
        pvalue = float("nan")

    monkeypatch.setattr(sps, "mannwhitneyu", lambda *a, **k: NoVariance())
    effect = S.two_sample([2.0] * 6, [2.0] * 6)
    assert effect.p == 1.0 and effect.estimate == 0.0


def test_shapley_two_and_three_levers() -> None:
    v2 = np.array([0.0, -0.10, -0.02, -0.15])  # bitmask order: ∅, {0}, {1}, {0,1}
    assert S.shapley(v2, 2) == pytest.approx([-0.115, -0.035])
    v3 = np.zeros(8)
    for subset, value in {
        (0,): -0.05,
        (1,): 0.01,
        (2,): -0.02,
        (0, 1): -0.06,
        (0, 2): -0.08,
        (1, 2): -0.01,
        (0, 1, 2): -0.10,
    }.items():
        v3[sum(1 << i for i in subset)] = value
    phi = S.shapley(v3, 3)
    assert phi == pytest.approx([-0.068333, -0.003333, -0.028333], abs=1e-6)
    assert phi.sum() == pytest.approx(-0.10)
    main, inter = S.factorial_effects(v3, 3)
    assert main == pytest.approx([-0.0675, -0.0025, -0.0275])
    assert inter[(0, 1)] == pytest.approx(-0.0125)
    assert inter[(0, 2)] == pytest.approx(-0.0075)
    assert inter[(1, 2)] == pytest.approx(-0.0025)


def test_shapley_per_round_rows() -> None:
    rows = np.array([[0.0, -0.10, -0.02, -0.15], [0.0, -0.2, 0.0, -0.2]])
    assert S.shapley(rows, 2) == pytest.approx(np.array([[-0.115, -0.035], [-0.2, 0.0]]))


def test_sign_convention_and_verdicts() -> None:
    faster = S.estimate(np.log(np.full(16, 0.98)) + np.linspace(-1e-3, 1e-3, 16))
    assert faster.effect_pct == pytest.approx(100 * (1 / 0.98 - 1), rel=1e-3)
    assert faster.ci_low_pct <= faster.effect_pct <= faster.ci_high_pct
    thr = S.pct_threshold_to_log(0.5)
    assert S.verdict(faster, thr) == "FASTER"
    slower = S.estimate(np.log(np.full(16, 1.03)) + np.linspace(-1e-3, 1e-3, 16))
    assert S.verdict(slower, thr) == "SLOWER" and slower.effect_pct < 0
    same = S.estimate(np.linspace(-1e-3, 1e-3, 16))
    assert S.verdict(same, thr) == "SAME"
    noisy = S.estimate(np.linspace(-0.05, 0.05, 16))
    assert S.verdict(noisy, thr) == "UNRESOLVED"
    tiny = S.estimate(np.full(16, 0.001) + np.linspace(-1e-4, 1e-4, 16))  # real but below threshold
    assert S.verdict(tiny, thr) == "SAME"


def test_resolution_formulas_match_the_table() -> None:
    # paired-t power arithmetic: at R = 16, h/σ = 0.53 and MDE/σ = 0.75 (paired t, before the Wilcoxon factor).
    assert S.noise_floor(1.0, 16) == pytest.approx(0.53, abs=0.01)
    # the exact interval's power is close to the paired t's (0.75·1.02 = 0.77 at R = 16), a little wider
    assert 0.74 <= S.minimum_detectable_effect(1.0, 16) <= 0.82
    assert S.noise_sigma([0.0, 1.0, -1.0, 0.5, -0.5]) > 0
    assert S.minimum_detectable_effect(1.0, 5) == math.inf  # no 95% interval below 6 rounds


@pytest.mark.parametrize(("rounds", "threshold"), [(8, 0.0), (16, 0.0), (16, 1.0), (40, 0.2)])
def test_the_resolvable_effect_is_called_80_percent_of_the_time(rounds: int, threshold: float) -> None:
    """Brute force, on draws the formula never saw: normal rounds shifted by the printed effect are
    called (interval excludes 0, estimate past the threshold) in about 80% of samples."""
    delta = S.minimum_detectable_effect(1.0, rounds, threshold)
    d = delta + np.random.default_rng(99).standard_normal((1500, rounds))
    called = [est >= threshold and low > 0 for est, low, _ in map(S.hodges_lehmann, d)]
    assert 0.77 <= np.mean(called) <= 0.83


def _placed_as_a_run(legs: np.ndarray, k: int) -> S.Effect:
    """The first leg's interval as a run prints it, from its case's legs' rounds (legs × rounds):
    its own spread where its F-test counts it, at least the floor pooled over the legs."""
    sets = np.arange(legs.shape[1]) % k
    case = S.case_placement({i: S.placement_spread(d, sets) for i, d in enumerate(legs)}, k)
    return S.with_placement(S.estimate(legs[0]), case.terms[0].half_width)


@pytest.mark.parametrize("legs", [2, 6])
def test_the_resolvable_effect_counts_the_placement_test_of_clean_legs(legs: int) -> None:
    """Brute force with four buffer sets and no true spread: a run adds the placement term where a
    leg's F-test gives p < 0.2 (one clean leg in five), and every leg carries the case's floor,
    pooled over its legs, so the printed figure must count those draws too; computed for the
    rounds-only interval it was called 69–73% of the time, not 80%."""
    rounds, k = 16, 4
    delta = S.minimum_detectable_effect(1.0, rounds, 0.0, widening=S.Widening.of(0.0, k, legs=legs))
    assert delta > S.minimum_detectable_effect(1.0, rounds, 0.0, widening=S.Widening.of(0.0, k))
    rng = np.random.default_rng(7)
    called = [_placed_as_a_run(delta + rng.standard_normal((legs, rounds)), k).low > 0 for _ in range(1500)]
    assert 0.77 <= np.mean(called) <= 0.83


@pytest.mark.parametrize("legs", [2, 6])
def test_the_rounds_for_same_count_the_placement_test_of_clean_legs(legs: int) -> None:
    """The same for the footer's rounds at which a leg with no effect reads SAME 80% of the time."""
    k, threshold = 4, 1.0
    rounds = S.rounds_for_same(1.0, threshold, widening=S.Widening.of(0.0, k, legs=legs))
    assert rounds is not None and rounds > S.rounds_for_same(1.0, threshold)
    rng = np.random.default_rng(8)
    same = []
    for _ in range(1500):
        effect = _placed_as_a_run(rng.standard_normal((legs, rounds)), k)
        same.append(-threshold < effect.low and effect.high < threshold)
    assert 0.77 <= np.mean(same) <= 0.86


def test_fewest_rounds_for_a_verdict() -> None:
    assert S.fewest_rounds() == 6  # 2/2^6 = 0.031 ≤ 0.05
    assert S.fewest_rounds(8) == 9  # a lone value in a sweep of 8: 2/2^9 ≤ 0.05/8 < 2/2^8


def test_trend_test_detects_ordered_doses() -> None:
    rng = np.random.default_rng(1)
    rising = np.arange(5)[None, :] * 0.01 + 0.001 * rng.standard_normal((16, 5))
    assert S.trend_test(rising) < 1e-4
    flat = 0.001 * rng.standard_normal((16, 5))
    assert S.trend_test(flat) > 0.01


def test_two_sample_shift_and_interval() -> None:
    rng = np.random.default_rng(5)
    a = np.exp(rng.normal(0.0, 0.01, 20))
    b = np.exp(rng.normal(0.05, 0.01, 20))
    eff = S.two_sample(a, b)
    assert eff.estimate == pytest.approx(0.05, abs=0.01)
    assert eff.low < 0.05 < eff.high and eff.low > 0
    assert eff.p < 1e-6
    small = S.two_sample([1.0, 1.1, 1.2], [1.3, 1.4, 1.5])
    assert (small.low, small.high) == (-math.inf, math.inf)


def test_an_effect_row_has_the_rerun_interval_around_its_interval() -> None:
    """The rerun interval is the interval widened √2 about the estimate in log time: it holds the
    interval, and the columns are the ones every table expects."""
    import math

    import numpy as np

    from kprof.analysis import stats as S

    e = S.estimate(np.random.default_rng(0).normal(-0.01, 0.002, 16))
    row = e.row()
    assert tuple(row) == S.EFFECT_COLUMNS
    assert row["rerun_low_pct"] < row["ci_low_pct"] < row["effect_pct"] < row["ci_high_pct"] < row["rerun_high_pct"]
    lg = lambda p: math.log1p(p / 100)  # noqa: E731
    assert lg(row["rerun_high_pct"]) - lg(row["effect_pct"]) == pytest.approx(
        math.sqrt(2) * (lg(row["ci_high_pct"]) - lg(row["effect_pct"]))
    )


def test_timer_quantum_sees_the_tick_through_one_ns_rounding() -> None:
    """Kernel times on an H200 come in 32 ns ticks read ±1 ns: the quantum is 32, not 1."""
    import pandas as pd

    from kprof.analysis.run_effects import timer_quantum

    rng = np.random.default_rng(0)
    ticks = 5760 + 32 * rng.integers(0, 4, 400) + rng.integers(-1, 2, 400)
    samples = pd.DataFrame({"time_ns": ticks.astype(float), "timer": "cuda-kernel-time"})
    assert timer_quantum(samples) == pytest.approx(32, abs=1.5)
    host = samples.assign(timer="host-clock")
    assert timer_quantum(host) is None


def test_welch_matches_scipys_unequal_variance_t_test() -> None:
    """kprof's Welch interval (scipy.special only, to keep scipy.stats out of start-up) against
    scipy.stats.ttest_ind(equal_var=False): estimate, 95% interval and p."""
    from scipy import stats

    rng = np.random.default_rng(5)
    for na, nb in ((2, 2), (3, 5), (6, 4)):
        la, lb = rng.normal(0, 0.004, na), rng.normal(0.003, 0.008, nb)
        ours = S.welch(la, lb)
        ref = stats.ttest_ind(lb, la, equal_var=False)
        ci = ref.confidence_interval(0.95)
        assert ours.estimate == pytest.approx(lb.mean() - la.mean())
        assert (ours.low, ours.high) == (pytest.approx(ci.low), pytest.approx(ci.high))
        assert ours.p == pytest.approx(ref.pvalue)
    assert S.welch([0.01], [0.02, 0.03]).low == -np.inf  # one run: no interval
