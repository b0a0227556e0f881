"""Stored evaluations: results read back equal `evalstore trec-eval -q`; same inputs are reused;
the leaderboard ranks runs with confidence intervals."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from typer.testing import CliRunner

from evalstore.cli import app
from evalstore.db import repositories as repo
from evalstore.db.models import QueryValues
from evalstore.db.session import read_only
from evalstore.errors import NotFoundError
from evalstore.services import store
from evalstore.services.comparisons import correlate
from evalstore.services.kinds.ranking import Selection, leaderboard, results
from evalstore.services.orchestration import evaluate_runs
from tests.conftest import shared_path


@pytest.fixture
def stored(engine: Engine) -> Engine:
    store.import_qrels(engine, shared_path("trec_eval_test", "qrels.test"), name="test")
    store.register_run(engine, shared_path("trec_eval_test", "results.test"), name="std")
    return engine


def test_stored_per_query_values_equal_trec_eval_q(stored: Engine) -> None:
    [summary] = evaluate_runs(stored, qrels_name="test", run_names=["std"], measures=["all_trec"])
    assert not summary.reused and summary.topics == 3
    expected = (
        CliRunner()
        .invoke(
            app,
            [
                "trec-eval",
                "-q",
                "-m",
                "map",
                "-m",
                "P.10",
                "-m",
                "ndcg_cut.10",
                str(shared_path("trec_eval_test", "qrels.test")),
                str(shared_path("trec_eval_test", "results.test")),
            ],
        )
        .stdout
    )
    wanted = {}
    for line in expected.splitlines():
        name, topic, value = (part.strip() for part in line.split("\t"))
        if topic != "all":
            wanted[({"map": "AP", "P_10": "P@10", "ndcg_cut_10": "nDCG@10"}[name], topic)] = value
    with read_only(stored) as session:
        [evaluation_id] = session.scalars(select(QueryValues.evaluation_id).distinct()).all()
        table = repo.result_table(session, evaluation_id, ["AP", "P@10", "nDCG@10"])
    rows = zip(*(table[c].to_pylist() for c in ("measure", "query_id", "value")), strict=True)
    assert {(m, q): f"{v:6.4f}" for m, q, v in rows} == wanted


def test_same_inputs_reuse_the_stored_result(stored: Engine) -> None:
    first = evaluate_runs(stored, qrels_name="test", run_names=["std"], measures=["AP", "P@10"])
    again = evaluate_runs(stored, qrels_name="test", run_names=["std"], measures=["map", "P_10"])
    assert again[0].reused and again[0].evaluation_id == first[0].evaluation_id
    forced = evaluate_runs(stored, qrels_name="test", run_names=["std"], measures=["AP", "P@10"], force=True)
    assert not forced[0].reused and forced[0].evaluation_id == first[0].evaluation_id
    with read_only(stored) as session:  # a row per measure, holding its 3 topics' values
        assert session.scalar(select(func.count()).select_from(QueryValues)) == 2


def test_deleting_a_run_or_its_qrels_deletes_their_per_query_values(stored: Engine, write) -> None:  # type: ignore[no-untyped-def]
    """The services delete an evaluation's values with it (a row per measure, migration 0018)."""
    other = write(
        "other.run", "".join(f"{t} Q0 doc{i} {i} {1.0 / (i + 1)} other\n" for t in (301, 302) for i in range(3))
    )
    store.register_run(stored, other, name="other")
    evaluate_runs(stored, qrels_name="test", run_names=None, measures=["AP", "P@10"])

    def stored_values() -> int:
        with read_only(stored) as session:
            return session.scalar(select(func.count()).select_from(QueryValues)) or 0

    assert stored_values() == 2 + 2
    store.delete_run(stored, "other")
    assert stored_values() == 2
    store.import_qrels(stored, shared_path("trec_eval_test", "qrels.rel_level"), name="test", replace=True)
    assert stored_values() == 0


def test_leaderboard_orders_runs_and_gives_intervals(stored: Engine, write) -> None:  # type: ignore[no-untyped-def]
    worse = write(
        "worse.run",
        "".join(f"{t} Q0 nothing{i} {i} {1.0 / (i + 1)} worse\n" for t in (301, 302, 303) for i in range(5)),
    )
    store.register_run(stored, worse, name="worse")
    evaluate_runs(stored, qrels_name="test", run_names=None, measures=["AP", "Judged@10"])
    board = leaderboard(stored, qrels_name="test", measures=["AP"])
    names, rows = board.names, board.rows
    assert names == ["AP"] and [r.run for r in rows] == ["std", "worse"]
    mean, low, high = rows[0].values["AP"]
    assert mean == pytest.approx(0.1785, abs=5e-5) and 0 <= low < mean < high <= 1
    assert rows[1].values["AP"][0] == 0.0 and rows[1].judged_at_10 == 0.0


