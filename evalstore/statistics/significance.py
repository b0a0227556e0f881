"""Paired significance tests, multiple-comparison corrections, Tukey HSD and rank correlation.

Pure numpy/scipy over score matrices: no database here (:mod:`evalstore.services.comparisons`
reads the matrices). Every comparison is *paired by topic*: row ``i`` of a difference matrix holds
one pair's per-topic differences ``run - versus``.

scipy gives the t-test, Wilcoxon, sign test (binomial) and the rank correlations; statsmodels gives
the corrections. Three things are ours, because running scipy's once per pair or value is hundreds
of times slower on a leaderboard's worth of pairs:

- the randomization (sign-flip permutation) test and the paired bootstrap draw ONE matrix of
  random signs / resampling weights per call and apply it to every pair with a single matrix
  product (scipy's ``permutation_test``/``bootstrap`` redraw per pair, in Python);
- the two-way (system x topic) Tukey HSD and the randomized Tukey HSD (Carterette 2012) are not
  in scipy or statsmodels (their Tukey is one-way, which ignores that topics differ in difficulty);
- the studentized range distribution behind Tukey's p-values and intervals
  (:mod:`evalstore.statistics.studentized_range`: scipy's, integrated for every pair at once).

Tests check each against scipy's implementation of the same test.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

TESTS = ("t", "randomization", "bootstrap", "wilcoxon", "sign")
CORRECTIONS = ("holm", "bonferroni", "bh", "hochberg", "sidak", "holm-sidak", "by", "none")
MULTI = ("tukey", "randomized-tukey")
_STATSMODELS_METHOD = {
    "holm": "holm",
    "bonferroni": "bonferroni",
    "bh": "fdr_bh",
    "hochberg": "simes-hochberg",
    "sidak": "sidak",
    "holm-sidak": "holm-sidak",
    "by": "fdr_by",
}

# Resampled statistics that equal the observed one up to rounding count as "as extreme": a sign
# flip that reproduces the observed signs sums in another order than the observed mean did.
_RELATIVE_TOLERANCE = 1e-9
# Rows of random signs / weights drawn at once: bounds memory (chunk x pairs doubles) whatever
# the number of resamples.
_CHUNK = 2000


@dataclass(frozen=True)
class PairedOutcome:
    """One value per pair (row of the difference matrix)."""

    statistic: np.ndarray
    p_value: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray


def paired_test(
    diffs: np.ndarray,
    test: str,
    *,
    confidence: float = 0.95,
    resamples: int = 10_000,
    rng: np.random.Generator | None = None,
) -> PairedOutcome:
    """Two-sided paired test of mean difference 0 for every row of ``diffs`` (pairs x topics).

    The interval is the t-interval of the mean difference, except for ``bootstrap`` (percentile
    interval of the resampled means). ``randomization`` and ``bootstrap`` need ``rng``; their
    p-value is (b + 1) / (resamples + 1), b the resamples at least as extreme as observed.
    """
    diffs = np.atleast_2d(np.asarray(diffs, dtype=float))
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; choose one of {', '.join(TESTS)}")
    if test in ("randomization", "bootstrap") and rng is None:
        raise ValueError(f"the {test} test needs a random generator (a seed)")
    ci_low, ci_high = t_interval(diffs, confidence)
    if test == "t":
        statistic, p_value = _t_test(diffs)
    elif test == "wilcoxon":
        statistic, p_value = _wilcoxon(diffs)
    elif test == "sign":
        statistic, p_value = _sign_test(diffs)
    elif test == "randomization":
        assert rng is not None  # refused above
        statistic, p_value = _randomization(diffs, resamples, rng)
    else:
        assert rng is not None
        statistic, p_value, ci_low, ci_high = _bootstrap(diffs, resamples, rng, confidence)
    return PairedOutcome(statistic, p_value, ci_low, ci_high)


def t_interval(diffs: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Student-t confidence interval of each row's mean (a point when the row is constant)."""
    from scipy import stats

    n = diffs.shape[1]
    mean = diffs.mean(axis=1)
    if n < 2:
        return mean.copy(), mean.copy()
    half = stats.t.ppf(0.5 + confidence / 2, n - 1) * diffs.std(axis=1, ddof=1) / np.sqrt(n)
    return mean - half, mean + half


