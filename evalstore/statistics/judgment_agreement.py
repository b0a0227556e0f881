"""How far two sets of judgments agree, at the three levels reported together: the labels
(Cohen's kappa, weighted kappa, Krippendorff's alpha ordinal and nominal, the confusion matrix,
over-labelling, and the agreement of the relevant sets at a grade; overall and per topic), the
order of systems evaluated on each (Kendall's tau-b, Spearman, Pearson, tau-AP, tau_AP_b with
ties, tau over the first's top k, the mean per-topic tau, swaps among the top k) and the
significance decisions (of the system pairs significant under the first, the shares kept,
reversed and lost under the second).

Pure computation on arrays: the service reads the qrels and evaluates the runs. Kappa is
scikit-learn's, alpha krippendorff's, tau, rho and r scipy's (through
:mod:`evalstore.statistics.pooling` and :mod:`evalstore.statistics.significance`); tau-AP and
tau_AP_b have no well-kept implementation and are :func:`evalstore.statistics.significance.tau_ap`
and :func:`evalstore.statistics.significance.tau_ap_b`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from evalstore.statistics.pooling import cohen_kappa
from evalstore.statistics.significance import correct, paired_test, rank_correlation, tau_ap_b


@dataclass(frozen=True)
class TopicLabels:
    topic: str
    items: int
    observed: float
    kappa: float
    mean_difference: float  # second minus first: above 0, the second rates higher


@dataclass(frozen=True)
class SetAgreement:
    """The relevant sets (grade ``relevant_from`` or more) of both, the first taken as the truth."""

    relevant_from: int
    relevant_first: int
    relevant_second: int
    relevant_both: int
    precision: float | None  # of the second's relevant items, the share the first calls relevant
    recall: float | None  # of the first's relevant items, the share the second calls relevant
    f1: float | None
    jaccard: float | None  # both / either
    kappa: float  # Cohen's kappa of the binarised labels


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
    krippendorff_alpha_nominal: float | None = None
    over_labelling: float = 0.0  # rated_higher / items: how often the second grades above the first
    under_labelling: float = 0.0  # rated_lower / items
    relevant: SetAgreement | None = None


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def set_agreement(first: np.ndarray, second: np.ndarray, relevant_from: int) -> SetAgreement:
    """Agreement of the relevant sets at ``relevant_from`` (F1 is the harmonic mean of precision
    and recall; None where a share has nothing to be a share of)."""
    a = np.asarray(first) >= relevant_from
    b = np.asarray(second) >= relevant_from
    both, either = int((a & b).sum()), int((a | b).sum())
    precision, recall = _ratio(both, int(b.sum())), _ratio(both, int(a.sum()))
    f1 = (
        None
        if precision is None or recall is None
        else (0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall))
    )
    return SetAgreement(
        relevant_from,
        int(a.sum()),
        int(b.sum()),
        both,
        precision,
        recall,
        f1,
        _ratio(both, either),
        _kappa(a.astype(np.int64), b.astype(np.int64)),
    )


def _kappa(first: np.ndarray, second: np.ndarray, weights: str | None = None) -> float:
    with np.errstate(invalid="ignore", divide="ignore"):
        return cohen_kappa(first, second, weights=weights)


def label_agreement(
    topics: np.ndarray, first: np.ndarray, second: np.ndarray, *, relevant_from: int = 1
) -> LabelAgreement:
    """Agreement of two labels of the same items (one item a row; ``topics`` names each row's
    topic); the relevant sets are those at grade ``relevant_from`` or more."""
    import krippendorff
    from sklearn.metrics import confusion_matrix

    first = np.asarray(first, dtype=np.int64)
    second = np.asarray(second, dtype=np.int64)
    topics = np.asarray(topics, dtype=object)
    if len(first) == 0:
        raise ValueError("no item is labelled in both sets of judgments")
    labels = sorted(set(first.tolist()) | set(second.tolist()))
    alpha: dict[str, float | None] = {"ordinal": None, "nominal": None}
    if len(labels) > 1:
        levels: tuple[Literal["ordinal"], Literal["nominal"]] = ("ordinal", "nominal")
        for level in levels:
            alpha[level] = float(
                krippendorff.alpha(
                    reliability_data=np.vstack([first, second]).astype(float),
                    level_of_measurement=level,
                    value_domain=labels,
                )
            )
    per_topic = []
    # each topic's rows found once (a mask per topic is topics x items comparisons of objects)
    codes, names = pd.factorize(pd.Series(topics, dtype=object))
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    rows = {names[i]: order[bounds[i] : bounds[i + 1]] for i in range(len(names))}
    for topic in sorted(rows, key=_natural):
        a, b = first[rows[topic]], second[rows[topic]]
        per_topic.append(TopicLabels(str(topic), len(a), float((a == b).mean()), _kappa(a, b), float((b - a).mean())))
    return LabelAgreement(
        items=len(first),
        labels=labels,
        observed=float((first == second).mean()),
        kappa=_kappa(first, second),
        weighted_kappa=_kappa(first, second, "linear"),
        quadratic_kappa=_kappa(first, second, "quadratic"),
        krippendorff_alpha=alpha["ordinal"],
        # one label only: scikit-learn warns that the matrix may lack labels; it is one cell
        confusion=[[len(first)]] if len(labels) == 1 else confusion_matrix(first, second, labels=labels).tolist(),
        mean_difference=float((second - first).mean()),
        rated_higher=int((second > first).sum()),
        rated_lower=int((second < first).sum()),
        per_topic=per_topic,
        krippendorff_alpha_nominal=alpha["nominal"],
        over_labelling=float((second > first).mean()),
        under_labelling=float((second < first).mean()),
        relevant=set_agreement(first, second, relevant_from),
    )


def _natural(value: Any) -> tuple[int, Any]:
    text = str(value)
    return (0, int(text)) if text.isdigit() else (1, text)


@dataclass(frozen=True)
class SystemAgreement:
    systems: int
    kendall_tau: float  # tau-b (scipy's kendalltau)
    tau_ap: float  # Yilmaz et al., the first as the reference, ties in the second broken by it
    top_k: int
    top_k_swaps: int  # pairs among the first's top k systems that the second orders the other way
    top_k_pairs: int
    swapped: list[tuple[str, str]]  # all swapped pairs, the first's best first
    scores: dict[str, tuple[float, float]]  # system -> (mean under the first, under the second)
    spearman: float = float("nan")
    pearson: float = float("nan")
    tau_ap_b: float = float("nan")  # with ties, the mean of both directions (autojudge-evaluate's)
    tau_at_k: float | None = None  # Kendall's tau-b over the first's top k systems
    per_topic_tau: float | None = None  # the mean over topics of tau-b of the systems' order on each
    per_topic_topics: int = 0  # topics the mean is over
    per_topic_undefined: int = 0  # topics where either order is all ties (tau undefined), left out


def _quiet_correlation(name: str, first: np.ndarray, second: np.ndarray) -> float:
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: scipy warns and returns nan, which we report
        if name == "kendall":
            return float(stats.kendalltau(first, second).statistic)
        if name == "spearman":
            return float(stats.spearmanr(first, second).statistic)
        return float(stats.pearsonr(first, second).statistic)


def system_agreement(
    names: list[str],
    first: np.ndarray,
    second: np.ndarray,
    *,
    top_k: int = 5,
    per_topic_first: np.ndarray | None = None,
    per_topic_second: np.ndarray | None = None,
) -> SystemAgreement:
    """The order of systems by their mean scores under each set of judgments (higher is better);
    with the systems x topics scores, the mean of the per-topic tau-b too (a topic where either
    order is all ties has no tau and is counted apart)."""
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
    topic_taus: list[float] = []
    undefined = 0
    if per_topic_first is not None and per_topic_second is not None:
        a, b = np.asarray(per_topic_first, dtype=float), np.asarray(per_topic_second, dtype=float)
        for column in range(a.shape[1]):
            tau = _quiet_correlation("kendall", a[:, column], b[:, column])
            if np.isnan(tau):
                undefined += 1
            else:
                topic_taus.append(tau)
    return SystemAgreement(
        len(names),
        correlation.kendall_tau,
        correlation.tau_ap,
        k,
        swaps,
        k * (k - 1) // 2,
        correlation.swapped,
        {n: (float(a), float(b)) for n, a, b in zip(names, first, second, strict=True)},
        spearman=correlation.spearman_rho,
        pearson=_quiet_correlation("pearson", first, second),
        tau_ap_b=tau_ap_b(first, second),
        tau_at_k=_quiet_correlation("kendall", first[top], second[top]) if k >= 2 else None,
        per_topic_tau=float(np.mean(topic_taus)) if topic_taus else None,
        per_topic_topics=len(topic_taus),
        per_topic_undefined=undefined,
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
    correction: str = "none"  # of the p-values, over all pairs, under each set of judgments apart
    lost: int = 0  # significant under the first only
    share_reversed: float | None = None  # reversed / significant_first
    share_lost: float | None = None  # lost / significant_first


def significance_agreement(
    first: np.ndarray,
    second: np.ndarray,
    *,
    test: str = "t",
    alpha: float = 0.05,
    correction: str = "none",
    rng: np.random.Generator | None = None,
) -> SignificanceAgreement:
    """Paired tests of every pair of systems under each set of judgments, their p-values corrected
    over the pairs (``correction``: :data:`evalstore.statistics.significance.CORRECTIONS`) as
    `evalstore compare` does. ``first`` and ``second`` are systems x topics score matrices over the
    same topics (Otero, Parapar & Ferro 2023: cheaper judgments should keep the significance
    decisions, not only the order). Of the pairs significant under the first, each is kept (the
    same direction under the second), reversed, or lost (not significant under the second)."""
    first = np.asarray(first, dtype=float)
    second = np.asarray(second, dtype=float)
    count = first.shape[0]
    rows, cols = np.triu_indices(count, 1)
    if len(rows) == 0:
        return SignificanceAgreement(test, alpha, 0, 0, 0, 0, 0, None, 0, correction)
    a = paired_test(first[rows] - first[cols], test, rng=rng)
    b = paired_test(second[rows] - second[cols], test, rng=rng)
    sign_a = np.sign((first[rows] - first[cols]).mean(axis=1))
    sign_b = np.sign((second[rows] - second[cols]).mean(axis=1))
    sig_a = correct(np.nan_to_num(a.p_value, nan=1.0), correction, alpha) < alpha
    sig_b = correct(np.nan_to_num(b.p_value, nan=1.0), correction, alpha) < alpha
    preserved = int((sig_a & sig_b & (sign_a == sign_b)).sum())
    reversed_ = int((sig_a & sig_b & (sign_a != sign_b)).sum())
    lost = int((sig_a & ~sig_b).sum())
    significant = int(sig_a.sum())
    return SignificanceAgreement(
        test,
        alpha,
        len(rows),
        significant,
        int(sig_b.sum()),
        preserved,
        reversed_,
        _ratio(preserved, significant),
        int((sig_b & ~sig_a).sum()),
        correction,
        lost,
        _ratio(reversed_, significant),
        _ratio(lost, significant),
    )