def test_leaderboard_without_evaluations_says_what_to_run(stored: Engine) -> None:
    with pytest.raises(NotFoundError) as refused:
        leaderboard(stored, qrels_name="test")
    assert str(refused.value) == "No evaluations on qrels 'test' with -l 1, -M none, -J off, missing topics zero yet."
    assert refused.value.remedy is not None
    assert refused.value.remedy.cli == "Run 'evalstore evaluate --qrels test --all-runs --wait'."


def test_leaderboard_ranks_lower_is_better_measures_ascending(stored: Engine, write) -> None:  # type: ignore[no-untyped-def]
    unjudged = write(
        "unjudged.run",
        "".join(f"{t} Q0 nothing{i} {i} {1.0 / (i + 1)} u\n" for t in (301, 302, 303) for i in range(10)),
    )
    store.register_run(stored, unjudged, name="unjudged")
    evaluate_runs(stored, qrels_name="test", run_names=None, measures=["Unj@10"])
    rows = leaderboard(stored, qrels_name="test", measures=["Unj@10"]).rows
    assert [r.run for r in rows] == ["std", "unjudged"]
    assert rows[0].values["Unj@10"][0] < rows[1].values["Unj@10"][0] == 1.0


def test_topics_missing_from_a_run_are_one_warning_per_job(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("".join(f"{t} 0 d{t} 1\n" for t in range(1, 9)))
    run.write_text("1 Q0 d1 1 1.0 r\n")
    store.import_qrels(engine, qrels, name="q")
    store.register_run(engine, run, name="r")
    with caplog.at_level(logging.WARNING, logger="evalstore.worker"):
        evaluate_runs(engine, qrels_name="q", run_names=["r"], measures=["AP"])
    assert [r.getMessage() for r in caplog.records if r.name == "evalstore.worker"] == [
        "job 1: run 'r' has no results for 7 qrels topics (2, 3, 4, 5, 6 and 2 more); scored as missing_topics=zero"
    ]


def test_leaderboard_compares_evaluations_made_with_the_same_options(stored: Engine, write) -> None:  # type: ignore[no-untyped-def]
    """std evaluated at -l 1, then again at -l 2 (its newest); worse only at -l 1. The default
    leaderboard shows std's -l 1 value beside worse's, never the -l 2 one, and says so."""
    worse = write(
        "worse.run",
        "".join(f"{t} Q0 nothing{i} {i} {1.0 / (i + 1)} worse\n" for t in (301, 302, 303) for i in range(5)),
    )
    store.register_run(stored, worse, name="worse")
    [level_1, _] = evaluate_runs(stored, qrels_name="test", run_names=None, measures=["AP"])
    [level_2] = evaluate_runs(stored, qrels_name="test", run_names=["std"], measures=["AP"], relevance_level=2)
    at_1 = results(stored, qrels_name="test", run_name="std", evaluation_id=level_1.evaluation_id).aggregates["AP"]
    at_2 = results(stored, qrels_name="test", run_name="std", evaluation_id=level_2.evaluation_id).aggregates["AP"]
    assert at_1 != at_2
    board = leaderboard(stored, qrels_name="test", measures=["AP"])
    std = next(r for r in board.rows if r.run == "std")
    assert std.values["AP"][0] == pytest.approx(at_1) and std.evaluation_ids == (level_1.evaluation_id,)
    assert std.as_dict()["relevance_level"] == 1 and [r.run for r in board.rows] == ["std", "worse"]
    strict = leaderboard(stored, qrels_name="test", measures=["AP"], selection=Selection(relevance_level=2))
    assert [(r.run, r.values["AP"][0]) for r in strict.rows] == [("std", pytest.approx(at_2))]
    assert strict.notes == [
        "fewer than 10 topics: the intervals of std (3) mean little",
        "left out, evaluated on 'test' only with other options or older qrels: worse "
        "(this leaderboard: -l 2, -M none, -J off, missing topics zero)",
    ]
    # correlate orders the systems by the same default-option values
    evaluate_runs(stored, qrels_name="test", run_names=None, measures=["P@10"])
    agreement = correlate(stored, qrels_names=["test"], measures=["AP", "P@10"])
    assert dict(zip(agreement.systems, agreement.first_scores, strict=True))["std"] == pytest.approx(at_1)
    # and by the -l 2 evaluations when asked for them
    evaluate_runs(stored, qrels_name="test", run_names=None, measures=["AP", "P@10"], relevance_level=2)
    strict_agreement = correlate(
        stored, qrels_names=["test"], measures=["AP", "P@10"], selection=Selection(relevance_level=2)
    )
    assert dict(zip(strict_agreement.systems, strict_agreement.first_scores, strict=True))["std"] == pytest.approx(at_2)
    assert strict_agreement.as_dict()["options"]["relevance_level"] == 2


def test_a_measure_of_an_older_evaluation_is_still_found(stored: Engine) -> None:
    """evaluate AP, then nDCG@5 alone: the newest evaluation does not hide the older one's AP."""
    [older] = evaluate_runs(stored, qrels_name="test", run_names=["std"], measures=["AP", "P@10"])
    evaluate_runs(stored, qrels_name="test", run_names=["std"], measures=["nDCG@5"])
    board = leaderboard(stored, qrels_name="test", measures=["AP", "nDCG@5"])
    [row] = board.rows
    assert set(row.values) == {"AP", "nDCG@5"} and older.evaluation_id in row.evaluation_ids
    assert results(stored, qrels_name="test", run_name="std", measures=["AP"]).evaluation_id == older.evaluation_id


def test_a_run_lacking_a_measure_under_the_options_is_named_with_the_fix(stored: Engine, write) -> None:  # type: ignore[no-untyped-def]
    other = write(
        "other.run", "".join(f"{t} Q0 doc{i} {i} {1.0 / (i + 1)} other\n" for t in (301, 302) for i in range(3))
    )
    store.register_run(stored, other, name="other")
    evaluate_runs(stored, qrels_name="test", run_names=None, measures=["AP"])
    evaluate_runs(stored, qrels_name="test", run_names=["std"], measures=["RR"])
    board = leaderboard(stored, qrels_name="test", measures=["RR", "AP"])
    assert [r.run for r in board.rows] == ["std", "other"] and "RR" not in board.rows[1].values
    assert board.notes == [
        "run 'other' has no RR evaluated with -l 1, -M none, -J off, missing topics zero; run "
        "'evalstore evaluate --qrels test --run other --measures RR --wait'",
        "fewer than 10 topics: the intervals of other (3), std (3) mean little",
    ]


def test_user_oriented_measures_stored_equal_the_file_api(
    engine: Engine,
    write,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """evaluate --known through the store gives the values metrics.evaluate(known=...) gives on
    the files; a new version of the known qrels is a new evaluation."""
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")  # no detached MLflow sync left running after the test
    from evalstore.metrics import evaluate as evaluate_files
    from evalstore.services.jobs import EvaluationOptions
    from evalstore.services.orchestration import RankingRequest
    from evalstore.services.orchestration import evaluate as run_request

    sample = Path(__file__).resolve().parents[2] / "evalstore" / "sample_data"
    store.import_qrels(engine, sample / "qrels.test", name="q")
    store.register_run(engine, sample / "results.test", name="std")
    lines = [line for line in (sample / "qrels.test").read_text().splitlines() if line.split()[3] != "0"]
    known_path = write("known.qrels", "\n".join(lines[::4]) + "\n")
    store.import_qrels(engine, known_path, name="known")
    options = EvaluationOptions(("AP",), known_qrels="known")
    run_request(engine, RankingRequest("q", ["std"], options, False, 3), wait=True)
    stored = results(engine, qrels_name="q", run_name="std").frame
    expected = evaluate_files(
        sample / "qrels.test",
        sample / "results.test",
        ["Coverage", "Novelty", "RelativeRecall", "RecallEffort"],
        known=known_path,
    )
    for measure in ("Coverage", "Novelty", "RelativeRecall", "RecallEffort"):
        got = stored[measure].astype(float)
        want = expected.per_query[expected.per_query["measure"] == measure].set_index("query_id")["value"]
        assert got.to_dict() == pytest.approx(want.to_dict()), measure
    store.import_qrels(engine, write("known2.qrels", "\n".join(lines[::3]) + "\n"), name="known", replace=True)
    again = run_request(engine, RankingRequest("q", ["std"], options, False, 3), wait=True)
    assert again.refs[0].outcome == "queued"  # the known documents changed: computed anew
    # a leaderboard shows them against the known qrels it names, never against whichever came last
    store.import_qrels(engine, known_path, name="other")
    run_request(
        engine, RankingRequest("q", ["std"], EvaluationOptions(("AP",), known_qrels="other"), False, 3), wait=True
    )
    board = leaderboard(engine, qrels_name="q", measures=["Coverage"], selection=Selection(known_qrels="known"))
    newest_known = results(engine, qrels_name="q", run_name="std", evaluation_id=again.refs[0].evaluation_id)
    assert board.rows[0].values["Coverage"][0] == pytest.approx(newest_known.aggregates["Coverage"])
    other = leaderboard(engine, qrels_name="q", measures=["Coverage"], selection=Selection(known_qrels="other"))
    assert other.rows[0].values["Coverage"][0] == pytest.approx(expected.aggregates["Coverage"])
    with pytest.raises(NotFoundError):  # without --known, no user-oriented value is picked
        leaderboard(engine, qrels_name="q", measures=["Coverage"])
