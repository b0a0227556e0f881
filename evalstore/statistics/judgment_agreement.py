"""How far two sets of judgments agree, at the three levels reported together (issue 39): the
labels (Cohen's kappa, weighted kappa, Krippendorff's alpha, the confusion matrix and the mean
label difference, overall and per topic), the order of systems evaluated on each (Kendall's tau,
tau-AP, swaps among the top k) and the significance decisions (of the system pairs significant
under the first, the share still significant, in the same direction, under the second).

Pure computation on arrays: the service reads the qrels and evaluates the runs. Kappa is
scikit-learn's, alpha krippendorff's, tau scipy's (through :mod:`evalstore.statistics.pooling`
and :mod:`evalstore.statistics.significance`); tau-AP has no well-kept implementation and is
:func:`evalstore.statistics.significance.tau_ap`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalstore.statistics.pooling import cohen_kappa
from evalstore.statistics.significance import paired_test, rank_correlation


@dataclass(frozen=True)
class TopicLabels:
    topic: str
    items: int
    observed: float
    kappa: float
    mean_difference: float  # second minus first: above 0, the second rates higher


@dataclass(frozen=True)
class LabelAgreement:
    items: int
    labels: list[int]
    observed: float  # share of items labelled alike
    kappa: float
    weighted_kappa: float  # linear weights
    quadratic_kappa: float
    krippendorff_alpha: float | None  # ordinal
    confusion: list[list[int]]  # rows: the first's label, columns: the second's (``labels`` order)
    mean_difference: float  # second minus first (over-rating when the second is a judge)
    rated_higher: int  # items the second labels above the first
    rated_lower: int
    per_topic: list[TopicLabels] = field(default_factory=list)


def _kappa(first: np.ndarray, second: np.ndarray, weights: str | None = None) -> float:
    with np.errstate(invalid="ignore", divide="ignore"):
        return cohen_kappa(first, second, weights=weights)


def label_agreement(topics: np.ndarray, first: np.ndarray, second: np.ndarray) -> LabelAgreement:
    """Agreement of two labels of the same items (one item a row; ``topics`` names each row's topic)."""
    import krippendorff
    from sklearn.metrics import confusion_matrix

    first = np.asarray(first, dtype=np.int64)
    second = np.asarray(second, dtype=np.int64)
    topics = np.asarray(topics, dtype=object)
    if len(first) == 0:
        raise ValueError("no item is labelled in both sets of judgments")
    labels = sorted(set(first.tolist()) | set(second.tolist()))
    alpha = None
    if len(labels) > 1:
        alpha = float(
            krippendorff.alpha(
                reliability_data=np.vstack([first, second]).astype(float),
                level_of_measurement="ordinal",
                value_domain=labels,
            )
        )
    per_topic = []
    for topic in sorted(set(topics.tolist()), key=_natural):
        mask = topics == topic
        a, b = first[mask], second[mask]
        per_topic.append(
            TopicLabels(str(topic), int(mask.sum()), float((a == b).mean()), _kappa(a, b), float((b - a).mean()))
        )
    return LabelAgreement(
        items=len(first),
        labels=labels,
        observed=float((first == second).mean()),
        kappa=_kappa(first, second),
        weighted_kappa=_kappa(first, second, "linear"),
        quadratic_kappa=_kappa(first, second, "quadratic"),
        krippendorff_alpha=alpha,
        # one label only: scikit-learn warns that the matrix may lack labels; it is one cell
        confusion=[[len(first)]] if len(labels) == 1 else confusion_matrix(first, second, labels=labels).tolist(),
        mean_difference=float((second - first).mean()),
        rated_higher=int((second > first).sum()),
        rated_lower=int((second < first).sum()),
        per_topic=per_topic,
    )


def _natural(value: Any) -> tuple[int, Any]:
    text = str(value)
    return (0, int(text)) if text.isdigit() else (1, text)


@dataclass(frozen=True)
class SystemAgreement:
    systems: int
    kendall_tau: float
    tau_ap: float
    top_k: int
    top_k_swaps: int  # pairs among the first's top k systems that the second orders the other way
    top_k_pairs: int
    swapped: list[tuple[str, str]]  # all swapped pairs, the first's best first
    scores: dict[str, tuple[float, float]]  # system -> (mean under the first, under the second)


def system_agreement(names: list[str], first: np.ndarray, second: np.ndarray, *, top_k: int = 5) -> SystemAgreement:
    """The order of systems by their mean scores under each set of judgments (higher is better)."""
    first = np.asarray(first, dtype=float)
    second = np.asarray(second, dtype=float)
    correlation = rank_correlation(names, first, second)
    k = min(top_k, len(names))
    top = np.argsort(-first, kind="stable")[:k]
    swaps = sum(
        1
        for i, x in enumerate(top)
        for y in top[i + 1 :]
        if np.sign(first[x] - first[y]) * np.sign(second[x] - second[y]) < 0
    )
    return SystemAgreement(
        len(names),
        correlation.kendall_tau,
        correlation.tau_ap,
        k,
        swaps,
        k * (k - 1) // 2,
        correlation.swapped,
        {n: (float(a), float(b)) for n, a, b in zip(names, first, second, strict=True)},
    )


@dataclass(frozen=True)
class SignificanceAgreement:
    test: str
    alpha: float
    pairs: int
    significant_first: int
    significant_second: int
    preserved: int  # significant under both, in the same direction
    reversed: int  # significant under both, in opposite directions
    share_preserved: float | None  # preserved / significant_first (None: nothing significant under the first)
    gained: int  # significant under the second only


def significance_agreement(
    first: np.ndarray,
    second: np.ndarray,
    *,
    test: str = "t",
    alpha: float = 0.05,
    rng: np.random.Generator | None = None,
) -> SignificanceAgreement:
    """Paired tests of every pair of systems under each set of judgments. ``first`` and ``second``
    are systems x topics score matrices over the same topics (Otero, Parapar & Ferro 2023: cheaper
    judgments should keep the significance decisions, not only the order)."""
    first = np.asarray(first, dtype=float)
    second = np.asarray(second, dtype=float)
    count = first.shape[0]
    rows, cols = np.triu_indices(count, 1)
    if len(rows) == 0:
        return SignificanceAgreement(test, alpha, 0, 0, 0, 0, 0, None, 0)
    a = paired_test(first[rows] - first[cols], test, rng=rng)
    b = paired_test(second[rows] - second[cols], test, rng=rng)
    sign_a = np.sign((first[rows] - first[cols]).mean(axis=1))
    sign_b = np.sign((second[rows] - second[cols]).mean(axis=1))
    sig_a = np.nan_to_num(a.p_value, nan=1.0) < alpha
    sig_b = np.nan_to_num(b.p_value, nan=1.0) < alpha
    preserved = int((sig_a & sig_b & (sign_a == sign_b)).sum())
    reversed_ = int((sig_a & sig_b & (sign_a != sign_b)).sum())
    return SignificanceAgreement(
        test,
        alpha,
        len(rows),
        int(sig_a.sum()),
        int(sig_b.sum()),
        preserved,
        reversed_,
        preserved / int(sig_a.sum()) if sig_a.any() else None,
        int((sig_b & ~sig_a).sum()),
    )
