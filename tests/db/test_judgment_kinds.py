"""Subtopic qrels and preference judgments, stored and evaluated by the worker like relevance
qrels, on SQLite and PostgreSQL: the stored values are the ones `evalstore ndeval` and
`evalstore trec-eval -R prefs` print (themselves checked byte for byte against ndeval and
trec_eval in tests/differential and tests/golden)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.errors import InputFormatError, InvalidParameterError, Remedy
from evalstore.io.writers import write_qrels
from evalstore.services import store
from evalstore.services.kinds.ranking import results
from evalstore.services.orchestration import evaluate_runs
from tests.golden.test_trec_eval_golden import suite_file

SUBTOPICS = """\
1 1 a 1
1 1 b 0
1 2 b 1
1 2 c 2
1 3 d 1
2 1 x 1
2 2 x 1
2 2 y 1
3 1 q 1
"""
# topic 3 is judged and not retrieved; topic 9 is retrieved and not judged
RUN = """\
1 Q0 b 1 3.0 div
1 Q0 z 2 2.0 div
1 Q0 a 3 2.0 div
1 Q0 d 4 1.0 div
2 Q0 y 1 1.0 div
2 Q0 w 2 0.5 div
2 Q0 x 3 0.5 div
9 Q0 a 1 1.0 div
"""


def _ndeval_amean(qrels: Path, run: Path, *options: str) -> dict[str, str]:
    result = CliRunner().invoke(app, ["ndeval", *options, str(qrels), str(run)])
    assert result.exit_code == 0, result.stderr
    header, *_, amean = result.stdout.splitlines()
    return dict(zip(header.split(",")[2:], amean.split(",")[2:], strict=True))


def test_subtopic_qrels_evaluate_to_ndeval_values(engine: Engine, tmp_path: Path) -> None:
    qrels, run = tmp_path / "web.qrels", tmp_path / "run.txt"
    qrels.write_text(SUBTOPICS)
    run.write_text(RUN)
    imported = store.import_qrels(engine, qrels, name="web", kind="subtopics")
    assert imported.summary.details["kind"] == "subtopics"
    store.register_run(engine, run, name="div")
    evaluate_runs(engine, qrels_name="web", run_names=["div"])  # the kind's default: every ndeval measure
    stored = results(engine, qrels_name="web", run_name="div")
    assert stored.topics == ["1", "2", "3"]  # missing topics score 0 (ndeval -c); unjudged 9 is not scored
    expected = _ndeval_amean(qrels, run, "-c")
    names = {
        "alpha_nDCG": "alpha-nDCG",
        "ERR_IA": "ERR-IA",
        "nERR_IA": "nERR-IA",
        "P_IA": "P-IA",
        "StRecall": "strec",
        "AP_IA": "MAP-IA",
        "NRBP": "NRBP",
        "nNRBP": "nNRBP",
    }
    assert len(stored.aggregates) == 18
    for measure, value in stored.aggregates.items():
        family, _, cutoff = measure.partition("@")
        column = names[family] + (f"@{cutoff}" if cutoff else "")
        assert f"{value:.6f}" == expected[column], measure
    assert stored.aggregates["alpha_nDCG@5"] > 0

    chosen = ["alpha_nDCG(alpha=0.9)@10", "NRBP(beta=0.8)"]
    evaluate_runs(engine, qrels_name="web", run_names=["div"], measures=chosen, missing_topics="skip")
    other = results(engine, qrels_name="web", run_name="div", measures=chosen)
    assert other.topics == ["1", "2"]
    alpha = _ndeval_amean(qrels, run, "-alpha", "0.9")
    beta = _ndeval_amean(qrels, run, "-beta", "0.8")
    assert f"{other.aggregates['alpha_nDCG(alpha=0.9)@10']:.6f}" == alpha["alpha-nDCG@10"]
    assert f"{other.aggregates['NRBP(beta=0.8)']:.6f}" == beta["NRBP"] != _ndeval_amean(qrels, run)["NRBP"]


def test_preference_judgments_evaluate_to_trec_eval_values(engine: Engine) -> None:
    store.import_qrels(engine, suite_file("prefs.test"), name="prefs", kind="preferences")
    store.register_run(engine, suite_file("prefs.results.test"), name="std")
    evaluate_runs(engine, qrels_name="prefs", run_names=["std"])  # the kind's default: every prefs_* measure
    stored = results(engine, qrels_name="prefs", run_name="std")
    golden = [line.split("\t") for line in suite_file("out.test.prefs").read_text().splitlines()]
    expected = {(name.strip(), topic): value for name, topic, value in golden}
    assert len(stored.measures) == 14
    for measure in stored.measures:
        count = measure.startswith("prefs_num")
        assert _trec_text(stored.aggregates[measure], count) == expected[(measure, "all")], measure
        for topic in stored.topics:
            assert _trec_text(stored.frame.loc[topic, measure], count) == expected[(measure, topic)], (measure, topic)


def _trec_text(value: float, count: bool) -> str:
    return str(round(value)) if count else f"{value:6.4f}"


def test_qrels_read_as_preferences_and_exported_back(engine: Engine, tmp_path: Path) -> None:
    """A qrels file imported as preferences (-R qrels_prefs): the second column is the judgment
    group; exported, each line carries its sub-group and level."""
    qrels = tmp_path / "q"
    qrels.write_text("1 u1 a 2\n1 u1 b 0\n1 u1 c 5.5\n")
    store.import_qrels(engine, qrels, name="q", kind="preferences")
    _, table = store.qrels_rows(engine, "q")
    assert table.select(["topic", "iteration", "subgroup", "doc", "relevance", "level"]).to_pylist()[2] == {
        "topic": "1",
        "iteration": "u1",
        "subgroup": "0",
        "doc": "c",
        "relevance": 1,
        "level": 5.5,
    }
    exported = io.BytesIO()
    write_qrels(table, exported, "trec")  # what 'evalstore qrels export q' writes
    assert exported.getvalue().decode() == "1 u1 0 a 2\n1 u1 0 b 0\n1 u1 0 c 5.5\n"


def test_subtopic_qrels_need_ndeval_numbering(engine: Engine, tmp_path: Path) -> None:
    qrels = tmp_path / "web.qrels"
    qrels.write_text("1 1 a 1\n# a comment\n1 x b 1\n")
    with pytest.raises(InputFormatError) as error:
        store.import_qrels(engine, qrels, name="web", kind="subtopics")
    assert str(error.value) == f"{qrels}:3: the topic and subtopic must be whole numbers (ndeval's numbering)"


def test_a_document_twice_in_one_preference_sub_group_is_refused_with_its_line(engine: Engine, tmp_path: Path) -> None:
    prefs = tmp_path / "prefs"
    prefs.write_text("1 u1 s1 a 2\n1 u1 s1 b 1\n1 u1 s2 a 1\n1 u1 s1 a 3\n")
    with pytest.raises(InputFormatError) as error:
        store.import_qrels(engine, prefs, name="p", kind="preferences")
    assert str(error.value) == (
        f"{prefs}:4: document a is judged again in topic 1, group u1, sub-group s1 (first on line 1); keep one line"
    )
    assert store.list_qrels(engine) == []


def test_measures_and_options_must_fit_the_judgments(engine: Engine, tmp_path: Path) -> None:
    qrels, run = tmp_path / "web.qrels", tmp_path / "run.txt"
    qrels.write_text(SUBTOPICS)
    run.write_text(RUN)
    store.import_qrels(engine, qrels, name="web", kind="subtopics")
    store.register_run(engine, run, name="div")
    with pytest.raises(InvalidParameterError) as error:
        evaluate_runs(engine, qrels_name="web", run_names=["div"], measures=["AP"])
    assert error.value.on_the_command_line() == (
        "AP is computed from relevance judgments, and qrels 'web' hold subtopic judgments. "
        "'evalstore measures' lists the judgments each measure needs."
    )
    with pytest.raises(InvalidParameterError) as error:
        evaluate_runs(engine, qrels_name="web", run_names=["div"], relevance_level=2)
    assert str(error.value) == (
        "-l and -J apply to relevance judgments; qrels 'web' hold subtopic judgments "
        "(ndeval counts every judgment above 0)."
    )
    store.import_qrels(engine, suite_file("qrels.test"), name="test")
    with pytest.raises(InvalidParameterError) as error:
        evaluate_runs(engine, qrels_name="test", run_names=["div"], measures=["alpha_nDCG@20"])
    assert str(error.value) == (
        "alpha_nDCG@20 is computed from subtopic judgments, and qrels 'test' hold relevance judgments."
    )
    assert error.value.remedy == Remedy(cli="'evalstore measures' lists the judgments each measure needs.")


def test_the_run_to_judgments_join_looks_judgments_up_by_index(engine: Engine) -> None:
    """Without the (qrels, topic, doc) index SQLite scans a qrels set's judgments once per run row
    (robust03: minutes instead of 0.1 s)."""
    if engine.dialect.name != "sqlite":
        pytest.skip("a SQLite query plan")
    from sqlalchemy import text

    with engine.connect() as connection:
        plan = " ".join(
            str(row[-1])
            for row in connection.execute(
                text(
                    "EXPLAIN QUERY PLAN SELECT run_rows.topic, run_rows.trec_rank, judgments.relevance FROM run_rows "
                    "JOIN judgments ON judgments.qrels_id = 1 AND judgments.topic = run_rows.topic "
                    "AND judgments.doc = run_rows.doc WHERE run_rows.run_id = 1"
                )
            )
        )
    assert "INDEX ix_judgments_qrels_id_topic_doc_relevance (qrels_id=? AND topic=? AND doc=?)" in plan


def test_compare_evaluates_runs_against_subtopic_qrels_with_their_own_measures(engine: Engine, tmp_path: Path) -> None:
    from evalstore.services.comparisons import score_matrix

    qrels, first, second = tmp_path / "web.qrels", tmp_path / "a.txt", tmp_path / "b.txt"
    qrels.write_text(SUBTOPICS)
    first.write_text(RUN)
    second.write_text(RUN.replace("1 Q0 b 1 3.0", "1 Q0 b 1 0.1"))
    store.import_qrels(engine, qrels, name="web", kind="subtopics")
    store.register_run(engine, first, name="a")
    store.register_run(engine, second, name="b")
    matrix = score_matrix(engine, qrels_name="web", run_names=["a", "b"], measures=["alpha_nDCG@10"])
    assert matrix.topics == ["1", "2", "3"]
    assert matrix.scores["alpha_nDCG@10"].shape == (2, 3)
    assert matrix.scores["alpha_nDCG@10"][0, 0] > matrix.scores["alpha_nDCG@10"][1, 0]  # b ranks b last
    assert len(results(engine, qrels_name="web", run_name="b").measures) == 18  # the kind's defaults
