"""Measures of how well a ranking keeps the order its judgments prefer: compatibility with an
ideal ordering (Compat) and the share of (relevant, non-relevant) pairs ranked the right way
round (Accuracy), as ir_measures' ``compat`` and ``accuracy`` providers compute them.

ir_measures walks each topic in Python; these are vectorised over topics like every kernel, in
blocks of topics where a matrix as wide as the deepest ranking is needed.
"""

from __future__ import annotations

import numpy as np

from evalstore.errors import InvalidParameterError
from evalstore.metrics.preparation import Ranking
from evalstore.metrics.ranking import REL
from evalstore.metrics.registry import Param, family

BLOCK_CELLS = 2_000_000  # topics x depth of one block's float64 matrices (16 MB)


def _ideal_positions(rk: Ranking) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The retrieved documents judged above 0, and the place each has in the ideal ordering: by
    level descending, then, within a level, the retrieved ones first in the ranking's order (an
    ideal ordering compatible with the run where the judgments do not prefer). Returns (row,
    place in the ranking, place in the ideal ordering), by row then ranking place."""
    chosen = rk.judged_rel > 0
    rows, positions, levels = rk.judged_row[chosen], rk.judged_position[chosen], rk.judged_rel[chosen]
    n_levels = rk.rel_levels.shape[1]
    # judged documents of a higher level than each entry's: a suffix sum over the levels
    above = np.zeros((rk.n, n_levels + 1), dtype=np.int64)
    above[:, :n_levels] = np.cumsum(rk.rel_levels[:, ::-1], axis=1)[:, ::-1]
    higher = above[rows, levels + 1]
    # retrieved documents of the same level ranked above each: group entries by (row, level)
    order = np.lexsort((positions, levels, rows))
    key = rows[order] * (n_levels + 1) + levels[order]
    starts = np.searchsorted(key, key)
    same_before = np.empty(len(order), dtype=np.int64)
    same_before[order] = np.arange(len(order)) - starts
    return rows, positions, higher + same_before


def _blocks(n: int, width: np.ndarray) -> list[tuple[int, int]]:
    """Topic ranges of about BLOCK_CELLS cells at the widest row's width."""
    step = max(1, BLOCK_CELLS // max(int(width.max()) if n else 1, 1))
    return [(start, min(start + step, n)) for start in range(0, n, step)]


def _rbo_sums(depth: np.ndarray, overlap_at: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray]:
    """Per row, sum_{i<depth} p^i overlap_at[i] / (i+1) and sum_{i<depth} p^i (rows of
    ``overlap_at``: the overlap of the first i+1 places)."""
    width = overlap_at.shape[1]
    weights = np.cumprod(np.concatenate(([1.0], np.full(max(width - 1, 0), p))))[:width]
    within = np.arange(width)[None, :] < depth[:, None]
    terms = np.where(within, weights * overlap_at / np.arange(1, width + 1), 0.0)
    return terms.sum(axis=1), np.where(within, weights, 0.0).sum(axis=1)


@family(
    "Compat",
    params={
        "p": Param(float, 0.95, low=0.0, high=1.0, doc="persistence of the rank-biased overlap"),
        "normalize": Param(bool, True, doc="divide by the ideal ordering's own overlap (finite ideal orderings)"),
    },
    aliases=("compat",),
    reference="Clarke, Vtyurina & Smucker, TOIS 2021 (compatibility); ir_measures' compat provider",
)
def compatibility(rk: Ranking, p: float, normalize: bool) -> np.ndarray:
    """Compatibility: the rank-biased overlap (RBO, persistence p) of the ranking with an ideal
    ordering of the documents judged above 0 (level descending; within a level, the retrieved ones
    in the ranking's order, then the rest), to depth max(retrieved, judged above 0); normalised by
    the ideal ordering's overlap with itself to that depth. 0 without a document judged above 0.
    ir_measures places an unretrieved document within its level as if it scored 0, so with
    negative scores its ideal ordering differs; ties in score are broken by docno descending here
    (trec_eval's order), by docno ascending there."""
    rows, positions, ideal = _ideal_positions(rk)
    relevant = rk.rel_levels[:, 1:].sum(axis=1)
    depth = np.maximum(rk.num_ret, relevant)
    out = np.zeros(rk.n)
    for start, stop in _blocks(rk.n, depth):
        mine = (rows >= start) & (rows < stop)
        width = max(int(depth[start:stop].max()) if stop > start else 0, 1)
        # a document in both lists counts from the depth where both have reached it
        counts = np.zeros((stop - start, width + 1))
        np.add.at(counts, (rows[mine] - start, np.maximum(positions[mine], ideal[mine])), 1.0)
        overlap = np.cumsum(counts[:, :width], axis=1)
        score, weight = _rbo_sums(depth[start:stop], overlap, p)
        value = np.divide(score, weight, out=np.zeros(stop - start), where=weight > 0)
        if normalize:
            ideal_overlap = np.minimum(np.arange(1, width + 1)[None, :], relevant[start:stop, None]).astype(float)
            best_score, _ = _rbo_sums(depth[start:stop], ideal_overlap, p)
            best = np.divide(best_score, weight, out=np.zeros(stop - start), where=weight > 0)
            value = np.divide(value, best, out=value.copy(), where=best > 0)
        out[start:stop] = value
    return out


@family(
    "Accuracy",
    params={"rel": REL, "cutoff": Param(int, None, low=1, doc="rank cutoff k (default: the whole ranking)")},
    summary="defined_mean",
    aliases=("accuracy",),
    reference="ir_measures' accuracy provider (pairwise preference accuracy)",
)
def pairwise_accuracy(rk: Ranking, rel: int, cutoff: int | None) -> np.ndarray:
    """The share of (relevant, non-relevant) pairs of retrieved documents, in the top k, with the
    relevant one ranked first; documents without a judgment count as non-relevant. Undefined
    (NaN, left out of the mean, as ir_measures reports no value) for a topic with no relevant
    document retrieved in the top k; 1 when no non-relevant one is there (ir_measures 0.4 divides
    by zero there)."""
    if rel < 1:
        raise InvalidParameterError(
            f"Accuracy takes a relevance level of 1 or more (got {rel}): at 0 and below ir_measures counts every "
            "document outside the qrels as relevant, which this measure does not."
        )
    k = rk.num_ret if cutoff is None else np.minimum(rk.num_ret, cutoff)
    relevant = (rk.judged_rel >= rel) & (rk.judged_position < k[rk.judged_row])
    rows, positions = rk.judged_row[relevant], rk.judged_position[relevant]
    found = np.bincount(rows, minlength=rk.n)
    starts = np.searchsorted(rows, rows)
    # non-relevant ranked above each relevant one: its place minus the relevant ones above it
    nonrel_above = positions - (np.arange(len(rows)) - starts)
    misordered = np.bincount(rows, weights=nonrel_above.astype(np.float64), minlength=rk.n)
    nonrel = (k - found).astype(np.float64)
    pairs = nonrel * found
    value = 1.0 - np.divide(misordered, pairs, out=np.zeros(rk.n), where=pairs > 0)
    return np.where(found > 0, value, np.nan)
