"""The statistics of `evalstore compare` / `correlate` against scipy, statsmodels and textbook cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from evalstore.statistics import significance as sig


def _monte_carlo_bound(p: float, resamples: int) -> float:
    """Five standard errors of a Monte Carlo p-value, plus the (b+1)/(R+1) offset."""
    return 5 * np.sqrt(max(p * (1 - p), 1e-4) / resamples) + 2 / resamples


@pytest.fixture
def diffs() -> np.ndarray:
    """Per-topic differences of several pairs: small and large effects, ties (zeros) and a dead heat."""
    rng = np.random.default_rng(7)
    rows = rng.normal(loc=[[0.0], [0.02], [0.05], [0.1], [-0.03]], scale=0.15, size=(5, 40))
    rows = np.round(rows, 2)  # trec-like values: ties and zero differences occur
    rows[2, :6] = 0.0
    return rows


def test_t_test_equals_scipy_paired_t(diffs: np.ndarray) -> None:
    outcome = sig.paired_test(diffs, "t")
    rng = np.random.default_rng(1)
    base = rng.random(diffs.shape)
    for row in range(len(diffs)):
        expected = stats.ttest_rel(base[row] + diffs[row], base[row])
        assert outcome.statistic[row] == pytest.approx(expected.statistic, rel=1e-9)
        assert outcome.p_value[row] == pytest.approx(expected.pvalue, rel=1e-9, abs=1e-12)
        low, high = stats.ttest_1samp(diffs[row], 0.0).confidence_interval(0.95)
        assert (outcome.ci_low[row], outcome.ci_high[row]) == pytest.approx((low, high), rel=1e-9)


def test_wilcoxon_equals_scipy_per_pair(diffs: np.ndarray) -> None:
    outcome = sig.paired_test(diffs, "wilcoxon")
    for row in range(len(diffs)):
        expected = stats.wilcoxon(diffs[row])
        assert outcome.statistic[row] == expected.statistic
        assert outcome.p_value[row] == pytest.approx(expected.pvalue, rel=1e-9)


def test_sign_test_equals_scipy_binomtest(diffs: np.ndarray) -> None:
    balanced = np.array([[1.0, -1.0, 0.0, 2.0, -2.0, 0.0]])  # wins == losses
    one_sided = np.array([[0.1] * 9 + [-0.1]])
    for matrix in (diffs, balanced, one_sided):
        outcome = sig.paired_test(matrix, "sign")
        for row in range(len(matrix)):
            wins, losses = int((matrix[row] > 0).sum()), int((matrix[row] < 0).sum())
            expected = stats.binomtest(wins, wins + losses, 0.5).pvalue
            assert outcome.p_value[row] == pytest.approx(expected, rel=1e-9)
            assert outcome.statistic[row] == wins


def test_randomization_agrees_with_scipy_exact_permutation_test() -> None:
    # 12 topics: scipy enumerates all 2^12 sign flips (the exact p-value); ours samples them
    rng = np.random.default_rng(3)
    matrix = np.round(rng.normal(loc=[[0.0], [0.08], [0.2]], scale=0.2, size=(3, 12)), 3)
    resamples = 20_000
    outcome = sig.paired_test(matrix, "randomization", resamples=resamples, rng=np.random.default_rng(11))
    for row in range(len(matrix)):
        exact = stats.permutation_test((matrix[row],), np.mean, permutation_type="samples", n_resamples=np.inf).pvalue
        assert abs(outcome.p_value[row] - exact) < _monte_carlo_bound(exact, resamples)
        assert outcome.statistic[row] == pytest.approx(matrix[row].mean())


def test_randomization_p_value_counts_the_observed_labelling() -> None:
    """p = (b + 1) / (R + 1): a constant positive difference is matched only by the all-plus and
    all-minus labellings, and never reaches 0."""
    outcome = sig.paired_test(np.full((1, 30), 0.1), "randomization", resamples=999, rng=np.random.default_rng(0))
    assert outcome.p_value[0] == pytest.approx(1 / 1000)


def test_bootstrap_agrees_with_scipy_bootstrap(diffs: np.ndarray) -> None:
    resamples = 20_000
    outcome = sig.paired_test(diffs, "bootstrap", resamples=resamples, rng=np.random.default_rng(5))
    for row in range(len(diffs)):
        reference = stats.bootstrap(
            (diffs[row],), np.mean, n_resamples=resamples, method="percentile", random_state=np.random.default_rng(6)
        )
        spread = reference.standard_error
        assert outcome.ci_low[row] == pytest.approx(reference.confidence_interval.low, abs=0.1 * spread)
        assert outcome.ci_high[row] == pytest.approx(reference.confidence_interval.high, abs=0.1 * spread)
        # the shift-method p-value from scipy's bootstrap distribution
        observed = diffs[row].mean()
        distribution = reference.bootstrap_distribution
        expected = ((np.abs(distribution - observed) >= abs(observed)).sum() + 1) / (resamples + 1)
        assert abs(outcome.p_value[row] - expected) < 2 * _monte_carlo_bound(expected, resamples)


@pytest.mark.parametrize("test", ["randomization", "bootstrap"])
def test_same_seed_same_output(diffs: np.ndarray, test: str) -> None:
    first = sig.paired_test(diffs, test, resamples=500, rng=np.random.default_rng(42))
    again = sig.paired_test(diffs, test, resamples=500, rng=np.random.default_rng(42))
    other = sig.paired_test(diffs, test, resamples=500, rng=np.random.default_rng(43))
    assert np.array_equal(first.p_value, again.p_value)
    assert np.array_equal(first.ci_low, again.ci_low)
    assert not np.array_equal(first.p_value, other.p_value)


def test_resampling_without_a_seed_is_refused(diffs: np.ndarray) -> None:
    with pytest.raises(ValueError, match="needs a random generator"):
        sig.paired_test(diffs, "randomization")


def test_identical_systems_and_constant_differences() -> None:
    matrix = np.array([[0.0] * 10, [0.2] * 10])
    for test in sig.TESTS:
        outcome = sig.paired_test(matrix, test, resamples=200, rng=np.random.default_rng(0))
        assert outcome.p_value[0] == 1.0, test
        assert outcome.p_value[1] < 0.01, test
    assert sig.effect_size(matrix).tolist() == [0.0, np.inf]


def test_effect_size_is_mean_over_standard_deviation(diffs: np.ndarray) -> None:
    assert sig.effect_size(diffs) == pytest.approx(diffs.mean(axis=1) / diffs.std(axis=1, ddof=1))


def test_wins_ties_losses() -> None:
    wins, ties, losses = sig.wins_ties_losses(np.array([[0.1, 0.0, -0.2, 0.3, 0.0]]))
    assert (wins[0], ties[0], losses[0]) == (2, 2, 1)


def test_corrections_textbook_and_statsmodels() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.005])
    assert sig.correct(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.02])
    # Holm: sorted 0.005*4, 0.01*3, 0.03*2, 0.04*1, made monotone
    assert sig.correct(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # Benjamini-Hochberg: p_(i) * m / i, made monotone from the largest
    assert sig.correct(p, "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert sig.correct(p, "none") == pytest.approx(p)
    # Hochberg: p_(i) * (m - i + 1), made monotone stepping up from the largest: 0.04, min(0.06,
    # 0.04), min(0.03, 0.04), min(0.02, 0.03)
    assert sig.correct(p, "hochberg") == pytest.approx([0.03, 0.04, 0.04, 0.02])
    # Sidak: 1 - (1 - p)^m
    assert sig.correct(p, "sidak") == pytest.approx(1 - (1 - p) ** 4)
    # Benjamini-Yekutieli: BH times sum(1/i) = 1 + 1/2 + 1/3 + 1/4
    assert sig.correct(p, "by") == pytest.approx(np.minimum(1, np.array([0.02, 0.04, 0.04, 0.02]) * 25 / 12))
    with pytest.raises(ValueError, match="unknown correction"):
        sig.correct(p, "tukey")


def _two_way_residual_mse(scores: np.ndarray) -> tuple[float, float]:
    """statsmodels' two-way ANOVA (system + topic, no interaction): residual mean square and df."""
    import pandas as pd
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    k, n = scores.shape
    frame = pd.DataFrame(
        {
            "score": scores.ravel(),
            "system": np.repeat(np.arange(k), n).astype(str),
            "topic": np.tile(np.arange(n), k).astype(str),
        }
    )
    table = anova_lm(smf.ols("score ~ C(system) + C(topic)", data=frame).fit())
    residual = table.loc["Residual"]
    return float(residual["sum_sq"] / residual["df"]), float(residual["df"])


