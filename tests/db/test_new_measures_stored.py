"""The C/W/L measures, Compat and Accuracy stored by a worker and ranked on a leaderboard, on both
databases: the values read back are the file API's, and the board sorts by them."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import Engine, select

from evalstore.db import repositories as repo
from evalstore.db.models import QueryValues
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError
from evalstore.metrics import evaluate
from evalstore.services import comparisons, store
from evalstore.services.kinds.ranking import leaderboard
from evalstore.services.orchestration import evaluate_runs
from tests.conftest import shared_path

NAMES = ["INST(max_rel=1)", "SDCG(max_rel=1)@10", "NERR10(max_rel=1,p=0.5)", "Compat", "Accuracy"]  # canonical


def test_stored_values_equal_the_file_api_and_rank_the_board(engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    qrels, run = shared_path("trec_eval_test", "qrels.test"), shared_path("trec_eval_test", "results.test")
    store.import_qrels(engine, qrels, name="test")
    store.register_run(engine, run, name="std")
    # nothing relevant retrieved: Accuracy has no value on any topic, the others are 0
    worse = write(
        "worse.run", "".join(f"{t} Q0 nothing{i} {i} {1.0 / (i + 1)} w\n" for t in (301, 302, 303) for i in range(5))
    )
    store.register_run(engine, worse, name="worse")
    evaluate_runs(engine, qrels_name="test", run_names=None, measures=[*NAMES, "P_5,10"])
    expected = evaluate(qrels, run, NAMES)
    with read_only(engine) as session:
        ids = session.scalars(select(QueryValues.evaluation_id).distinct().order_by(QueryValues.evaluation_id)).all()
        table = repo.result_table(session, ids[0], [*NAMES, "P@5", "P@10"])
    stored = {
        (m, q): v for m, q, v in zip(*(table[c].to_pylist() for c in ("measure", "query_id", "value")), strict=True)
    }
    assert {m for m, _ in stored} == {*NAMES, "P@5", "P@10"}
    frame = expected.per_query
    for measure, query, value in zip(frame["measure"], frame["query_id"], frame["value"], strict=True):
        assert stored[(measure, query)] == pytest.approx(value, abs=1e-12) or (
            math.isnan(value) and (stored[(measure, query)] is None or math.isnan(stored[(measure, query)]))
        ), (measure, query)
    for name in ["INST(max_rel=1)", "Compat", "SDCG(max_rel=1)@10"]:
        rows = leaderboard(engine, qrels_name="test", measures=[name]).rows
        assert [r.run for r in rows] == ["std", "worse"], name
        assert rows[0].values[name][0] == pytest.approx(expected.aggregates[name]) and rows[1].values[name][0] == 0.0
    # Accuracy: the mean over the topics with a value; a run with none has no value (its row last)
    rows = leaderboard(engine, qrels_name="test", measures=["Accuracy"]).rows
    assert [r.run for r in rows] == ["std", "worse"]
    assert rows[0].values["Accuracy"][0] == pytest.approx(expected.aggregates["Accuracy"])
    # a comparison topic by topic would read Accuracy's undefined topics as 0: refused, with where
    with pytest.raises(
        EvaluationError,
        match=r"^Accuracy has no value for run 'worse' on 3 topic\(s\) \(301, 302, 303\): the measure is undefined "
        r"there, and a comparison topic by topic needs a value on every topic\. Compare a measure defined on every "
        r"topic\.$",
    ):
        comparisons.compare(engine, qrels_name="test", run_names=["std", "worse"], measures=["Accuracy"])
    compared = comparisons.compare(engine, qrels_name="test", run_names=["std", "worse"], measures=["INST(max_rel=1)"])
    assert compared.matrix.measures == ["INST(max_rel=1)"] and len(compared.pairs) == 1
