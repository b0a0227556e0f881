"""The three levels of `judgments compare`, checked against scikit-learn, krippendorff and scipy
computed here independently, and on hand-made cases."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from evalstore.statistics.judgment_agreement import label_agreement, significance_agreement, system_agreement


def test_label_agreement_equals_the_libraries() -> None:
    rng = np.random.default_rng(11)
    first = rng.integers(0, 4, 300)
    second = np.clip(first + rng.integers(-1, 3, 300), 0, 3)  # a judge that over-rates
    topics = np.array([str(i % 7) for i in range(300)], dtype=object)
    result = label_agreement(topics, first, second)
    assert result.items == 300 and result.labels == [0, 1, 2, 3]
    assert result.kappa == pytest.approx(cohen_kappa_score(first, second), abs=1e-12)
    assert result.weighted_kappa == pytest.approx(cohen_kappa_score(first, second, weights="linear"), abs=1e-12)
    assert result.quadratic_kappa == pytest.approx(cohen_kappa_score(first, second, weights="quadratic"), abs=1e-12)
    expected_alpha = krippendorff.alpha(
        reliability_data=np.vstack([first, second]).astype(float), level_of_measurement="ordinal"
    )
    assert result.krippendorff_alpha == pytest.approx(expected_alpha, abs=1e-12)
    assert result.confusion == confusion_matrix(first, second, labels=[0, 1, 2, 3]).tolist()
    assert result.mean_difference == pytest.approx(float(np.mean(second - first)))
    assert result.mean_difference > 0 and result.rated_higher == int((second > first).sum())
    assert [t.topic for t in result.per_topic] == ["0", "1", "2", "3", "4", "5", "6"]
    mask = topics == "3"
    assert result.per_topic[3].kappa == pytest.approx(cohen_kappa_score(first[mask], second[mask]), abs=1e-12)
    assert result.per_topic[3].items == int(mask.sum())


def test_label_agreement_by_hand() -> None:
    result = label_agreement(
        np.array(["1", "1", "2", "2"], dtype=object), np.array([0, 1, 2, 3]), np.array([0, 2, 2, 3])
    )
    assert result.observed == 0.75 and result.mean_difference == 0.25
    assert result.confusion == [[1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    assert result.per_topic[1].kappa == 1.0  # identical labels
    with pytest.raises(ValueError, match="no item is labelled in both"):
        label_agreement(np.array([], dtype=object), np.array([]), np.array([]))


def test_system_agreement_equals_scipy_and_counts_top_k_swaps() -> None:
    names = ["a", "b", "c", "d", "e", "f"]
    first = np.array([0.60, 0.55, 0.50, 0.40, 0.30, 0.20])
    second = np.array([0.58, 0.59, 0.45, 0.42, 0.10, 0.25])  # a<->b swapped at the top, e<->f at the bottom
    result = system_agreement(names, first, second, top_k=3)
    assert result.kendall_tau == pytest.approx(stats.kendalltau(first, second).statistic, abs=1e-12)
    assert (result.top_k, result.top_k_swaps, result.top_k_pairs) == (3, 1, 3)
    assert result.swapped == [("a", "b"), ("e", "f")]
    # tau_AP (Yilmaz et al. 2008) by its definition, with second's order: b a c d f e
    reference_rank = {n: i for i, n in enumerate(names)}
    order = ["b", "a", "c", "d", "f", "e"]
    terms = [sum(reference_rank[order[j]] < reference_rank[order[i]] for j in range(i)) / i for i in range(1, 6)]
    assert result.tau_ap == pytest.approx(2 / 5 * sum(terms) - 1)
    assert result.tau_ap < result.kendall_tau or result.kendall_tau == pytest.approx(result.tau_ap)


def test_significance_agreement_equals_scipy_paired_t_tests() -> None:
    rng = np.random.default_rng(5)
    base = rng.random((5, 40))
    first = base + np.array([0.0, 0.05, 0.1, 0.2, 0.3])[:, None] + rng.normal(0, 0.05, (5, 40))
    second = base + np.array([0.0, 0.06, 0.02, 0.2, 0.29])[:, None] + rng.normal(0, 0.05, (5, 40))
    result = significance_agreement(first, second, alpha=0.05)
    significant_a, significant_b, preserved = 0, 0, 0
    for i in range(5):
        for j in range(i + 1, 5):
            pa = stats.ttest_rel(first[i], first[j]).pvalue
            pb = stats.ttest_rel(second[i], second[j]).pvalue
            same = np.sign((first[i] - first[j]).mean()) == np.sign((second[i] - second[j]).mean())
            significant_a += pa < 0.05
            significant_b += pb < 0.05
            preserved += bool(pa < 0.05 and pb < 0.05 and same)
    assert (result.pairs, result.significant_first, result.significant_second, result.preserved) == (
        10,
        significant_a,
        significant_b,
        preserved,
    )
    assert result.share_preserved == pytest.approx(preserved / significant_a)
    assert 0 < result.share_preserved < 1  # the test is not trivially 0 or 1


def test_nothing_significant_has_no_share() -> None:
    same = np.ones((3, 5))
    result = significance_agreement(same, same)
    assert (result.significant_first, result.share_preserved) == (0, None)


def test_one_label_in_common_is_one_cell_of_agreement() -> None:
    # scikit-learn's confusion_matrix warns here (an error under the suite's filterwarnings)
    result = label_agreement(np.array(["1", "2"], dtype=object), np.array([2, 2]), np.array([2, 2]))
    assert (result.items, result.labels, result.confusion, result.observed, result.kappa) == (2, [2], [[2]], 1.0, 1.0)