def test_tukey_hsd_uses_the_two_way_error_term() -> None:
    rng = np.random.default_rng(2)
    scores = rng.random((4, 25)) * 0.3 + rng.random(25)[None, :] + np.array([[0.0], [0.05], [0.1], [0.2]])
    outcome = sig.tukey_hsd(scores)
    mse, df = _two_way_residual_mse(scores)
    assert outcome.mse == pytest.approx(mse, rel=1e-9)
    assert outcome.df == df
    means = scores.mean(axis=1)
    for index, (i, j) in enumerate(outcome.pairs):
        q = abs(means[i] - means[j]) / np.sqrt(mse / 25)
        assert outcome.statistic[index] == pytest.approx(q, rel=1e-9)
        assert outcome.p_value[index] == pytest.approx(stats.studentized_range.sf(q, 4, df), rel=1e-6, abs=1e-12)
        assert outcome.ci_low[index] < means[i] - means[j] < outcome.ci_high[index]


def test_tukey_hsd_blocks_topic_difficulty() -> None:
    """Adding a per-topic constant to every system changes nothing (one-way Tukey would drown)."""
    rng = np.random.default_rng(4)
    scores = rng.random((3, 30)) * 0.2 + np.array([[0.0], [0.03], [0.08]])
    harder = scores + rng.random(30)[None, :] * 5
    assert sig.tukey_hsd(harder).p_value == pytest.approx(sig.tukey_hsd(scores).p_value, rel=1e-6)
    one_way = stats.tukey_hsd(*harder).pvalue
    assert one_way[0, 2] > 0.5 > sig.tukey_hsd(harder).p_value[1]


