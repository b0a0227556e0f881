"""ir_measures names under ties (issue #40): ``RR@k`` (ir_measures' msmarco provider) and
``Judged@k`` (its judged provider) break ties in score by docno ascending; evalstore keeps
trec_eval's rule (docno descending) for every name. The decisions table (`evalstore measures`,
evalstore.metrics.peers) says they differ under ties. On DL19's BM25 run with scores rounded to
integers (ties everywhere), this test holds both halves: ir_measures' values differ on topics
with ties, and they are evalstore's values of the same run with its ties broken ir_measures' way
(scores made distinct in docno-ascending order), so the tie rule is the whole difference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.metrics import evaluate
from evalstore.metrics.peers import PEERS
from tests.conftest import shared_path

ir_measures = pytest.importorskip("ir_measures", reason="ir_measures is a test dependency (pip install -e .[test])")

TIE_NAMES = ["RR@10", "Judged@10", "RR@3", "Judged@5"]


def _rounded_runs(tmp_path: Path) -> tuple[Path, Path]:
    """DL19 BM25 with scores rounded to integers, and the same run with its ties broken by docno
    ascending (distinct scores in that order)."""
    source = shared_path("msmarco-dl19", "runs", "run.msmarco-v1-passage.bm25-default.dl19.txt")
    rows = []
    for line in source.read_text().splitlines():
        topic, _, doc, _, score, _ = line.split()
        rows.append((topic, doc, float(round(float(score)))))
    tied = tmp_path / "tied.run"
    tied.write_text("".join(f"{t} Q0 {d} 0 {s} r\n" for t, d, s in rows))
    ordered = sorted(rows, key=lambda row: (row[0], -row[2], row[1]))  # score desc, docno ascending
    broken = tmp_path / "broken.run"
    broken.write_text("".join(f"{t} Q0 {d} 0 {-i} r\n" for i, (t, d, _) in enumerate(ordered)))
    return tied, broken


def _theirs(qrels: Path, run: Path, name: str) -> dict[str, float]:
    measure = ir_measures.parse_measure(name)
    return {
        m.query_id: m.value
        for m in ir_measures.iter_calc(
            [measure], ir_measures.read_trec_qrels(str(qrels)), ir_measures.read_trec_run(str(run))
        )
    }


def _ours(qrels: Path, run: Path, name: str) -> dict[str, float]:
    result = evaluate(qrels, run, [name], missing_topics="skip")
    return dict(zip(result.per_query["query_id"], result.per_query["value"], strict=True))


@pytest.mark.slow
def test_rr_at_k_and_judged_at_k_differ_from_ir_measures_only_by_the_tie_rule(tmp_path: Path) -> None:
    qrels = shared_path("msmarco-dl19", "qrels.dl19-passage.txt")
    tied, broken = _rounded_runs(tmp_path)
    differing = {}
    for name in TIE_NAMES:
        theirs, ours = _theirs(qrels, tied, name), _ours(qrels, tied, name)
        assert ours.keys() == theirs.keys(), name
        differing[name] = sum(abs(ours[q] - theirs[q]) > 1e-9 for q in theirs)
        # their values are ours once the ties are broken their way
        ours_broken = _ours(qrels, broken, name)
        assert max(abs(ours_broken[q] - theirs[q]) for q in theirs) < 1e-9, name
    # the rounded run ties on most topics: the rule shows on many of the 43
    assert differing["RR@10"] >= 5 and differing["Judged@10"] >= 5, differing
    # RR without a cutoff goes through pytrec_eval (trec_eval's rule): the same values, ties and all
    theirs, ours = _theirs(qrels, tied, "RR"), _ours(qrels, tied, "RR")
    assert max(abs(ours[q] - theirs[q]) for q in theirs) < 1e-9


def test_the_decisions_table_says_they_differ_under_ties() -> None:
    assert "RR@k DIFFERS UNDER TIES" in PEERS["RR"]
    assert "DIFFERS UNDER TIES" in PEERS["Judged"]
    shown = CliRunner().invoke(app, ["measures", "--format", "json"])
    assert shown.exit_code == 0
    peers = {row["name"]: row["peers"] for row in json.loads(shown.stdout)}
    assert "RR@k DIFFERS UNDER TIES" in peers["RR"] and "DIFFERS UNDER TIES" in peers["Judged"]
