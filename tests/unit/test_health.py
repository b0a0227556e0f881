"""The collection-health statistics against direct computations: swap rates against a loop over
the same topic draws, topic-set size against the normal-approximation formula and statsmodels,
discriminative power against pairwise scipy tests."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from evalstore.services import health
from evalstore.statistics import significance


def scores(runs: int = 6, topics: int = 30, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(
        rng.normal(0.3, 0.15, (1, topics)) + np.linspace(0, 0.1, runs)[:, None] + rng.normal(0, 0.08, (runs, topics)),
        0,
        1,
    )


def test_swap_rates_count_the_pairs_two_disjoint_sets_order_differently() -> None:
    table = scores()
    found = health._stability("AP", table, 0.05, 200, np.random.default_rng(3))
    rng = np.random.default_rng(3)  # the same draws, one resample at a time
    for n, row in zip(range(5, 16, 5), found, strict=True):
        order = rng.permuted(np.tile(np.arange(table.shape[1]), (200, 1)), axis=1)
        swaps = total = 0
        for draw in order:
            a, b = table[:, draw[:n]].mean(axis=1), table[:, draw[n : 2 * n]].mean(axis=1)
            for i in range(len(table)):
                for j in range(i + 1, len(table)):
                    total += 1
                    swaps += (a[i] - a[j]) * (b[i] - b[j]) < 0
        assert row.topics == n and row.swap_rate == pytest.approx(swaps / total)


def test_topic_set_size_follows_the_paired_t_power_analysis() -> None:
    table = scores()
    result = health._topic_set_size("AP", table, 0.05, 0.05, 0.8)
    variance, df = significance.residual_variance(table)
    assert df == 5 * 29 and result.residual_variance == pytest.approx(variance)
    # normal approximation n = (z_a/2 + z_b)^2 * 2 sigma^2 / delta^2: the t-based answer is a little above
    approximate = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) ** 2 * 2 * variance / 0.05**2
    assert math.ceil(approximate) <= result.topics_needed <= math.ceil(approximate) + 3
    bigger = health._topic_set_size("AP", table, 0.10, 0.05, 0.8)
    assert bigger.topics_needed < result.topics_needed


def test_discriminative_power_counts_holm_corrected_t_tests() -> None:
    table = scores(runs=5)
    found = health._discriminative_power("AP", table, "t", "holm", 0.05, np.random.default_rng(0))
    pairs = [(i, j) for i in range(5) for j in range(i + 1, 5)]
    p = np.array([stats.ttest_rel(table[i], table[j]).pvalue for i, j in pairs])
    from statsmodels.stats.multitest import multipletests

    significant = multipletests(p, alpha=0.05, method="holm")[0]
    assert (found.pairs, found.significant) == (10, int(significant.sum()))
    differences = np.array([abs((table[i] - table[j]).mean()) for i, j in pairs])
    assert found.smallest_significant_difference == pytest.approx(differences[significant].min())


def test_topic_set_size_of_runs_that_barely_differ_is_the_smallest_design() -> None:
    # residual variance ~4e-7: the 0.05 difference is ~56 spreads wide, and statsmodels' root
    # finder returns NaN (it used to crash the report with "cannot convert float NaN to integer")
    table = np.array([[0.5, 0.3, 0.7], [0.501, 0.3, 0.699]])
    result = health._topic_set_size("AP", table, 0.05, 0.05, 0.8)
    assert result.topics_needed == 2 and 0 < result.residual_variance < 1e-5