@pytest.mark.parametrize("seed", [1, 5, 9])
def test_tukey_hsd_different_finds_the_pairs_whose_p_value_is_below_alpha(seed: int) -> None:
    """One quantile of the studentized range decides every pair as the per-pair p-values do."""
    rng = np.random.default_rng(seed)
    scores = rng.random((8, 20)) * 0.3 + np.linspace(0, 0.25, 8)[:, None]
    outcome = sig.tukey_hsd(scores)
    expected = {pair for pair, p in zip(outcome.pairs, outcome.p_value, strict=True) if p < 0.05}
    assert 0 < len(expected) < len(outcome.pairs)
    assert sig.tukey_hsd_different(scores) == expected
    assert sig.tukey_hsd_different(scores, critical=lambda k, df: stats.studentized_range.ppf(0.95, k, df)) == expected


def test_tukey_hsd_different_without_spread() -> None:
    scores = np.array([[0.5, 0.5, 0.5], [0.5, 0.5, 0.5], [0.7, 0.7, 0.7]])
    assert sig.tukey_hsd_different(scores) == {(0, 2), (1, 2)}


def test_bootstrap_counts_given_are_the_draws_made() -> None:
    samples = np.random.default_rng(3).random((4, 30))
    drawn = sig.bootstrap_mean_intervals(samples, 0.95)
    given_counts = sig.bootstrap_mean_intervals(samples, 0.95, counts=sig.bootstrap_counts(30).astype("uint16"))
    assert all((a == b).all() for a, b in zip(drawn, given_counts, strict=True))


