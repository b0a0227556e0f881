"""Novelty and diversity measures of the TREC Web track, exactly as ndeval 4.5 computes them.

From subtopic qrels (``topic subtopic docno judgment``; a judgment above 1 counts as 1) and a
run ranked in trec_eval's order (score descending, then docno descending: ndeval's
``-traditional``), per topic: ERR-IA@k and nERR-IA@k (Chapelle et al., CIKM 2009), alpha-DCG@k
and alpha-nDCG@k (Clarke et al., SIGIR 2008), NRBP and nNRBP (Clarke et al., ICTIR 2009), MAP-IA,
P-IA@k and subtopic recall (strec@k), all intent-aware (Agrawal et al., WSDM 2009). The ``n``
measures divide by the same measure of ndeval's greedy ideal ranking; the others by ndeval's
"ideal ideal" (every subtopic covered at every rank).

The C program is the reference (``tests/differential/test_against_ndeval.py`` compares output
byte for byte). We write our own rather than wrap it because it is not a Python package, and it
lets every topic be computed at once: the ranks (at most ``DEPTH`` for the @k measures) and the
subtopics (a handful) are the only Python loops; every sum keeps ndeval's order of operations, so
the values agree to the last printed digit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from evalstore import _kernels as pc
from evalstore.errors import InputFormatError
from evalstore.metrics.registry import REQUIRED, Measure, Param, register_elsewhere

DEPTH = 20  # ndeval's deepest @k
CUTOFFS = (5, 10, 20)  # the ones it prints
ALPHA = 0.5
BETA = 0.5
# ndeval's columns, in its order: (printed name, ir_measures-style canonical name)
COLUMNS = [
    *((f"ERR-IA@{k}", f"ERR_IA@{k}") for k in CUTOFFS),
    *((f"nERR-IA@{k}", f"nERR_IA@{k}") for k in CUTOFFS),
    *((f"alpha-DCG@{k}", f"alpha_DCG@{k}") for k in CUTOFFS),
    *((f"alpha-nDCG@{k}", f"alpha_nDCG@{k}") for k in CUTOFFS),
    ("NRBP", "NRBP"),
    ("nNRBP", "nNRBP"),
    ("MAP-IA", "AP_IA"),
    *((f"P-IA@{k}", f"P_IA@{k}") for k in CUTOFFS),
    *((f"strec@{k}", f"StRecall@{k}") for k in CUTOFFS),
]


@dataclass
class DiversityResult:
    topics: list[int]  # the run's topics, ascending (ndeval prints each, judged or not)
    judged: np.ndarray  # (n,) bool: the topic is in the qrels
    values: dict[str, np.ndarray]  # printed column name -> per-topic values
    qrels_topics: int  # number of topics in the qrels (the -c denominator)


def natural_number(text: str) -> int | None:
    """ndeval's topic and subtopic numbers: decimal digits only."""
    return int(text) if text.isdigit() and text.isascii() else None


def run_topic_number(text: str) -> int | None:
    """ndeval's run topics may carry a task prefix ending in '-' (``wt09-1``)."""
    return natural_number(text if text[:1].isdigit() else text.partition("-")[2])


