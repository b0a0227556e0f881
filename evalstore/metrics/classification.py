"""Classification and clustering measures: pure functions over integer-coded numpy arrays.

Everything that comes from a confusion matrix (accuracy, per-class precision/recall/F-beta and
their micro/macro/weighted averages, specificity, fallout, generality, balanced accuracy, MCC,
Cohen's kappa, expected cost) is computed from one ``np.bincount`` confusion matrix, and for
groups from one (groups, k, k) stack of them, so per-group values cost one more bincount and no
Python loop per group. scikit-learn has these measures but recounts the matrix per call and has
no batched (per-group) form; the property tests hold every value to scikit-learn's.

Binary scores: one descending sort gives the ROC and precision-recall curves at every distinct
score (as scikit-learn's ``_binary_clf_curve``), and from them AUC (trapezoids, so ties count
half, as Mann-Whitney), average precision (scikit-learn's step definition), 11-point interpolated
AP, the break-even point and the best thresholds. GAUC (AUC per group, weighted by group size,
over the groups holding both classes) sorts once by (group, score) and ranks within groups with
tie-averaged ranks. Multiclass AUC (one-vs-rest, one-vs-one) and the clustering indices ARI and
NMI are scikit-learn's; purity, inverse purity and their F (Amigó et al. 2009) are ours, since
scikit-learn lacks them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from evalstore.metrics.registry import register_prediction_measure

if TYPE_CHECKING:
    import pyarrow as pa

THRESHOLD_RULES = ("best-f1", "youden", "iso-accuracy")


def confusion(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    k: int,
    groups: np.ndarray | None = None,
    n_groups: int = 1,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """(k, k) counts (sums of sample weights with ``weight``), rows true class, columns
    predicted; with ``groups``, (n_groups, k, k)."""
    cell = y_true.astype(np.int64) * k + y_pred
    if groups is None:
        return np.bincount(cell, weights=weight, minlength=k * k).reshape(k, k)
    return np.bincount(groups.astype(np.int64) * (k * k) + cell, weights=weight, minlength=n_groups * k * k).reshape(
        n_groups, k, k
    )


def _ratio(num: np.ndarray | float, den: np.ndarray | float) -> np.ndarray:
    """num / den, 0 where den is 0 (scikit-learn's zero_division=0)."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.zeros(np.broadcast(num, den).shape), where=den != 0)


def _f_beta(precision: np.ndarray, recall: np.ndarray, beta: float) -> np.ndarray:
    b2 = beta * beta
    return _ratio((1 + b2) * precision * recall, b2 * precision + recall)


def label_measures(
    cm: np.ndarray, classes: list[str], *, beta: float = 1.0, positive: int | None = None
) -> dict[str, np.ndarray]:
    """Every confusion-matrix measure, for one matrix (k, k) or a stack (..., k, k): values of
    shape ``cm.shape[:-2]``. Per-class values are named ``measure.CLASS``; with ``positive`` (a
    binary task), the positive class's values also go by their plain names."""
    cm = np.asarray(cm, dtype=np.float64)
    n = cm.sum(axis=(-2, -1))
    tp = np.diagonal(cm, axis1=-2, axis2=-1)
    true_count = cm.sum(axis=-1)  # per class: support
    pred_count = cm.sum(axis=-2)
    fp = pred_count - tp
    fn = true_count - tp
    tn = n[..., None] - tp - fp - fn
    precision = _ratio(tp, pred_count)
    recall = _ratio(tp, true_count)
    f = _f_beta(precision, recall, beta)
    specificity = _ratio(tn, tn + fp)
    fallout = _ratio(fp, fp + tn)
    generality = _ratio(true_count, n[..., None])
    weights = _ratio(true_count, true_count.sum(axis=-1, keepdims=True))
    micro_p = _ratio(tp.sum(axis=-1), pred_count.sum(axis=-1))
    micro_r = _ratio(tp.sum(axis=-1), true_count.sum(axis=-1))
    accuracy = _ratio(tp.sum(axis=-1), n)
    # chance agreement from the marginals, shared by kappa and MCC
    expected = (true_count * pred_count).sum(axis=-1)
    kappa = _ratio(n * tp.sum(axis=-1) - expected, n * n - expected)
    mcc_den = np.sqrt((n * n - (pred_count**2).sum(axis=-1)) * (n * n - (true_count**2).sum(axis=-1)))
    mcc = _ratio(n * tp.sum(axis=-1) - expected, mcc_den)
    present = true_count > 0
    balanced = _ratio((recall * present).sum(axis=-1), present.sum(axis=-1))
    suffix = "" if beta == 1 else f"_beta{beta:g}"
    out: dict[str, np.ndarray] = {
        "accuracy": accuracy,
        "error_rate": 1 - accuracy,
        "balanced_accuracy": balanced,
        "mcc": mcc,
        "kappa": kappa,
        "precision_micro": micro_p,
        "recall_micro": micro_r,
        f"f1_micro{suffix}": _f_beta(micro_p, micro_r, beta),
        "precision_macro": precision.mean(axis=-1),
        "recall_macro": recall.mean(axis=-1),
        f"f1_macro{suffix}": f.mean(axis=-1),
        "precision_weighted": (precision * weights).sum(axis=-1),
        "recall_weighted": (recall * weights).sum(axis=-1),
        f"f1_weighted{suffix}": (f * weights).sum(axis=-1),
        "specificity_macro": specificity.mean(axis=-1),
        "fallout_macro": fallout.mean(axis=-1),
        "jaccard_macro": _ratio(tp, tp + fp + fn).mean(axis=-1),
    }
    per_class = {
        "precision": precision,
        "recall": recall,
        f"f1{suffix}": f,
        "specificity": specificity,
        "fallout": fallout,
        "generality": generality,
        "support": true_count,
    }
    for name, values in per_class.items():
        for index, label in enumerate(classes):
            out[f"{name}.{label}"] = values[..., index]
        if positive is not None:
            out[name] = values[..., positive]
    return out


def labels_at(score: np.ndarray, threshold: float, positive: int) -> np.ndarray:
    """Binary labels from scores: ``positive`` (0 or 1) where score >= threshold, the other class below."""
    return np.where(score >= threshold, positive, 1 - positive)


def expected_cost(cm: np.ndarray, costs: np.ndarray) -> tuple[float, float]:
    """(total cost, cost per item (per unit of weight, when weighted)) of a (k, k) confusion
    matrix under a (k, k) cost matrix (rows true class, columns predicted)."""
    total = float((np.asarray(cm, dtype=np.float64) * costs).sum())
    return total, total / max(float(np.sum(cm)), 1.0)


# --- binary scores ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Curve:
    """Counts (sums of sample weights, when weighted) at each distinct score, highest first:
    predicting positive when score >= threshold."""

    thresholds: np.ndarray
    tps: np.ndarray
    fps: np.ndarray
    positives: float
    negatives: float

    # each item's dense rank among the distinct scores, highest 0 (for group_auc's one-key sort)
    score_rank: np.ndarray

    @classmethod
    def of(cls, positive: np.ndarray, score: np.ndarray, weight: np.ndarray | None = None) -> Curve:
        order = np.argsort(-score)
        sorted_score = score[order]
        hits = positive[order].astype(np.float64)
        change = sorted_score[1:] != sorted_score[:-1]
        last = np.r_[np.flatnonzero(change), len(score) - 1] if len(score) else np.zeros(0, np.int64)
        if weight is None:
            tps = np.cumsum(hits)[last]
            fps = last + 1 - tps
        else:
            hits *= weight[order]
            tps = np.cumsum(hits)[last]
            fps = np.cumsum(weight[order] - hits)[last]
        score_rank = np.empty(len(score), dtype=np.int64)
        score_rank[order] = np.r_[0, np.cumsum(change)] if len(score) else np.zeros(0, np.int64)
        positives = float(tps[-1]) if len(tps) else 0.0
        return cls(sorted_score[last], tps, fps, positives, float(fps[-1]) if len(fps) else 0.0, score_rank)

    @property
    def tpr(self) -> np.ndarray:
        return np.r_[0.0, _ratio(self.tps, self.positives)]

    @property
    def fpr(self) -> np.ndarray:
        return np.r_[0.0, _ratio(self.fps, self.negatives)]

    @property
    def precision(self) -> np.ndarray:
        return _ratio(self.tps, self.tps + self.fps)

    @property
    def recall(self) -> np.ndarray:
        return _ratio(self.tps, self.positives)

    def auc(self) -> float:
        """The share of (positive, negative) pairs ordered right, ties counting half: over the
        distinct scores, each block's positives times (the negatives below it + half its own).
        Unweighted, the sum counts half-pairs exactly and is divided once, so the value is the
        correctly rounded ratio whatever the summation order: the DuckDB and Spark backends
        compute the same count (evalstore.backends) and get the same bits. It equals the area
        under the ROC curve by trapezoids (scikit-learn's) to rounding."""
        if self.positives == 0 or self.negatives == 0:
            return float("nan")
        block_pos = np.diff(np.r_[0.0, self.tps])
        block_neg = np.diff(np.r_[0.0, self.fps])
        half_pairs = float(np.sum(block_pos * (2 * (self.negatives - self.fps) + block_neg)))
        return half_pairs / (2 * self.positives * self.negatives)

    def average_precision(self) -> float:
        """scikit-learn's: sum over thresholds of (recall step) x precision."""
        if self.positives == 0:
            return float("nan")
        return float(np.sum(np.diff(np.r_[0.0, self.recall]) * self.precision))

    def interpolated_ap_11(self) -> float:
        """Mean over recall 0, 0.1, ..., 1 of the highest precision at that recall or above."""
        if self.positives == 0:
            return float("nan")
        best_from = np.maximum.accumulate(self.precision[::-1])[::-1]  # max precision at recall >= r_i
        levels = np.linspace(0, 1, 11)
        at = np.searchsorted(self.recall, levels - 1e-12, side="left")
        return float(np.where(at < len(best_from), best_from[np.minimum(at, len(best_from) - 1)], 0.0).mean())

    def break_even(self) -> float:
        """Precision where it equals recall: the first |positives| items in score order; a tie
        straddling that cut counts in proportion (interpolated along the tied block)."""
        if self.positives == 0:
            return float("nan")
        predicted = self.tps + self.fps
        block = int(np.searchsorted(predicted, self.positives, side="left"))
        before_tp = self.tps[block - 1] if block else 0
        before_n = predicted[block - 1] if block else 0
        share = (self.positives - before_n) / (predicted[block] - before_n)
        return float((before_tp + share * (self.tps[block] - before_tp)) / self.positives)

    def best_threshold(self, rule: str, prior: float | None = None) -> tuple[float, float]:
        """(threshold, value of the criterion) maximising F1, Youden's J (TPR - FPR), or accuracy
        under class prior ``prior`` (P(positive); the iso-accuracy lines of slope
        (1 - prior) / prior in ROC space touch the hull there)."""
        tpr, fpr = self.tpr[1:], self.fpr[1:]
        if rule == "best-f1":
            value = _ratio(2 * self.tps, self.tps + self.fps + self.positives)
        elif rule == "youden":
            value = tpr - fpr
        elif rule == "iso-accuracy":
            pi = self.positives / max(self.positives + self.negatives, 1) if prior is None else prior
            value = pi * tpr + (1 - pi) * (1 - fpr)
        else:
            raise ValueError(f"unknown threshold rule {rule!r}; choose one of {', '.join(THRESHOLD_RULES)}")
        best = int(np.argmax(value))
        return float(self.thresholds[best]), float(value[best])


def group_auc(
    positive: np.ndarray,
    score: np.ndarray,
    groups: np.ndarray,
    n_groups: int,
    score_rank: np.ndarray | None = None,
    weight: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(AUC per group, NaN where a group lacks a class; average precision per group, NaN where
    it has no positive; items (or their summed weights) per group), from one sort.

    AUC_g is the (weighted) share of positive-negative pairs ordered right, ties counting half:
    over each group's tied blocks, lowest score first, the block's positives times (the negatives
    below it + half the block's negatives), over P N; unweighted, every term is a multiple of 1/2,
    so the sums are exact and equal Mann-Whitney's rank-sum form. AP_g is scikit-learn's: over the
    tied blocks, highest score first, the block's positives / P times the precision of
    everything scoring at least the block's score. Items are sorted once on one int64 key,
    group x distinct score (``score_rank``: :attr:`Curve.score_rank`, computed here when not
    given): 1 s for 10M items, where ``np.lexsort`` on (group, score) took 4 s."""
    if score_rank is None:
        score_rank = Curve.of(positive, score).score_rank
    distinct = int(score_rank.max()) + 1 if len(score_rank) else 1
    # ascending score within each group: the highest score has dense rank 0
    key = groups.astype(np.int64) * distinct + (distinct - 1 - score_rank)
    order = np.argsort(key)
    sorted_key = key[order]
    g = sorted_key // distinct
    n = len(g)
    w = np.ones(n) if weight is None else weight[order].astype(np.float64)
    pos = positive[order] * w
    new_group = np.r_[True, g[1:] != g[:-1]] if n else np.zeros(0, bool)
    new_block = np.r_[True, sorted_key[1:] != sorted_key[:-1]] if n else new_group
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(n), 0))
    block_first = np.flatnonzero(new_block)
    block_last = np.r_[block_first[1:], n] - 1
    block_group = g[block_first]
    # running sums over the sorted items: entry i sums the first i
    before_pos = np.r_[0.0, np.cumsum(pos)]
    before_all = np.r_[0.0, np.cumsum(w)]
    before_neg = before_all - before_pos
    sizes = np.bincount(g, weights=w, minlength=n_groups)
    positives = np.bincount(g, weights=pos, minlength=n_groups)
    negatives = sizes - positives
    block_pos = before_pos[block_last + 1] - before_pos[block_first]
    block_neg = before_neg[block_last + 1] - before_neg[block_first]
    neg_below = before_neg[block_first] - before_neg[group_start[block_first]]
    ordered_pairs = np.bincount(block_group, weights=block_pos * (neg_below + block_neg / 2), minlength=n_groups)
    auc = np.full(n_groups, np.nan)
    both = (positives > 0) & (negatives > 0)
    auc[both] = ordered_pairs[both] / (positives[both] * negatives[both])
    # AP: a block and everything after it in its group score at least the block's score
    group_end = group_start[block_first] + np.bincount(g, minlength=n_groups)[block_group] if n else block_first
    at_least = before_pos[group_end] - before_pos[block_first]
    precision = _ratio(at_least, before_all[group_end] - before_all[block_first])
    ap_sum = np.bincount(block_group, weights=block_pos * precision, minlength=n_groups)
    ap = np.full(n_groups, np.nan)
    has_positive = positives > 0
    ap[has_positive] = ap_sum[has_positive] / positives[has_positive]
    return auc, ap, sizes


def curve_points(curve: Curve, max_points: int = 600) -> dict[str, list[float]]:
    """The ROC and precision-recall curves thinned to about ``max_points`` points each, first and
    last kept, for plots: a 10M-item curve has a point per distinct score."""

    def thin(x: np.ndarray, y: np.ndarray) -> tuple[list[float], list[float]]:
        keep = np.unique(np.r_[np.arange(0, len(x), max(1, len(x) // max_points)), len(x) - 1])
        return x[keep].tolist(), y[keep].tolist()

    fpr, tpr = thin(curve.fpr, curve.tpr)
    recall, precision = thin(np.r_[0.0, curve.recall], np.r_[1.0, curve.precision])
    return {"fpr": fpr, "tpr": tpr, "recall": recall, "precision": precision}


def gauc(auc: np.ndarray, sizes: np.ndarray) -> tuple[float, int]:
    """(GAUC: per-group AUC weighted by group size over the groups holding both classes,
    number of groups skipped for holding one class only)."""
    scored = ~np.isnan(auc)
    if not scored.any():
        return float("nan"), int((~scored).sum())
    # exactly rounded sums (math.fsum), so that any order of the groups gives the same bits, as
    # the backends that sum them in another order must
    return math.fsum(auc[scored] * sizes[scored]) / math.fsum(sizes[scored]), int((~scored).sum())


def ratio_of_pairs(twice_pairs: np.ndarray, positives: np.ndarray, negatives: np.ndarray) -> np.ndarray:
    """AUC per group from exact counts of twice the pairs ordered right (NaN for a group with one
    class): the division :meth:`Curve.auc` does, so the same integers give the same bits whoever
    counted them (the DuckDB and Spark backends)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        both = (positives > 0) & (negatives > 0)
        return np.where(both, twice_pairs.astype(np.float64) / (2.0 * positives * negatives), np.nan)


def gauc_of_pairs(twice_pairs: list[int], positives: np.ndarray, negatives: np.ndarray) -> tuple[float, float]:
    """(GAUC, groups skipped for one class) from each group's exact pair counts (:func:`gauc`,
    whose exact sums make the groups' order irrelevant)."""
    value, skipped = gauc(
        ratio_of_pairs(np.asarray(twice_pairs, dtype=object), positives, negatives),
        (positives + negatives).astype(np.float64),
    )
    return value, float(skipped)


@dataclass(frozen=True)
class BinaryCounts:
    """Everything the binary suite below needs of a prediction set too large to hold, as an
    out-of-core backend (DuckDB, Spark) counts it, overall and per group: positives and negatives;
    twice the (positive, negative) pairs the score orders right, ties counting one (an exact
    integer: Python's int); the sum over distinct scores of the positives there times the
    precision of everything scoring at least as high (average precision times positives); the
    confusion counts of the predicted labels; and the sums of the log loss and Brier terms (when
    every score is a probability). ``groups`` holds one row per group with the same columns."""

    positives: int
    negatives: int
    twice_pairs: int
    precision_sum: float
    confusion: tuple[int, int, int, int]  # tp, fp, fn, tn
    log_loss_sum: float | None
    brier_sum: float | None
    group_names: list[str] | None = None
    groups: dict[str, np.ndarray] | None = None  # positives, negatives, twice_pairs (object: int), precision_sum,
    # tp, fp, fn, tn: one entry per group, in group_names' order

    @classmethod
    def from_tables(
        cls, whole: pa.Table, groups: pa.Table | None, log_loss_sum: float | None, brier_sum: float | None
    ) -> BinaryCounts:
        """From a backend's tables of counts: one row for all items, one per group (or None);
        columns group, positives, negatives, twice_pairs (decimal text: it can pass 64 bits),
        precision_sum, tp, fp, fn, tn."""
        row = whole.to_pylist()[0]
        columns = None
        if groups is not None:
            columns = {
                name: groups[name].to_numpy()
                for name in ("positives", "negatives", "precision_sum", "tp", "fp", "fn", "tn")
            }
            columns["twice_pairs"] = np.array([int(v) for v in groups["twice_pairs"].to_pylist()], dtype=object)
        return cls(
            int(row["positives"]),
            int(row["negatives"]),
            int(row["twice_pairs"]),
            float(row["precision_sum"]),
            (int(row["tp"]), int(row["fp"]), int(row["fn"]), int(row["tn"])),
            log_loss_sum,
            brier_sum,
            None if groups is None else [str(g) for g in groups["group"].to_pylist()],
            columns,
        )


def _binary_confusion(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray, positive: int) -> np.ndarray:
    """(..., 2, 2) confusion matrices in class-code order (rows gold, columns predicted) from the
    positive class's counts."""
    cells = [[tn, fp], [fn, tp]] if positive == 1 else [[tp, fn], [fp, tn]]
    return np.moveaxis(np.asarray(cells, dtype=np.int64), (0, 1), (-2, -1))


def binary_suite_from_counts(
    counts: BinaryCounts, classes: list[str], positive: int, *, beta: float = 1.0, costs: np.ndarray | None = None
) -> Suite:
    """The measures of :func:`evaluate` that binary predictions' counts decide, computed as it
    computes them: AUC and the per-group AUCs to the bit (the same integer ratios), GAUC to the
    bit (exact sums), every confusion-matrix measure to the bit (the same matrix), average
    precision, log loss and Brier score to rounding (the backend sums in its own order).
    Measures that need the whole curve (threshold rules, partial AUC, break-even, interpolated AP)
    are not computed; the settings list them."""
    n = counts.positives + counts.negatives
    aggregates: dict[str, float] = {
        "auc": float(
            ratio_of_pairs(
                np.array([counts.twice_pairs], dtype=object), np.array([counts.positives]), np.array([counts.negatives])
            )[0]
        ),
        "average_precision": counts.precision_sum / counts.positives if counts.positives else float("nan"),
    }
    if counts.log_loss_sum is not None and counts.brier_sum is not None:
        aggregates["log_loss"], aggregates["brier"] = counts.log_loss_sum / n, counts.brier_sum / n
    tp, fp, fn, tn = (np.asarray(c) for c in counts.confusion)
    cm = _binary_confusion(tp, fp, fn, tn, positive)
    aggregates.update({name: float(v) for name, v in label_measures(cm, classes, beta=beta, positive=positive).items()})
    if costs is not None:
        aggregates["cost"], aggregates["cost_per_item"] = expected_cost(cm, costs)
    per_group: dict[str, np.ndarray] = {}
    if counts.groups is not None:
        g = counts.groups
        auc = ratio_of_pairs(g["twice_pairs"], g["positives"], g["negatives"])
        aggregates["gauc"], skipped = gauc(auc, (g["positives"] + g["negatives"]).astype(np.float64))
        aggregates["gauc_groups_skipped"] = float(skipped)
        per_group["auc"] = auc
        with np.errstate(divide="ignore", invalid="ignore"):
            per_group["average_precision"] = np.where(g["positives"] > 0, g["precision_sum"] / g["positives"], np.nan)
        stacked = label_measures(
            _binary_confusion(g["tp"], g["fp"], g["fn"], g["tn"], positive), classes, beta=beta, positive=positive
        )
        per_group.update({name: stacked[name] for name in GROUP_LABEL_MEASURES if name in stacked})
    settings: dict[str, object] = {
        "classes": classes,
        "beta": beta,
        "weighted": False,
        "confusion": cm.tolist(),
        "not_computed": list(CURVE_MEASURES),
    }
    return Suite(aggregates, per_group, None, settings)


# what binary_suite_from_counts leaves out: each needs the whole ROC or precision-recall curve
CURVE_MEASURES = (
    "interpolated_ap_11",
    "break_even",
    "auc_fpr10",
    "threshold_best_f1",
    "threshold_youden",
    "threshold_iso_accuracy",
)


def rela_impr(auc: float, baseline_auc: float) -> float:
    """RelaImpr (Yan et al. 2014): relative AUC lift over a baseline, measured from random (0.5), in %."""
    return ((auc - 0.5) / (baseline_auc - 0.5) - 1) * 100 if baseline_auc != 0.5 else float("nan")


def partial_auc(
    is_positive: np.ndarray, score: np.ndarray, max_fpr: float = 0.1, sample_weight: np.ndarray | None = None
) -> dict[str, float]:
    """The area under the ROC curve up to a false-positive rate of 0.1, McClish-standardised (0.5:
    random, 1: perfect), as scikit-learn's roc_auc_score(max_fpr=0.1) gives it."""
    from sklearn.metrics import roc_auc_score

    w = np.ones(len(score)) if sample_weight is None else sample_weight
    if not (w[is_positive].sum() > 0 and w[~is_positive].sum() > 0):  # one class only: no ROC curve
        return {"auc_fpr10": float("nan")}
    return {"auc_fpr10": float(roc_auc_score(is_positive, score, max_fpr=max_fpr, sample_weight=sample_weight))}


def probability_measures(
    y_true: np.ndarray, probabilities: np.ndarray, k: int, sample_weight: np.ndarray | None = None
) -> dict[str, float]:
    """Log loss and Brier score of class probabilities (n, k) (scikit-learn), and top-2/top-3
    accuracy for more than two classes. Scores that are not probabilities (outside [0, 1]) have
    none of these: they would mean nothing."""
    from sklearn.metrics import brier_score_loss, log_loss, top_k_accuracy_score

    if probabilities.min() < 0 or probabilities.max() > 1:
        return {}
    labels = np.arange(k)
    out = {
        "log_loss": float(log_loss(y_true, probabilities, labels=labels, sample_weight=sample_weight)),
        "brier": float(
            brier_score_loss(
                y_true, probabilities if k > 2 else probabilities[:, 1], labels=labels, sample_weight=sample_weight
            )
        ),
    }
    for top in (2, 3):
        if k > top:
            out[f"top{top}_accuracy"] = float(
                top_k_accuracy_score(y_true, probabilities, k=top, labels=labels, sample_weight=sample_weight)
            )
    return out


def multiclass_auc(y_true: np.ndarray, scores: np.ndarray, sample_weight: np.ndarray | None = None) -> dict[str, float]:
    """One-vs-rest and one-vs-one macro AUC (scikit-learn); rows of ``scores`` are normalised
    to sum to 1 first, as scikit-learn requires probabilities. Weighted items have no
    one-vs-one AUC: scikit-learn defines none (Hand & Till's pairs are unweighted)."""
    from sklearn.metrics import roc_auc_score

    totals = scores.sum(axis=1, keepdims=True)
    probabilities = np.divide(scores, totals, out=np.full_like(scores, 1 / scores.shape[1]), where=totals > 0)
    labels = np.arange(scores.shape[1])
    if len(np.unique(y_true)) < 2:
        return {"auc_ovr": float("nan")} | ({} if sample_weight is not None else {"auc_ovo": float("nan")})
    out = {
        "auc_ovr": float(
            roc_auc_score(y_true, probabilities, multi_class="ovr", labels=labels, sample_weight=sample_weight)
        )
    }
    if sample_weight is None:
        out["auc_ovo"] = float(roc_auc_score(y_true, probabilities, multi_class="ovo", labels=labels))
    return out


# --- multilabel ------------------------------------------------------------------------------


def multilabel(
    y_true: np.ndarray,
    classes: list[str],
    *,
    y_pred: np.ndarray | None = None,
    scores: np.ndarray | None = None,
    threshold: float = 0.5,
    groups: np.ndarray | None = None,
    n_groups: int = 0,
    beta: float = 1.0,
    sample_weight: np.ndarray | None = None,
) -> Suite:
    """The multilabel suite: gold and predicted label sets as (n, k) boolean indicator matrices
    (``y_pred``, or ``scores`` >= ``threshold``). Subset accuracy, Hamming loss, Jaccard and
    precision/recall/F over classes (micro, macro, weighted by support) and over items
    ("samples"), per-class values, and with ``scores`` the label-ranking measures (scikit-learn's
    LRAP, coverage error, ranking loss). Per class and per item counts are two matrix sums;
    scikit-learn's values, for which the property tests hold these, recount per average."""
    n, k = y_true.shape
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    settings: dict[str, object] = {
        "classes": classes,
        "beta": beta,
        "weighted": sample_weight is not None,
        "multilabel": True,
    }
    aggregates: dict[str, float] = {}
    if scores is not None:
        from sklearn.metrics import coverage_error, label_ranking_average_precision_score, label_ranking_loss

        aggregates["lrap"] = float(label_ranking_average_precision_score(y_true, scores, sample_weight=sample_weight))
        aggregates["coverage_error"] = float(coverage_error(y_true, scores, sample_weight=sample_weight))
        aggregates["label_ranking_loss"] = float(label_ranking_loss(y_true, scores, sample_weight=sample_weight))
        if y_pred is None:
            y_pred = scores >= threshold
            settings["threshold"] = threshold
    if y_pred is None:
        raise ValueError("multilabel predictions need label sets or one score per class")
    t, p = y_true.astype(bool), y_pred.astype(bool)
    hit, extra, missed = t & p, ~t & p, t & ~p
    # per class: weighted counts over items
    tp, fp, fn = w @ hit, w @ extra, w @ missed
    support = w @ t
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    f = _f_beta(precision, recall, beta)
    weights = _ratio(support, support.sum())
    micro_p, micro_r = _ratio(tp.sum(), (tp + fp).sum()), _ratio(tp.sum(), (tp + fn).sum())
    # per item: counts over classes
    item_tp, item_fp, item_fn = hit.sum(axis=1), extra.sum(axis=1), missed.sum(axis=1)
    item_p, item_r = _ratio(item_tp, item_tp + item_fp), _ratio(item_tp, item_tp + item_fn)
    per_item = {
        "subset_accuracy": (item_fp + item_fn == 0).astype(np.float64),
        "hamming_loss": (item_fp + item_fn) / k,
        "jaccard_samples": _ratio(item_tp, item_tp + item_fp + item_fn),
        "precision_samples": item_p,
        "recall_samples": item_r,
        "f1_samples": _f_beta(item_p, item_r, beta),
    }
    total = w.sum()
    aggregates.update({name: float(w @ values / total) for name, values in per_item.items()})
    suffix = "" if beta == 1 else f"_beta{beta:g}"
    aggregates.update(
        {
            "precision_micro": float(micro_p),
            "recall_micro": float(micro_r),
            f"f1_micro{suffix}": float(_f_beta(micro_p, micro_r, beta)),
            "precision_macro": float(precision.mean()),
            "recall_macro": float(recall.mean()),
            f"f1_macro{suffix}": float(f.mean()),
            "precision_weighted": float(precision @ weights),
            "recall_weighted": float(recall @ weights),
            f"f1_weighted{suffix}": float(f @ weights),
            "jaccard_macro": float(_ratio(tp, tp + fp + fn).mean()),
            "jaccard_micro": float(_ratio(tp.sum(), (tp + fp + fn).sum())),
        }
    )
    if suffix:
        aggregates[f"f1_samples{suffix}"] = aggregates.pop("f1_samples")
    for name, values in (("precision", precision), ("recall", recall), (f"f1{suffix}", f), ("support", support)):
        for index, label in enumerate(classes):
            aggregates[f"{name}.{label}"] = float(values[index])
    per_group: dict[str, np.ndarray] = {}
    if groups is not None:
        group_weight = np.bincount(groups, weights=w, minlength=n_groups)
        for name in ("subset_accuracy", "hamming_loss", "jaccard_samples", "f1_samples"):
            per_group[name] = _ratio(np.bincount(groups, weights=w * per_item[name], minlength=n_groups), group_weight)
        g_tp, g_fp, g_fn = (np.bincount(groups, weights=w * c, minlength=n_groups) for c in (item_tp, item_fp, item_fn))
        per_group["f1_micro"] = _f_beta(_ratio(g_tp, g_tp + g_fp), _ratio(g_tp, g_tp + g_fn), beta)
    return Suite(aggregates, per_group, None, settings)


# --- clustering ------------------------------------------------------------------------------


def clustering_measures(y_true: np.ndarray, clusters: np.ndarray) -> dict[str, float]:
    """Purity, inverse purity and their F (Amigó, Gonzalo, Artiles & Verdejo 2009); the Rand index
    and its adjusted form, NMI, AMI, homogeneity, completeness, V-measure and Fowlkes-Mallows
    (scikit-learn)."""
    from sklearn import metrics as sk

    n = len(y_true)
    k_true, k_cluster = int(y_true.max()) + 1, int(clusters.max()) + 1
    table = (
        np.bincount(clusters.astype(np.int64) * k_true + y_true, minlength=k_cluster * k_true)
        .reshape(k_cluster, k_true)
        .astype(np.float64)
    )
    cluster_size, class_size = table.sum(axis=1), table.sum(axis=0)
    purity = table.max(axis=1).sum() / n
    inverse_purity = table.max(axis=0).sum() / n
    # F: for each class, its best cluster by van Rijsbergen's F, weighted by class size
    recall = _ratio(table, class_size[None, :])
    precision = _ratio(table, cluster_size[:, None])
    f = _ratio(2 * recall * precision, recall + precision)
    f_measure = float((class_size / n * f.max(axis=0)).sum())
    homogeneity, completeness, v_measure = sk.homogeneity_completeness_v_measure(y_true, clusters)
    # ordered pairs of distinct items: [[apart in both, together in the clusters only], [together
    # in the classes only, together in both]] (ELKI's PairCounting counts each unordered pair once:
    # the ratios are the same, its Mirkin index is 2 x its disagreeing pairs, the sum here)
    (apart, clusters_only), (classes_only, together) = sk.pair_confusion_matrix(y_true, clusters).astype(np.float64)
    disagree = clusters_only + classes_only
    harmonic = 2 * purity * inverse_purity / (purity + inverse_purity) if purity + inverse_purity else 0.0
    return {
        "purity": float(purity),
        "inverse_purity": float(inverse_purity),
        "purity_f": f_measure,
        "purity_harmonic_f": float(harmonic),
        "ari": float(sk.adjusted_rand_score(y_true, clusters)),
        "rand": float(sk.rand_score(y_true, clusters)),
        "pair_jaccard": float(_ratio(together, together + disagree)) if together + disagree else 1.0,
        "pair_f1": float(_ratio(2 * together, 2 * together + disagree)) if together + disagree else 1.0,
        "mirkin": float(disagree),
        "nmi": float(sk.normalized_mutual_info_score(y_true, clusters)),
        "ami": float(sk.adjusted_mutual_info_score(y_true, clusters)),
        "homogeneity": float(homogeneity),
        "completeness": float(completeness),
        "v_measure": float(v_measure),
        "fowlkes_mallows": float(sk.fowlkes_mallows_score(y_true, clusters)),
        "clusters": float(k_cluster),
    }


# --- the suite -------------------------------------------------------------------------------


@dataclass
class Suite:
    """A classification evaluation: aggregates, per-group values (the per-query values of a
    ranking evaluation), curves for plots, and the settings that produced them."""

    aggregates: dict[str, float]
    per_group: dict[str, np.ndarray] = field(default_factory=dict)  # measure -> value per group
    curve: Curve | None = None
    settings: dict[str, object] = field(default_factory=dict)


# the confusion-matrix measures stored per group as well
GROUP_LABEL_MEASURES = (
    "accuracy",
    "error_rate",
    "balanced_accuracy",
    "mcc",
    "kappa",
    "f1_macro",
    "precision_macro",
    "recall_macro",
)


def evaluate(
    y_true: np.ndarray,
    classes: list[str],
    *,
    y_pred: np.ndarray | None = None,
    score: np.ndarray | None = None,
    scores: np.ndarray | None = None,
    groups: np.ndarray | None = None,
    n_groups: int = 0,
    positive: int = 1,
    threshold: float | str | None = None,
    prior: float | None = None,
    costs: np.ndarray | None = None,
    beta: float = 1.0,
    baseline_score: np.ndarray | None = None,
    sample_weight: np.ndarray | None = None,
) -> Suite:
    """The full suite for integer-coded gold labels ``y_true`` (codes into ``classes``) and a
    predicted label, a binary score (P(``positive``)) and/or one score per class; ``groups``
    (codes 0..n_groups-1) give per-group values and GAUC. With ``sample_weight`` every count is
    a sum of weights, as scikit-learn's ``sample_weight``; GAUC then weights each group by its
    items' total weight."""
    k = len(classes)
    binary = k == 2
    w = sample_weight
    settings: dict[str, object] = {"classes": classes, "beta": beta, "weighted": w is not None}
    aggregates: dict[str, float] = {}
    per_group: dict[str, np.ndarray] = {}
    curve = None
    if scores is not None and score is None and binary:
        score = scores[:, positive]
    if score is not None and binary:
        is_positive = y_true == positive
        curve = Curve.of(is_positive, score, w)
        aggregates.update(
            {
                "auc": curve.auc(),
                "average_precision": curve.average_precision(),
                "interpolated_ap_11": curve.interpolated_ap_11(),
                "break_even": curve.break_even(),
            }
        )
        aggregates.update(partial_auc(is_positive, score, sample_weight=w))
        if 0 <= score.min() and score.max() <= 1:
            p_positive = score if positive == 1 else 1 - score
            aggregates.update(probability_measures(y_true, np.column_stack([1 - p_positive, p_positive]), 2, w))
        for rule in THRESHOLD_RULES:
            at, value = curve.best_threshold(rule, prior)
            aggregates[f"threshold_{rule.replace('-', '_')}"] = at
            aggregates[f"threshold_{rule.replace('-', '_')}_value"] = value
        if threshold is not None or y_pred is None:
            # a threshold or rule given decides the labels; without one, the predicted labels do
            # (or 0.5 on the score when there are none)
            given: float | str = 0.5 if threshold is None else threshold
            cut = float(given) if not isinstance(given, str) else curve.best_threshold(given, prior)[0]
            settings["threshold"] = cut
            settings["threshold_rule"] = given if isinstance(given, str) else "given"
            y_pred = labels_at(score, cut, positive)
        if groups is not None:
            auc, ap, sizes = group_auc(is_positive, score, groups, n_groups, curve.score_rank, w)
            aggregates["gauc"], skipped = gauc(auc, sizes)
            aggregates["gauc_groups_skipped"] = float(skipped)
            per_group["auc"] = auc
            per_group["average_precision"] = ap
        if baseline_score is not None:
            base = Curve.of(is_positive, baseline_score, w)
            aggregates["rela_impr"] = rela_impr(aggregates["auc"], base.auc())
            if groups is not None:
                base_auc, _, base_sizes = group_auc(is_positive, baseline_score, groups, n_groups, base.score_rank, w)
                aggregates["rela_impr_gauc"] = rela_impr(aggregates["gauc"], gauc(base_auc, base_sizes)[0])
    if scores is not None and not binary:
        aggregates.update(multiclass_auc(y_true, scores, w))
        if np.allclose(scores.sum(axis=1), 1.0, atol=1e-6):  # class probabilities, not just scores
            aggregates.update(probability_measures(y_true, scores, k, w))
        if y_pred is None:
            y_pred = np.argmax(scores, axis=1)
    if y_pred is None:
        raise ValueError("predictions need a label, a binary score or one score per class")
    cm = confusion(y_true, y_pred, k, weight=w)
    values = label_measures(cm, classes, beta=beta, positive=positive if binary else None)
    aggregates.update({name: float(v) for name, v in values.items()})
    if costs is not None:
        aggregates["cost"], aggregates["cost_per_item"] = expected_cost(cm, costs)
    if groups is not None:
        stacked = label_measures(
            confusion(y_true, y_pred, k, groups, n_groups, w), classes, beta=beta, positive=positive if binary else None
        )
        for name in GROUP_LABEL_MEASURES:
            if name in stacked:
                per_group[name] = stacked[name]
    settings["confusion"] = cm.tolist()
    return Suite(aggregates, per_group, curve, settings)


# --- the registry's entries ------------------------------------------------------------------------


class _Entry(NamedTuple):
    """One measure of the suite as the registry lists it: ``headline``, shown by default where
    results are summed up."""

    name: str
    description: str
    reference: str
    higher_is_better: bool = True
    headline: bool = False


_SK = "scikit-learn sklearn.metrics"
_CLASSIFIER_MEASURES = [
    _Entry("accuracy", "share of items labelled right", f"{_SK}.accuracy_score", headline=True),
    _Entry(
        "error_rate",
        "share of items labelled wrong (1 - accuracy)",
        f"1 - {_SK}.accuracy_score",
        higher_is_better=False,
    ),
    _Entry("balanced_accuracy", "mean recall over the classes present", f"{_SK}.balanced_accuracy_score"),
    *[
        _Entry(
            f"{m}_{avg}",
            f"{m} averaged over classes ({avg}); F-beta with --beta",
            f"{_SK}.{m}_score(average='{avg}')",
            headline=(m, avg) == ("f1", "macro"),
        )
        for avg in ("micro", "macro", "weighted")
        for m in ("precision", "recall", "f1")
    ],
    _Entry(
        "mcc",
        "Matthews correlation coefficient (multiclass: Gorodkin's R_K)",
        f"{_SK}.matthews_corrcoef",
        headline=True,
    ),
    _Entry("kappa", "Cohen's kappa of labels against gold", f"{_SK}.cohen_kappa_score"),
    _Entry("specificity_macro", "true-negative rate averaged over classes", "1 - fallout; Sokolova & Lapalme 2009"),
    _Entry(
        "fallout_macro", "false-positive rate averaged over classes", "Sokolova & Lapalme 2009", higher_is_better=False
    ),
    *[
        _Entry(m, f"{m} of the positive class (binary); '{m}.<class>' for each class", f"{_SK}.{m}_score")
        for m in ("precision", "recall", "f1")
    ],
    _Entry(
        "specificity",
        "true-negative rate of the positive class; 'specificity.<class>' for each",
        "Sokolova & Lapalme 2009",
    ),
    _Entry(
        "fallout",
        "false-positive rate of the positive class; 'fallout.<class>' for each",
        "Sokolova & Lapalme 2009",
        higher_is_better=False,
    ),
    _Entry(
        "generality",
        "share of gold items in the positive class; 'generality.<class>' for each",
        "Sokolova & Lapalme 2009",
    ),
    _Entry(
        "support",
        "gold items in the positive class; 'support.<class>' for each",
        f"{_SK}.precision_recall_fscore_support",
    ),
    _Entry(
        "auc", "area under the ROC curve of the binary score (ties count half)", f"{_SK}.roc_auc_score", headline=True
    ),
    _Entry(
        "gauc",
        "group AUC: per-group AUC weighted by group size, over groups with both classes",
        "Zhou et al., KDD 2018 (DIN)",
        headline=True,
    ),
    _Entry(
        "gauc_groups_skipped",
        "groups left out of GAUC (one class only)",
        "Zhou et al., KDD 2018",
        higher_is_better=False,
    ),
    _Entry(
        "average_precision",
        "average precision of the binary score (step definition)",
        f"{_SK}.average_precision_score",
        headline=True,
    ),
    _Entry(
        "interpolated_ap_11", "11-point interpolated average precision of the binary score", "TREC 11-point average"
    ),
    _Entry("break_even", "precision where it equals recall on the precision-recall curve", "Lewis 1992"),
    *[
        _Entry(
            f"threshold_{rule.replace('-', '_')}{part}",
            f"{'value at ' if part else ''}the score threshold chosen by {rule}",
            "--threshold rules; Youden 1950 (youden)",
        )
        for rule in THRESHOLD_RULES
        for part in ("", "_value")
    ],
    _Entry("rela_impr", "relative AUC improvement over --baseline", "Yan et al., KDD 2014 (RelaImpr)"),
    _Entry("rela_impr_gauc", "relative GAUC improvement over --baseline", "Yan et al., KDD 2014 (RelaImpr)"),
    _Entry(
        "auc_fpr10",
        "partial AUC up to a false-positive rate of 0.1, McClish-standardised",
        f"{_SK}.roc_auc_score(max_fpr=0.1)",
    ),
    _Entry("log_loss", "cross-entropy of the predicted class probabilities", f"{_SK}.log_loss", higher_is_better=False),
    _Entry(
        "brier",
        "Brier score: mean squared error of the class probabilities",
        f"{_SK}.brier_score_loss",
        higher_is_better=False,
    ),
    *[
        _Entry(
            f"top{k}_accuracy",
            f"share of items whose gold class is among the {k} highest scores",
            f"{_SK}.top_k_accuracy_score(k={k})",
        )
        for k in (2, 3)
    ],
    _Entry(
        "jaccard_macro",
        "Jaccard index (TP / (TP + FP + FN)) averaged over classes",
        f"{_SK}.jaccard_score(average='macro')",
    ),
    _Entry(
        "subset_accuracy",
        "multilabel: share of items whose predicted label set is exactly the gold set",
        f"{_SK}.accuracy_score (indicator matrices)",
        headline=True,
    ),
    _Entry(
        "hamming_loss",
        "multilabel: share of item-class decisions made wrong",
        f"{_SK}.hamming_loss",
        higher_is_better=False,
        headline=True,
    ),
    _Entry("jaccard_micro", "Jaccard index of the pooled counts over classes", f"{_SK}.jaccard_score(average='micro')"),
    _Entry(
        "jaccard_samples",
        "multilabel: Jaccard index of each item's label sets, averaged over items",
        f"{_SK}.jaccard_score(average='samples')",
        headline=True,
    ),
    *[
        _Entry(
            f"{m}_samples",
            f"multilabel: {m} of each item's label set, averaged over items",
            f"{_SK}.{m}_score(average='samples')",
        )
        for m in ("precision", "recall", "f1")
    ],
    _Entry(
        "lrap",
        "multilabel: label-ranking average precision of the per-class scores",
        f"{_SK}.label_ranking_average_precision_score",
    ),
    _Entry(
        "coverage_error",
        "multilabel: how far down the per-class scores all gold labels are found",
        f"{_SK}.coverage_error",
        higher_is_better=False,
    ),
    _Entry(
        "label_ranking_loss",
        "multilabel: share of (gold, other) label pairs the scores order wrong",
        f"{_SK}.label_ranking_loss",
        higher_is_better=False,
    ),
    _Entry("auc_ovr", "multiclass AUC, one-vs-rest", f"{_SK}.roc_auc_score(multi_class='ovr')"),
    _Entry("auc_ovo", "multiclass AUC, one-vs-one", f"{_SK}.roc_auc_score(multi_class='ovo')"),
    _Entry(
        "cost",
        "expected cost of the confusion matrix under --cost-matrix",
        "Elkan 2001",
        higher_is_better=False,
        headline=True,
    ),
    _Entry("cost_per_item", "expected cost per item under --cost-matrix", "Elkan 2001", higher_is_better=False),
]
_CLUSTERING_MEASURES = [
    _Entry(
        "purity",
        "share of items in their cluster's majority class",
        "Zhao & Karypis 2001; Amigo et al. 2009",
        headline=True,
    ),
    _Entry("inverse_purity", "share of items in their class's majority cluster", "Amigo et al. 2009"),
    _Entry(
        "purity_f",
        "F of purity and inverse purity: each class's best cluster by F, weighted by class size",
        "Amigo et al. 2009",
        headline=True,
    ),
    _Entry("purity_harmonic_f", "harmonic mean of purity and inverse purity", "Zhao & Karypis 2001"),
    _Entry("ari", "adjusted Rand index", f"{_SK}.adjusted_rand_score"),
    _Entry("nmi", "normalised mutual information", f"{_SK}.normalized_mutual_info_score", headline=True),
    _Entry("ami", "adjusted mutual information", f"{_SK}.adjusted_mutual_info_score"),
    _Entry("rand", "Rand index: share of item pairs the clustering and the classes treat alike", f"{_SK}.rand_score"),
    _Entry(
        "pair_jaccard",
        "pair-counting Jaccard: item pairs together in both over pairs together in either (1 when no pair is "
        "together in either)",
        "ELKI PairCounting.jaccard; from sklearn.metrics.cluster.pair_confusion_matrix",
    ),
    _Entry(
        "pair_f1",
        "pair-counting F1: the F of the pairs put together against the pairs of one class (1 when no pair is "
        "together in either)",
        "ELKI PairCounting.f1Measure; from sklearn.metrics.cluster.pair_confusion_matrix",
    ),
    _Entry(
        "mirkin",
        "Mirkin metric: twice the item pairs the clustering and the classes treat differently (sum of squared "
        "class and cluster sizes less twice the squared cells)",
        "Mirkin 1996; ELKI PairCounting.mirkin; from sklearn.metrics.cluster.pair_confusion_matrix",
        higher_is_better=False,
    ),
    _Entry("homogeneity", "each cluster holds one class only", f"{_SK}.homogeneity_score"),
    _Entry("completeness", "each class lies in one cluster only", f"{_SK}.completeness_score"),
    _Entry("v_measure", "harmonic mean of homogeneity and completeness", f"{_SK}.v_measure_score"),
    _Entry("fowlkes_mallows", "geometric mean of pairwise precision and recall", f"{_SK}.fowlkes_mallows_score"),
    _Entry("clusters", "number of clusters", "count"),
]
for _kind, _table in (("classifier", _CLASSIFIER_MEASURES), ("clustering", _CLUSTERING_MEASURES)):
    for _entry in _table:
        register_prediction_measure(
            _entry.name,
            _kind,
            description=_entry.description,
            reference=_entry.reference,
            higher_is_better=_entry.higher_is_better,
            headline=_entry.headline,
        )