def test_randomized_tukey_with_two_systems_is_the_randomization_test() -> None:
    """With two systems, permuting within a topic is a sign flip and max - min is |mean diff|."""
    rng = np.random.default_rng(8)
    scores = np.round(rng.random((2, 12)), 3)
    scores[1] += 0.15
    resamples = 20_000
    _, p_value, _ = sig.randomized_tukey_hsd(scores, resamples=resamples, rng=np.random.default_rng(1))
    exact = stats.permutation_test(
        (scores[0] - scores[1],), np.mean, permutation_type="samples", n_resamples=np.inf
    ).pvalue
    assert abs(p_value[0] - exact) < _monte_carlo_bound(exact, resamples)


def test_randomized_tukey_is_family_wise() -> None:
    """Its p-values are at least the per-pair randomization test's (the max statistic dominates)."""
    rng = np.random.default_rng(9)
    scores = rng.random((6, 40)) * 0.3 + np.linspace(0, 0.1, 6)[:, None]
    pairs, family, _ = sig.randomized_tukey_hsd(scores, resamples=4000, rng=np.random.default_rng(2))
    diffs = np.vstack([scores[i] - scores[j] for i, j in pairs])
    single = sig.paired_test(diffs, "randomization", resamples=4000, rng=np.random.default_rng(3)).p_value
    assert (family >= single - _monte_carlo_bound(0.5, 4000)).all()
    assert family.mean() > single.mean()


def test_randomized_tukey_intervals_agree_with_its_p_values() -> None:
    """An interval beside a p-value belongs to the same procedure: with the simultaneous interval
    (difference +- the 95% quantile of the max - min spread), 0 lies outside it exactly for the
    pairs whose family-wise p-value is below 0.05 (up to the p-value's own (b + 1) / (R + 1)
    granularity). The unadjusted t-interval printed before did not: CI [+0.0013, +0.0605] beside
    p = 0.81."""
    rng = np.random.default_rng(11)
    scores = rng.random((6, 30)) * 0.4 + np.linspace(0, 0.15, 6)[:, None]
    pairs, p_value, half_width = sig.randomized_tukey_hsd(
        scores, resamples=5000, rng=np.random.default_rng(4), confidence=0.95
    )
    means = scores.mean(axis=1)
    difference = np.array([means[i] - means[j] for i, j in pairs])
    excludes_zero = np.abs(difference) > half_width
    assert excludes_zero.any() and not excludes_zero.all()
    assert (excludes_zero == (p_value < 0.05)).all()
    t_low, t_high = sig.t_interval(np.vstack([scores[i] - scores[j] for i, j in pairs]), 0.95)
    assert ((t_low > 0) | (t_high < 0)).sum() > excludes_zero.sum()  # the per-pair interval claims more


def test_bootstrap_intervals_of_bounded_values_stay_in_their_range() -> None:
    """Three topics' AP 0, 0.05 and 0.9: the t-interval of the mean leaves [0, 1] (a negative
    AP), the percentile bootstrap stays within the values; it is the same on every call (seed 0)
    and narrows as topics are added."""
    few = np.array([[0.0, 0.05, 0.9]])
    t_low, _ = sig.t_interval(few, 0.95)
    assert t_low[0] < 0
    low, high = sig.bootstrap_mean_intervals(few, 0.95)
    assert 0 <= low[0] < few.mean() < high[0] <= 0.9
    assert sig.bootstrap_mean_intervals(few, 0.95) == (low, high)
    many = np.tile(few, 10)
    many_low, many_high = sig.bootstrap_mean_intervals(many, 0.95)
    assert many_high[0] - many_low[0] < high[0] - low[0]
    # the percentile interval of a large sample is close to the t-interval (the mean is near normal)
    rng = np.random.default_rng(3)
    values = rng.random((1, 400))
    t_low, t_high = sig.t_interval(values, 0.95)
    b_low, b_high = sig.bootstrap_mean_intervals(values, 0.95)
    assert abs(b_low[0] - t_low[0]) < 0.005 and abs(b_high[0] - t_high[0]) < 0.005


