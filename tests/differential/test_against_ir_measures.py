"""ir_measures spellings mean ir_measures' values: per topic, on real runs from ../shared/data,
with ir_measures 0.4 (its default providers) as the reference.

Decided differences, each kept under a name of its own (see `evalstore measures`):
- ``IPrec@x``: evalstore equals trec_eval 10.0 (recall points by ``lround``); ir_measures goes
  through pytrec_eval, trec_eval 9.x's code (``(int)(x*R + 0.9)``), so it is not compared here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evalstore.metrics import evaluate
from tests.conftest import shared_path

ir_measures = pytest.importorskip("ir_measures", reason="ir_measures is a test dependency (pip install -e .[test])")

RUNS = [
    (("msmarco-dl19", "qrels.dl19-passage.txt"), ("msmarco-dl19", "runs", "run.msmarco-v1-passage.bm25-default.dl19.txt")),
    (("dl-hard", "dl_hard-passage.qrels"), ("dl-hard", "runs", "passage", "bm25+rm3+t5-zs.run.gz")),
    (("robust03", "robust03_qrels.txt"), ("robust03", "runs", "input.NLPR03vb10.gz")),
]
# through pytrec_eval (trec_eval's code) and ir_measures' own providers: exact to rounding
SHARED_NAMES = ["AP", "AP@100", "AP(rel=2)", "nDCG", "nDCG@10", "P@10", "P(rel=2)@10", "R@1000", "R(rel=2)@1000",
                "RR", "RR@10", "RR(rel=2)@10", "Rprec", "Bpref", "infAP", "Judged@10", "Success@1", "Success@10",
                "NumRet", "NumRel", "NumQ", "NumRelRet", "SetP", "SetR", "SetF", "SetAP",
                # ir_measures' parameter spellings of our measures
                "SetF(beta=2.0)", "SetF(beta=0.5)", "Judged", "NumRet(rel=1)", "NumRet(rel=2)", "nDCG(dcg='log2')@10"]


def _per_topic(qrels: Path, run: Path, name: str) -> tuple[dict[str, float], dict[str, float]]:
    measure = ir_measures.parse_measure(name)
    theirs = {m.query_id: m.value for m in ir_measures.iter_calc([measure], ir_measures.read_trec_qrels(str(qrels)),
                                                                 ir_measures.read_trec_run(str(run)))}
    result = evaluate(qrels, run, [name], missing_topics="skip")
    ours = dict(zip(result.per_query["query_id"], result.per_query["value"], strict=True))
    return theirs, ours


@pytest.mark.slow
@pytest.mark.parametrize(("qrels_parts", "run_parts"), RUNS, ids=[r[1][-1] for r in RUNS])
def test_shared_names_give_ir_measures_values(qrels_parts: tuple[str, ...], run_parts: tuple[str, ...]) -> None:
    qrels, run = shared_path(*qrels_parts), shared_path(*run_parts)
    for name in SHARED_NAMES:
        theirs, ours = _per_topic(qrels, run, name)
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
    for name in ["ERR@20", "ERR@10", "nDCG(dcg='exp-log2')@10", "nDCG(dcg='exp-log2')@20"]:
        theirs, ours = _per_topic(qrels, run, name)
        assert ours.keys() == theirs.keys()
        assert max(abs(ours[q] - theirs[q]) for q in theirs) <= 5e-6, name