# what the statistic of each procedure is (compare's table names its column after it)
STATISTIC_NAMES = {
    "t": "t",
    "wilcoxon": "W",
    "sign": "wins",
    "randomization": "mean diff",
    "bootstrap": "mean diff",
    "tukey": "q",
    "randomized-tukey": "mean diff",
}

LEADERBOARD_RESAMPLES = 10_000
LEADERBOARD_SEED = 0  # fixed: a leaderboard reads the same every time it is printed
FEW_TOPICS = 10  # below this, intervals and p-values over topics (or groups) mean little


def bootstrap_counts(n: int, *, resamples: int = LEADERBOARD_RESAMPLES, seed: int = LEADERBOARD_SEED) -> np.ndarray:
    """The draws :func:`bootstrap_mean_intervals` makes for ``n`` topics: how often each topic is
    drawn in each resample (resamples x n). They depend on ``n`` and the seed alone, so a process
    that summarises sample after sample of one length draws them once (drawing is most of the
    time: ~0.4 s for 250 topics, the matrix product a few ms)."""
    return np.random.default_rng(seed).multinomial(n, np.full(n, 1 / n), size=resamples)


def bootstrap_mean_intervals(
    samples: np.ndarray,
    confidence: float,
    *,
    resamples: int = LEADERBOARD_RESAMPLES,
    seed: int = LEADERBOARD_SEED,
    counts: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of each row's mean (rows: measures or runs; columns: topics).

    A percentile interval lies within the smallest and largest value resampled, so a measure
    bounded in [0, 1] keeps an interval in [0, 1], where a t-interval over 3 topics gave AP
    [-0.34, 0.70]. Every row is resampled with the same draws: one multinomial weight matrix
    (resamples x topics) and one matrix product give every resampled mean at once. ``counts``:
    :func:`bootstrap_counts` for these samples' length, drawn before (with the same seed)."""
    samples = np.asarray(samples, dtype=float)
    n = samples.shape[1]
    if n < 2:
        return samples.mean(axis=1), samples.mean(axis=1)
    if counts is None:
        counts = bootstrap_counts(n, resamples=resamples, seed=seed)
    weights = counts / n  # the same draws as ``counts`` given: the same intervals, bit for bit
    means = samples @ weights.T  # (rows x resamples)
    tail = (1 - confidence) / 2
    low, high = row_quantiles(means, (tail, 1 - tail))
    return low, high


def row_quantiles(values: np.ndarray, quantiles: tuple[float, ...]) -> np.ndarray:
    """``np.quantile(values, quantiles, axis=1)`` (its default, linear interpolation) of a 2-D
    float array, bit for bit: a row per quantile.

    Ours because numpy's is slow for this shape: it moves the axis to the front and partitions
    each row at all four order statistics at once, ~18 ms for 100 rows of 10,000 resampled means,
    most of a job's summaries; this takes ~5 ms. A quantile needs two neighbouring order
    statistics, ``k`` and ``k + 1`` (:func:`_neighbours`: one partition of contiguous rows, numpy's
    vectorised selection). The quantiles are taken from the largest ``k`` down in one copy, each
    partition leaving each row's smallest values in front, among which the next is found. The
    interpolation is numpy's own (``_lerp``), and a row holding a NaN gives NaN, as numpy's does."""
    values = np.asarray(values, dtype=float)
    rows, n = values.shape
    out = np.empty((len(quantiles), rows))
    if not all(0 <= quantile <= 1 for quantile in quantiles):
        raise ValueError(f"quantiles must be in [0, 1], not {quantiles}")
    if rows == 0:
        return out
    if n == 0:
        raise ValueError("no values to take quantiles of")
    work, front = values.copy(), n  # work[:, :front] holds each row's `front` smallest values
    # numpy's virtual index for the linear method: its lower neighbour k and the weight after it
    places = [(k := int(np.floor(virtual)), virtual - k) for virtual in ((n - 1) * np.float64(q) for q in quantiles)]
    for at in sorted(range(len(places)), key=lambda i: -places[i][0]):
        k, gamma = places[at]
        if k + 1 < front or k >= n - 1 == front - 1:
            below, above, front = _neighbours(work[:, :front], k)
        else:  # the same k as a quantile before: its neighbours are no longer in front
            below, above, _ = _neighbours(values.copy(), k)
        diff = above - below  # numpy's _lerp, operation for operation
        out[at] = above - diff * (1 - gamma) if gamma >= 0.5 else below + diff * gamma
    out[:, np.isnan(values).any(axis=1)] = np.nan
    return out


def _neighbours(rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Each row's ``k``-th and ``(k + 1)``-th smallest values (0-based; numpy's neighbours of the
    last index are the largest value twice), partitioning ``rows`` in place, and how many of each
    row's smallest values are then in front. After a partition at ``p`` only larger values follow
    the ``p``-th; near the start the ``k``-th is the largest of the ``k + 1`` in front of
    ``p = k + 1``, further on the ``(k + 1)``-th the smallest after ``p = k``."""
    n = rows.shape[1]
    if k >= n - 1:
        largest = rows.max(axis=1)
        return largest, largest, n
    if k < n // 2:
        rows.partition(k + 1, axis=1)
        return rows[:, : k + 1].max(axis=1), rows[:, k + 1], k + 1
    rows.partition(k, axis=1)
    return rows[:, k], rows[:, k + 1 :].min(axis=1), k


def effect_size(diffs: np.ndarray) -> np.ndarray:
    """Paired standardised mean difference (Cohen's d_z): mean / standard deviation of the
    differences; 0 for identical systems, +-inf for a constant non-zero difference."""
    mean = diffs.mean(axis=1)
    sd = diffs.std(axis=1, ddof=1) if diffs.shape[1] > 1 else np.zeros(len(diffs))
    constant = np.copysign(np.where(mean == 0, 0.0, np.inf), mean)
    return np.where(sd > 0, mean / np.where(sd > 0, sd, 1.0), constant)


def wins_ties_losses(diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Topics where ``run`` scores higher, the same, lower than ``versus``. Equal means exactly
    equal: the same ranking of the same documents gives bit-identical values."""
    return (diffs > 0).sum(axis=1), (diffs == 0).sum(axis=1), (diffs < 0).sum(axis=1)


def _degenerate(diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows with no spread, where the tests' statistics are undefined: identical systems (p = 1)
    and a constant non-zero difference (as strong as evidence gets: p = 0)."""
    constant = np.all(diffs == diffs[:, :1], axis=1)
    return constant, np.where(diffs[:, 0] == 0, 1.0, 0.0)


def _t_test(diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from scipy import stats

    constant, p_constant = _degenerate(diffs)
    statistic = np.copysign(np.where(diffs[:, 0] == 0, 0.0, np.inf), diffs[:, 0])
    p_value = p_constant.copy()
    if (~constant).any():
        with warnings.catch_warnings():
            # rows that differ only by rounding make scipy warn about catastrophic cancellation;
            # its result is still the right one for the numbers given
            warnings.simplefilter("ignore", RuntimeWarning)
            result = stats.ttest_1samp(diffs[~constant], 0.0, axis=1)
        statistic[~constant] = result.statistic
        p_value[~constant] = result.pvalue
    return statistic, p_value


def _wilcoxon(diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """scipy's Wilcoxon signed-rank test (zero differences dropped, 'wilcox'; exact distribution
    for up to 50 non-tied topics, normal approximation otherwise)."""
    from scipy import stats

    nonzero = (diffs != 0).any(axis=1)
    statistic = np.zeros(len(diffs))
    p_value = np.ones(len(diffs))
    for index in np.flatnonzero(nonzero):
        # one call per pair: scipy picks exact or approximate per sample (ties, zeros, size), and
        # a batched call would pick once for all rows
        result = stats.wilcoxon(diffs[index], zero_method="wilcox")
        statistic[index] = result.statistic
        p_value[index] = result.pvalue
    return statistic, p_value


def _sign_test(diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided exact binomial test on wins vs losses (ties dropped), as ``scipy.stats.binomtest``
    with p = 0.5, where the two-sided p-value is twice the smaller tail (capped at 1); vectorised
    through the binomial cdf."""
    from scipy import stats

    wins, _, losses = wins_ties_losses(diffs)
    trials = wins + losses
    tail = stats.binom.cdf(np.minimum(wins, losses), np.maximum(trials, 1), 0.5)
    p_value = np.where(trials == 0, 1.0, np.minimum(1.0, 2.0 * tail))
    p_value = np.where(wins == losses, 1.0, p_value)
    return wins.astype(float), p_value


def _randomization(diffs: np.ndarray, resamples: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Sign-flip permutation test of the mean difference (Fisher's randomization test)."""
    n = diffs.shape[1]
    observed = diffs.mean(axis=1)
    threshold = np.abs(observed) * (1 - _RELATIVE_TOLERANCE)
    extreme = np.zeros(len(diffs), dtype=np.int64)
    for size in _chunks(resamples):
        signs = rng.integers(0, 2, size=(size, n), dtype=np.int8).astype(float) * 2.0 - 1.0
        means = signs @ diffs.T / n  # (size x pairs): every pair under the same relabellings
        extreme += (np.abs(means) >= threshold).sum(axis=0)
    return observed, (extreme + 1) / (resamples + 1)


def _bootstrap(
    diffs: np.ndarray, resamples: int, rng: np.random.Generator, confidence: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Paired bootstrap of the mean difference: topics resampled with replacement (the same
    resampled topic set for every pair). The p-value is the shift method's (Efron & Tibshirani
    1993, Sakai 2006): resampled means centred on the observed one, as extreme as the observed
    mean is from 0. The interval is the percentile interval."""
    n = diffs.shape[1]
    observed = diffs.mean(axis=1)
    threshold = np.abs(observed) * (1 - _RELATIVE_TOLERANCE)
    extreme = np.zeros(len(diffs), dtype=np.int64)
    means = np.empty((len(diffs), resamples))  # a row a pair: row_quantiles reads contiguous rows
    start = 0
    for size in _chunks(resamples):
        weights = rng.multinomial(n, np.full(n, 1.0 / n), size=size).astype(float)
        block = weights @ diffs.T / n
        means[:, start : start + size] = block.T
        extreme += (np.abs(block - observed) >= threshold).sum(axis=0)
        start += size
    low, high = row_quantiles(means, (0.5 - confidence / 2, 0.5 + confidence / 2))
    return observed, (extreme + 1) / (resamples + 1), low, high


def _chunks(total: int) -> list[int]:
    return [min(_CHUNK, total - start) for start in range(0, total, _CHUNK)]


def correct(p_values: np.ndarray, method: str, alpha: float = 0.05) -> np.ndarray:
    """Adjusted p-values for one family of tests (statsmodels' multipletests)."""
    if method not in CORRECTIONS:
        raise ValueError(f"unknown correction {method!r}; choose one of {', '.join(CORRECTIONS)}")
    p_values = np.asarray(p_values, dtype=float)
    if method == "none" or len(p_values) == 0:
        return p_values.copy()
    if method == "holm":
        return _holm(p_values)
    from statsmodels.stats.multitest import multipletests

    return np.asarray(multipletests(p_values, alpha=alpha, method=_STATSMODELS_METHOD[method])[1])


def _holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjustment, statsmodels' multipletests(method="holm") operation for
    operation (tests/property/test_holm.py holds the two to the bit). Ours because statsmodels'
    Holm branch ends in ``gc.collect()``: a full collection on every call, ~0.2 s in a server or a
    CLI holding a few million objects, paid by every compare page and health report."""
    order = np.argsort(p_values)
    adjusted = np.maximum.accumulate(p_values[order] * np.arange(len(p_values), 0, -1))
    adjusted[adjusted > 1] = 1
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return out


@dataclass(frozen=True)
class TukeyOutcome:
    """For every pair (i, j), i < j of the systems: q statistic, family-wise p-value, interval of
    mean_i - mean_j."""

    pairs: list[tuple[int, int]]
    statistic: np.ndarray
    p_value: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    mse: float
    df: int


def residual_variance(scores: np.ndarray) -> tuple[float, int]:
    """The residual mean square of the additive two-way model (system x topic, one score per
    cell): score = grand + system + topic + error, and its (k-1)(n-1) degrees of freedom."""
    scores = np.asarray(scores, dtype=float)
    k, n = scores.shape
    residual = scores - scores.mean(axis=1)[:, None] - scores.mean(axis=0)[None, :] + scores.mean()
    df = (k - 1) * (n - 1)
    return float((residual**2).sum() / df), df


def tukey_hsd(
    scores: np.ndarray, *, confidence: float = 0.95, pairs: list[tuple[int, int]] | None = None
) -> TukeyOutcome:
    """Tukey's HSD on the two-way (system x topic) design without replication.

    The error term is the residual of the additive model score = grand + system + topic, with
    (k-1)(n-1) degrees of freedom, so per-topic difficulty is blocked out (statsmodels'
    pairwise_tukeyhsd is one-way and would count it as noise). p-values and intervals come from
    the studentized range distribution with k systems (:mod:`.studentized_range`, scipy's to 1e-9).
    """
    from evalstore.statistics import studentized_range  # scipy.special: only where Tukey is asked for

    scores = np.asarray(scores, dtype=float)
    k, n = scores.shape
    if k < 2 or n < 2:
        raise ValueError("Tukey HSD needs at least two systems and two topics")
    system_means = scores.mean(axis=1)
    mse, df = residual_variance(scores)
    pairs = pairs if pairs is not None else [(i, j) for i in range(k) for j in range(i + 1, k)]
    first, second = np.array([p[0] for p in pairs], dtype=int), np.array([p[1] for p in pairs], dtype=int)
    difference = system_means[first] - system_means[second]
    scale = np.sqrt(mse / n)
    if scale == 0:
        statistic = np.where(difference == 0, 0.0, np.inf)
        return TukeyOutcome(pairs, statistic, np.where(difference == 0, 1.0, 0.0), difference, difference, mse, df)
    statistic = np.abs(difference) / scale
    p_value = studentized_range.sf(statistic, k, df)
    half = studentized_range.ppf(confidence, k, df) * scale
    return TukeyOutcome(pairs, statistic, np.clip(p_value, 0.0, 1.0), difference - half, difference + half, mse, df)


def tukey_hsd_different(
    scores: np.ndarray, *, confidence: float = 0.95, critical: Callable[[int, int], float] | None = None
) -> set[tuple[int, int]]:
    """The pairs (i, j), i < j, that :func:`tukey_hsd` finds significantly different (p below
    ``1 - confidence``), without a p-value per pair: a pair's p-value is below that exactly when
    its statistic is above the studentized range's ``confidence`` quantile, so one quantile
    decides every pair. ``critical(k, df)``: that quantile, from a caller that keeps it."""
    from evalstore.statistics import studentized_range

    scores = np.asarray(scores, dtype=float)
    k, n = scores.shape
    if k < 2 or n < 2:
        raise ValueError("Tukey HSD needs at least two systems and two topics")
    system_means = scores.mean(axis=1)
    mse, df = residual_variance(scores)
    first, second = np.triu_indices(k, 1)
    difference = system_means[first] - system_means[second]
    scale = np.sqrt(mse / n)
    if scale == 0:
        different = difference != 0
    else:
        quantile = critical(k, df) if critical else studentized_range.ppf(confidence, k, df)
        different = np.abs(difference) / scale > quantile
    return {(int(i), int(j)) for i, j in zip(first[different], second[different], strict=True)}


def randomized_tukey_hsd(
    scores: np.ndarray,
    *,
    resamples: int,
    rng: np.random.Generator,
    pairs: list[tuple[int, int]] | None = None,
    confidence: float = 0.95,
) -> tuple[list[tuple[int, int]], np.ndarray, float]:
    """Randomized Tukey HSD (Carterette 2012; Sakai 2018): under the null every system is
    exchangeable within a topic, so each resample permutes the k scores of every topic; a pair's
    p-value is the share of resamples whose largest minus smallest system mean reaches the pair's
    observed |difference| ((b + 1) / (resamples + 1)). Family-wise by construction.

    Returns the pairs, their p-values, and the half-width of the simultaneous intervals at
    ``confidence``: that quantile of the same largest-minus-smallest spread, so a pair's interval
    (difference +- half-width) leaves out 0 exactly when its difference exceeds the spread that
    ``1 - confidence`` of the resamples reach, i.e. when its p-value is about below 1 - confidence
    (the interval and the p-value beside it say the same thing)."""
    scores = np.asarray(scores, dtype=float)
    k, n = scores.shape
    pairs = pairs if pairs is not None else [(i, j) for i in range(k) for j in range(i + 1, k)]
    means = scores.mean(axis=1)
    observed = np.abs(np.array([means[i] - means[j] for i, j in pairs]))
    threshold = observed * (1 - _RELATIVE_TOLERANCE)
    by_topic = scores.T  # (topics x systems): a resample shuffles within each row
    extreme = np.zeros(len(pairs), dtype=np.int64)
    spreads = []
    for size in _chunks(resamples):
        shuffled = rng.permuted(np.broadcast_to(by_topic, (size, n, k)), axis=2)
        resampled = shuffled.mean(axis=1)
        spread = resampled.max(axis=1) - resampled.min(axis=1)
        extreme += (spread[:, None] >= threshold[None, :]).sum(axis=0)
        spreads.append(spread)
    half_width = float(np.quantile(np.concatenate(spreads), confidence, method="higher"))
    return pairs, (extreme + 1) / (resamples + 1), half_width


# --- rank correlation -----------------------------------------------------------------------


@dataclass(frozen=True)
class RankCorrelation:
    systems: int
    kendall_tau: float
    tau_ap: float
    spearman_rho: float
    concordant: int
    discordant: int
    swapped: list[tuple[str, str]]  # (a, b): the first ordering puts a above b, the second b above a


def rank_correlation(names: list[str], first: np.ndarray, second: np.ndarray) -> RankCorrelation:
    """Agreement of two orderings of the same systems, each given by scores (higher is better).

    Kendall's tau (scipy's tau-b: tau-a when there are no ties), Spearman's rho (scipy), and
    tau-AP (Yilmaz, Aslam & Robertson 2008) with ``first`` as the reference: it weighs a swap near
    the top of ``second`` more than one near the bottom. tau-AP is not in scipy.
    """
    from scipy import stats

    first = np.asarray(first, dtype=float)
    second = np.asarray(second, dtype=float)
    if len(names) < 2:
        raise ValueError("rank correlation needs at least two systems")
    sign_first = np.sign(first[:, None] - first[None, :])
    sign_second = np.sign(second[:, None] - second[None, :])
    upper = np.triu(np.ones_like(sign_first, dtype=bool), 1)
    product = (sign_first * sign_second)[upper]
    swapped = [
        (names[i], names[j]) if first[i] > first[j] else (names[j], names[i])
        for i, j in zip(*np.nonzero(upper & (sign_first * sign_second < 0)), strict=True)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: scipy warns and returns nan, which we report
        tau = float(stats.kendalltau(first, second).statistic)
        rho = float(stats.spearmanr(first, second).statistic)
    score = dict(zip(names, first.tolist(), strict=True))
    swapped.sort(key=lambda pair: (-score[pair[0]], -score[pair[1]], pair))  # the reference's best first
    return RankCorrelation(
        len(names), tau, tau_ap(first, second), rho, int((product > 0).sum()), int((product < 0).sum()), swapped
    )


def tau_ap(reference: np.ndarray, other: np.ndarray) -> float:
    """tau-AP of ``other`` against ``reference`` (Yilmaz et al. 2008, eq. 3):
    2/(N-1) * sum_{i=2..N} C(i)/(i-1) - 1, with i running over ``other``'s ordering (best first)
    and C(i) the systems above position i in ``other`` that ``reference`` also ranks above it.
    Ties in ``other`` are broken by ``reference`` (the most favourable reading, as 1.0 for an
    identical ordering requires)."""
    reference = np.asarray(reference, dtype=float)
    other = np.asarray(other, dtype=float)
    count = len(reference)
    order = np.lexsort((-reference, -other))  # by other descending, ties by reference
    ranked = reference[order]
    above = np.tril(ranked[None, :] > ranked[:, None], -1)  # [i, j]: j above i in other, and in reference
    correct_above = above.sum(axis=1)[1:]
    return float(2.0 / (count - 1) * (correct_above / np.arange(1, count)).sum() - 1.0)


def tau_ap_b(first: np.ndarray, second: np.ndarray) -> float:
    """tau_AP_b with ties (Urbano & Marrero 2017, "The treatment of ties in AP correlation"): the
    mean of tau_AP_b walked down each ordering, as ``autojudge_evaluate/pyircore.py`` computes it
    (``tauap_b``, after eldrin/pyircore; autojudge-evaluate 1.1.0 on PyPI), transcribed here in
    numpy: that module is not installable alone (its package wants NLTK data at import) and is a
    double loop. Walking ``y`` with ``x`` as the other (scores, higher is better): every item
    outside ``y``'s top tie group counts the items of strictly higher tie groups of ``y`` that
    ``x`` also puts strictly above it, divided by the number of items in those groups;
    2 / (items counted) * sum - 1. An ordering that is all one tie counts 0, as pyircore's does."""
    first = np.asarray(first, dtype=float)
    second = np.asarray(second, dtype=float)
    return (_tau_ap_b_ties(first, second) + _tau_ap_b_ties(second, first)) / 2


def _tau_ap_b_ties(x: np.ndarray, y: np.ndarray) -> float:
    from scipy import stats

    rank_x = stats.rankdata(-x)  # average ranks: a tie in x is neither concordant nor discordant
    above = stats.rankdata(-y, "min") - 1  # items in the tie groups of y strictly above each
    counted = above > 0
    if not counted.any():
        return 0.0
    higher_in_y = above[None, :] < above[:, None]  # [i, j]: j is in a strictly higher group of y
    concordant = (higher_in_y & (rank_x[:, None] > rank_x[None, :])).sum(axis=1)
    return float(2.0 / counted.sum() * (concordant[counted] / above[counted]).sum() - 1.0)


def compact_letters(count: int, different: set[tuple[int, int]]) -> list[str]:
    """The compact letter display of ``count`` systems listed best first: systems that share a
    letter are not significantly different; ``different`` holds the significantly different pairs
    (i, j). Piepho's insert-and-absorb algorithm (2004): start with one group of everybody, split
    every group holding a different pair into two (one without i, one without j), and drop the
    groups that another group contains. Letters go to groups in the order of their best member.
    (statsmodels and scipy have no letter display; R's multcompView does this.)"""
    groups: list[frozenset[int]] = [frozenset(range(count))]
    for i, j in sorted((min(p), max(p)) for p in different):
        split: list[frozenset[int]] = []
        for group in groups:
            if i in group and j in group:
                split.extend([group - {i}, group - {j}])
            else:
                split.append(group)
        groups = [g for g in set(split) if not any(g < other for other in split)]
    groups.sort(key=lambda g: (min(g), sorted(g)))
    letters = [""] * count
    for index, group in enumerate(groups):
        letter = _letter(index)
        for member in sorted(group):
            letters[member] += letter
    return letters


def _letter(index: int) -> str:
    """a..z, then aa, ab, ... (a leaderboard of many runs can need more than 26 groups)."""
    text = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        text = chr(ord("a") + rest) + text
    return text
