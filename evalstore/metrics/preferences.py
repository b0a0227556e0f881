"""trec_eval's preference measures (``-R prefs`` and ``-R qrels_prefs``), exactly as trec_eval 10.0
computes them (``form_prefs_counts.c`` and the fourteen ``m_prefs_*.c``).

Preference judgments are lines ``topic jg jsg docno rel_level``: within a judgment sub-group (jsg)
a document with a higher level is preferred to one with a lower level; a judgment group (jg) is
one user's information need, its sub-groups together a partial order (closed transitively); a
level of 0 means non-relevant. ``-R qrels_prefs`` reads an ordinary qrels file as preferences:
the second column is the judgment group, with one sub-group.

Per topic, every judged document gets a *docid rank*: the retrieved ones first, in retrieval
order, then the others in docno order. A preference A > B is then

- fulfilled and retrieved when both are retrieved and A ranks above B (trec_eval's area A1),
- not fulfilled and retrieved when both are retrieved and B ranks above A (A2),
- fulfilled by implication when only A is retrieved (A3), not fulfilled when only B is (A4),
- possible but not occurring when neither is (A5).

The measures are ratios of these counts, summed over the judgment groups (``prefs_simp``),
averaged over them (``prefs_avgjg``) or over document pairs (``prefs_pair``); ``_ret`` keeps
only A1/A2, ``_imp`` also A3/A4, the plain ones all five areas. ``_Rnonrel`` counts as many
non-relevant documents as there are relevant ones (akin to bpref).

Two things of trec_eval's that differ from its ``-R qrels`` mode are kept: ties in score are
broken by docno *ascending* here (``comp_sim_docno`` in ``form_prefs_counts.c``), and ``-J``,
``-l`` and ``-N`` have no effect.

The structures are per judgment group (a preference matrix closed transitively, as trec_eval's
``PREFS_ARRAY``), so the topics and groups are a Python loop and the work inside them is numpy;
this mode is used on judgment sets of a few hundred documents per topic. The matrices are as
large as trec_eval's own (judged documents squared, per topic).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from evalstore import _kernels as pc
from evalstore.errors import EvaluationError, InputFormatError, InvalidParameterError, Remedy
from evalstore.io.formats import Preferences
from evalstore.metrics.registry import register_elsewhere, trec

# trec_eval's order (measures.c); the 'prefs' group is trec_eval's official subset
PREFS_MEASURES = (
    "prefs_num_prefs_poss",
    "prefs_num_prefs_ful",
    "prefs_num_prefs_ful_ret",
    "prefs_simp",
    "prefs_pair",
    "prefs_avgjg",
    "prefs_avgjg_Rnonrel",
    "prefs_simp_ret",
    "prefs_pair_ret",
    "prefs_avgjg_ret",
    "prefs_avgjg_Rnonrel_ret",
    "prefs_simp_imp",
    "prefs_pair_imp",
    "prefs_avgjg_imp",
)
PREFS_GROUPS = {"all_prefs": PREFS_MEASURES, "prefs": PREFS_MEASURES[:6]}
# counts: printed as integers, summed (not averaged) over topics
PREFS_COUNTS = frozenset(PREFS_MEASURES[:3])
# trec_eval -c ranks a topic missing from the run as this one document (trec_eval.c)
STAND_IN_DOCNO = "ceci_nest_pas_un_docno"


@dataclass
class PrefsResult:
    topics: list[str]
    values: dict[str, np.ndarray]  # measure name -> per-topic values, in ``topics`` order
    missing: list[str] = field(default_factory=list)  # judged topics the run lacks (skipped without -c)


@dataclass
class _Group:
    """One judgment group's counts (trec_eval's JG)."""

    ful_ret: int
    poss_ret: int
    ful_imp: int
    poss_imp: int
    notoccur: int
    num_rel: int
    num_rel_ret: int
    num_nonrel: int
    num_nonrel_ret: int
    # what the _Rnonrel measures recount: the equivalence classes (EC groups), or the closed
    # preference matrix and each document's level (-1: not in this group)
    classes: list[np.ndarray] | None = None
    matrix: np.ndarray | None = None
    levels: np.ndarray | None = None


def evaluate_preferences(
    prefs: Preferences, run: pa.Table, *, max_docs: int | None = None, complete: bool = False, measures: bool = True
) -> PrefsResult:
    """Every ``prefs_*`` measure per judged topic. ``run`` has columns topic, doc, score. With
    ``measures=False`` only the topics are found (trec_eval reads the judgments only for a
    measure that needs them: ``-m num_q`` alone reports judgments it would refuse)."""
    ranked = _ranked_docs(run, max_docs)
    order = np.argsort(prefs.topic, kind="stable")
    sorted_topics = prefs.topic[order]
    topics: list[str] = []
    missing: list[str] = []
    rows: list[dict[str, float]] = []
    for begin, end in _segments(sorted_topics):
        topic = str(sorted_topics[begin])
        docs = ranked.get(topic)
        if docs is None:
            missing.append(topic)
            if not complete:
                continue
            docs = np.array([STAND_IN_DOCNO])
        topics.append(topic)
        if not measures:
            continue
        lines = order[begin:end]
        groups, counts, num_judged_ret = _topic_groups(
            topic, docs, prefs.group[lines], prefs.subgroup[lines], prefs.doc[lines], prefs.level[lines]
        )
        rows.append(_measures(groups, counts, num_judged_ret))
    values = (
        {name: np.array([row[name] for row in rows], dtype=np.float64) for name in PREFS_MEASURES}
        if rows
        else dict.fromkeys(PREFS_MEASURES, np.zeros(len(topics)))
    )
    return PrefsResult(topics, values, missing)


def check_consistent(prefs: Preferences, path: str) -> None:
    """Refuse judgments trec_eval would refuse when it evaluates (a document both relevant and
    not in one group, a cycle of preferences), at import rather than at the first evaluation."""
    from evalstore.metrics import EMPTY_RUN  # here: this module is imported as part of that package

    try:
        evaluate_preferences(prefs, EMPTY_RUN, complete=True)
    except EvaluationError as exc:
        raise InputFormatError(path, None, str(exc)) from None


def _segments(values: np.ndarray) -> list[tuple[int, int]]:
    """(begin, end) of each run of equal values in a sorted array."""
    if not len(values):
        return []
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    return list(zip(starts.tolist(), np.r_[starts[1:], len(values)].tolist(), strict=True))


def _ranked_docs(run: pa.Table, max_docs: int | None) -> dict[str, np.ndarray]:
    """Each run topic's documents in retrieval order (score descending, docno ascending), cut
    at ``max_docs``; a docno twice among them is refused, as trec_eval refuses it."""
    if run.num_rows == 0:
        return {}
    indices = pc.sort_indices(run, sort_keys=[("topic", "ascending"), ("score", "descending"), ("doc", "ascending")])
    table = pc.take(run, indices)
    topic = np.array(table["topic"].to_pylist(), dtype=object)
    doc = np.array(table["doc"].to_pylist(), dtype=object)
    ranked: dict[str, np.ndarray] = {}
    for begin, end in _segments(topic):
        docs = doc[begin : end if max_docs is None else min(end, begin + max_docs)].astype(str)
        unique, seen = np.unique(docs, return_counts=True)
        if (seen > 1).any():
            raise EvaluationError(
                f"topic {topic[begin]} retrieves document {unique[seen > 1][0]} twice; a run ranks each document "
                "once per topic"
            )
        ranked[str(topic[begin])] = docs
    return ranked


def _topic_groups(
    topic: str, retrieved: np.ndarray, group: np.ndarray, subgroup: np.ndarray, doc: np.ndarray, level: np.ndarray
) -> tuple[list[_Group], np.ndarray, int]:
    """One topic's judgment groups and the preference counts of every document pair summed over
    the groups (trec_eval's ``pref_counts``), indexed by docid rank; and how many judged
    documents were retrieved."""
    judged = np.unique(doc.astype(str))
    retrieved_judged = retrieved[np.isin(retrieved, judged)]
    unretrieved = np.setdiff1d(judged, retrieved_judged)  # sorted by docno
    num_judged_ret = len(retrieved_judged)
    id_order = np.concatenate([retrieved_judged, unretrieved])
    by_docno = np.argsort(id_order)
    docid = by_docno[np.searchsorted(id_order[by_docno], doc.astype(str))]
    num_judged = len(id_order)

    # trec_eval's order: group, sub-group, level descending, docid rank
    lines = np.lexsort((docid, -level, subgroup.astype(str), group.astype(str)))
    group, subgroup, level, docid, doc = group[lines], subgroup[lines], level[lines], docid[lines], doc[lines]
    counts = np.zeros((num_judged, num_judged), dtype=np.int32)
    groups: list[_Group] = []
    for begin, end in _segments(group):
        part = slice(begin, end)
        if len(np.unique(subgroup[part])) > 1:
            matrix, levels = _closed_preferences(topic, subgroup[part], level[part], docid[part], doc[part], num_judged)
            jg = _count_matrix(matrix.astype(np.int64), num_judged_ret)
            rel, nonrel = levels > 0.0, levels == 0.0
            jg.num_rel, jg.num_rel_ret = int(rel.sum()), int(rel[:num_judged_ret].sum())
            jg.num_nonrel, jg.num_nonrel_ret = int(nonrel.sum()), int(nonrel[:num_judged_ret].sum())
            jg.matrix, jg.levels = matrix, levels
            counts += matrix
        else:
            pair_counts = _class_matrix(topic, level[part], docid[part], doc[part], num_judged)
            jg = _count_matrix(pair_counts, num_judged_ret)
            rel = level[part] > 0.0
            ret = docid[part] < num_judged_ret
            jg.num_rel, jg.num_rel_ret = int(rel.sum()), int((rel & ret).sum())
            jg.num_nonrel, jg.num_nonrel_ret = int((~rel).sum()), int((~rel & ret).sum())
            boundaries = np.flatnonzero(level[part][1:] != level[part][:-1]) + 1
            jg.classes = np.split(docid[part], boundaries)
            counts += pair_counts
        groups.append(jg)
    return groups, counts, num_judged_ret


def _class_matrix(topic: str, level: np.ndarray, docid: np.ndarray, doc: np.ndarray, num_judged: int) -> np.ndarray:
    """A one-sub-group judgment group: every line is preferred to every line of a lower level
    (duplicate lines count twice, as in trec_eval), as counts[preferred docid, other docid]."""
    better = level[:, None] > level[None, :]
    counts = np.zeros((num_judged, num_judged), dtype=np.int32)
    if len(np.unique(docid)) == len(docid):  # the usual case: one line per document
        counts[np.ix_(docid, docid)] = better
        return counts
    first, second = np.nonzero(better)
    clash = docid[first] == docid[second]
    if clash.any():
        raise EvaluationError(
            f"topic {topic}: document {doc[first[clash][0]]} has two different levels in one judgment sub-group; "
            "give each document one level per sub-group"
        )
    np.add.at(counts, (docid[first], docid[second]), 1)
    return counts


def _closed_preferences(
    topic: str, subgroup: np.ndarray, level: np.ndarray, docid: np.ndarray, doc: np.ndarray, num_judged: int
) -> tuple[np.ndarray, np.ndarray]:
    """A judgment group of several sub-groups: its preferences as a boolean docid x docid matrix,
    closed transitively (form_jg_pa), and each document's level (-1 where it is not judged)."""
    levels = np.full(num_judged, -1.0)
    for d, lv, name in zip(docid.tolist(), level.tolist(), doc.tolist(), strict=True):
        # in line order, as trec_eval checks: 0 after >0 (or >0 after 0) is inconsistent
        if (levels[d] > 0.0 and lv == 0.0) or (levels[d] == 0.0 and lv > 0.0):
            raise EvaluationError(
                f"topic {topic}: document {name} is judged non-relevant (0) and relevant (>0) in one judgment "
                "group; a group is one user's consistent judgments"
            )
        levels[d] = lv
    same = subgroup[:, None] == subgroup[None, :]
    better, worse = np.nonzero(same & (level[:, None] > level[None, :]))
    matrix = np.zeros((num_judged, num_judged), dtype=bool)
    matrix[docid[better], docid[worse]] = True
    np.fill_diagonal(matrix, True)
    while True:  # the reflexive transitive closure, by squaring until nothing changes
        closed = (matrix.astype(np.float32) @ matrix.astype(np.float32)) > 0
        if np.array_equal(closed, matrix):
            break
        matrix = closed
    np.fill_diagonal(matrix, False)
    conflicts = np.argwhere(matrix & matrix.T)
    if len(conflicts):
        names = dict(zip(docid.tolist(), doc.tolist(), strict=True))
        first, second = (names[int(d)] for d in conflicts[0])
        raise EvaluationError(
            f"topic {topic}: the preferences of one judgment group contradict each other ({first} and {second} "
            "are each preferred to the other, through its sub-groups); put contradicting judgments in different "
            "judgment groups"
        )
    return matrix, levels


def _count_matrix(pair_counts: np.ndarray, njr: int) -> _Group:
    """Fulfilled and possible preferences by area (see the module docstring)."""
    ret = pair_counts[:njr, :njr]
    ful_ret = int(np.triu(ret, 1).sum())
    unful_ret = int(np.tril(ret, -1).sum())
    ful_imp = int(pair_counts[:njr, njr:].sum())
    unful_imp = int(pair_counts[njr:, :njr].sum())
    notoccur = int(pair_counts[njr:, njr:].sum())
    return _Group(ful_ret, ful_ret + unful_ret, ful_imp, ful_imp + unful_imp, notoccur, 0, 0, 0, 0)


def _measures(groups: list[_Group], counts: np.ndarray, njr: int) -> dict[str, float]:
    ful_ret = sum(g.ful_ret for g in groups)
    ful_imp = sum(g.ful_imp for g in groups)
    poss_ret = sum(g.poss_ret for g in groups)
    poss_imp = sum(g.poss_imp for g in groups)
    notoccur = sum(g.notoccur for g in groups)
    values = {
        "prefs_num_prefs_poss": poss_ret + poss_imp + notoccur,
        "prefs_num_prefs_ful": ful_ret + ful_imp,
        "prefs_num_prefs_ful_ret": ful_ret,
        "prefs_simp": _ratio(ful_ret + ful_imp, poss_ret + poss_imp + notoccur),
        "prefs_simp_ret": _ratio(ful_ret, poss_ret),
        "prefs_simp_imp": _ratio(ful_ret + ful_imp, poss_ret + poss_imp),
        "prefs_avgjg": _average(groups, lambda g: (g.ful_ret + g.ful_imp, g.poss_ret + g.poss_imp + g.notoccur)),
        "prefs_avgjg_ret": _average(groups, lambda g: (g.ful_ret, g.poss_ret)),
        "prefs_avgjg_imp": _average(groups, lambda g: (g.ful_imp + g.ful_ret, g.poss_ret + g.poss_imp)),
        "prefs_avgjg_Rnonrel": _average(groups, lambda g: _r_nonrel(g, njr, retrieved_only=False), skip_empty=False),
        "prefs_avgjg_Rnonrel_ret": _average(groups, lambda g: _r_nonrel(g, njr, retrieved_only=True), skip_empty=False),
    }
    if counts.max(initial=0) <= 1 and not (counts.astype(bool) & counts.T.astype(bool)).any():
        # every pair judged once (no two groups share a pair): each pair's share is 0 or 1, so the
        # pair measures are the simple ratios (m_prefs_pair.c says so), and summing ones is exact
        values.update(
            prefs_pair=values["prefs_simp"],
            prefs_pair_imp=values["prefs_simp_imp"],
            prefs_pair_ret=values["prefs_simp_ret"],
        )
    else:
        values.update(_pair_measures(counts, njr))
    return values


def _ratio(numerator: float, denominator: int) -> float:
    return numerator / denominator if denominator else 0.0


def _average(groups: list[_Group], counts_of: Callable[[_Group], tuple[int, int]], skip_empty: bool = True) -> float:
    """The mean over judgment groups of fulfilled / possible; a topic whose sum is not positive
    scores 0, as in trec_eval (where a 0/0 of _Rnonrel makes the sum NaN, and so 0)."""
    total = 0.0
    for g in groups:
        ful, poss = counts_of(g)
        if poss:
            total += ful / poss
        elif not skip_empty:
            total = float("nan")
    return total / len(groups) if total > 0.0 else 0.0


def _r_nonrel(g: _Group, njr: int, *, retrieved_only: bool) -> tuple[int, int]:
    """m_prefs_avgjg_Rnonrel(_ret).c: as many non-relevant documents as relevant ones."""
    r, n = (g.num_rel_ret, g.num_nonrel_ret) if retrieved_only else (g.num_rel, g.num_nonrel)
    if r >= n:  # add R - N fulfilled non-relevant documents below every retrieved relevant one
        ful = g.ful_ret + (0 if retrieved_only else g.ful_imp) + g.num_rel_ret * (r - n)
        poss = g.poss_ret + (0 if retrieved_only else g.poss_imp + g.notoccur) + g.num_rel * (r - n)
        return ful, poss
    if g.classes is not None:
        return _recount_classes(g, njr, retrieved_only)
    return _recount_matrix(g, njr, retrieved_only)


def _recount_classes(g: _Group, njr: int, retrieved_only: bool) -> tuple[int, int]:
    """The _Rnonrel recount of a one-sub-group judgment group, line for line as trec_eval's
    ``recalculate``: its last (lowest) class stands for the non-relevant documents and keeps
    its first R; it is also compared with itself (trec_eval's loops include it)."""
    assert g.classes is not None
    classes = g.classes
    reduced = classes[-1][: g.num_rel_ret if retrieved_only else g.num_rel]
    if retrieved_only:  # each class is in docid order: its retrieved documents come first
        classes = [c[c < njr] for c in classes]
        reduced = reduced[reduced < njr]
    ful = poss = 0
    pairs = [(classes[a], classes[b]) for a in range(len(classes)) for b in range(a + 1, len(classes) - 1)]
    pairs += [(first, reduced) for first in classes]
    for first, second in pairs:
        eligible = first if retrieved_only else first[first < njr]
        fulfilled = int((len(second) - np.searchsorted(second, eligible, side="right")).sum())
        ful += fulfilled
        poss += len(first) * len(second) - fulfilled
    return ful, poss + ful


def _recount_matrix(g: _Group, njr: int, retrieved_only: bool) -> tuple[int, int]:
    """The _Rnonrel recount of a preference-matrix judgment group: non-relevant documents after
    the (R+1)-th one (in docid order) drop out of the matrix."""
    matrix, levels = g.matrix, g.levels
    assert matrix is not None and levels is not None
    end = njr if retrieved_only else len(levels)
    nonrel = levels == 0.0
    seen = np.cumsum(nonrel[:end])
    hit = np.flatnonzero(nonrel[:end] & (seen == g.num_rel + 1))
    first_dropped = int(hit[0]) if len(hit) else end
    kept = ~(nonrel & (np.arange(len(levels)) >= first_dropped))
    m = matrix & kept[:, None] & kept[None, :]
    ret = m[:njr, :njr]
    ful = int(np.triu(ret, 1).sum())
    poss = int(np.tril(ret, -1).sum())
    if not retrieved_only:
        ful += int(m[:njr, njr:].sum())
        poss += int(m[njr:, :njr].sum()) + int(m[njr:, njr:].sum())
    return ful, poss + ful


def _pair_measures(counts: np.ndarray, njr: int) -> dict[str, float]:
    """prefs_pair(_ret, _imp): the mean over document pairs with a preference of the share of
    their preferences (over all judgment groups) that the ranking fulfils. Summed in trec_eval's
    loop order (row by row) so the last digit agrees."""
    upper = np.triu_indices(njr, 1)
    both = (counts[:njr, :njr][upper], counts[:njr, :njr].T[upper])
    one = (counts[:njr, njr:].ravel(), counts[njr:, :njr].T.ravel())
    unretrieved = counts[njr:, njr:]
    shares = []
    for fulfilled, failed in (both, one):
        present = (fulfilled > 0) | (failed > 0)
        shares.append(fulfilled[present] / (fulfilled[present] + failed[present]))
    n_both, n_one = len(shares[0]), len(shares[1])
    n_none = int(np.triu((unretrieved > 0) | (unretrieved.T > 0), 1).sum())
    sequence = np.concatenate(shares)
    running = np.cumsum(sequence) if len(sequence) else np.zeros(1)
    sum_both = float(running[n_both - 1]) if n_both else 0.0
    sum_all = float(running[-1]) if len(sequence) else 0.0
    return {
        "prefs_pair": _ratio(sum_all, n_both + n_one + n_none),
        "prefs_pair_imp": _ratio(sum_all, n_both + n_one),
        "prefs_pair_ret": _ratio(sum_both, n_both),
    }


def expand_prefs_specs(specs: Iterable[str]) -> list[str]:
    """``-m`` values of the preference mode, in trec_eval's order (runid and num_q first)."""
    chosen: set[str] = set()
    for spec in specs:
        root = spec.partition(".")[0]
        if root in PREFS_GROUPS:
            chosen.update(("runid", "num_q", *PREFS_GROUPS[root]))
        elif root in PREFS_MEASURES or root in ("runid", "num_q"):
            chosen.add(root)
        else:
            raise InvalidParameterError(
                f"Measure '{root}' needs -R qrels; with -R prefs or -R qrels_prefs use all_prefs, prefs or a "
                "prefs_* measure.",
                remedy=Remedy(cli="'evalstore measures --trec' lists them."),
            )
    return [name for name in ("runid", "num_q", *PREFS_MEASURES) if name in chosen]


# --------------------------------------------------------------------------- the registry's families
_DESCRIPTIONS = {
    "prefs_num_prefs_poss": "Number of preferences possible, retrieved or not (summed over topics).",
    "prefs_num_prefs_ful": "Number of preferences fulfilled, by retrieved pairs or by implication (only the "
    "preferred document retrieved); summed over topics.",
    "prefs_num_prefs_ful_ret": "Number of preferences fulfilled among retrieved pairs (summed over topics).",
    "prefs_simp": "Preferences fulfilled / possible; a pair neither of whose documents is retrieved counts as "
    "a failure.",
    "prefs_pair": "Mean over document pairs of the share of their preferences (over all judgment groups) fulfilled.",
    "prefs_avgjg": "prefs_simp per judgment group, averaged over the groups (each user counts once).",
    "prefs_avgjg_Rnonrel": "prefs_avgjg with as many non-relevant documents as relevant ones per group "
    "(akin to bpref).",
    "prefs_simp_ret": "prefs_simp over pairs whose documents are both retrieved.",
    "prefs_pair_ret": "prefs_pair over pairs whose documents are both retrieved.",
    "prefs_avgjg_ret": "prefs_avgjg over pairs whose documents are both retrieved.",
    "prefs_avgjg_Rnonrel_ret": "prefs_avgjg_Rnonrel over pairs whose documents are both retrieved.",
    "prefs_simp_imp": "prefs_simp ignoring pairs neither of whose documents is retrieved.",
    "prefs_pair_imp": "prefs_pair ignoring pairs neither of whose documents is retrieved.",
    "prefs_avgjg_imp": "prefs_avgjg ignoring pairs neither of whose documents is retrieved.",
}
for _name in PREFS_MEASURES:
    register_elsewhere(
        _name,
        "preferences",
        description=_DESCRIPTIONS[_name],
        summary="sum" if _name in PREFS_COUNTS else "mean",
        value_type="int" if _name in PREFS_COUNTS else "float",
        trec=trec(_name, mode="prefs"),
        reference=f"trec_eval m_{_name}.c (-R prefs / -R qrels_prefs)",
    )
