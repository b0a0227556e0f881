"""The three levels of `judgments compare`, checked against scikit-learn, krippendorff and scipy
computed here independently, and on hand-made cases."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from evalstore.statistics.judgment_agreement import label_agreement, significance_agreement, system_agreement
from evalstore.statistics.significance import tau_ap_b


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


# tau_AP_b as autojudge-evaluate 1.1.0's autojudge_evaluate/pyircore.py (``tauap_b``) gives it on
# these inputs (computed with that module; it is not a dependency)
PYIRCORE_TAU_AP_B = [
    ([0.6, 0.55, 0.5, 0.4, 0.3, 0.2], [0.58, 0.59, 0.45, 0.42, 0.10, 0.25], 0.52),
    ([3, 3, 2, 1, 1, 0], [2, 3, 3, 1, 0, 0], 0.38749999999999996),
    ([1, 2, 3, 4, 5], [5, 4, 3, 2, 1], -1.0),
    ([1, 1, 1, 1], [1, 2, 3, 4], -0.5),  # one ordering all tied: that direction counts 0
    ([0.5, 0.4, 0.4, 0.3, 0.2, 0.2, 0.1], [0.45, 0.45, 0.3, 0.35, 0.1, 0.2, 0.2], 0.5222222222222221),
]


@pytest.mark.parametrize(("first", "second", "expected"), PYIRCORE_TAU_AP_B)
def test_tau_ap_b_equals_pyircore(first: list[float], second: list[float], expected: float) -> None:
    assert tau_ap_b(np.array(first, float), np.array(second, float)) == pytest.approx(expected, abs=1e-12)


def _tau_ap_b_by_definition(x: list[float], y: list[float]) -> float:
    """Urbano & Marrero's tau_AP_b walked down ``y``, item by item, as the paper states it."""
    n, total, counted = len(x), 0.0, 0
    for i in range(n):
        above = [j for j in range(n) if y[j] > y[i]]  # the tie groups of y strictly above i
        if not above:
            continue
        counted += 1
        total += sum(1 for j in above if x[j] > x[i]) / len(above)
    return 0.0 if counted == 0 else 2 * total / counted - 1


@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=2, max_size=12),
)
@settings(max_examples=200, deadline=None)
def test_tau_ap_b_is_the_mean_of_both_directions_of_the_definition(pairs: list[tuple[int, int]]) -> None:
    x = [float(a) for a, _ in pairs]
    y = [float(b) for _, b in pairs]
    expected = (_tau_ap_b_by_definition(x, y) + _tau_ap_b_by_definition(y, x)) / 2
    assert tau_ap_b(np.array(x), np.array(y)) == pytest.approx(expected, abs=1e-12)


def test_set_agreement_and_nominal_alpha_equal_the_libraries() -> None:
    from sklearn.metrics import f1_score, jaccard_score, precision_score, recall_score

    rng = np.random.default_rng(3)
    first = rng.integers(0, 4, 200)
    second = np.clip(first + rng.integers(-1, 2, 200), 0, 3)
    result = label_agreement(np.array(["1"] * 200, dtype=object), first, second, relevant_from=2)
    a, b = first >= 2, second >= 2
    relevant = result.relevant
    assert relevant is not None and relevant.relevant_from == 2
    assert (relevant.relevant_first, relevant.relevant_second, relevant.relevant_both) == (
        int(a.sum()),
        int(b.sum()),
        int((a & b).sum()),
    )
    assert relevant.precision == pytest.approx(precision_score(a, b), abs=1e-12)
    assert relevant.recall == pytest.approx(recall_score(a, b), abs=1e-12)
    assert relevant.f1 == pytest.approx(f1_score(a, b), abs=1e-12)
    assert relevant.jaccard == pytest.approx(jaccard_score(a, b), abs=1e-12)
    assert relevant.kappa == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    nominal = krippendorff.alpha(
        reliability_data=np.vstack([first, second]).astype(float), level_of_measurement="nominal"
    )
    assert result.krippendorff_alpha_nominal == pytest.approx(nominal, abs=1e-12)
    assert result.krippendorff_alpha_nominal != pytest.approx(result.krippendorff_alpha)
    assert result.over_labelling == pytest.approx(float(np.mean(second > first)))
    assert result.under_labelling == pytest.approx(float(np.mean(second < first)))


