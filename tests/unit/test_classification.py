"""Classification and clustering measures: the issue's textbook cases, and scikit-learn's values
on generated data (ties in scores included)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics

from evalstore.metrics import classification as cls


def _codes(labels: list[str], classes: list[str]) -> np.ndarray:
    return np.array([classes.index(label) for label in labels])


def test_fruit_micro_and_macro_averages() -> None:
    classes = ["apple", "lemon", "orange"]
    truth = ["orange"] * 5 + ["lemon"] * 2 + ["apple"] * 2
    predicted = ["lemon", "lemon", "apple", "orange", "apple", "lemon", "apple", "apple", "apple"]
    suite = cls.evaluate(_codes(truth, classes), classes, y_pred=_codes(predicted, classes))
    assert suite.aggregates["precision_micro"] == pytest.approx(0.444, abs=5e-4)
    assert suite.aggregates["precision_macro"] == pytest.approx(0.578, abs=5e-4)
    assert suite.aggregates["recall_macro"] == pytest.approx(0.567, abs=5e-4)
    assert suite.aggregates["precision.lemon"] == pytest.approx(1 / 3)
    assert suite.settings["confusion"] == [[2, 0, 0], [1, 1, 0], [2, 2, 1]]


@pytest.mark.parametrize(
    ("tp", "fn", "fp", "tn", "accuracy", "cost"), [(150, 40, 60, 250, 0.80, 3910), (250, 45, 5, 200, 0.90, 4255)]
)
def test_accuracy_and_cost_textbook_cases(tp: int, fn: int, fp: int, tn: int, accuracy: float, cost: float) -> None:
    # classes (negative, positive); cost rows true class, columns predicted: TP -1, FN 100, FP 1, TN 0
    y_true = np.array([1] * (tp + fn) + [0] * (fp + tn))
    y_pred = np.array([1] * tp + [0] * fn + [1] * fp + [0] * tn)
    costs = np.array([[0, 1], [100, -1]])
    suite = cls.evaluate(y_true, ["neg", "pos"], y_pred=y_pred, costs=costs)
    assert suite.aggregates["accuracy"] == pytest.approx(accuracy)
    assert suite.aggregates["cost"] == cost
    assert suite.aggregates["cost_per_item"] == pytest.approx(cost / 500)


@pytest.mark.parametrize(("order", "auc"), [("u1- u1+ u2- u1+ u2+", 0.833), ("u1- u1+ u1+ u2- u2+", 0.667)])
def test_auc_and_gauc_textbook_cases(order: str, auc: float) -> None:
    items = order.split()
    score = np.arange(1, len(items) + 1, dtype=float)  # ascending
    y_true = np.array([int(item.endswith("+")) for item in items])
    groups = np.array([int(item[1]) - 1 for item in items])
    suite = cls.evaluate(y_true, ["neg", "pos"], score=score / 10, groups=groups, n_groups=2)
    assert suite.aggregates["auc"] == pytest.approx(auc, abs=5e-4)
    assert suite.aggregates["gauc"] == 1.0 and suite.aggregates["gauc_groups_skipped"] == 0


def test_gauc_skips_and_counts_groups_with_one_class() -> None:
    y_true = np.array([0, 1, 1, 1, 0, 1])
    score = np.array([0.1, 0.9, 0.5, 0.6, 0.8, 0.2])
    groups = np.array([0, 0, 1, 1, 2, 2])  # group 1 holds positives only
    auc, ap, sizes = cls.group_auc(y_true == 1, score, groups, 3)
    assert np.isnan(auc[1]) and auc[0] == 1.0 and auc[2] == 0.0
    assert ap.tolist() == [1.0, 1.0, 0.5]
    assert cls.gauc(auc, sizes) == (0.5, 1)


def test_purity_textbook_case() -> None:
    # three clusters whose majority classes hold 5 of 7, 4 of 8 and 6 of 10 items
    clusters = np.repeat([0, 1, 2], [7, 8, 10])
    y_true = np.concatenate([[0] * 5 + [1] * 2, [1] * 4 + [0] * 2 + [2] * 2, [2] * 6 + [0] * 4])
    values = cls.clustering_measures(y_true, clusters)
    assert values["purity"] == pytest.approx(0.6)
    assert values["clusters"] == 3
    assert values["ari"] == pytest.approx(metrics.adjusted_rand_score(y_true, clusters))
    assert values["nmi"] == pytest.approx(metrics.normalized_mutual_info_score(y_true, clusters))


def test_purity_f_by_hand() -> None:
    # class 0 = {a,b,c}, class 1 = {d,e}; clusters {a,b}, {c,d,e}
    values = cls.clustering_measures(np.array([0, 0, 0, 1, 1]), np.array([0, 0, 1, 1, 1]))
    assert values["purity"] == pytest.approx(4 / 5) and values["inverse_purity"] == pytest.approx(4 / 5)
    # class 0: best F with {a,b} = 2*(2/3)*1/(2/3+1) = 0.8; class 1: with {c,d,e} = 2*1*(2/3)/(5/3) = 0.8
    assert values["purity_f"] == pytest.approx(0.8)
    assert values["purity_harmonic_f"] == pytest.approx(0.8)
    # unequal: 6 items in one cluster, two classes of 3: purity 1/2, inverse purity 1 -> 2/3
    lumped = cls.clustering_measures(np.array([0, 0, 0, 1, 1, 1]), np.zeros(6, dtype=np.int64))
    assert (lumped["purity"], lumped["inverse_purity"]) == (0.5, 1.0)
    assert lumped["purity_harmonic_f"] == pytest.approx(2 / 3)


def test_thresholds_and_break_even_by_hand() -> None:
    y_true = np.array([1, 1, 0, 1, 0, 0])
    score = np.array([0.9, 0.8, 0.7, 0.6, 0.3, 0.1])
    curve = cls.Curve.of(y_true == 1, score)
    # F1 at >= 0.6: tp 3, fp 1 -> 6/7; at >= 0.8: tp 2 -> 0.8
    assert curve.best_threshold("best-f1") == (0.6, pytest.approx(6 / 7))
    assert curve.best_threshold("youden") == (0.6, pytest.approx(1 - 1 / 3))
    # prior 0.5: accuracy at 0.6 is 0.5 * 1 + 0.5 * 2/3; a prior of 0.1 makes false positives
    # costly: 0.8 (0.1 * 2/3 + 0.9 * 1) beats 0.6 (0.1 + 0.9 * 2/3)
    assert curve.best_threshold("iso-accuracy") == (0.6, pytest.approx(5 / 6))
    assert curve.best_threshold("iso-accuracy", prior=0.1) == (0.8, pytest.approx(0.1 * 2 / 3 + 0.9))
    assert curve.break_even() == pytest.approx(2 / 3)  # the top 3 hold 2 positives
    # recall 0 to 0.6 reach precision 1 (recall 2/3 at 0.8); 0.7 to 1 reach 0.75 (recall 1 at 0.6)
    assert curve.interpolated_ap_11() == pytest.approx((7 * 1.0 + 4 * 0.75) / 11)


labels_strategy = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=60)


@settings(max_examples=80, deadline=None)
@given(labels_strategy, st.sampled_from([0.5, 1.0, 2.0]))
def test_label_measures_equal_scikit_learn(pairs: list[tuple[int, int]], beta: float) -> None:
    y_true = np.array([p[0] for p in pairs])
    y_pred = np.array([p[1] for p in pairs])
    classes = ["a", "b", "c"]
    values = cls.label_measures(cls.confusion(y_true, y_pred, 3), classes, beta=beta)
    suffix = "" if beta == 1 else f"_beta{beta:g}"
    kw = {"labels": [0, 1, 2], "zero_division": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn warns on a class absent from both lists
        averages = {
            average: metrics.precision_recall_fscore_support(y_true, y_pred, beta=beta, average=average, **kw)
            for average in ("micro", "macro", "weighted")
        }
        p, r, f, support = metrics.precision_recall_fscore_support(y_true, y_pred, beta=beta, **kw)
        mcc = metrics.matthews_corrcoef(y_true, y_pred)
        kappa = metrics.cohen_kappa_score(y_true, y_pred, labels=[0, 1, 2])
        balanced = metrics.balanced_accuracy_score(y_true, y_pred)
    assert values["accuracy"] == pytest.approx(metrics.accuracy_score(y_true, y_pred))
    for average, (ap, ar, af, _) in averages.items():
        assert values[f"precision_{average}"] == pytest.approx(ap)
        assert values[f"recall_{average}"] == pytest.approx(ar)
        assert values[f"f1_{average}{suffix}"] == pytest.approx(af)
    for index, label in enumerate(classes):
        assert values[f"precision.{label}"] == pytest.approx(p[index])
        assert values[f"recall.{label}"] == pytest.approx(r[index])
        assert values[f"support.{label}"] == support[index]
    assert values["mcc"] == pytest.approx(mcc, abs=1e-12)
    assert values["kappa"] == pytest.approx(0.0 if np.isnan(kappa) else kappa, abs=1e-12)
    assert values["balanced_accuracy"] == pytest.approx(balanced)
    assert values["error_rate"] == pytest.approx(1 - metrics.accuracy_score(y_true, y_pred))
    # one-vs-rest counts per class: specificity tn/(tn+fp), fallout fp/(fp+tn), generality support/n
    per_class = metrics.multilabel_confusion_matrix(y_true, y_pred, labels=[0, 1, 2])
    tn, fp = per_class[:, 0, 0], per_class[:, 0, 1]
    specificity = np.divide(tn, tn + fp, out=np.zeros(3), where=tn + fp > 0)
    fallout = np.divide(fp, tn + fp, out=np.zeros(3), where=tn + fp > 0)
    for index, label in enumerate(classes):
        assert values[f"f1{suffix}.{label}"] == pytest.approx(f[index])
        assert values[f"specificity.{label}"] == pytest.approx(specificity[index])
        assert values[f"fallout.{label}"] == pytest.approx(fallout[index])
        assert values[f"generality.{label}"] == pytest.approx(support[index] / len(y_true))
    assert values["specificity_macro"] == pytest.approx(specificity.mean())
    assert values["fallout_macro"] == pytest.approx(fallout.mean())
    assert values["jaccard_macro"] == pytest.approx(
        metrics.jaccard_score(y_true, y_pred, labels=[0, 1, 2], average="macro", zero_division=0)
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=1, max_size=40))
def test_positive_class_measures_equal_scikit_learns_binary_ones(pairs: list[tuple[int, int]]) -> None:
    y_true = np.array([p[0] for p in pairs])
    y_pred = np.array([p[1] for p in pairs])
    values = cls.label_measures(cls.confusion(y_true, y_pred, 2), ["neg", "pos"], positive=1)
    kw = {"pos_label": 1, "zero_division": 0}
    tn, fp, _, _ = metrics.confusion_matrix(y_true, y_pred, labels=[0, 1]).ravel()
    assert values["precision"] == pytest.approx(metrics.precision_score(y_true, y_pred, **kw))
    assert values["recall"] == pytest.approx(metrics.recall_score(y_true, y_pred, **kw))
    assert values["f1"] == pytest.approx(metrics.f1_score(y_true, y_pred, **kw))
    assert values["specificity"] == pytest.approx(tn / (tn + fp) if tn + fp else 0.0)
    assert values["fallout"] == pytest.approx(fp / (tn + fp) if tn + fp else 0.0)
    assert values["support"] == (y_true == 1).sum()
    assert values["generality"] == pytest.approx((y_true == 1).mean())


def test_the_suite_reports_the_best_thresholds_and_rela_impr() -> None:
    y_true = np.array([1, 1, 0, 1, 0, 0])
    score = np.array([0.9, 0.8, 0.7, 0.6, 0.3, 0.1])
    baseline = np.array([0.9, 0.2, 0.7, 0.6, 0.3, 0.1])  # one positive sinks below two negatives
    suite = cls.evaluate(y_true, ["neg", "pos"], score=score, baseline_score=baseline)
    # the rules' thresholds as test_thresholds_and_break_even_by_hand works them out
    assert (suite.aggregates["threshold_best_f1"], suite.aggregates["threshold_best_f1_value"]) == (
        0.6,
        pytest.approx(6 / 7),
    )
    assert (suite.aggregates["threshold_youden"], suite.aggregates["threshold_youden_value"]) == (
        0.6,
        pytest.approx(2 / 3),
    )
    assert (suite.aggregates["threshold_iso_accuracy"], suite.aggregates["threshold_iso_accuracy_value"]) == (
        0.6,
        pytest.approx(5 / 6),
    )
    # AUC 8/9 against the baseline's 6/9 (Yan et al. 2014, in percent: ((AUC - 0.5) / (AUC_base - 0.5) - 1) * 100)
    assert suite.aggregates["auc"] == pytest.approx(8 / 9)
    assert suite.aggregates["rela_impr"] == pytest.approx(((8 / 9 - 0.5) / (6 / 9 - 0.5) - 1) * 100)
    groups = np.array([0, 0, 0, 1, 1, 1])
    grouped = cls.evaluate(y_true, ["neg", "pos"], score=score, baseline_score=baseline, groups=groups, n_groups=2)
    # group 0: AUC 1 (base 0.5); group 1: AUC 1 (base 1) -> GAUC 1 vs 0.75
    assert grouped.aggregates["rela_impr_gauc"] == pytest.approx(((1 - 0.5) / (0.75 - 0.5) - 1) * 100)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 6)), min_size=2, max_size=60))
def test_score_measures_equal_scikit_learn_with_ties(rows: list[tuple[bool, int]]) -> None:
    y_true = np.array([int(r[0]) for r in rows])
    score = np.array([r[1] / 6 for r in rows])  # few distinct values: many ties
    curve = cls.Curve.of(y_true == 1, score)
    if 0 < y_true.sum() < len(y_true):
        assert curve.auc() == pytest.approx(metrics.roc_auc_score(y_true, score))
        fpr, tpr, thresholds = metrics.roc_curve(y_true, score, drop_intermediate=False)
        assert np.allclose(curve.fpr, fpr) and np.allclose(curve.tpr, tpr)
        auc, _, _ = cls.group_auc(y_true == 1, score, np.zeros(len(y_true), int), 1)
        assert auc[0] == pytest.approx(metrics.roc_auc_score(y_true, score))
    if y_true.sum() > 0:
        assert curve.average_precision() == pytest.approx(metrics.average_precision_score(y_true, score))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 4), st.integers(0, 3)), min_size=2, max_size=60))
def test_gauc_and_group_ap_equal_scikit_learn_per_group(rows: list[tuple[bool, int, int]]) -> None:
    y_true = np.array([int(r[0]) for r in rows])
    score = np.array([r[1] / 4 for r in rows])
    groups = np.array([r[2] for r in rows])
    auc, ap, sizes = cls.group_auc(y_true == 1, score, groups, 4)
    expected, weights, skipped = [], [], 0
    for g in range(4):
        mine = groups == g
        if y_true[mine].sum() > 0:
            assert ap[g] == pytest.approx(metrics.average_precision_score(y_true[mine], score[mine]))
        else:
            assert np.isnan(ap[g])
        if not mine.any():
            skipped += 1
            continue
        if len(set(y_true[mine].tolist())) < 2:
            skipped += 1
            continue
        expected.append(metrics.roc_auc_score(y_true[mine], score[mine]))
        weights.append(mine.sum())
    value, counted = cls.gauc(auc, sizes)
    assert counted == skipped
    if expected:
        assert value == pytest.approx(np.average(expected, weights=weights))


def test_multiclass_auc_is_scikit_learns() -> None:
    rng = np.random.default_rng(1)
    y_true = rng.integers(0, 3, 200)
    scores = rng.random((200, 3)) + np.eye(3)[y_true] * 0.3
    suite = cls.evaluate(y_true, ["a", "b", "c"], scores=scores)
    probabilities = scores / scores.sum(axis=1, keepdims=True)
    assert suite.aggregates["auc_ovr"] == pytest.approx(metrics.roc_auc_score(y_true, probabilities, multi_class="ovr"))
    assert suite.aggregates["auc_ovo"] == pytest.approx(metrics.roc_auc_score(y_true, probabilities, multi_class="ovo"))
    assert suite.aggregates["accuracy"] == pytest.approx(np.mean(np.argmax(scores, axis=1) == y_true))


def test_per_group_values_equal_each_groups_own_suite() -> None:
    rng = np.random.default_rng(2)
    y_true = rng.integers(0, 2, 300)
    score = np.round(rng.random(300), 1)
    groups = rng.integers(0, 5, 300)
    suite = cls.evaluate(y_true, ["n", "p"], score=score, groups=groups, n_groups=5, threshold="best-f1")
    for g in range(5):
        mine = groups == g
        own = cls.evaluate(y_true[mine], ["n", "p"], score=score[mine], threshold=suite.settings["threshold"])
        for name in ("accuracy", "mcc", "f1_macro", "kappa"):
            assert suite.per_group[name][g] == pytest.approx(own.aggregates[name]), name
        assert suite.per_group["auc"][g] == pytest.approx(own.aggregates["auc"])
    assert suite.settings["threshold_rule"] == "best-f1"
    assert suite.aggregates["threshold_best_f1"] == suite.settings["threshold"]


# the measures this file holds to scikit-learn or to worked examples (tests/unit/test_reference_coverage.py)
REFERENCE_FAMILIES = {
    "accuracy",
    "error_rate",
    "balanced_accuracy",
    "mcc",
    "kappa",
    *(f"{m}_{avg}" for m in ("precision", "recall", "f1") for avg in ("micro", "macro", "weighted")),
    "specificity_macro",
    "fallout_macro",
    "precision",
    "recall",
    "f1",
    "specificity",
    "fallout",
    "generality",
    "support",
    "cost",
    "cost_per_item",
    "auc",
    "gauc",
    "gauc_groups_skipped",
    "average_precision",
    "interpolated_ap_11",
    "break_even",
    "threshold_best_f1",
    "threshold_best_f1_value",
    "threshold_youden",
    "threshold_youden_value",
    "threshold_iso_accuracy",
    "threshold_iso_accuracy_value",
    "rela_impr",
    "rela_impr_gauc",
    "auc_ovr",
    "auc_ovo",
    "purity",
    "inverse_purity",
    "purity_f",
    "purity_harmonic_f",
    "ari",
    "nmi",
    "clusters",
    "jaccard_macro",
    "log_loss",
    "brier",
    "top2_accuracy",
    "top3_accuracy",
    "auc_fpr10",
    "ami",
    "rand",
    "pair_jaccard",
    "pair_f1",
    "mirkin",
    "homogeneity",
    "completeness",
    "v_measure",
    "fowlkes_mallows",
    "subset_accuracy",
    "hamming_loss",
    "jaccard_micro",
    "jaccard_samples",
    "precision_samples",
    "recall_samples",
    "f1_samples",
    "lrap",
    "coverage_error",
    "label_ranking_loss",
}


def test_probability_measures_equal_scikit_learn() -> None:
    rng = np.random.default_rng(4)
    y_true = rng.integers(0, 2, 300)
    score = np.clip(rng.random(300) * 0.7 + y_true * 0.3, 0, 1)
    suite = cls.evaluate(y_true, ["no", "yes"], score=score)
    assert suite.aggregates["log_loss"] == pytest.approx(metrics.log_loss(y_true, score))
    assert suite.aggregates["brier"] == pytest.approx(metrics.brier_score_loss(y_true, score))
    assert suite.aggregates["auc_fpr10"] == pytest.approx(metrics.roc_auc_score(y_true, score, max_fpr=0.1))
    y3 = rng.integers(0, 4, 300)
    raw = rng.random((300, 4)) + np.eye(4)[y3] * 0.5
    probabilities = raw / raw.sum(axis=1, keepdims=True)
    multi = cls.evaluate(y3, ["a", "b", "c", "d"], scores=probabilities)
    assert multi.aggregates["log_loss"] == pytest.approx(metrics.log_loss(y3, probabilities))
    assert multi.aggregates["brier"] == pytest.approx(metrics.brier_score_loss(y3, probabilities))
    for k in (2, 3):
        assert multi.aggregates[f"top{k}_accuracy"] == pytest.approx(
            metrics.top_k_accuracy_score(y3, probabilities, k=k)
        )
    assert "log_loss" not in cls.evaluate(y3, ["a", "b", "c", "d"], scores=raw).aggregates  # not probabilities


def test_clustering_measures_equal_scikit_learn() -> None:
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 4, 200)
    clusters = np.where(rng.random(200) < 0.7, truth, rng.integers(0, 5, 200))
    values = cls.clustering_measures(truth, clusters)
    h, c, v = metrics.homogeneity_completeness_v_measure(truth, clusters)
    assert (values["homogeneity"], values["completeness"], values["v_measure"]) == pytest.approx((h, c, v))
    assert values["ami"] == pytest.approx(metrics.adjusted_mutual_info_score(truth, clusters))
    assert values["rand"] == pytest.approx(metrics.rand_score(truth, clusters))
    assert values["fowlkes_mallows"] == pytest.approx(metrics.fowlkes_mallows_score(truth, clusters))
    # the pair-counting measures from scikit-learn's pair confusion matrix (ordered pairs)
    (_, clusters_only), (classes_only, together) = metrics.cluster.pair_confusion_matrix(truth, clusters)
    assert values["pair_jaccard"] == pytest.approx(together / (together + clusters_only + classes_only))
    assert values["pair_f1"] == pytest.approx(2 * together / (2 * together + clusters_only + classes_only))
    # Mirkin's own formula on the contingency table: sum of squared class and cluster sizes less
    # twice the squared cells
    table = metrics.cluster.contingency_matrix(truth, clusters)
    mirkin = (table.sum(axis=1) ** 2).sum() + (table.sum(axis=0) ** 2).sum() - 2 * (table**2).sum()
    assert values["mirkin"] == mirkin


def test_pair_counting_measures_on_a_worked_example() -> None:
    """Five items, classes aab|bb against clusters aa|abb: of the 10 pairs 2 are together in both,
    2 in the clusters only, 2 in the classes only, 4 apart in both."""
    values = cls.clustering_measures(np.array([0, 0, 0, 1, 1]), np.array([0, 0, 1, 1, 1]))
    assert values["rand"] == pytest.approx(0.6)
    assert values["pair_jaccard"] == pytest.approx(2 / 6)
    assert values["pair_f1"] == pytest.approx(0.5)
    assert values["mirkin"] == 8.0
    same = cls.clustering_measures(np.array([0, 1, 2]), np.array([2, 0, 1]))  # no pair together anywhere
    assert (same["pair_jaccard"], same["pair_f1"], same["mirkin"]) == (1.0, 1.0, 0.0)


# sample weights: small integers and zero (an item left out) make scikit-learn's weighted sums exact
weighted_rows = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 5), st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.25])),
    min_size=2,
    max_size=50,
)


@settings(max_examples=60, deadline=None)
@given(weighted_rows)
def test_weighted_label_and_score_measures_equal_scikit_learn(rows: list[tuple[int, int, int, float]]) -> None:
    y_true, y_pred = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    score, w = np.array([r[2] / 5 for r in rows]), np.array([r[3] for r in rows])
    if w.sum() == 0:
        w[0] = 1.0
    classes = ["a", "b", "c"]
    suite = cls.evaluate(y_true, classes, y_pred=y_pred, sample_weight=w)
    values = suite.aggregates
    kw = {"labels": [0, 1, 2], "zero_division": 0, "sample_weight": w}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for average in ("micro", "macro", "weighted"):
            p, r, f, _ = metrics.precision_recall_fscore_support(y_true, y_pred, average=average, **kw)
            assert (
                values[f"precision_{average}"],
                values[f"recall_{average}"],
                values[f"f1_{average}"],
            ) == pytest.approx((p, r, f))
        assert values["jaccard_macro"] == pytest.approx(metrics.jaccard_score(y_true, y_pred, average="macro", **kw))
        assert values["mcc"] == pytest.approx(metrics.matthews_corrcoef(y_true, y_pred, sample_weight=w), abs=1e-12)
        kappa = metrics.cohen_kappa_score(y_true, y_pred, labels=[0, 1, 2], sample_weight=w)
        assert values["kappa"] == pytest.approx(0.0 if np.isnan(kappa) else kappa, abs=1e-12)
        balanced = metrics.balanced_accuracy_score(y_true, y_pred, sample_weight=w)
    assert values["accuracy"] == pytest.approx(metrics.accuracy_score(y_true, y_pred, sample_weight=w))
    assert values["balanced_accuracy"] == pytest.approx(balanced)
    assert suite.settings["weighted"] is True
    # binary scores: the curve, AUC, AP and partial AUC
    positive = y_true == 1
    binary = cls.evaluate(positive.astype(int), ["no", "yes"], score=score, sample_weight=w)
    has_both = (w[positive].sum() > 0) and (w[~positive].sum() > 0)
    if has_both:
        assert binary.aggregates["auc"] == pytest.approx(metrics.roc_auc_score(positive, score, sample_weight=w))
        assert binary.aggregates["average_precision"] == pytest.approx(
            metrics.average_precision_score(positive, score, sample_weight=w)
        )
        assert binary.aggregates["log_loss"] == pytest.approx(metrics.log_loss(positive, score, sample_weight=w))
        assert binary.aggregates["brier"] == pytest.approx(metrics.brier_score_loss(positive, score, sample_weight=w))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 4), st.integers(0, 2), st.sampled_from([0.5, 1.0, 3.0])),
        min_size=2,
        max_size=60,
    )
)
def test_weighted_group_auc_and_ap_equal_scikit_learn_per_group(rows: list[tuple[bool, int, int, float]]) -> None:
    y_true = np.array([int(r[0]) for r in rows])
    score, groups, w = (
        np.array([r[1] / 4 for r in rows]),
        np.array([r[2] for r in rows]),
        np.array([r[3] for r in rows]),
    )
    auc, ap, totals = cls.group_auc(y_true == 1, score, groups, 3, weight=w)
    for g in range(3):
        mine = groups == g
        assert totals[g] == pytest.approx(w[mine].sum())
        if 0 < y_true[mine].sum() < mine.sum():
            assert auc[g] == pytest.approx(metrics.roc_auc_score(y_true[mine], score[mine], sample_weight=w[mine]))
        else:
            assert np.isnan(auc[g])
        if y_true[mine].sum() > 0:
            assert ap[g] == pytest.approx(
                metrics.average_precision_score(y_true[mine], score[mine], sample_weight=w[mine])
            )


def test_weighted_multiclass_probabilities_equal_scikit_learn() -> None:
    rng = np.random.default_rng(6)
    y3 = rng.integers(0, 4, 300)
    raw = rng.random((300, 4)) + np.eye(4)[y3] * 0.5
    probabilities = raw / raw.sum(axis=1, keepdims=True)
    w = rng.random(300) * 3
    suite = cls.evaluate(y3, ["a", "b", "c", "d"], scores=probabilities, sample_weight=w)
    assert suite.aggregates["log_loss"] == pytest.approx(metrics.log_loss(y3, probabilities, sample_weight=w))
    assert suite.aggregates["top2_accuracy"] == pytest.approx(
        metrics.top_k_accuracy_score(y3, probabilities, k=2, sample_weight=w)
    )
    assert suite.aggregates["auc_ovr"] == pytest.approx(
        metrics.roc_auc_score(y3, probabilities, multi_class="ovr", sample_weight=w)
    )
    assert "auc_ovo" not in suite.aggregates  # scikit-learn has no weighted one-vs-one AUC


def test_unit_weights_change_nothing() -> None:
    rng = np.random.default_rng(7)
    y_true, score, groups = rng.integers(0, 2, 500), rng.integers(0, 20, 500) / 20, rng.integers(0, 30, 500)
    plain = cls.evaluate(y_true, ["n", "y"], score=score, groups=groups, n_groups=30)
    unit = cls.evaluate(y_true, ["n", "y"], score=score, groups=groups, n_groups=30, sample_weight=np.ones(500))
    assert unit.aggregates == plain.aggregates
    assert all(np.array_equal(unit.per_group[m], plain.per_group[m], equal_nan=True) for m in plain.per_group)


multilabel_rows = st.lists(
    st.tuples(
        st.lists(st.booleans(), min_size=4, max_size=4),
        st.lists(st.integers(0, 4), min_size=4, max_size=4),
        st.sampled_from([0.5, 1.0, 2.0]),
    ),
    min_size=2,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(multilabel_rows, st.booleans())
def test_multilabel_measures_equal_scikit_learn(
    rows: list[tuple[list[bool], list[int], float]], weighted: bool
) -> None:
    y_true = np.array([r[0] for r in rows])
    scores = np.array([r[1] for r in rows]) / 4
    w = np.array([r[2] for r in rows]) if weighted else None
    y_pred = scores >= 0.5
    suite = cls.multilabel(y_true, list("abcd"), scores=scores, sample_weight=w)
    values = suite.aggregates
    kw = {"sample_weight": w, "zero_division": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert values["subset_accuracy"] == pytest.approx(metrics.accuracy_score(y_true, y_pred, sample_weight=w))
        assert values["hamming_loss"] == pytest.approx(metrics.hamming_loss(y_true, y_pred, sample_weight=w))
        for average in ("micro", "macro", "weighted", "samples"):
            p, r, f, _ = metrics.precision_recall_fscore_support(y_true, y_pred, average=average, **kw)
            assert (
                values[f"precision_{average}"],
                values[f"recall_{average}"],
                values[f"f1_{average}"],
            ) == pytest.approx((p, r, f)), average
        for average in ("micro", "macro", "samples"):
            assert values[f"jaccard_{average}"] == pytest.approx(
                metrics.jaccard_score(y_true, y_pred, average=average, **kw)
            ), average
        p, r, f, support = metrics.precision_recall_fscore_support(y_true, y_pred, **kw)
        for index, label in enumerate("abcd"):
            assert (
                values[f"precision.{label}"],
                values[f"recall.{label}"],
                values[f"f1.{label}"],
                values[f"support.{label}"],
            ) == pytest.approx((p[index], r[index], f[index], support[index]))
        if y_true.any():
            assert values["lrap"] == pytest.approx(
                metrics.label_ranking_average_precision_score(y_true, scores, sample_weight=w)
            )
        assert values["coverage_error"] == pytest.approx(metrics.coverage_error(y_true, scores, sample_weight=w))
        assert values["label_ranking_loss"] == pytest.approx(
            metrics.label_ranking_loss(y_true, scores, sample_weight=w)
        )


def test_multilabel_per_group_values_equal_each_groups_own_suite() -> None:
    rng = np.random.default_rng(8)
    y_true, y_pred = rng.random((200, 5)) < 0.3, rng.random((200, 5)) < 0.3
    groups, w = rng.integers(0, 7, 200), rng.random(200) + 0.1
    suite = cls.multilabel(y_true, list("abcde"), y_pred=y_pred, groups=groups, n_groups=7, sample_weight=w)
    for g in range(7):
        mine = groups == g
        own = cls.multilabel(y_true[mine], list("abcde"), y_pred=y_pred[mine], sample_weight=w[mine])
        for name in ("subset_accuracy", "hamming_loss", "jaccard_samples", "f1_samples", "f1_micro"):
            assert suite.per_group[name][g] == pytest.approx(own.aggregates[name]), name


def test_multilabel_textbook_case() -> None:
    # gold {a, b}, {c}, {}; predicted {a}, {c, d}, {d}: Hamming loss = 1 + 1 + 1 wrong of 3 x 4 decisions
    y_true = np.array([[1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]], bool)
    y_pred = np.array([[1, 0, 0, 0], [0, 0, 1, 1], [0, 0, 0, 1]], bool)
    values = cls.multilabel(y_true, list("abcd"), y_pred=y_pred).aggregates
    assert values["hamming_loss"] == pytest.approx(3 / 12)
    assert values["subset_accuracy"] == 0.0
    assert values["jaccard_samples"] == pytest.approx((1 / 2 + 1 / 2 + 0) / 3)
    assert values["jaccard_micro"] == pytest.approx(2 / 5)  # tp 2, fp 2, fn 1
