"""ir_measures spellings mean ir_measures' values: per topic, on real runs from ../shared/data,
with ir_measures 0.4 (its default providers) as the reference.

Decided differences, each kept under a name of its own (see `evalstore measures`):
- ``IPrec@x`` is ir_measures' (pytrec_eval, trec_eval 9.x: the recall level counts ``(long)(x*R +
  0.9)`` relevant documents); trec_eval 10.0's (``lround(x*R)``), which ``iprec_at_recall_x`` means,
  is ``IPrec(rounding=trec_eval10)@x``.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from evalstore.io.formats import read_qrels, read_run
from evalstore.metrics import evaluate, parse_measure
from evalstore.metrics.diversity import diversity_values
from tests.conftest import shared_path

ir_measures = pytest.importorskip("ir_measures", reason="ir_measures is a test dependency (pip install -e .[test])")

RUNS = [
    (
        ("msmarco-dl19", "qrels.dl19-passage.txt"),
        ("msmarco-dl19", "runs", "run.msmarco-v1-passage.bm25-default.dl19.txt"),
    ),
    (("dl-hard", "dl_hard-passage.qrels"), ("dl-hard", "runs", "passage", "bm25+rm3+t5-zs.run.gz")),
    (("robust03", "robust03_qrels.txt"), ("robust03", "runs", "input.NLPR03vb10.gz")),
]
# through pytrec_eval (trec_eval's code) and ir_measures' own providers: exact to rounding
SHARED_NAMES = [
    "AP",
    "AP@100",
    "AP(rel=2)",
    "nDCG",
    "nDCG@10",
    "P@10",
    "P(rel=2)@10",
    "R@1000",
    "R(rel=2)@1000",
    "RR",
    "RR@10",
    "RR(rel=2)@10",
    "Rprec",
    "Bpref",
    "infAP",
    "Judged@10",
    "Success@1",
    "Success@10",
    "NumRet",
    "NumRel",
    "NumQ",
    "NumRelRet",
    "SetP",
    "SetR",
    "SetF",
    "SetAP",
    # ir_measures' parameter spellings of our measures
    "SetF(beta=2.0)",
    "SetF(beta=0.5)",
    "Judged",
    "NumRet(rel=1)",
    "NumRet(rel=2)",
    "nDCG(dcg='log2')@10",
    "IPrec@0.0",
    "IPrec@0.1",
    "IPrec@0.3",
    "IPrec(rel=2)@0.7",
    "IPrec@1.0",
    "SetRelP",
]
# through gdeval.pl (ERR, exponential-gain nDCG) and cwl_eval (binary RBP)
GDEVAL_NAMES = ["ERR@20", "ERR@10", "nDCG(dcg='exp-log2')@10", "nDCG(dcg='exp-log2')@20"]
CWL_NAMES = ["RBP(rel=1)", "RBP(p=0.5,rel=1)", "RBP(p=0.95,rel=2)"]


def _theirs(names: list[str], qrels: list[Any], run: list[Any]) -> dict[str, dict[str, float]]:
    """ir_measures' values of each name by topic, the names computed together as its users would
    (one name per call re-read robust03 for each: most of this file's time). Together, but one
    call per setting of the parameters other than the cutoff: ir_measures hands a provider one
    setting for all the measures of a call (pyndeval got alpha 0.5 for alpha_nDCG(alpha=0.8)
    beside the default), and names it reads as one measure (NumRelRet is NumRet(rel=1), MAP_IA is
    AP_IA) share its values."""
    spelled: dict[Any, list[str]] = {}
    for name in names:
        spelled.setdefault(ir_measures.parse_measure(name), []).append(name)
    calls: dict[tuple[tuple[str, Any], ...], list[Any]] = {}
    for measure in spelled:
        setting = tuple(sorted((k, v) for k, v in measure.params.items() if k != "cutoff"))
        calls.setdefault(setting, []).append(measure)
    values: dict[str, dict[str, float]] = {name: {} for name in names}
    for measures in calls.values():
        for m in ir_measures.iter_calc(measures, qrels, run):
            for name in spelled[m.measure]:
                values[name][m.query_id] = m.value
    return values


def _per_topic(qrels: Path, run: Path, names: list[str]) -> dict[str, tuple[dict[str, float], dict[str, float]]]:
    """For each name, (ir_measures' values, ours) by topic; evalstore too computes them together."""
    theirs = _theirs(names, list(ir_measures.read_trec_qrels(str(qrels))), list(ir_measures.read_trec_run(str(run))))
    # per canonical name: nDCG@10 and nDCG(dcg='log2')@10 are one measure to evalstore
    frame = evaluate(qrels, run, names, missing_topics="skip").per_query
    ours: dict[str, dict[str, float]] = {}
    for query, canonical, value in zip(frame["query_id"], frame["measure"], frame["value"], strict=True):
        ours.setdefault(canonical, {})[query] = value
    return {name: (theirs[name], ours[str(parse_measure(name))]) for name in names}


@pytest.mark.slow
@pytest.mark.parametrize(("qrels_parts", "run_parts"), RUNS, ids=[r[1][-1] for r in RUNS])
def test_shared_names_give_ir_measures_values(qrels_parts: tuple[str, ...], run_parts: tuple[str, ...]) -> None:
    qrels, run = shared_path(*qrels_parts), shared_path(*run_parts)
    for name, (theirs, ours) in _per_topic(qrels, run, SHARED_NAMES).items():
        assert ours.keys() == theirs.keys(), name
        assert max(abs(ours[q] - theirs[q]) for q in theirs) < 1e-9, name


@pytest.mark.slow
@pytest.mark.parametrize(("qrels_parts", "run_parts"), RUNS[:2], ids=[r[1][-1] for r in RUNS[:2]])
def test_err_and_exp_ndcg_are_gdeval_values(qrels_parts: tuple[str, ...], run_parts: tuple[str, ...]) -> None:
    """ERR@k and nDCG(dcg='exp-log2')@k through ir_measures run gdeval.pl, which prints 5
    decimals; its ERR normalises grades by 4 whatever the qrels' scale (the DL qrels go to 3)."""
    if shutil.which("perl") is None:
        pytest.skip("ir_measures computes ERR with gdeval.pl, which needs perl")
    qrels, run = shared_path(*qrels_parts), shared_path(*run_parts)
    for name, (theirs, ours) in _per_topic(qrels, run, GDEVAL_NAMES).items():
        assert ours.keys() == theirs.keys()
        assert max(abs(ours[q] - theirs[q]) for q in theirs) <= 5e-6, name


DIVERSITY_NAMES = [
    "alpha_nDCG@1",
    "alpha_nDCG@5",
    "alpha_nDCG@15",
    "alpha_nDCG@20",
    "alpha_DCG@1",
    "alpha_DCG@10",
    "ERR_IA@1",
    "nERR_IA@7",
    "P_IA@1",
    "P_IA@12",
    "StRecall@3",
    "alpha_nDCG(alpha=0.8)@10",
    "ERR_IA@10",
    "ERR_IA@20",
    "nERR_IA@20",
    "P_IA@5",
    "P_IA@20",
    "StRecall@10",
    "StRecall@20",
    "NRBP",
    "nNRBP",
    "AP_IA",
    "MAP_IA",
]


def _seeded_run(qrels: Path, seed: int, *, ties: bool) -> list[tuple[str, str, float]]:
    """(topic, doc, score) for 40 of the topics: judged documents and unjudged ones, shuffled."""
    rng = random.Random(seed)
    docs: dict[str, set[str]] = {}
    for line in qrels.read_text().splitlines():
        topic, _, doc, _ = line.split()
        docs.setdefault(topic, set()).add(doc)
    rows = []
    for topic in sorted(docs)[:40]:
        ranked = sorted(docs[topic]) + [f"unjudged-{i}" for i in range(10)]
        rng.shuffle(ranked)
        for i, doc in enumerate(ranked[:60]):
            rows.append((topic, doc, float(rng.choice([1, 2, 3])) if ties else 1000.0 - i))
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("ties", [False, True], ids=["distinct-scores", "tied-scores"])
def test_diversity_measures_are_pyndeval_values(ties: bool) -> None:
    """ir_measures computes the diversity measures with pyndeval (ndeval's code). Per topic they
    agree where no two documents of a topic tie in score; with ties pyndeval ranks by docno
    ascending, evalstore (as trec_eval and ndeval -traditional) by docno descending. Judged topics
    missing from the run score 0 in ir_measures, as under evalstore's default --missing zero."""
    qrels = shared_path("web-diversity", "qrels.web.201-250.ndeval.txt")
    rows = _seeded_run(qrels, 7, ties=ties)
    run = pa.table({"topic": [r[0] for r in rows], "doc": [r[1] for r in rows], "score": [r[2] for r in rows]})
    measures = [parse_measure(name) for name in DIVERSITY_NAMES]
    topics, ours = diversity_values(read_qrels(qrels, judgment_groups=True).table, run, measures)
    judgments = list(ir_measures.read_trec_qrels(str(qrels)))
    scored = [ir_measures.ScoredDoc(*row) for row in rows]
    by_name = _theirs(DIVERSITY_NAMES, judgments, scored)
    differing = set()
    for name, measure in zip(DIVERSITY_NAMES, measures, strict=True):
        theirs = by_name[name]
        # ir_measures scores the judged topics the run lacks as 0 (evalstore's --missing zero)
        assert {q: v for q, v in theirs.items() if q not in topics} == dict.fromkeys(set(theirs) - set(topics), 0.0)
        assert set(topics) <= set(theirs), name
        column = dict(zip(topics, ours[measure], strict=True))
        gaps = {q: abs(column[q] - theirs[q]) for q in topics}
        if ties:
            differing |= {q for q, gap in gaps.items() if gap > 1e-9}
        else:
            assert max(gaps.values()) < 1e-9, name
    if ties:  # the tie order is the one difference: it shows on most topics of this run
        assert len(differing) > 20


@pytest.mark.slow
@pytest.mark.parametrize(("qrels_parts", "run_parts"), RUNS, ids=[r[1][-1] for r in RUNS])
def test_rbp_is_cwl_eval_rbp(qrels_parts: tuple[str, ...], run_parts: tuple[str, ...], tmp_path: Path) -> None:
    """ir_measures computes RBP(rel=r) (binary gains; p=0.8 by default) with cwl_eval, which breaks
    ties in score its own way: the run is rewritten with distinct scores in trec_eval's order, so
    both rank alike and the definitions are what is compared. (Graded RBP, without rel, is not in
    ir_measures' default providers; evalstore's is trec_eval's rbp.)"""
    qrels, run = shared_path(*qrels_parts), shared_path(*run_parts)
    table = read_run(run, strict=False).table
    order = pc.sort_indices(table, sort_keys=[("topic", "ascending"), ("score", "descending"), ("doc", "descending")])
    table = table.take(order)
    distinct = tmp_path / "run.txt"
    distinct.write_text(
        "".join(
            f"{t} Q0 {d} {i} {-i} r\n"
            for i, (t, d) in enumerate(zip(table["topic"].to_pylist(), table["doc"].to_pylist(), strict=True))
        )
    )
    for name, (theirs, ours) in _per_topic(qrels, distinct, CWL_NAMES).items():
        assert ours.keys() == theirs.keys(), name
        assert max(abs(ours[q] - theirs[q]) for q in theirs) < 1e-9, name


# the families this file holds to ir_measures' providers (tests/unit/test_reference_coverage.py)
REFERENCE_FAMILIES = {
    parse_measure(name).family for name in [*SHARED_NAMES, *GDEVAL_NAMES, *DIVERSITY_NAMES, *CWL_NAMES]
}