def evaluate_diversity(
    qrels: pa.Table,
    run: pa.Table,
    *,
    alpha: float = ALPHA,
    beta: float = BETA,
    max_docs: int | None = None,
    qrels_path: str = "qrels",
    run_path: str = "run",
    cutoffs: tuple[int, ...] = CUTOFFS,
) -> DiversityResult:
    """Every ndeval measure per run topic, the @k ones at ``cutoffs`` (ndeval prints 5, 10 and
    20; any k up to ``DEPTH`` is computed the same way, as pyndeval does). ``qrels`` has columns
    topic, iteration (the subtopic), doc, relevance; ``run`` topic, doc, score."""
    q_topic = _numbers(qrels["topic"], natural_number, qrels_path, "topic")
    q_sub = _numbers(qrels["iteration"], natural_number, qrels_path, "subtopic")
    judgment = qrels["relevance"].to_numpy()
    if (judgment < 0).any():
        raise InputFormatError(qrels_path, None, "a judgment is negative; subtopic judgments are 0 or more")
    judgment = np.minimum(judgment, 1)  # ndeval: binary assessment only

    topics_q, t_code = np.unique(q_topic, return_inverse=True)
    n_subtopics = int(q_sub.max()) + 1 if len(q_sub) else 1
    # each qrels document once per topic, in docno (byte) order: the greedy ideal breaks ties by it
    doc_keys = pa.table({"t": pa.array(t_code), "doc": qrels["doc"]})
    distinct = (
        doc_keys.group_by(["t", "doc"], use_threads=False)
        .aggregate([])
        .sort_by([("t", "ascending"), ("doc", "ascending")])
    )
    d_topic = distinct["t"].to_numpy()
    d_count = np.bincount(d_topic, minlength=len(topics_q))
    width = int(d_count.max()) if len(d_count) else 0
    d_pos = np.arange(len(d_topic)) - np.concatenate([[0], np.cumsum(d_count)[:-1]])[d_topic]
    rel = np.zeros((len(topics_q), max(width, 1), n_subtopics), dtype=bool)
    where = _lookup(distinct, doc_keys)
    rel[t_code, d_pos[where], q_sub] |= judgment.astype(bool)
    nrel_sub = np.zeros((len(topics_q), n_subtopics), dtype=np.int64)
    np.add.at(nrel_sub, (t_code, q_sub), judgment)  # ndeval adds every judgment line
    actual = (nrel_sub > 0).sum(axis=1)

    ideal_scores = _greedy_ideal(rel, d_count, alpha)
    ideal = _measures(ideal_scores, np.full(len(topics_q), ideal_scores.shape[1]), actual, alpha, beta, cutoffs)

    r_topic = _numbers(run["topic"], run_topic_number, run_path, "topic")
    topics_r = np.unique(r_topic)
    judged = np.isin(topics_r, topics_q)
    order = _trec_order(run, r_topic)
    r_rows = np.searchsorted(topics_r, r_topic[order])
    r_count = np.bincount(r_rows, minlength=len(topics_r))
    r_pos = np.arange(len(order)) - np.concatenate([[0], np.cumsum(r_count)[:-1]])[r_rows]
    if max_docs is not None:
        kept = r_pos < max_docs
        order, r_rows, r_pos = order[kept], r_rows[kept], r_pos[kept]
        r_count = np.minimum(r_count, max_docs)
    depth = int(r_count.max()) if len(r_count) else 0
    # each run document's subtopic judgments, from its qrels row (none when unjudged)
    q_row = np.searchsorted(topics_q, topics_r)
    run_keys = pa.table({"t": pa.array(np.where(judged, q_row, -1)[r_rows]), "doc": run["doc"].take(pa.array(order))})
    hit = _lookup(distinct, run_keys, missing=-1)
    run_rel = np.zeros((len(topics_r), max(depth, 1), n_subtopics), dtype=bool)
    found = hit >= 0
    run_rel[r_rows[found], r_pos[found]] = rel[d_topic[hit[found]], d_pos[hit[found]]]
    scores = _novelty_scores(run_rel, alpha)

    row_q = np.where(judged, q_row, 0)
    run_actual = np.where(judged, actual[row_q], 0)
    values = _measures(scores, r_count, run_actual, alpha, beta, cutoffs)
    values.update(_counting_measures(run_rel, r_count, run_actual, nrel_sub[row_q] * judged[:, None], cutoffs))
    # normalised by the ideal ranking's values (renormalize in ndeval.c); judged topics only
    for k in cutoffs:
        dcg, err = values[f"alpha-DCG@{k}"], values[f"ERR-IA@{k}"]
        with np.errstate(divide="ignore", invalid="ignore"):
            values[f"alpha-nDCG@{k}"] = np.where(dcg != 0, dcg / ideal[f"alpha-DCG@{k}"][row_q], 0.0)
            values[f"nERR-IA@{k}"] = np.where(dcg != 0, err / ideal[f"ERR-IA@{k}"][row_q], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        values["nNRBP"] = np.where(judged, values["NRBP"] / ideal["NRBP"][row_q], 0.0)
    for name in values:
        values[name] = np.where(judged, values[name], 0.0)
    return DiversityResult(topics=topics_r.tolist(), judged=judged, values=values, qrels_topics=len(topics_q))


def _numbers(column: pa.ChunkedArray, parse: Callable[[str], int | None], path: str, what: str) -> np.ndarray:
    texts = pc.unique(column).to_pylist()
    numbers = {text: parse(text) for text in texts}
    bad = next((text for text, number in numbers.items() if number is None), None)
    if bad is not None:
        raise InputFormatError(
            path,
            None,
            f"{what} '{bad}' is not a whole number; ndeval's topics and subtopics "
            "are numbers (run topics may carry a prefix such as 'wt09-')",
        )
    codes = pc.index_in(column, value_set=pa.array(texts, column.type)).to_numpy(zero_copy_only=False)
    return np.array([numbers[text] for text in texts], dtype=np.int64)[codes]


def _lookup(index: pa.Table, keys: pa.Table, missing: int | None = None) -> np.ndarray:
    """Row of ``index`` (columns t, doc) holding each row of ``keys``; ``missing`` where none."""
    numbered = index.append_column("row", pa.array(np.arange(index.num_rows)))
    probe = keys.append_column("i", pa.array(np.arange(keys.num_rows)))
    joined = probe.join(numbered, keys=["t", "doc"], join_type="left outer")
    out = np.full(keys.num_rows, -1 if missing is None else missing, dtype=np.int64)
    rows = joined["row"].to_numpy(zero_copy_only=False)
    present = ~np.isnan(rows) if rows.dtype.kind == "f" else np.ones(len(rows), dtype=bool)
    out[joined["i"].to_numpy()[present]] = rows[present].astype(np.int64)
    return out


def _trec_order(run: pa.Table, topic: np.ndarray) -> np.ndarray:
    table = pa.table({"t": pa.array(topic), "score": run["score"], "doc": run["doc"]})
    return pc.sort_indices(
        table, sort_keys=[("t", "ascending"), ("score", "descending"), ("doc", "descending")]
    ).to_numpy()


def _greedy_ideal(rel: np.ndarray, doc_count: np.ndarray, alpha: float) -> np.ndarray:
    """ndeval's idealResult: at each rank the unranked document with the most novel gain, ties
    to the greater docno (documents are in docno order, so the later one), for every topic at
    once. Only the ranks up to the last relevant document carry gain; the rest score 0."""
    n, width, n_sub = rel.shape
    relevant = rel.any(axis=2)
    steps = int(relevant.sum(axis=1).max()) if n else 0
    open_: np.ndarray = np.arange(width)[None, :] < doc_count[:, None]
    gain = np.ones((n, n_sub))
    scores = np.zeros((n, max(steps, 1)))
    rows = np.arange(n)
    for rank in range(steps):
        score = np.zeros((n, width))
        for j in range(n_sub):  # in subtopic order, as ndeval sums
            score = score + np.where(rel[:, :, j], gain[:, j : j + 1], 0.0)
        score = np.where(open_, score, -np.inf)
        best = score.max(axis=1)
        pick = width - 1 - np.argmax((score == best[:, None])[:, ::-1], axis=1)  # the last (greatest docno)
        has = np.asarray(open_.any(axis=1))
        scores[:, rank] = np.where(has, np.maximum(best, 0.0), 0.0)
        open_[rows[has], pick[has]] = False
        gain = np.where(has[:, None] & rel[rows, pick], gain * (1.0 - alpha), gain)
    return scores


def _novelty_scores(rel: np.ndarray, alpha: float) -> np.ndarray:
    """Each rank's gain: the sum, in subtopic order, of (1 - alpha)^(times the subtopic was seen
    above), the powers built by repeated multiplication as in ndeval."""
    factor = np.where(rel, 1.0 - alpha, 1.0)
    before = np.concatenate([np.ones_like(factor[:, :1]), np.cumprod(factor, axis=1)[:, :-1]], axis=1)
    score = np.zeros(rel.shape[:2])
    for j in range(rel.shape[2]):
        score = score + np.where(rel[:, :, j], before[:, :, j], 0.0)
    return score


def _discount(depth: int) -> np.ndarray:
    # the C library's log, as ndeval's (numpy's vectorised log may differ in the last bit)
    return np.array([math.log(2.0) / math.log(rank + 2.0) for rank in range(depth)])


def _measures(
    scores: np.ndarray, count: np.ndarray, actual: np.ndarray, alpha: float, beta: float, cutoffs: tuple[int, ...]
) -> dict[str, np.ndarray]:
    """alpha-DCG@k, ERR-IA@k (ideal-ideal normalised) and NRBP from each rank's novelty gain."""
    n = len(count)
    top = np.zeros((n, DEPTH))
    width = min(DEPTH, scores.shape[1])
    top[:, :width] = np.where(np.arange(width)[None, :] < count[:, None], scores[:, :width], 0.0)
    ideal_gain = np.empty((n, DEPTH))
    ideal_gain[:, 0] = actual
    for i in range(1, DEPTH):
        ideal_gain[:, i] = ideal_gain[:, i - 1] * (1.0 - alpha)
    discount, ranks = _discount(DEPTH), np.arange(1, DEPTH + 1, dtype=np.float64)
    dcg = np.cumsum(top * discount, axis=1)
    err = np.cumsum(top / ranks, axis=1)
    ideal_dcg = np.cumsum(ideal_gain * discount, axis=1)
    ideal_err = np.cumsum(ideal_gain / ranks, axis=1)
    covered = actual > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        dcg[:, 1:] = np.where(covered[:, None], dcg[:, 1:] / ideal_dcg[:, 1:], 0.0)
        err[:, 1:] = np.where(covered[:, None], err[:, 1:] / ideal_err[:, 1:], 0.0)
        decay = np.cumprod(
            np.concatenate([np.ones((n, 1)), np.full((n, max(scores.shape[1] - 1, 0)), beta)], axis=1), axis=1
        )[:, : scores.shape[1]]
        in_list = np.arange(scores.shape[1])[None, :] < count[:, None]
        total = np.cumsum(np.where(in_list, scores * decay, 0.0), axis=1)[:, -1] if scores.shape[1] else np.zeros(n)
        nrbp = np.where(covered, total * ((1 - (1 - alpha) * beta) / actual), 0.0)
    values = {"NRBP": nrbp}
    for k in cutoffs:
        values[f"alpha-DCG@{k}"] = dcg[:, k - 1]
        values[f"ERR-IA@{k}"] = err[:, k - 1]
    return values


def _counting_measures(
    rel: np.ndarray, count: np.ndarray, actual: np.ndarray, nrel_sub: np.ndarray, cutoffs: tuple[int, ...]
) -> dict[str, np.ndarray]:
    """P-IA@k, strec@k and MAP-IA of the run's rankings."""
    n, depth, n_sub = rel.shape
    in_list = (np.arange(depth)[None, :] < count[:, None])[:, :, None]
    rel = rel & in_list
    pairs = np.cumsum(rel.sum(axis=2), axis=1)
    seen = np.maximum.accumulate(rel, axis=1).sum(axis=2)
    values: dict[str, np.ndarray] = {}
    covered = actual > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in cutoffs:
            at = min(k, depth) - 1
            pairs_k = pairs[:, at] if depth else np.zeros(n)
            seen_k = seen[:, at] if depth else np.zeros(n)
            values[f"P-IA@{k}"] = np.where(covered, pairs_k / (k * actual), 0.0)
            values[f"strec@{k}"] = np.where(covered, seen_k / actual, 0.0)
        # per subtopic: sum over its relevant ranks of (its relevant so far) / rank, then / its total
        so_far = np.cumsum(rel, axis=1)
        ranks = np.arange(1, depth + 1, dtype=np.float64)[None, :, None]
        per_sub = np.cumsum(np.where(rel, so_far / ranks, 0.0), axis=1)[:, -1, :] if depth else np.zeros((n, n_sub))
        map_ia = np.zeros(n)
        for j in range(n_sub):  # in subtopic order, as ndeval sums
            map_ia = map_ia + np.where(nrel_sub[:, j] > 0, per_sub[:, j] / np.maximum(nrel_sub[:, j], 1), 0.0)
        values["MAP-IA"] = np.where(covered, map_ia / actual, 0.0)
    return values


def render_ndeval(result: DiversityResult, runid: str, *, complete: bool) -> str:
    """ndeval's CSV: a line per run topic, then the ``amean`` line (over the judged run topics,
    or every qrels topic with ``complete``)."""
    names = [printed for printed, _ in COLUMNS]
    lines = ["runid,topic," + ",".join(names)]
    matrix = np.column_stack([result.values[name] for name in names]) if result.topics else np.zeros((0, len(names)))
    for topic, row in zip(result.topics, matrix, strict=True):
        lines.append(f"{runid},{topic}," + ",".join(_fixed6(v) for v in row))
    count = result.qrels_topics if complete else int(result.judged.sum())
    totals = np.cumsum(matrix, axis=0)[-1] if len(matrix) else np.zeros(len(names))
    with np.errstate(divide="ignore", invalid="ignore"):
        means = totals / count
    lines.append(f"{runid},amean," + ",".join(_fixed6(v) for v in means))
    return "\n".join(lines) + "\n"


def _fixed6(value: float) -> str:
    # glibc prints the NaN of a 0/0 (x86's default NaN has its sign bit set) as -nan
    return "-nan" if np.isnan(value) else f"{value:.6f}"


# --------------------------------------------------------------------------- the registry's families
# (family, ndeval's column for cutoff k or the measure, description); ir_measures 0.4 spells them so
# (its pyndeval provider)
_CUTOFF = Param(
    int, REQUIRED, low=1, high=DEPTH, doc="rank cutoff k, at most 20 (ndeval's depth; it prints 5, 10 and 20)"
)
_ALPHA = Param(float, ALPHA, low=0.0, high=1.0, doc="redundancy intolerance")
_BETA = Param(float, BETA, low=0.0, high=1.0, doc="patience (NRBP)")
_FAMILIES: dict[str, tuple[str, dict[str, Param], str]] = {
    "alpha_nDCG": (
        "alpha-nDCG@{k}",
        {"alpha": _ALPHA, "cutoff": _CUTOFF},
        "alpha-DCG@k divided by that of ndeval's greedy ideal ranking (Clarke et al., SIGIR 2008).",
    ),
    "alpha_DCG": (
        "alpha-DCG@{k}",
        {"alpha": _ALPHA, "cutoff": _CUTOFF},
        "Novelty-discounted cumulative gain: a document's gain for each subtopic it covers is "
        "(1 - alpha)^(documents above it covering that subtopic), discounted by log2(rank + 1); "
        "normalised by the ideal-ideal ranking, as ndeval prints it.",
    ),
    "ERR_IA": (
        "ERR-IA@{k}",
        {"cutoff": _CUTOFF},
        "Intent-aware expected reciprocal rank (Chapelle et al., CIKM 2009), subtopics weighted "
        "equally, normalised by the ideal-ideal ranking (ndeval, alpha 0.5).",
    ),
    "nERR_IA": ("nERR-IA@{k}", {"cutoff": _CUTOFF}, "ERR-IA@k divided by that of ndeval's greedy ideal ranking."),
    "NRBP": (
        "NRBP",
        {"alpha": _ALPHA, "beta": _BETA},
        "Novelty- and rank-biased precision (Clarke et al., ICTIR 2009).",
    ),
    "nNRBP": ("nNRBP", {"alpha": _ALPHA, "beta": _BETA}, "NRBP divided by that of ndeval's greedy ideal ranking."),
    "AP_IA": (
        "MAP-IA",
        {},
        "Intent-aware average precision: AP per subtopic, averaged over the topic's subtopics "
        "(Agrawal et al., WSDM 2009).",
    ),
    "P_IA": ("P-IA@{k}", {"cutoff": _CUTOFF}, "Intent-aware precision at k: precision per subtopic, averaged."),
    "StRecall": (
        "strec@{k}",
        {"cutoff": _CUTOFF},
        "Subtopic recall at k: the share of the topic's subtopics covered in the top k (Zhai et al.).",
    ),
}
for _name, (_column, _params, _text) in _FAMILIES.items():
    register_elsewhere(
        _name,
        "subtopics",
        params=_params,
        description=_text,
        aliases=("MAP_IA",) if _name == "AP_IA" else (),  # ir_measures' other spelling
        reference="ndeval (TREC Web track 2009-2014), -traditional order",
    )


def ndeval_column(measure: Measure) -> str:
    """The ndeval column holding ``measure``'s values."""
    column = _FAMILIES[measure.family][0]
    return column.format(k=measure.param("cutoff")) if "{k}" in column else column


def diversity_values(
    qrels: pa.Table, run: pa.Table, measures: list[Measure], *, max_docs: int | None = None
) -> tuple[list[str], dict[Measure, np.ndarray]]:
    """Each measure's values on the run's judged topics (as text, in the run's numeric order):
    one ndeval pass per (alpha, beta) the measures ask for."""
    values: dict[Measure, np.ndarray] = {}
    topics: list[str] = []
    settings = {_alpha_beta(m) for m in measures}
    cutoffs = tuple(sorted({*CUTOFFS, *(m.param("cutoff") for m in measures if "cutoff" in m.spec.params)}))
    for alpha, beta in sorted(settings):
        result = evaluate_diversity(qrels, run, alpha=alpha, beta=beta, max_docs=max_docs, cutoffs=cutoffs)
        topics = [str(t) for t, judged in zip(result.topics, result.judged, strict=True) if judged]
        for measure in measures:
            if _alpha_beta(measure) == (alpha, beta):
                values[measure] = result.values[ndeval_column(measure)][result.judged]
    return topics, {measure: values[measure] for measure in measures}


def _alpha_beta(measure: Measure) -> tuple[float, float]:
    """The (alpha, beta) an ndeval pass needs for ``measure`` (ndeval's defaults where it has none)."""
    params = measure.spec.params
    return (measure.param("alpha") if "alpha" in params else ALPHA, measure.param("beta") if "beta" in params else BETA)