def test_no_relevant_item_leaves_the_shares_empty() -> None:
    result = label_agreement(np.array(["1", "1"], dtype=object), np.array([0, 1]), np.array([0, 0]), relevant_from=2)
    assert result.relevant is not None
    assert (result.relevant.precision, result.relevant.recall, result.relevant.f1, result.relevant.jaccard) == (
        None,
        None,
        None,
        None,
    )


def test_significance_is_kept_reversed_or_lost_after_the_correction() -> None:
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(8)
    base = rng.random((6, 30))
    first = base + np.linspace(0, 0.3, 6)[:, None] + rng.normal(0, 0.05, (6, 30))
    second = base + np.array([0.3, 0.06, 0.12, 0.18, 0.24, 0.0])[:, None] + rng.normal(0, 0.05, (6, 30))
    result = significance_agreement(first, second, correction="holm")
    rows, cols = np.triu_indices(6, 1)
    pa = multipletests(
        [stats.ttest_rel(first[i], first[j]).pvalue for i, j in zip(rows, cols, strict=True)], method="holm"
    )[1]
    pb = multipletests(
        [stats.ttest_rel(second[i], second[j]).pvalue for i, j in zip(rows, cols, strict=True)], method="holm"
    )[1]
    sa, sb = pa < 0.05, pb < 0.05
    same = np.array(
        [
            np.sign((first[i] - first[j]).mean()) == np.sign((second[i] - second[j]).mean())
            for i, j in zip(rows, cols, strict=True)
        ]
    )
    kept, reversed_, lost = int((sa & sb & same).sum()), int((sa & sb & ~same).sum()), int((sa & ~sb).sum())
    assert (result.correction, result.significant_first, result.preserved, result.reversed, result.lost) == (
        "holm",
        int(sa.sum()),
        kept,
        reversed_,
        lost,
    )
    assert kept > 0 and reversed_ > 0 and lost > 0  # every outcome happens here
    assert result.share_preserved + result.share_reversed + result.share_lost == pytest.approx(1.0)
    assert result.share_lost == pytest.approx(lost / int(sa.sum()))
    uncorrected = significance_agreement(first, second)
    assert uncorrected.significant_first >= result.significant_first


def test_system_agreement_adds_rho_r_tau_at_k_and_the_per_topic_mean() -> None:
    rng = np.random.default_rng(4)
    per_a = rng.random((8, 12))
    per_b = per_a + rng.normal(0, 0.2, (8, 12))
    per_a[:, 0] = 0.5  # a topic where every system ties under A: no tau there
    names = [f"r{i}" for i in range(8)]
    a, b = per_a.mean(axis=1), per_b.mean(axis=1)
    result = system_agreement(names, a, b, top_k=4, per_topic_first=per_a, per_topic_second=per_b)
    assert result.spearman == pytest.approx(stats.spearmanr(a, b).statistic, abs=1e-12)
    assert result.pearson == pytest.approx(stats.pearsonr(a, b).statistic, abs=1e-12)
    top = np.argsort(-a)[:4]
    assert result.tau_at_k == pytest.approx(stats.kendalltau(a[top], b[top]).statistic, abs=1e-12)
    taus = [stats.kendalltau(per_a[:, t], per_b[:, t]).statistic for t in range(1, 12)]
    assert result.per_topic_tau == pytest.approx(float(np.mean(taus)), abs=1e-12)
    assert (result.per_topic_topics, result.per_topic_undefined) == (11, 1)
    assert result.per_topic_tau < result.kendall_tau  # topics disagree more than their means
    assert result.tau_ap_b == pytest.approx(tau_ap_b(a, b))