def test_kendall_tau_textbook_example() -> None:
    """Truth 1 2 3 4 5 against 2 1 5 3 4: 7 concordant, 3 discordant pairs, tau = 0.4."""
    truth = -np.array([1, 2, 3, 4, 5.0])  # scores: rank 1 is the best
    other = -np.array([2, 1, 5, 3, 4.0])
    result = sig.rank_correlation(list("ABCDE"), truth, other)
    assert (result.concordant, result.discordant) == (7, 3)
    assert result.kendall_tau == pytest.approx(0.4)
    assert result.spearman_rho == pytest.approx(stats.spearmanr(truth, other).statistic)
    assert result.swapped == [("A", "B"), ("C", "D"), ("C", "E")]
    # tau-AP, by hand: other's order B A D E C; C(i)/(i-1) = 0/1, 2/2, 3/3, 2/4 -> 2/4 * 2.5 - 1
    assert result.tau_ap == pytest.approx(0.25)


def _tau_ap_by_definition(reference: list[float], other: list[float]) -> float:
    order = sorted(range(len(other)), key=lambda i: -other[i])
    total = 0.0
    for position in range(1, len(order)):
        item = order[position]
        correct = sum(reference[above] > reference[item] for above in order[:position])
        total += correct / position
    return 2 / (len(order) - 1) * total - 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=12, unique=True), st.randoms())
def test_tau_ap_matches_its_definition(reference: list[float], shuffler) -> None:  # type: ignore[no-untyped-def]
    other = reference.copy()
    shuffler.shuffle(other)
    assert sig.tau_ap(np.array(reference), np.array(other)) == pytest.approx(
        _tau_ap_by_definition(reference, other), abs=1e-12
    )
    assert sig.tau_ap(np.array(reference), np.array(reference)) == pytest.approx(1.0)
    assert sig.tau_ap(np.array(reference), -np.array(reference)) == pytest.approx(-1.0)


def test_tau_ap_weighs_swaps_at_the_top_more() -> None:
    truth = np.arange(10.0, 0.0, -1.0)
    top_swapped, bottom_swapped = truth.copy(), truth.copy()
    top_swapped[[0, 1]] = top_swapped[[1, 0]]
    bottom_swapped[[8, 9]] = bottom_swapped[[9, 8]]
    assert stats.kendalltau(truth, top_swapped).statistic == stats.kendalltau(truth, bottom_swapped).statistic
    assert sig.tau_ap(truth, top_swapped) < sig.tau_ap(truth, bottom_swapped)


@settings(max_examples=40, deadline=None)
@given(
    arrays(
        np.float64,
        st.tuples(st.integers(1, 4), st.integers(2, 25)),
        elements=st.sampled_from([-1.0, -0.5, -0.25, 0.0, 0.1, 0.25, 0.5, 1.0]),
    )
)
def test_paired_tests_are_well_formed(matrix: np.ndarray) -> None:
    """Graded-label-like values with ties, zero rows and constant rows: p in [0, 1], the interval
    holds the mean difference, wins + ties + losses = topics, t agrees with scipy where defined."""
    for test in sig.TESTS:
        outcome = sig.paired_test(matrix, test, resamples=200, rng=np.random.default_rng(0))
        assert ((outcome.p_value >= 0) & (outcome.p_value <= 1)).all(), test
        mean = matrix.mean(axis=1)
        assert (outcome.ci_low <= mean + 1e-12).all() and (mean <= outcome.ci_high + 1e-12).all(), test
    wins, ties, losses = sig.wins_ties_losses(matrix)
    assert ((wins + ties + losses) == matrix.shape[1]).all()
    t = sig.paired_test(matrix, "t")
    for row in range(len(matrix)):
        if (matrix[row] != matrix[row][0]).any():  # a constant row is ours to define (p 0 or 1)
            assert t.p_value[row] == pytest.approx(stats.ttest_1samp(matrix[row], 0.0).pvalue, rel=1e-9, abs=1e-15)
