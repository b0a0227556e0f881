"""Ranking measures: one kernel per family, vectorised over all topics of a :class:`Ranking`.

Every kernel returns a float64 array of shape ``(n_topics,)`` (``RelString`` returns strings).
Definitions follow trec_eval 10.0 exactly where trec_eval has the measure (the file named in
each docstring); the rest cite their source. ``rel`` is the relevance level: a document judged
at least ``rel`` is relevant (trec_eval ``-l``; default: the evaluation's level, 1).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from evalstore.errors import InvalidParameterError, Remedy
from evalstore.metrics.preparation import NONPOOL, UNJUDGED, Known, Ranking, column_at, count_within
from evalstore.metrics.registry import REQUIRED, Param, family, trec

REL = Param(int, None, doc="relevance level (default: the evaluation's, trec_eval -l)", from_evaluation=True)
CUTOFF = Param(int, REQUIRED, low=1, doc="rank cutoff k")
OPTIONAL_CUTOFF = Param(int, None, low=1, doc="rank cutoff k (default: the whole ranking)")
GAINS = Param(dict, None, doc="gain per relevance level, e.g. {1:3,2:9}; others keep gain = level")
MIN_GEO_MEAN = 1e-5  # trec_eval's floor before taking logs for gm_map/gm_bpref
# trec_eval's default parameters (its measure table, measures.c)
TREC_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
ELEVEN_RECALLS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
RPREC_MULT_X = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)


def _sequential_sum(matrix: np.ndarray) -> np.ndarray:
    """Row sums accumulated left to right, as trec_eval's loops add them. numpy's sum is pairwise,
    which can differ in the last bit and then round differently at the 4th decimal (seen on
    robust03's SABIR03BASE); cumsum is sequential."""
    if matrix.shape[1] == 0:
        return np.zeros(matrix.shape[0])
    return np.cumsum(matrix, axis=1)[:, -1]


def _returned(rk: Ranking) -> np.ndarray:
    """Each topic's number of ranked documents as trec_eval's measures that walk the ranking see
    it: a topic without results has trec_eval -c's stand-in document, relevant at a negative
    level and with a gain if documents outside the qrels have one (``Ranking.stand_in``)."""
    return rk.num_ret + rk.stand_in


def _safe_div(num: np.ndarray, den: np.ndarray | float) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.broadcast_to(np.asarray(den, dtype=np.float64), num.shape)
    return np.divide(num, den, out=np.zeros_like(num), where=den != 0)


# --------------------------------------------------------------------------- counts


@family("NumRet", summary="sum", value_type="int", trec=trec("num_ret"), aliases=("num_ret",))
def num_ret(rk: Ranking) -> np.ndarray:
    """Number of documents retrieved (after -M / -J)."""
    return rk.num_ret.astype(np.float64)


@family("NumQ", summary="sum", value_type="int", aliases=("num_q",), reference="trec_eval m_num_q.c")
def num_q(rk: Ranking) -> np.ndarray:
    """Number of topics evaluated (1 per topic; the summary is the count)."""
    return np.ones(rk.n)


def _positive_judgments(rk: Ranking) -> float:
    # trec_eval -c sums, over every qrels topic, the judgments with relevance > 0, whatever -l says
    return float(rk.rel_levels[:, 1:].sum())


@family(
    "NumRel",
    params={"rel": REL},
    summary="sum",
    value_type="int",
    trec=trec("num_rel"),
    aliases=("num_rel",),
    complete_summary=_positive_judgments,
)
def num_rel(rk: Ranking, rel: int) -> np.ndarray:
    """Number of relevant documents in the qrels, retrieved or not. With every qrels topic
    evaluated (trec_eval -c, missing topics scored 0) the summary is, as in trec_eval, the number
    of judgments with relevance above 0, whatever the relevance level."""
    return rk.num_rel(rel).astype(np.float64)


@family(
    "NumRelRet",
    params={"rel": REL},
    summary="sum",
    value_type="int",
    trec=trec("num_rel_ret"),
    aliases=("num_rel_ret",),
)
def num_rel_ret(rk: Ranking, rel: int) -> np.ndarray:
    """Number of relevant documents retrieved."""
    return rk.num_rel_ret(rel).astype(np.float64)


@family(
    "NumNonRelJudgedRet",
    params={"rel": REL},
    summary="sum",
    value_type="int",
    trec=trec("num_nonrel_judged_ret"),
    aliases=("num_nonrel_judged_ret",),
)
def num_nonrel_judged_ret(rk: Ranking, rel: int) -> np.ndarray:
    """Number of retrieved documents judged non-relevant (0 <= level < rel)."""
    nonrel = (rk.judged_rel >= 0) & (rk.judged_rel < rel)
    return np.bincount(rk.judged_row[nonrel], minlength=rk.n).astype(np.float64)


# --------------------------------------------------------------------------- precision family


@family(
    "P",
    params={"rel": REL, "cutoff": CUTOFF},
    trec=trec("P", param="cutoff", kind="long", defaults=TREC_CUTOFFS),
    aliases=("precision",),
    reference="trec_eval m_P.c",
    headline=3,
    headline_cutoff=10,
)
def precision(rk: Ranking, rel: int, cutoff: int) -> np.ndarray:
    """Precision at k: relevant in the top k divided by k (a short ranking counts as non-relevant
    to k)."""
    return rk.judged_within(rel, cutoff) / cutoff


@family(
    "R",
    params={"rel": REL, "cutoff": CUTOFF},
    trec=trec("recall", param="cutoff", kind="long", defaults=TREC_CUTOFFS),
    aliases=("recall",),
    reference="trec_eval m_recall.c",
)
def recall(rk: Ranking, rel: int, cutoff: int) -> np.ndarray:
    """Recall at k: relevant in the top k divided by the number of relevant documents."""
    return _safe_div(rk.judged_within(rel, cutoff), rk.num_rel(rel))


@family(
    "Success",
    params={"rel": REL, "cutoff": CUTOFF},
    trec=trec("success", param="cutoff", kind="long", defaults=(1, 5, 10)),
    aliases=("success", "HitRate", "hit_rate"),
    reference="trec_eval m_success.c; ranx hit_rate@k",
)
def success(rk: Ranking, rel: int, cutoff: int) -> np.ndarray:
    """1 if a relevant document is in the top k, else 0."""
    return (rk.judged_within(rel, cutoff) > 0).astype(np.float64)


@family("Hits", params={"rel": REL, "cutoff": CUTOFF}, summary="mean", reference="ranx hits@k")
def hits(rk: Ranking, rel: int, cutoff: int) -> np.ndarray:
    """Number of relevant documents in the top k (ranx's hits@k; its mean over topics is the
    summary). "Hits@k" in knowledge-graph papers is usually Success@k, spelt HitRate@k here."""
    return rk.judged_within(rel, cutoff).astype(np.float64)


@family(
    "RelP",
    params={"rel": REL, "cutoff": CUTOFF},
    trec=trec("relative_P", param="cutoff", kind="long", defaults=TREC_CUTOFFS),
    aliases=("relative_P",),
    reference="trec_eval m_rel_P.c",
)
def relative_precision(rk: Ranking, rel: int, cutoff: int) -> np.ndarray:
    """Relevant in the top k divided by min(k, R): precision up to R, recall after."""
    return _safe_div(rk.judged_within(rel, cutoff), np.minimum(cutoff, rk.num_rel(rel)))


@family(
    "Rprec",
    params={"rel": REL},
    trec=trec("Rprec"),
    aliases=("R-prec", "BEP", "RPrec"),
    reference="trec_eval m_Rprec.c",
)
def r_precision(rk: Ranking, rel: int) -> np.ndarray:
    """Precision after R documents (R = number of relevant): the break-even point where precision
    equals recall (BEP)."""
    num = rk.num_rel(rel)
    return _safe_div(rk.judged_within(rel, np.minimum(num, _returned(rk))), num)


@family(
    "RprecMult",
    params={"rel": REL, "x": Param(float, REQUIRED, low=0.0)},
    trec=trec("Rprec_mult", param="x", kind="double", defaults=RPREC_MULT_X),
    aliases=("Rprec_mult",),
    reference="trec_eval m_Rprec_mult.c",
    at="x",
)
def r_precision_multiple(rk: Ranking, rel: int, x: float) -> np.ndarray:
    """Precision at x times R documents (trec_eval rounds x*R+0.9 down)."""
    k = np.floor(x * rk.num_rel(rel) + 0.9).astype(np.int64)
    return _safe_div(rk.judged_within(rel, k), k)


@family(
    "F",
    params={"rel": REL, "cutoff": CUTOFF, "beta": Param(float, 1.0, low=0.0)},
    aliases=("Fbeta", "F1"),
    reference="van Rijsbergen 1979; F-beta of P@k and R@k",
)
def f_beta(rk: Ranking, rel: int, cutoff: int, beta: float) -> np.ndarray:
    """F-beta at k: (1+b^2) P@k R@k / (b^2 P@k + R@k); 0 when nothing relevant is in the top k."""
    p = precision(rk, rel, cutoff)
    r = recall(rk, rel, cutoff)
    b2 = beta * beta
    return _safe_div((1 + b2) * p * r, b2 * p + r)


# --------------------------------------------------------------------------- average precision


def _precision_at_relevant(rk: Ranking, rel: int) -> np.ndarray:
    return rk.cached(("prec_at_rel", rel), lambda: np.where(rk.is_rel(rel), rk.cum_rel(rel) / rk.ranks, 0.0))


@family(
    "AP",
    params={"rel": REL, "cutoff": OPTIONAL_CUTOFF},
    trec=(trec("map"), trec("map_cut", param="cutoff", kind="long", defaults=TREC_CUTOFFS)),
    aliases=("map", "MAP", "map_cut"),
    reference="trec_eval m_map.c, m_map_cut.c",
    headline=1,
)
def average_precision(rk: Ranking, rel: int, cutoff: int | None) -> np.ndarray:
    """Average precision: sum of precision at each relevant retrieved document (within the top k
    for AP@k), divided by the number of relevant documents R (not by min(k, R))."""
    if rel < 0:  # unjudged documents count as relevant then: only the matrix has them
        if cutoff is None:
            total = rk.cached(("ap_sum", rel), lambda: _sequential_sum(_precision_at_relevant(rk, rel)))
        else:
            running = rk.cached(("ap_cum", rel), lambda: np.cumsum(_precision_at_relevant(rk, rel), axis=1))
            total = column_at(running, cutoff)
        return _safe_div(total, rk.num_rel(rel))
    entries = rk.cached(("entries", rel), lambda: _JudgedEntries(rk, rel))
    precision = rk.cached(("entry_precision", rel), lambda: (entries.rel_before + 1) / (entries.position + 1.0))
    within = precision if cutoff is None else np.where(entries.position < cutoff, precision, 0.0)
    return _safe_div(entries.row_sums(within), rk.num_rel(rel))


@family(
    "GMAP",
    params={"rel": REL},
    summary="gmean",
    trec=trec("gm_map"),
    aliases=("gm_map",),
    reference="trec_eval m_gm_map.c",
)
def geometric_map(rk: Ranking, rel: int) -> np.ndarray:
    """Per topic the AP; summarised by the geometric mean, each AP floored at 1e-5."""
    return average_precision(rk, rel, None)


@family(
    "YAAP",
    params={"rel": REL},
    trec=trec("yaap"),
    aliases=("yaap",),
    reference="trec_eval m_yaap.c; Robertson, 'On Smoothing Average Precision', ECIR 2012",
)
def yet_another_ap(rk: Ranking, rel: int) -> np.ndarray:
    """Yet Another Average Precision: log((1 + S) / (1 + R - S)), S the sum of precision at
    each relevant retrieved document (AP's numerator), R the number of relevant documents."""
    if rel < 0:
        total = rk.cached(("ap_sum", rel), lambda: _sequential_sum(_precision_at_relevant(rk, rel)))
    else:
        entries = rk.cached(("entries", rel), lambda: _JudgedEntries(rk, rel))
        precision = rk.cached(("entry_precision", rel), lambda: (entries.rel_before + 1) / (entries.position + 1.0))
        total = entries.row_sums(precision)
    return np.log((1.0 + total) / (1.0 + rk.num_rel(rel) - total))


@family(
    "RR",
    params={"rel": REL, "cutoff": Param(int, None, low=1, doc="rank cutoff k (default: none)")},
    trec=trec("recip_rank"),
    aliases=("recip_rank", "MRR"),
    reference="trec_eval m_recip_rank.c; RR@10 is MS MARCO's official MRR@10",
    headline=4,
)
def reciprocal_rank(rk: Ranking, rel: int, cutoff: int | None) -> np.ndarray:
    """1 / rank of the first relevant document; 0 if none is retrieved (in the top k, with a
    cutoff: RR@10 is MS MARCO's MRR@10)."""
    if rel < 0:  # documents outside the qrels count then: only the matrix has them
        hits = rk.is_rel(rel)
        first = hits.argmax(axis=1) if rk.depth else np.zeros(rk.n, dtype=np.int64)
        found = hits.any(axis=1) if rk.depth else np.zeros(rk.n, dtype=bool)
    else:
        first, found = _first_entry(rk, rel)
    if cutoff is not None:
        found &= first < cutoff
    return np.where(found, 1.0 / (first + 1.0), 0.0)


def _first_entry(rk: Ranking, rel: int) -> tuple[np.ndarray, np.ndarray]:
    """Per topic, the position of its first document judged at least ``rel`` (0 <= rel), and
    whether it has one."""
    keys = rk.entry_keys(rel)
    width = rk.depth + 1
    start = np.arange(rk.n, dtype=np.int64) * width
    at = np.searchsorted(keys, start)
    key = keys[np.minimum(at, len(keys) - 1)] if len(keys) else np.zeros(rk.n, dtype=np.int64)
    found = (at < len(keys)) & (key < start + width)
    return np.where(found, key - start, 0), found


def _interpolated_precision(
    rk: Ranking, rel: int, recall_points: tuple[float, ...], rounding: str = "trec_eval10"
) -> np.ndarray:
    """(n, points): max precision at or after the rank where x*R relevant docs are seen, x*R made
    a count as trec_eval 10.0 does (lround) or 9.x (``(long)(x*R + 0.9)``)."""
    num = rk.num_rel(rel)
    found = rk.num_rel_ret(rel)
    if rel < 0:  # documents outside the qrels count then: only the matrix has them
        cum = rk.cum_rel(rel)
        precision_at = np.where(rk.valid, cum / rk.ranks, 0.0) if rk.depth else np.zeros((rk.n, 0))
        interpolated = rk.cached(("iprec", rel), lambda: np.maximum.accumulate(precision_at[:, ::-1], axis=1)[:, ::-1])

        def best_from(target: np.ndarray) -> np.ndarray:
            return interpolated[np.arange(rk.n), (cum >= target[:, None]).argmax(axis=1)]
    else:
        # the best precision at or after a rank is one at a relevant document (between two, it
        # falls): the i-th relevant document's precision, best of the i-th on, one topic a row
        entries = rk.cached(("entries", rel), lambda: _JudgedEntries(rk, rel))
        best_after = rk.cached(
            ("iprec_entries", rel),
            lambda: np.maximum.accumulate(
                entries.grid((entries.rel_before + 1) / (entries.position + 1.0))[:, ::-1], axis=1
            )[:, ::-1],
        )

        def best_from(target: np.ndarray) -> np.ndarray:
            return column_at(best_after, target)

    out = np.zeros((rk.n, len(recall_points)))
    for j, x in enumerate(recall_points):
        # trec_eval 10.0 converts a recall point to a count with lround(x * R) (half away from 0);
        # 9.x (pytrec_eval, and so ir_measures) with (long)(x * R + 0.9)
        count = np.floor(x * num + (0.5 if rounding == "trec_eval10" else 0.9)).astype(np.int64)
        reachable = (count <= found) & (found > 0)
        if rk.depth:
            out[:, j] = np.where(reachable, best_from(np.maximum(count, 1)), 0.0)
        # a ranking trec_eval sees as empty (everything dropped by -J, or -M 0): its precision
        # there is 0/0, and that is what a recall point of 0 relevant documents gets
        out[:, j] = np.where((count == 0) & (rk.num_ret == 0) & ~rk.stand_in, np.nan, out[:, j])
    return out


@family(
    "IPrec",
    params={
        "rel": REL,
        "recall": Param(float, REQUIRED, low=0.0),  # above 1: 0, as in trec_eval
        "rounding": Param(
            str,
            "trec_eval9",
            choices=("trec_eval9", "trec_eval10"),
            doc="how x*R becomes a count of relevant documents",
        ),
    },
    trec=trec(
        "iprec_at_recall", param="recall", kind="double", defaults=ELEVEN_RECALLS, fixed=(("rounding", "trec_eval10"),)
    ),
    aliases=("iprec_at_recall",),
    reference="trec_eval m_iprec_at_recall.c",
    at="recall",
)
def interpolated_precision(rk: Ranking, rel: int, recall: float, rounding: str) -> np.ndarray:
    """Interpolated precision at a recall level: max precision at any rank with recall >= the
    level (the standard recall-precision graph). The level x becomes a count of relevant
    documents: by default as ir_measures' IPrec counts it (through pytrec_eval, trec_eval 9.x:
    (long)(x*R + 0.9)); rounding=trec_eval10 as trec_eval 10.0's iprec_at_recall does (lround(x*R)),
    which is what the trec_eval name iprec_at_recall_x means here."""
    return _interpolated_precision(rk, rel, (recall,), rounding)[:, 0]


@family(
    "IPrecAvg",
    params={"rel": REL, "recalls": Param(tuple, (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0))},
    trec=trec("11pt_avg", param="recalls", kind="raw", defaults=(ELEVEN_RECALLS,)),
    aliases=("11pt_avg", "11ptAvg"),
    reference="trec_eval m_11pt_avg.c",
)
def interpolated_precision_average(rk: Ranking, rel: int, recalls: tuple[float, ...]) -> np.ndarray:
    """Interpolated precision averaged over recall levels (the 11 standard points by default):
    precision at standard recall levels, averaged per topic."""
    points = _interpolated_precision(rk, rel, tuple(recalls))
    return _sequential_sum(points[:, ::-1]) / len(recalls)  # trec_eval adds from the last point back


@family(
    "PAtR",
    params={"rel": REL, "recall": Param(float, REQUIRED, low=0.0, high=1.0)},
    aliases=("PrecAtRecall",),
    reference="Manning et al., Introduction to IR, 8.4",
    at="recall",
)
def precision_at_recall(rk: Ranking, rel: int, recall: float) -> np.ndarray:
    """Non-interpolated precision at the rank where recall first reaches the level (0 if never)."""
    need = np.maximum(np.ceil(recall * rk.num_rel(rel) - 1e-12), 1).astype(np.int64)
    reached = (rk.num_rel_ret(rel) >= need) & (rk.num_rel(rel) > 0)
    if rk.depth == 0:
        return np.zeros(rk.n)
    if rel < 0:  # documents outside the qrels count then: only the matrix has them
        position = (rk.cum_rel(rel) >= need[:, None]).argmax(axis=1)
    else:  # the need-th relevant document's place
        entries = rk.cached(("entries", rel), lambda: _JudgedEntries(rk, rel))
        position = column_at(entries.grid(entries.position.astype(np.float64)), need)
    return np.where(reached, need / (position + 1.0), 0.0)


# --------------------------------------------------------------------------- incomplete judgments


class _JudgedEntries:
    """The retrieved relevant documents of every topic, from the ranking's judged entries (not its
    matrix: a 7M-row run has a few thousand), with the judged documents ranked above each: relevant,
    non-relevant and pooled-but-unjudged (trec_eval's bpref and infAP loops count the same)."""

    def __init__(self, rk: Ranking, rel: int) -> None:
        codes = rk.judged_rel
        judged = codes >= 0
        nonrel = judged & (codes < rel)
        relevant = judged & ~nonrel
        unjudged = codes == UNJUDGED
        starts = np.searchsorted(rk.judged_row, rk.judged_row)  # each entry's topic's first entry

        def before(mask: np.ndarray) -> np.ndarray:
            counts = np.concatenate(([0], np.cumsum(mask, dtype=np.int64)))
            return (counts[:-1] - counts[starts])[relevant]

        self.n = rk.n
        self.row = rk.judged_row[relevant]
        self.position = rk.judged_position[relevant]
        self.rel_before, self.nonrel_before, self.unjudged_before = before(relevant), before(nonrel), before(unjudged)

    def row_sums(self, values: np.ndarray) -> np.ndarray:
        """Each topic's sum of its entries' ``values``, added left to right as trec_eval does (see
        :func:`_sequential_sum`)."""
        return _sequential_sum(self.grid(values))

    def grid(self, values: np.ndarray) -> np.ndarray:
        """The entries' ``values`` laid out one topic a row, in rank order, zeros after."""
        return _entry_grid(self.n, self.row, values)


def _entry_grid(n: int, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` of entries ordered by row, laid out one row each, in order, zeros after."""
    counts = np.bincount(rows, minlength=n)
    width = int(counts.max()) if n and len(rows) else 0
    grid = np.zeros((n, width))
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    grid[rows, np.arange(len(rows)) - starts[rows]] = values
    return grid


@family("Bpref", params={"rel": REL}, trec=trec("bpref"), aliases=("bpref",), reference="trec_eval m_bpref.c")
def bpref(rk: Ranking, rel: int) -> np.ndarray:
    """Binary preference (Buckley & Voorhees, SIGIR 2004): per judged relevant document, 1 minus the
    judged non-relevant ranked above it (capped at R) over min(N, R), N = judged non-relevant in
    the qrels; unjudged documents are skipped."""
    return rk.cached(("bpref", rel), lambda: _bpref(rk, rel))


def _bpref(rk: Ranking, rel: int) -> np.ndarray:
    entries = rk.cached(("entries", rel), lambda: _JudgedEntries(rk, rel))
    r = rk.num_rel(rel)[entries.row]
    n_nonrel = rk.rel_levels[:, : max(rel, 0)].sum(axis=1)[entries.row]
    before = entries.nonrel_before
    penalty = _safe_div(np.minimum(before, r), np.minimum(n_nonrel, r))
    contributions = np.where(before > 0, 1.0 - penalty, 1.0)
    return _safe_div(entries.row_sums(contributions), rk.num_rel(rel))


@family(
    "GM_Bpref",
    params={"rel": REL},
    summary="gmean",
    trec=trec("gm_bpref"),
    aliases=("gm_bpref",),
    reference="trec_eval m_gm_bpref.c",
)
def geometric_bpref(rk: Ranking, rel: int) -> np.ndarray:
    """Per topic the bpref; summarised by the geometric mean (floor 1e-5)."""
    return bpref(rk, rel)


@family("infAP", params={"rel": REL}, trec=trec("infAP"), aliases=("infap",), reference="trec_eval m_infap.c")
def inferred_ap(rk: Ranking, rel: int) -> np.ndarray:
    """Inferred AP (Yilmaz & Aslam, CIKM 2006) over a sampled pool: qrels entries with negative
    relevance are pooled-but-unjudged."""
    entries = rk.cached(("entries", rel), lambda: _JudgedEntries(rk, rel))
    rel_before, nonrel_before, unj_before = entries.rel_before, entries.nonrel_before, entries.unjudged_before
    j = entries.position.astype(np.float64)
    eps = 1e-5
    with np.errstate(divide="ignore", invalid="ignore"):
        later = 1.0 / (j + 1) + (j / (j + 1)) * ((rel_before + nonrel_before + unj_before) / j) * (
            (rel_before + eps) / (rel_before + nonrel_before + 2 * eps)
        )
    contributions = np.where(j == 0, 1.0, later)
    return _safe_div(entries.row_sums(contributions), rk.num_rel(rel))


@family(
    "Unj",
    params={"cutoff": CUTOFF},
    trec=trec("unj", param="cutoff", kind="long", defaults=(5, 10, 20)),
    aliases=("unj",),
    higher_is_better=False,
    reference="trec_eval m_unjudged.c",
)
def unjudged(rk: Ranking, cutoff: int) -> np.ndarray:
    """Fraction of the top k not judged (not in the qrels, or pooled-unjudged); k is the denominator."""
    return (np.minimum(cutoff, rk.num_ret) - rk.judged_within(0, cutoff)) / cutoff


@family("Judged", params={"cutoff": OPTIONAL_CUTOFF}, aliases=("judged",), reference="Sakai 2007; ir_measures Judged@k")
def judged(rk: Ranking, cutoff: int | None) -> np.ndarray:
    """Fraction of the retrieved top k (min(k, retrieved) documents) that has a judgment; of
    every retrieved document without a cutoff."""
    if cutoff is None:
        return _safe_div(rk.judged_within(0, rk.num_ret), rk.num_ret)
    return _safe_div(rk.judged_within(0, cutoff), np.minimum(cutoff, rk.num_ret))


@family(
    "RelString",
    params={"cutoff": Param(int, 10, low=0)},
    summary="none",
    value_type="str",
    trec=trec("relstring", param="cutoff", kind="raw", defaults=(10,)),
    aliases=("relstring",),
    reference="trec_eval m_relstring.c",
)
def relevance_string(rk: Ranking, cutoff: int) -> np.ndarray:
    """The first k relevance values as characters: 0-9, '>' above 9, '-' not in the pool,
    '.' pooled but unjudged."""
    top = rk.rel[:, :cutoff]
    chars = np.where(
        top > 9,
        ord(">"),
        np.where(top >= 0, ord("0") + top, np.where(top == NONPOOL, ord("-"), np.where(top == UNJUDGED, ord("."), 0))),
    )
    return np.array(["".join(chr(c) for c in row if c) for row in chars.tolist()], dtype=object)


# --------------------------------------------------------------------------- set measures


@family("SetP", params={"rel": REL}, trec=trec("set_P"), aliases=("set_P",), reference="trec_eval m_set_P.c")
def set_precision(rk: Ranking, rel: int) -> np.ndarray:
    """Relevant retrieved / retrieved."""
    return _safe_div(rk.num_rel_ret(rel), rk.num_ret)


@family(
    "SetR", params={"rel": REL}, trec=trec("set_recall"), aliases=("set_recall",), reference="trec_eval m_set_recall.c"
)
def set_recall(rk: Ranking, rel: int) -> np.ndarray:
    """Relevant retrieved / relevant."""
    return _safe_div(rk.num_rel_ret(rel), rk.num_rel(rel))


@family(
    "SetRelP",
    params={"rel": REL},
    trec=trec("set_relative_P"),
    aliases=("set_relative_P",),
    reference="trec_eval m_set_rel_P.c",
)
def set_relative_precision(rk: Ranking, rel: int) -> np.ndarray:
    """Relevant retrieved / min(retrieved, relevant)."""
    return _safe_div(rk.num_rel_ret(rel), np.minimum(rk.num_ret, rk.num_rel(rel)))


@family("SetAP", params={"rel": REL}, trec=trec("set_map"), aliases=("set_map",), reference="trec_eval m_set_map.c")
def set_map(rk: Ranking, rel: int) -> np.ndarray:
    """Relevant retrieved squared / (retrieved x relevant)."""
    found = rk.num_rel_ret(rel).astype(np.float64)
    return _safe_div(found * found, rk.num_ret * rk.num_rel(rel).astype(np.float64))


@family(
    "SetF",
    params={"rel": REL, "x": Param(float, 1.0, low=0.0)},
    trec=trec("set_F", param="x", kind="raw", defaults=(1.0,)),
    aliases=("set_F",),
    reference="trec_eval m_set_F.c",
)
def set_f(rk: Ranking, rel: int, x: float) -> np.ndarray:
    """(x+1) P R / (x P + R) over the retrieved set (x weighs recall against precision; x=1 is F1)."""
    p = set_precision(rk, rel)
    r = set_recall(rk, rel)
    return np.where(rk.num_rel_ret(rel) > 0, _safe_div((x + 1.0) * p * r, x * p + r), 0.0)


@family(
    "Utility",
    params={"rel": REL, "coefficients": Param(tuple, (1.0, -1.0, 0.0, 0.0)), "collection_size": Param(int, 0, low=0)},
    trec=trec("utility", param="coefficients", kind="raw", defaults=((1.0, -1.0, 0.0, 0.0),)),
    aliases=("utility",),
    reference="trec_eval m_utility.c",
)
def utility(rk: Ranking, rel: int, coefficients: tuple[float, ...], collection_size: int) -> np.ndarray:
    """a*rel_ret + b*nonrel_ret + c*rel_not_ret + d*nonrel_not_ret (d needs the collection size)."""
    if len(coefficients) != 4:
        raise InvalidParameterError(f"Utility needs 4 coefficients (a,b,c,d). Got {len(coefficients)}.")
    a, b, c, d = coefficients
    found = rk.num_rel_ret(rel).astype(np.float64)
    ret = rk.num_ret.astype(np.float64)
    num = rk.num_rel(rel).astype(np.float64)
    return a * found + b * (ret - found) + c * (num - found) + d * (collection_size + found - ret - num)


# --------------------------------------------------------------------------- graded gain measures


def _gain_table(rk: Ranking, gains: dict[int, float] | None) -> np.ndarray:
    """Gain per code for codes -3..max_level (index code+3): level itself unless overridden."""
    top = max(rk.max_level, 0)  # a qrels of -1 judgments alone still has level 0's row (rel_levels)
    levels = np.arange(-3, top + 1)
    table = np.where(levels >= 0, levels, 0).astype(np.float64)
    for level, gain in (gains or {}).items():
        if -2 <= level <= top:
            table[level + 3] = gain
    table[0] = 0.0  # PAD
    return table


def _ideal_gains(
    rk: Ranking, gains: dict[int, float] | None, transform: Callable[[np.ndarray], np.ndarray] | None = None
) -> np.ndarray:
    """(n, M): each topic's judged documents ordered by gain descending, positive gains only."""
    n_levels = rk.rel_levels.shape[1]
    table = _gain_table(rk, gains)[3 : 3 + n_levels]
    if transform is not None:
        table = transform(table)
    order = np.argsort(-table, kind="stable")
    positive = [lvl for lvl in order if table[lvl] > 0]
    counts = rk.rel_levels[:, positive] if positive else np.zeros((rk.n, 0), dtype=np.int64)
    length = int(counts.sum(axis=1).max()) if rk.n and counts.size else 0
    ideal = np.zeros((rk.n, length))
    if length == 0:
        return ideal
    bounds = np.cumsum(counts, axis=1)
    position = np.arange(length)[None, :]
    level_index = (position[:, :, None] >= bounds[:, None, :]).sum(axis=2)  # (n, M)
    in_list = level_index < len(positive)
    values = table[np.asarray(positive)][np.minimum(level_index, len(positive) - 1)]
    ideal[:] = np.where(in_list, values, 0.0)
    return ideal


def _discounted(gains: np.ndarray, discount: str, base: float) -> np.ndarray:
    """Each gain divided by its rank's discount (:func:`_discounts`)."""
    return gains / _discounts(gains.shape[1], discount, base)


def _discounts(depth: int, discount: str, base: float) -> np.ndarray:
    """The discount of ranks 1..depth: log2(rank+1) (trec_eval divides by it, so do we), or
    Jarvelin & Kekalainen's (TOIS 2002): no discount before rank b, then log_b(rank)."""
    ranks = np.arange(1, depth + 1, dtype=np.float64)
    if discount == "jk":
        return np.where(ranks < base, 1.0, np.log(np.maximum(ranks, base)) / np.log(base))
    return np.log2(ranks + 1.0)


NDCG_PARAMS = {
    "cutoff": OPTIONAL_CUTOFF,
    "gains": GAINS,
    "gain": Param(str, "linear", choices=("linear", "exp"), doc="linear: the level; exp: 2^level - 1 (Burges)"),
    "discount": Param(str, "log2", choices=("log2", "jk"), doc="log2(rank+1), or Jarvelin-Kekalainen log_b(rank)"),
    "base": Param(float, 2.0, low=1.000001, doc="log base b of the jk discount"),
}


def _exp_gain(table: np.ndarray) -> np.ndarray:
    return np.where(table > 0, np.power(2.0, table) - 1.0, table)


@family(
    "nDCG",
    params=NDCG_PARAMS,
    trec=(
        trec("ndcg", param="gains", kind="pairs"),
        trec("ndcg_cut", param="cutoff", kind="long", defaults=TREC_CUTOFFS),
    ),
    aliases=("ndcg", "NDCG", "ndcg_cut"),
    reference="trec_eval m_ndcg.c, m_ndcg_cut.c; Burges et al. 2005",
    headline=2,
    headline_cutoff=10,
)
def ndcg(
    rk: Ranking, cutoff: int | None, gains: dict[int, float] | None, gain: str, discount: str, base: float
) -> np.ndarray:
    """Normalised DCG (Jarvelin & Kekalainen, TOIS 2002). DCG sums gain/log2(rank+1) over the
    ranking (top k for nDCG@k); the ideal DCG orders all judged documents of the topic by gain
    (positive gains only), truncated at the same k. Default gain is the relevance level (trec_eval);
    gain=exp uses 2^level - 1; discount=jk uses 1/log_b(rank) from rank b on."""
    discounted, best = _dcg_pair(rk, cutoff, gains, gain, discount, base)
    return _safe_div(discounted, best) * (best > 0)


def _gain_key(gains: dict[int, float] | None) -> tuple[tuple[int, float], ...]:
    return tuple(sorted((gains or {}).items()))


def _ideal(rk: Ranking, gains: dict[int, float] | None, gain: str) -> np.ndarray:
    """The (n, M) ideal gains of :func:`_ideal_gains`, kept in the ranking's cache."""
    return rk.cached(
        ("ideal", _gain_key(gains), gain), lambda: _ideal_gains(rk, gains, _exp_gain if gain == "exp" else None)
    )


def _cum_idcg(rk: Ranking, gains: dict[int, float] | None, gain: str, discount: str, base: float) -> np.ndarray:
    """Cumulative DCG of the ideal ranking (n, M): the ideal DCG at k is column k-1."""
    return rk.cached(
        ("cum_idcg", _gain_key(gains), gain, discount, base),
        lambda: np.cumsum(_discounted(_ideal(rk, gains, gain), discount, base), axis=1),
    )


def _result_gain_matrix(rk: Ranking, gains: dict[int, float] | None, gain: str) -> np.ndarray:
    """The gain of every place (n, depth), needed when documents outside the qrels have one: then
    so has the document that trec_eval -c ranks first for a topic without results (its stand-in,
    see :attr:`Ranking.stand_in`)."""

    def build() -> np.ndarray:
        table = _gain_table(rk, gains)
        if gain == "exp":
            table = _exp_gain(table)
        result = np.where(rk.valid, table[rk.rel + 3], 0.0)
        result[rk.stand_in, :1] = table[NONPOOL + 3]  # a ranking with a stand-in has a first column
        return result

    return rk.cached(("gains", _gain_key(gains), gain), build)


def _results_dcg(
    rk: Ranking,
    k: np.ndarray | int,
    gains: dict[int, float] | None,
    gain: str = "linear",
    discount: str = "log2",
    base: float = 2.0,
) -> np.ndarray:
    """The DCG of each topic's top k (k: one for all, (n,) or (n, w) cutoffs a topic): from the
    judged entries (:func:`_entry_dcgs`), or from the (n, depth) matrix when documents outside the
    qrels have a gain."""
    running = _entry_dcgs(rk, gains, gain, discount, base)
    if running is not None:
        return running.at(k)
    cumulative = _cum_dcg_matrix(rk, gains, gain, discount, base)
    k = np.asarray(k)
    return _gather(cumulative, k) if k.ndim == 2 else column_at(cumulative, k)


def _cum_dcg_matrix(rk: Ranking, gains: dict[int, float] | None, gain: str, discount: str, base: float) -> np.ndarray:
    """Cumulative DCG of every place (n, depth), from :func:`_result_gain_matrix`."""
    return rk.cached(
        ("cum_dcg", _gain_key(gains), gain, discount, base),
        lambda: np.cumsum(_discounted(_result_gain_matrix(rk, gains, gain), discount, base), axis=1),
    )


def _dcg_pair(
    rk: Ranking, cutoff: int | None, gains: dict[int, float] | None, gain: str, discount: str, base: float
) -> tuple[np.ndarray, np.ndarray]:
    k = np.iinfo(np.int64).max if cutoff is None else cutoff
    return (_results_dcg(rk, k, gains, gain, discount, base), column_at(_cum_idcg(rk, gains, gain, discount, base), k))


class _RunningSums:
    """Per topic, the running sum of values at some of its judged entries, read at any cutoff: the
    sum at k adds, left to right, the values of the entries in the top k (as trec_eval adds each
    place's, zeros included, which change nothing)."""

    def __init__(self, rk: Ranking, chosen: np.ndarray, values: np.ndarray) -> None:
        self.n, self.depth = rk.n, rk.depth  # not the ranking itself: this is kept in its cache
        self.keys = rk.entry_keys()[chosen]
        self.rows, self.positions, self.values = rk.judged_row[chosen], rk.judged_position[chosen], values
        self.cumulative = np.cumsum(_entry_grid(rk.n, self.rows, values), axis=1)

    def at(self, k: int | np.ndarray) -> np.ndarray:
        counts = count_within(self.keys, self.n, self.depth, k)
        return _gather(self.cumulative, counts) if counts.ndim == 2 else column_at(self.cumulative, counts)

    def through_entries(self) -> np.ndarray:
        """The running sum at each entry, its own value included, in entry order."""
        first = np.searchsorted(self.rows, self.rows)  # each entry's topic's first entry
        return self.cumulative[self.rows, np.arange(len(self.rows)) - first]


def _entry_dcgs(
    rk: Ranking, gains: dict[int, float] | None, gain: str, discount: str, base: float
) -> _RunningSums | None:
    """The DCG of the results from the judged entries alone, not the (n, depth) matrix; None when a
    document outside the qrels has a gain (gains={-1: ...}): only the matrix has those."""
    table = _gain_table(rk, gains)
    if gain == "exp":
        table = _exp_gain(table)
    if table[NONPOOL + 3] != 0:
        return None

    def build() -> _RunningSums:
        entry_gains = table[rk.judged_rel + 3]
        chosen = entry_gains != 0
        divisors = _discounts(rk.depth, discount, base)
        return _RunningSums(rk, chosen, entry_gains[chosen] / divisors[rk.judged_position[chosen]])

    return rk.cached(("entry_dcg", _gain_key(gains), gain, discount, base), build)


@family(
    "DCG",
    params=NDCG_PARAMS,
    trec=trec("dcg", param="gains", kind="pairs"),
    aliases=("dcg",),
    reference="trec_eval m_ndcg.c",
)
def dcg(
    rk: Ranking, cutoff: int | None, gains: dict[int, float] | None, gain: str, discount: str, base: float
) -> np.ndarray:
    """Discounted cumulative gain of the ranking (same gains and discounts as nDCG)."""
    return _dcg_pair(rk, cutoff, gains, gain, discount, base)[0]


@family(
    "IDCG",
    params=NDCG_PARAMS,
    trec=trec("ideal_dcg", param="gains", kind="pairs"),
    aliases=("ideal_dcg",),
    reference="trec_eval m_ndcg.c",
)
def ideal_dcg(
    rk: Ranking, cutoff: int | None, gains: dict[int, float] | None, gain: str, discount: str, base: float
) -> np.ndarray:
    """DCG of the ideal ranking of all judged documents of the topic."""
    return _dcg_pair(rk, cutoff, gains, gain, discount, base)[1]


@family(
    "nDCG_rel",
    params={"gains": GAINS},
    trec=trec("ndcg_rel", param="gains", kind="pairs"),
    aliases=("ndcg_rel",),
    reference="trec_eval m_ndcg_rel.c",
)
def ndcg_rel(rk: Ranking, gains: dict[int, float] | None) -> np.ndarray:
    """nDCG averaged over relevant documents (experimental, trec_eval): at each retrieved document of
    positive gain, and at the end of the ranking for each relevant document not retrieved."""
    n_ideal = (_ideal(rk, gains, "linear") > 0).sum(axis=1)
    cum_idcg = _cum_idcg(rk, gains, "linear", "log2", 2.0)
    # the ideal DCG at position i stops growing once the ideal list (n_ideal documents) ends
    ideal_end = np.maximum(n_ideal - 1, 0)
    ideal_dcg_at = np.pad(cum_idcg, ((0, 0), (0, 1)))
    running = _entry_dcgs(rk, gains, "linear", "log2", 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        if running is not None:  # the places of positive gain are judged entries
            positive = running.values > 0
            rows, positions = running.rows[positive], running.positions[positive]
            ratios = running.through_entries()[positive] / ideal_dcg_at[rows, np.minimum(positions, ideal_end[rows])]
            at_relevant = _sequential_sum(_entry_grid(rk.n, rows, ratios))
            found = np.bincount(rows, minlength=rk.n)
        else:
            result = _result_gain_matrix(rk, gains, "linear")
            cum_dcg = _cum_dcg_matrix(rk, gains, "linear", "log2", 2.0)
            ideal_at = np.take_along_axis(
                ideal_dcg_at, np.minimum(np.arange(rk.depth)[None, :], ideal_end[:, None]), axis=1
            )
            at_relevant = _sequential_sum(np.where(result > 0, cum_dcg / ideal_at, 0.0))
            found = (result > 0).sum(axis=1)
        unfound = (n_ideal - found).astype(np.float64)
        total = at_relevant + unfound * _results_dcg(rk, _returned(rk), gains) / column_at(cum_idcg, n_ideal)
    return np.where((total > 0) & np.isfinite(total), _safe_div(total, n_ideal), 0.0)


@family(
    "RnDCG",
    params={"rel": REL, "gains": GAINS},
    trec=trec("Rndcg", param="gains", kind="pairs"),
    aliases=("Rndcg",),
    reference="trec_eval m_Rndcg.c",
)
def r_ndcg(rk: Ranking, rel: int, gains: dict[int, float] | None) -> np.ndarray:
    """nDCG averaged at the R-level boundaries of the ideal ranking (experimental, trec_eval)."""
    ideal = _ideal(rk, gains, "linear")
    cum_idcg = _cum_idcg(rk, gains, "linear", "log2", 2.0)
    n_ideal = (ideal > 0).sum(axis=1)
    if ideal.shape[1] == 0:  # no positive gain anywhere: no boundary (see below)
        return np.where(rk.num_rel(rel) > 0, np.nan, 0.0)
    # boundaries b in 1..n_ideal where the ideal gain at position b differs from position b-1
    # (position n_ideal is past the list: gain 0). Only the ideal's width is materialised.
    padded = np.pad(ideal, ((0, 0), (1, 1)))[:, 1:]  # padded[:, b] = ideal gain at position b
    b = np.arange(padded.shape[1])[None, :]
    change = np.zeros(padded.shape, dtype=bool)
    change[:, 1:] = padded[:, 1:] != padded[:, :-1]
    change &= (b >= 1) & (b <= n_ideal[:, None])
    returned = _returned(rk)
    dcg_at = _results_dcg(rk, np.minimum(b, returned[:, None]), gains)  # DCG of the first min(b, retrieved)
    idcg_at = _gather(cum_idcg, b)
    use = change & (idcg_at > 0)
    total = _sequential_sum(np.where(use, _safe_div(dcg_at, idcg_at), 0.0))
    count = use.sum(axis=1)
    # trec_eval adds the end of a ranking longer than the ideal list by more than one document
    extra = returned > n_ideal + 1
    idcg_end = column_at(cum_idcg, n_ideal)
    extra &= idcg_end > 0
    total = total + np.where(extra, _safe_div(_results_dcg(rk, returned, gains), idcg_end), 0.0)
    count = count + extra
    # no boundary at all (relevant documents, but none with a positive gain: -l 0 with only level
    # 0 judged) is trec_eval's 0/0
    mean = np.divide(total, count, out=np.full(rk.n, np.nan), where=count > 0)
    return np.where(rk.num_rel(rel) > 0, mean, 0.0)


def _gather(cumulative: np.ndarray, k: np.ndarray) -> np.ndarray:
    """cumulative[row, k-1] for a (n, w) matrix of k (0 where k <= 0; past the end, the last value)."""
    n, width = cumulative.shape
    if width == 0:
        return np.zeros(k.shape)
    k = np.broadcast_to(k, (n, k.shape[1]))
    values = np.take_along_axis(cumulative, np.clip(k, 1, width) - 1, axis=1)
    return np.where(k > 0, values, 0.0)


@family("G", params={"gains": GAINS}, trec=trec("G", param="gains", kind="pairs"), reference="trec_eval m_G.c")
def g_measure(rk: Ranking, gains: dict[int, float] | None) -> np.ndarray:
    """Normalised gain G (experimental, trec_eval): gain(doc) / log2(2 + ideal_cost(i) - gain so far)."""
    ideal = _ideal(rk, gains, "linear")
    table = _gain_table(rk, gains)
    with np.errstate(divide="ignore", invalid="ignore"):
        # the entries hold every place with a gain unless documents outside the qrels have one;
        # their running sums jump over places, which equals trec_eval's place-by-place sums when
        # the gains are whole numbers (fractional gains: the matrix, summed place by place)
        if table[NONPOOL + 3] == 0 and np.array_equal(table, np.round(table)):
            terms = _g_entry_terms(rk, table, ideal)
        else:
            result = _result_gain_matrix(rk, gains, "linear")
            length = result.shape[1]
            ideal_here = np.pad(ideal, ((0, 0), (0, max(0, length - ideal.shape[1]))))[:, :length]
            cost = np.cumsum(np.maximum(ideal_here, 1.0), axis=1)
            terms = np.where(result != 0, result / np.log2(2.0 + cost - np.cumsum(result, axis=1)), 0.0)
    return _safe_div(_sequential_sum(terms), _sequential_sum(ideal))


def _g_entry_terms(rk: Ranking, table: np.ndarray, ideal: np.ndarray) -> np.ndarray:
    """G's terms laid out one topic a row (:func:`_entry_grid`), from the judged entries of
    non-zero gain: every place with a gain is one when documents outside the qrels have none."""
    gain = table[rk.judged_rel + 3]
    chosen = gain != 0
    rows, positions, gain = rk.judged_row[chosen], rk.judged_position[chosen], gain[chosen]
    sums = np.concatenate(([0.0], np.cumsum(gain)))
    gained = sums[1:] - sums[np.searchsorted(rows, rows)]  # each topic's gain so far, exact: whole numbers
    # the cost at place i: the ideal gains of places 0..i (at least 1 a place), 1 a place past them
    width = ideal.shape[1]
    if width:
        cost_ideal = np.cumsum(np.maximum(ideal, 1.0), axis=1)
        cost = np.where(
            positions < width,
            cost_ideal[rows, np.minimum(positions, width - 1)],
            cost_ideal[rows, width - 1] + (positions + 1 - width),
        )
    else:
        cost = positions + 1.0
    return _entry_grid(rk.n, rows, gain / np.log2(2.0 + cost - gained))


@family("binG", params={"rel": REL}, trec=trec("binG"), reference="trec_eval m_binG.c")
def binary_g(rk: Ranking, rel: int) -> np.ndarray:
    """Binary G (experimental, trec_eval): mean over relevant documents of 1/log2(2 + non-relevant
    ranked above)."""
    if rel < 0:  # documents outside the qrels count then: only the matrix has them
        nonrel_before = np.arange(rk.depth)[None, :] - (rk.cum_rel(rel) - 1)
        terms = np.where(rk.is_rel(rel), 1.0 / np.log2(2.0 + nonrel_before), 0.0)
        return _safe_div(_sequential_sum(terms), rk.num_rel(rel))
    entries = rk.cached(("entries", rel), lambda: _JudgedEntries(rk, rel))
    terms = 1.0 / np.log2(2.0 + (entries.position - entries.rel_before))
    return _safe_div(entries.row_sums(terms), rk.num_rel(rel))


@family(
    "ERR",
    params={
        "cutoff": OPTIONAL_CUTOFF,
        "max_grade": Param(int, 4, low=1, doc="the grade scale's top, 4 as in gdeval and ir_measures"),
    },
    reference="Chapelle, Metzler, Zhang & Grinspan, CIKM 2009; gdeval.pl (TREC Web track), ir_measures ERR",
)
def expected_reciprocal_rank(rk: Ranking, cutoff: int | None, max_grade: int) -> np.ndarray:
    """Expected reciprocal rank (cascade model): sum over ranks r of R_r/r * prod_{i<r}(1-R_i), with
    R = (2^grade - 1) / 2^max_grade. max_grade is 4 by default, as in gdeval.pl and so in
    ir_measures' ERR@k (before schema 0008 evalstore used the qrels' highest grade: those stored
    values are named ERR(max_grade=G)@k). On a 0-3 scale, ERR(max_grade=3)@k is Chapelle's."""
    top = max_grade
    grades = np.where(rk.valid & (rk.rel > 0), rk.rel, 0)
    if cutoff is not None:
        grades = grades[:, :cutoff]
    stop = (np.power(2.0, grades) - 1.0) / 2.0**top
    reach = np.cumprod(1.0 - stop, axis=1)
    reach = np.concatenate([np.ones((rk.n, 1)), reach[:, :-1]], axis=1)
    return (stop * reach / np.arange(1, grades.shape[1] + 1)).sum(axis=1)


# --------------------------------------------------------------------------- rank-biased precision


RBP_P = Param(float, 0.8, low=0.0, high=1.0, doc="persistence p (ir_measures' default 0.8; trec_eval's rbp: 0.9)")
RBP_RESID_P = Param(float, 0.9, low=0.0, high=1.0, doc="persistence p (trec_eval's default 0.9)")


@family(
    "RBP",
    params={
        "p": RBP_P,
        "gains": GAINS,
        "rel": Param(
            int,
            None,
            doc="binary gains: 1 at this relevance level or above, as "
            "ir_measures' RBP(rel=r) (cwl_eval); default: trec_eval's "
            "graded gains",
        ),
    },
    trec=trec("rbp", param="p", kind="pairs", fixed=(("p", 0.9),)),
    aliases=("rbp",),
    reference="Moffat & Zobel, TOIS 2008; trec_eval m_rbp.c; cwl_eval",
)
def rank_biased_precision(rk: Ranking, p: float, gains: dict[int, float] | None, rel: int | None) -> np.ndarray:
    """(1-p) sum gain_i p^(i-1). Gains are trec_eval's: each level's gain (the level, or as
    given), min-max normalised per topic where one falls outside [0,1]; or, with rel, 1 for a
    document judged at least rel and 0 otherwise (ir_measures' RBP(rel=r))."""
    if rel is not None:
        if gains:
            raise InvalidParameterError("RBP takes gains or rel, not both: rel makes the gains binary.")
        if rel < 0:  # documents outside the qrels count then: only the matrix has them
            binary = np.where(rk.is_rel(rel), 1.0, 0.0)
            return (1.0 - p) * _sequential_sum(binary * _persistence(p, rk.depth)[:-1])
        chosen = rk.judged_rel >= rel
        weights = _persistence(p, rk.depth)[rk.judged_position[chosen]]
        return (1.0 - p) * _sequential_sum(_entry_grid(rk.n, rk.judged_row[chosen], 1.0 * weights))
    table = _gain_table(rk, gains)
    levels_present = rk.rel_levels > 0
    # per topic: the gains of levels 0..(highest level judged in the topic), plus given levels
    n_levels = rk.rel_levels.shape[1]
    top_level = np.where(levels_present.any(axis=1), n_levels - 1 - levels_present[:, ::-1].argmax(axis=1), -1)
    in_list = np.arange(n_levels)[None, :] <= top_level[:, None]
    for level in gains or {}:
        if 0 <= level < n_levels:
            in_list[:, level] = True
    level_gains = np.broadcast_to(table[3 : 3 + n_levels], in_list.shape)
    low = np.minimum(0.0, np.where(in_list, level_gains, np.inf).min(axis=1))
    high = np.maximum(0.0, np.where(in_list, level_gains, -np.inf).max(axis=1))
    rescale = (low < 0) | (high > 1)
    span = np.where(high - low > 0, high - low, 1.0)
    if NONPOOL not in (gains or {}):  # the judged entries hold every place with a gain
        code, row = rk.judged_rel, rk.judged_row
        listed = np.zeros(len(code), dtype=bool)
        judged = code >= 0
        listed[judged] = in_list[row[judged], code[judged]]
        if UNJUDGED in (gains or {}):
            listed |= code == UNJUDGED
        raw = table[code + 3]
        value = np.where(rescale[row], (raw - low[row]) / span[row], raw)
        terms = np.where(listed, value, 0.0) * _persistence(p, rk.depth)[rk.judged_position]
        return (1.0 - p) * _sequential_sum(_entry_grid(rk.n, row, terms))
    raw = table[rk.rel + 3]
    listed = np.zeros_like(rk.valid)
    judged = rk.rel >= 0
    listed[judged] = np.take_along_axis(in_list, np.clip(rk.rel, 0, n_levels - 1), axis=1)[judged]
    for level in gains or {}:
        if level in (NONPOOL, UNJUDGED):
            listed |= rk.rel == level
    value = np.where(rescale[:, None], (raw - low[:, None]) / span[:, None], raw)
    g = np.where(rk.valid & listed, value, 0.0)
    return (1.0 - p) * _sequential_sum(g * _persistence(p, rk.depth)[:-1])


def _persistence(p: float, depth: int) -> np.ndarray:
    """p^0 .. p^depth by repeated multiplication (trec_eval's cur_p *= p, not pow)."""
    return np.cumprod(np.concatenate([[1.0], np.full(depth, p)]))


@family(
    "RBP_resid",
    params={"p": RBP_RESID_P},
    trec=trec("rbp_resid", param="p", kind="pairs"),
    aliases=("rbp_resid",),
    higher_is_better=False,
    reference="Moffat & Zobel, TOIS 2008; trec_eval m_rbp_resid.c",
)
def rbp_residual(rk: Ranking, p: float) -> np.ndarray:
    """The largest possible rise of RBP if every retrieved unjudged document (and everything past
    the ranking) were fully relevant: p^n + (1-p) sum over unjudged p^(i-1); 0 with none unjudged."""
    unj = rk.valid & (rk.rel < 0)
    weights = _persistence(p, rk.depth)
    tail = weights[rk.num_ret]
    return np.where(unj.any(axis=1), tail + (1.0 - p) * _sequential_sum(np.where(unj, weights[:-1], 0.0)), 0.0)


# --------------------------------------------------------------------------- user-oriented
# Korfhage (1997) and Baeza-Yates & Ribeiro-Neto (Modern Information Retrieval, 1999, 3.2.3): with
# U the relevant documents the user already knew (a second qrels set, evaluate --known), R the
# relevant ones and A the retrieved: Rk = |A n U|, Ru = |(A n R) - U|.


def _known(rk: Ranking, name: str) -> Known:
    if rk.known is None:
        raise InvalidParameterError(
            f"{name} compares the ranking with what the user already knew.",
            remedy=Remedy(cli="Evaluate with --known QRELS (the relevant documents the user knew beforehand)."),
        )
    return rk.known


def _known_retrieved(rk: Ranking, known: Known) -> np.ndarray:
    return np.bincount(known.row, minlength=rk.n).astype(np.float64)


def _unknown_relevant_retrieved(rk: Ranking, known: Known, rel: int) -> np.ndarray:
    relevant = rk.judged_rel >= rel
    width = np.int64(rk.depth + 1)
    is_known = np.isin(
        rk.judged_row[relevant] * width + rk.judged_position[relevant], known.row * width + known.position
    )
    return np.bincount(rk.judged_row[relevant][~is_known], minlength=rk.n).astype(np.float64)


@family("Coverage", reference="Korfhage 1997; Baeza-Yates & Ribeiro-Neto 1999, 3.2.3")
def coverage(rk: Ranking) -> np.ndarray:
    """Share of the relevant documents the user knew that were retrieved: |Rk| / |U| (0 when the
    user knew none)."""
    known = _known(rk, "Coverage")
    return _safe_div(_known_retrieved(rk, known), known.relevant)


@family("Novelty", params={"rel": REL}, reference="Korfhage 1997; Baeza-Yates & Ribeiro-Neto 1999, 3.2.3")
def novelty(rk: Ranking, rel: int) -> np.ndarray:
    """Share of the relevant retrieved documents the user did not know: |Ru| / (|Ru| + |Rk|)."""
    known = _known(rk, "Novelty")
    unknown = _unknown_relevant_retrieved(rk, known, rel)
    return _safe_div(unknown, unknown + _known_retrieved(rk, known))


@family("RelativeRecall", params={"rel": REL}, reference="Baeza-Yates & Ribeiro-Neto 1999, 3.2.3")
def relative_recall(rk: Ranking, rel: int) -> np.ndarray:
    """Relevant documents found over the number the user expected to find (those they knew), at
    most 1: a user who has found as many as expected stops."""
    known = _known(rk, "RelativeRecall")
    return np.minimum(_safe_div(rk.num_rel_ret(rel).astype(np.float64), known.relevant), 1.0)


@family("RecallEffort", params={"rel": REL}, reference="Baeza-Yates & Ribeiro-Neto 1999, 3.2.3")
def recall_effort(rk: Ranking, rel: int) -> np.ndarray:
    """The number of relevant documents the user expected to find (those they knew) over the
    documents examined to find that many: down to the rank of the |U|-th relevant document, or
    the whole ranking when it holds fewer (0 when the user knew none)."""
    known = _known(rk, "RecallEffort")
    relevant = rk.judged_rel >= rel
    rows, positions = rk.judged_row[relevant], rk.judged_position[relevant]
    starts = np.searchsorted(rows, rows)  # each entry's topic's first relevant entry
    nth = np.arange(len(rows)) - starts + 1
    examined = rk.num_ret.astype(np.float64).copy()
    reached = nth == known.relevant[rows]
    examined[rows[reached]] = positions[reached] + 1
    return np.minimum(_safe_div(known.relevant.astype(np.float64), examined), 1.0)
