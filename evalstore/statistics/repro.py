"""Reproducibility and replicability measures (Breuer et al., "How to Measure the Reproducibility
of System-oriented IR Experiments", SIGIR 2020), as ``repro_eval`` 0.5 computes them:

- document order (reproducibility only, same topics): Kendall's tau Union (KTU) and rank-biased
  overlap (RBO) per topic, and their means;
- effectiveness: RMSE and normalised RMSE of the per-topic values of a measure;
- overall effects, when baselines are given: the effect ratio (ER) and the delta relative
  improvement (DeltaRI);
- the two-sided t-test between original and reproduced per-topic values: paired for a
  reproduction (the same topics), unpaired (Student's, equal variances) for a replication.

Pure numpy/scipy over rankings and per-topic values; the service (:mod:`evalstore.services.repro`)
reads them from the store. Written here rather than imported: ``repro_eval`` reads files through
ir_measures and pytrec_eval and re-evaluates the runs itself, where evalstore has the rankings and
per-topic values stored already; the differential test (tests/differential/test_against_repro_eval.py)
holds the formulas to its values.

Ranking order. repro_eval takes a run's documents in file order and only reorders runs of equal
scores that stand next to each other (docno descending). evalstore ranks as trec_eval does
everywhere else: score descending, then docno descending. The two agree on any run file sorted by
score (TREC runs are); on an unsorted file repro_eval's KTU and RBO compare file orders, which the
measures computed on the same runs (trec_eval's) do not use, so evalstore follows trec_eval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

RUN_LENGTH = 1000  # repro_eval's default: KTU compares the top 1,000 documents of each ranking
RBO_DEPTH = 1000  # and RBO sums to depth 1,000
RBO_P = 0.95  # with persistence 0.95


def ranked_documents(run: pa.Table, depth: int | None = None) -> dict[str, list[str]]:
    """Each topic's documents (columns topic, doc, score) in trec_eval's order: score descending,
    then docno descending; the top ``depth`` of them when given."""
    frame = run.select(["topic", "doc", "score"]).to_pandas()
    frame["topic"] = frame["topic"].astype(str)
    frame["doc"] = frame["doc"].astype(str)
    frame = frame.sort_values(["topic", "score", "doc"], ascending=[True, False, False], kind="mergesort")
    ranked: dict[str, list[str]] = {}
    for topic, docs in frame.groupby("topic", sort=True)["doc"]:
        ranked[str(topic)] = docs.tolist()[:depth] if depth is not None else docs.tolist()
    return ranked


def ktu(original: Sequence[str], reproduced: Sequence[str], depth: int = RUN_LENGTH) -> float:
    """Kendall's tau Union of two rankings, as repro_eval computes it: both cut at ``depth``, each
    document replaced by its position in the sorted union of the two, and Kendall's tau-b between
    the two sequences, rank by rank (rounded to 14 decimals, as repro_eval does). repro_eval
    raises when the rankings differ in length; here both are cut to the shorter one first."""
    from scipy.stats import kendalltau

    first, second = list(original[:depth]), list(reproduced[:depth])
    length = min(len(first), len(second))
    first, second = first[:length], second[:length]
    union = {doc: i for i, doc in enumerate(sorted(set(first) | set(second)))}
    if length < 2:
        return math.nan  # tau of fewer than two pairs is undefined (scipy: nan)
    tau = kendalltau([union[d] for d in first], [union[d] for d in second]).statistic
    return float(round(float(tau), 14))


def rbo(original: Sequence[str], reproduced: Sequence[str], p: float = RBO_P, depth: int = RBO_DEPTH) -> float:
    """Rank-biased overlap to ``depth`` with persistence ``p``, normalised by the weights summed
    (Clarke et al.'s form, which repro_eval uses): sum_i p^(i-1) |A_i & B_i| / i / sum_i p^(i-1)."""
    if not 0 < p <= 1:
        raise ValueError(f"RBO's persistence p must be in (0, 1], not {p}")
    seen_original: set[str] = set()
    seen_reproduced: set[str] = set()
    overlap = 0
    score = normaliser = 0.0
    weight = 1.0
    for i in range(depth):
        # the overlap grows by the documents newly seen in both (kept as a count: O(depth))
        if i < len(reproduced):
            doc = reproduced[i]
            if doc not in seen_reproduced:
                seen_reproduced.add(doc)
                overlap += doc in seen_original
        if i < len(original):
            doc = original[i]
            if doc not in seen_original:
                seen_original.add(doc)
                overlap += doc in seen_reproduced
        score += weight * overlap / (i + 1)
        normaliser += weight
        weight *= p
    return score / normaliser


def rmse(original: np.ndarray, reproduced: np.ndarray) -> float:
    """Root mean square error between per-topic values, aligned by topic."""
    diff = np.asarray(original, dtype=float) - np.asarray(reproduced, dtype=float)
    return math.sqrt(float(np.sum(np.square(diff))) / len(diff))


def nrmse(original: np.ndarray, reproduced: np.ndarray) -> float:
    """RMSE divided by the largest RMSE the original values allow (each reproduced value as far
    from its original as [0, 1] permits: max(x, 1 - x)), as repro_eval normalises it."""
    values = np.asarray(original, dtype=float)
    worst = math.sqrt(float(np.sum(np.square(np.maximum(values, 1 - values)))) / len(values))
    return rmse(original, reproduced) / worst if worst else math.nan


def effect_ratio(
    original_advanced: np.ndarray,
    original_baseline: np.ndarray,
    reproduced_advanced: np.ndarray,
    reproduced_baseline: np.ndarray,
) -> float:
    """ER: the reproduced mean per-topic improvement over the baseline divided by the original's
    (each pair of arrays aligned by topic)."""
    improvement = float(np.mean(np.asarray(original_advanced) - np.asarray(original_baseline)))
    reproduced = float(np.mean(np.asarray(reproduced_advanced) - np.asarray(reproduced_baseline)))
    return reproduced / improvement if improvement else math.nan


def delta_ri(
    original_advanced: np.ndarray,
    original_baseline: np.ndarray,
    reproduced_advanced: np.ndarray,
    reproduced_baseline: np.ndarray,
) -> float:
    """DeltaRI: the original's relative improvement of the mean minus the reproduction's."""

    def relative(advanced: np.ndarray, baseline: np.ndarray) -> float:
        base = float(np.mean(baseline))
        return (float(np.mean(advanced)) - base) / base if base else math.nan

    return relative(np.asarray(original_advanced), np.asarray(original_baseline)) - relative(
        np.asarray(reproduced_advanced), np.asarray(reproduced_baseline)
    )


def t_test(original: np.ndarray, reproduced: np.ndarray, *, paired: bool) -> float:
    """The two-sided t-test's p-value: paired (ttest_rel, arrays aligned by topic) or unpaired
    (ttest_ind, Student's). Where scipy gives nan because the two are identical, 1.0 (repro_eval's
    rule: identical scores are not different)."""
    from scipy.stats import ttest_ind, ttest_rel

    first, second = np.asarray(original, dtype=float), np.asarray(reproduced, dtype=float)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a zero variance: nan, handled below
        p = float((ttest_rel(first, second) if paired else ttest_ind(first, second)).pvalue)
    if math.isnan(p) and first.shape == second.shape and np.array_equal(first, second):
        return 1.0
    return p


@dataclass(frozen=True)
class DocumentOrder:
    topics: list[str]
    ktu: list[float]
    rbo: list[float]

    @property
    def mean_ktu(self) -> float:
        return float(np.mean(self.ktu)) if self.ktu else math.nan

    @property
    def mean_rbo(self) -> float:
        return float(np.mean(self.rbo)) if self.rbo else math.nan


def document_order(
    original: Mapping[str, Sequence[str]],
    reproduced: Mapping[str, Sequence[str]],
    *,
    depth: int = RUN_LENGTH,
    p: float = RBO_P,
) -> DocumentOrder:
    """KTU and RBO for each topic both rankings hold (sorted by topic id)."""
    topics = sorted(set(original) & set(reproduced))
    return DocumentOrder(
        topics,
        [ktu(original[t], reproduced[t], depth) for t in topics],
        [rbo(original[t], reproduced[t], p, depth) for t in topics],
    )
