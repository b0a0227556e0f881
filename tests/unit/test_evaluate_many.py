"""`evalstore.evaluate(qrels, runs, measures)` with a list or mapping of runs: each result is the
one evaluating that run alone gives, value for value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import evalstore
from evalstore.errors import EvaluationError
from evalstore.metrics import EvaluationResult
from evalstore.metrics import _several_runs as several_runs
from tests.golden.test_trec_eval_golden import suite_file

RUNS = [suite_file(name) for name in ("results.test", "results.trunc", "results-302.test")]
MEASURES = ["all_trec", "P@3", "nDCG(gains={-1:1})@5", "RelString@5"]


def _same(ours: EvaluationResult, alone: EvaluationResult) -> None:
    assert repr(ours.aggregates) == repr(alone.aggregates)  # nan as nan
    assert (ours.topics, ours.missing_topics, ours.dropped_run_topics, ours.options) == (
        alone.topics,
        alone.missing_topics,
        alone.dropped_run_topics,
        alone.options,
    )
    assert list(ours.values) == list(alone.values)
    for name, column in alone.values.items():
        assert ours.values[name].dtype == column.dtype, name
        if column.dtype == object:
            assert ours.values[name].tolist() == column.tolist(), name
        else:
            assert ours.values[name].tobytes() == column.tobytes(), name


@pytest.mark.parametrize(
    "options", [{}, {"missing_topics": "skip"}, {"max_docs": 7, "judged_only": True}, {"relevance_level": 2}]
)
def test_a_list_of_run_files_gives_each_runs_own_result(options: dict[str, object]) -> None:
    qrels = suite_file("qrels.test")
    results = evalstore.evaluate(qrels, RUNS, MEASURES, **options)  # type: ignore[arg-type]
    assert isinstance(results, list)
    assert len(results) == len(RUNS)
    for result, run in zip(results, RUNS, strict=True):
        _same(result, evalstore.evaluate(qrels, run, MEASURES, **options))  # type: ignore[arg-type]
    # batches of one run each give the same as one batch of all
    from evalstore.metrics import _evaluate_runs

    small = _evaluate_runs(
        qrels,
        RUNS,
        MEASURES,
        per_query=True,
        relevance_level=options.get("relevance_level", 1),
        max_docs=options.get("max_docs"),
        judged_only=bool(options.get("judged_only")),  # type: ignore[arg-type]
        missing_topics=str(options.get("missing_topics", "zero")),
        stack_cells=1,
    )
    for one, other in zip(small, results, strict=True):
        _same(one, other)  # type: ignore[arg-type]


def test_a_mapping_of_runs_in_any_form_gives_results_by_name(tmp_path: Path) -> None:
    qrels = {"q1": {"d1": 1, "d2": 0, "d3": 2}, "q2": {"d4": 1}}
    as_dict = {"q1": {"d1": 0.9, "d2": 0.8, "d3": 0.1}, "q2": {"d5": 1.0, "d4": 0.5}}
    frame = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["d3", "d9", "d4"], "score": [3.0, 2.0, 1.0]})
    path = tmp_path / "run.txt"
    path.write_text("q2 Q0 d4 1 2.0 t\nq2 Q0 d1 2 1.0 t\n")
    runs = {"dict": as_dict, "frame": frame, "file": path, "name": str(path)}
    results = evalstore.evaluate(qrels, runs, ["AP", "nDCG@10", "P@2", "NumQ"], known={"q1": {"d3": 1}})
    assert isinstance(results, dict)
    assert list(results) == ["dict", "frame", "file", "name"]
    for name, run in runs.items():
        _same(
            results[name],
            evalstore.evaluate(
                qrels,
                run,
                ["AP", "nDCG@10", "P@2", "NumQ"],  # type: ignore[arg-type]
                known={"q1": {"d3": 1}},
            ),
        )
    assert round(results["dict"].aggregates["map"], 4) == 0.6667
    assert results["file"].missing_topics == ["q1"]


def test_one_run_as_a_dict_is_one_run_not_several() -> None:
    assert not several_runs({"q1": {"d1": 0.9}})
    assert not several_runs({})
    assert several_runs({"bm25": {"q1": {"d1": 0.9}}})
    assert several_runs({"bm25": "run.txt"})
    assert several_runs({"bm25": pd.DataFrame()})
    assert several_runs([{"q1": {"d1": 0.9}}])
    assert several_runs(())
    result = evalstore.evaluate({"q1": {"d1": 1}}, {"q1": {"d1": 0.9}}, ["AP"])
    assert isinstance(result, EvaluationResult)
    assert evalstore.evaluate({"q1": {"d1": 1}}, [], ["AP"]) == []


def test_a_run_sharing_no_topic_with_the_qrels_is_named() -> None:
    qrels = {"q1": {"d1": 1}}
    with pytest.raises(
        EvaluationError,
        match=r"^Run 'other' and the qrels share no topic; check that the topic ids "
        r"match\.$",
    ):
        evalstore.evaluate(
            qrels, {"fine": {"q1": {"d1": 1.0}}, "other": {"q9": {"d1": 1.0}}}, ["AP"], missing_topics="skip"
        )
    with pytest.raises(EvaluationError, match=r"^Run 1 and the qrels share no topic"):
        evalstore.evaluate(qrels, [{"q1": {"d1": 1.0}}, {"q9": {"d1": 1.0}}], ["AP"], missing_topics="skip")
    # every qrels topic is scored by default: a run without them scores 0, as one run alone does
    assert evalstore.evaluate(qrels, [{"q9": {"d1": 1.0}}], ["AP"])[0].aggregates == {"AP": 0.0}


def test_per_query_false_keeps_no_values_and_aggregates_stay() -> None:
    results = evalstore.evaluate(suite_file("qrels.test"), RUNS[:2], ["AP"], per_query=False)
    assert [r.values for r in results] == [{}, {}]
    alone = evalstore.evaluate(suite_file("qrels.test"), RUNS[1], ["AP"])
    assert results[1].aggregates == alone.aggregates
    assert np.isfinite(results[0].aggregates["AP"])


def test_a_loop_over_runs_encodes_an_in_memory_qrels_table_once() -> None:
    """`evaluate(table, run)` in a loop: the table is validated into a new Table each call, over
    the caller's buffers, and the judged docnos and topics are encoded on the first call only;
    other judgments (new buffers, even with the same values) are encoded afresh."""
    import pyarrow as pa

    from evalstore.io.formats import read_qrels
    from evalstore.metrics import preparation

    def encodings() -> tuple[object, object]:  # what the last evaluation's qrels were encoded into
        assert preparation._last_topics is not None
        return preparation._last_judged[0][2], preparation._last_topics[2]

    qrels = read_qrels(suite_file("qrels.test"), strict=False).table
    first, seen = [], []
    for run in RUNS:
        first.append(evalstore.evaluate(qrels, run, ["AP"]).aggregates["AP"])
        seen.append(encodings())
    assert all(s[0] is seen[0][0] and s[1] is seen[0][1] for s in seen)
    copy = pa.table({name: pa.array(qrels[name].to_pylist(), qrels[name].type) for name in qrels.column_names})
    again = [evalstore.evaluate(copy, run, ["AP"]).aggregates["AP"] for run in RUNS]
    assert again == first
    assert encodings()[0] is not seen[0][0] and encodings()[1] is not seen[0][1]


def test_a_key_that_meets_another_topics_judgment_is_not_a_judgment(monkeypatch: pytest.MonkeyPatch) -> None:
    """prepare looks a run's (topic, docno) keys up among the judgments' and confirms a key found
    on the topic and the docno. With keys that ignore the topic, topic 1's d2 meets topic 2's
    judgment of d2: it stays unjudged in topic 1."""
    import pyarrow as pa

    from evalstore.metrics import preparation
    from evalstore.metrics.preparation import NONPOOL, prepare

    monkeypatch.setattr(preparation, "with_topics", lambda keys, codes: keys)
    monkeypatch.setattr(preparation, "_last_judged", [])
    qrels = pa.table({"topic": ["1", "2"], "doc": ["d1", "d2"], "relevance": pa.array([1, 2], pa.int64())})
    run = pa.table({"topic": ["1", "1", "2"], "doc": ["d2", "d1", "d2"], "score": [2.0, 1.0, 1.0]})
    ranking = prepare(qrels, run)
    assert ranking.rel.tolist() == [[NONPOOL, 1], [2, preparation.PAD]]


def test_the_hashes_given_to_prepare_and_the_duplicate_check_are_left_as_they_are() -> None:
    """prepare_run_file hashes a run's docnos once for both: each works on a copy (the look-up
    mixes the topics into its keys, the check sorts them)."""
    import pyarrow as pa

    from evalstore.io.hashing import doc_hashes
    from evalstore.io.parsed import has_duplicate_docs
    from evalstore.metrics.preparation import prepare

    qrels = pa.table({"topic": ["1", "2"], "doc": ["d1", "d2"], "relevance": pa.array([1, 2], pa.int64())})
    run = pa.table({"topic": ["1", "1", "2"], "doc": ["d2", "d1", "d2"], "score": [2.0, 1.0, 1.0]})
    keys = doc_hashes(run["doc"])
    before = keys.copy()
    prepare(qrels, run, doc_keys=keys)
    assert not has_duplicate_docs(run, doc_keys=keys)
    np.testing.assert_array_equal(keys, before)
