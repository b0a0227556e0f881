"""`evalstore.evaluate` takes what ir_measures takes (measure objects and their string forms; qrels
and runs as Qrel/ScoredDoc namedtuples, dicts of dicts, DataFrames with ir_measures' columns) and
gives ir_measures' per-query values, in its columns when asked (as_ir_measures=True)."""

from __future__ import annotations

import pandas as pd
import pytest

import evalstore
from evalstore.errors import InvalidParameterError
from evalstore.io.ir_measures_compat import as_table, measure_names
from tests.conftest import shared_path

ir_measures = pytest.importorskip("ir_measures", reason="ir_measures is a test dependency (pip install -e .[test])")

QRELS = {"q1": {"d1": 1, "d2": 0, "d3": 2}, "q2": {"d4": 1, "d5": 2}}
RUN = {"q1": {"d1": 0.9, "d2": 0.8, "d3": 0.1, "d9": 0.1}, "q2": {"d5": 1.0, "d4": 0.5, "d6": 0.5}}


def _measures() -> list[object]:
    from ir_measures import AP, ERR, RR, Bpref, Judged, P, R, Rprec, nDCG

    return [AP, AP(rel=2), nDCG @ 10, nDCG, P @ 2, P(rel=2) @ 2, R @ 1000, RR, Rprec, Bpref, Judged @ 10, ERR @ 20]


def _theirs(measures: list[object], qrels: object, run: object) -> dict[tuple[str, str], float]:
    return {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures, qrels, run)}


def _ours(measures: list[object], qrels: object, run: object) -> dict[tuple[str, str], float]:
    frame = evalstore.evaluate(qrels, run, measures, as_ir_measures=True, missing_topics="skip").per_query
    assert list(frame.columns) == ["query_id", "measure", "value"]
    return {(q, m): v for q, m, v in frame.itertuples(index=False)}


def test_objects_and_namedtuples_give_ir_measures_values() -> None:
    measures = [m for m in _measures() if not str(m).startswith("ERR")]  # ERR: gdeval.pl needs perl
    qrels = [ir_measures.Qrel(q, d, r) for q, docs in QRELS.items() for d, r in docs.items()]
    run = [ir_measures.ScoredDoc(q, d, s) for q, docs in RUN.items() for d, s in docs.items()]
    theirs = _theirs(measures, qrels, run)
    for shaped_qrels, shaped_run in (
        (qrels, run),
        (iter(qrels), (sd for sd in run)),
        (QRELS, RUN),
        (pd.DataFrame(qrels), pd.DataFrame(run)),
    ):
        ours = _ours(measures, shaped_qrels, shaped_run)
        assert ours.keys() == theirs.keys()
        assert all(abs(ours[k] - theirs[k]) < 1e-12 for k in theirs), shaped_qrels
    result = evalstore.evaluate(qrels, run, measures)
    nDCG = ir_measures.nDCG  # noqa: N806 (ir_measures' name)
    assert result.aggregates[nDCG @ 10] == result.aggregates["nDCG@10"]  # objects find the aggregates
    assert nDCG @ 10 in result.aggregates and ir_measures.SetP not in result.aggregates
    # string forms name the columns as given
    frame = evalstore.evaluate(qrels, run, ["AP(rel=2)", "P_2"], as_ir_measures=True).per_query
    assert set(frame["measure"]) == {"AP(rel=2)", "P_2"}


@pytest.mark.slow
def test_real_runs_as_ir_measures_reads_them() -> None:
    qrels_path = shared_path("msmarco-dl19", "qrels.dl19-passage.txt")
    run_path = shared_path("msmarco-dl19", "runs", "run.msmarco-v1-passage.bm25-default.dl19.txt")
    measures = [m for m in _measures() if not str(m).startswith("ERR")]
    qrels = list(ir_measures.read_trec_qrels(str(qrels_path)))
    run = list(ir_measures.read_trec_run(str(run_path)))
    theirs = _theirs(measures, qrels, run)
    ours = _ours(measures, qrels, run)
    assert ours.keys() == theirs.keys()
    assert max(abs(ours[k] - theirs[k]) for k in theirs) < 1e-9
    frame_ours = _ours(measures, pd.DataFrame(qrels), pd.DataFrame(run))
    assert frame_ours == ours
    aggregates = evalstore.evaluate(qrels, run, measures, missing_topics="skip").aggregates
    for measure, value in ir_measures.calc_aggregate(measures, qrels, run).items():
        assert abs(aggregates[measure] - value) < 1e-9, measure


def test_bad_shapes_say_what_is_wrong() -> None:
    with pytest.raises(
        InvalidParameterError,
        match=r"^Item 2 of the run is a int, not a ScoredDoc\(query_id, "
        r"doc_id, score\)\.$",
    ):
        as_table([ir_measures.ScoredDoc("q", "d", 1.0), 5], "run")
    with pytest.raises(InvalidParameterError, match=r"^The qrels' relevance values must be numbers"):
        as_table([("q", "d", "very")], "qrels")
    with pytest.raises(InvalidParameterError, match=r"^Pass the measures as a list \(\['nDCG@10'\]\), not one "):
        measure_names(ir_measures.nDCG @ 10)
    with pytest.raises(InvalidParameterError, match=r"^Pass the measures as a list \(\['AP'\]\), not one str\.$"):
        measure_names("AP")
    assert measure_names([ir_measures.AP(rel=2), "P@5"]) == ["AP(rel=2)", "P@5"]
    assert as_table([("q", "d", 2)], "qrels").to_pydict() == {"topic": ["q"], "doc": ["d"], "relevance": [2]}
