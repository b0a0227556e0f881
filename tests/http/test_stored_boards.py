"""Boards ready before anyone asks: the worker stores each evaluation's measure summaries (mean and
bootstrap interval, over all topics and a split task's public and private ones) with its results,
and once its queue is empty each task's significance letters; the leaderboard API and page read
them, a new evaluation refreshes what it touches, and a hidden task stays hidden (both databases)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from evalstore.db.models import BoardTiers, MeasureSummary, QrelsSet, QueryValues
from evalstore.db.session import read_only, unit_of_work
from evalstore.services import tasks
from evalstore.services.jobs import summaries
from evalstore.services.kinds import ranking
from evalstore.services.worker import Worker, WorkerSettings
from evalstore.statistics import significance
from tests.http.conftest import World, run_text

pytestmark = pytest.mark.both_databases

TOPICS = ("301", "302", "303")


def _reference(world: World, run: str, measure: str, topics: list[str] | None = None) -> tuple[float, float, float]:
    """Mean and 95% percentile bootstrap interval (seed 0, 10,000 resamples) of the run's stored
    per-topic values, as the leaderboard computed them on every request before."""
    frame = ranking.results(world.engine, qrels_name="sample", run_name=run, measures=[measure]).frame[measure]
    values = frame.to_numpy(dtype=float) if topics is None else frame[topics].to_numpy(dtype=float)
    low, high = significance.bootstrap_mean_intervals(values[None, :], 0.95)
    return float(values.mean()), float(low[0]), float(high[0])


def _stored(world: World, evaluation_id: int) -> dict[tuple[str, str], MeasureSummary]:
    with read_only(world.engine) as session:
        rows = session.scalars(select(MeasureSummary).where(MeasureSummary.evaluation_id == evaluation_id))
        return {(row.scope, row.measure): row for row in rows}


def _qrels(world: World) -> QrelsSet:
    with read_only(world.engine) as session:
        return session.execute(select(QrelsSet).where(QrelsSet.name == "sample")).scalar_one()


def _refresh(world: World) -> int:
    """What a worker does once its queue is empty, after storing results on the qrels."""
    worker = Worker(world.engine, WorkerSettings(until_empty=True, index_runs=False))
    worker.touched_qrels = {_qrels(world).id}
    return worker.refresh_boards()


def test_the_worker_stores_each_measures_summary_and_the_board_shows_it(world: World, client: TestClient) -> None:
    stored = _stored(world, world.jobs["open"])
    assert {scope for scope, _ in stored} == {summaries.ALL_TOPICS}
    assert {"AP", "P@10", "nDCG@10", "RR", "Judged@10"} <= {measure for _, measure in stored}
    for measure in ("AP", "nDCG@10"):
        row = stored[(summaries.ALL_TOPICS, measure)]
        assert row.topics == 3
        assert (row.mean, row.ci_low, row.ci_high) == pytest.approx(_reference(world, "red-open", measure), rel=1e-12)
    board = client.get("/api/v1/tasks/open/leaderboard?measure=AP").json()
    (only,) = board["rows"]
    ap = stored[(summaries.ALL_TOPICS, "AP")]
    assert only["scores"]["AP"] == {"mean": ap.mean, "ci_low": ap.ci_low, "ci_high": ap.ci_high}
    assert only["topics"] == 3


def test_a_job_summarises_the_boards_measures_and_the_empty_queue_every_other(world: World, client: TestClient) -> None:
    first = _stored(world, world.jobs["open"])
    with read_only(world.engine) as session:
        numeric = set(
            session.scalars(
                select(QueryValues.measure).where(
                    QueryValues.evaluation_id == world.jobs["open"], QueryValues.numbers.is_not(None)
                )
            )
        )
        shown = summaries.shown_measures(session, _qrels(world).id)
    # with the results: what the boards show and sort by, not the ~100 other measures' draws
    assert {m for _, m in first} == numeric & shown and "P@20" in numeric - shown
    before = client.get("/api/v1/tasks/open/leaderboard?measure=P@20").json()  # computed on the page meanwhile
    assert _refresh(world) >= 1
    row = _stored(world, world.jobs["open"])[(summaries.ALL_TOPICS, "P@20")]
    assert {m for _, m in _stored(world, world.jobs["open"])} == numeric  # every measure once the queue is empty
    assert (row.mean, row.ci_low, row.ci_high) == pytest.approx(_reference(world, "red-open", "P@20"), rel=1e-12)
    board = client.get("/api/v1/tasks/open/leaderboard?measure=P@20").json()
    assert board["rows"][0]["scores"]["P@20"] == before["rows"][0]["scores"]["P@20"]
    assert board["rows"][0]["scores"]["P@20"]["mean"] == row.mean


def test_a_busy_worker_summarises_the_boards_measures_of_an_evaluation_stored_without_summaries(world: World) -> None:
    with unit_of_work(world.engine) as session:  # as `evaluate` stores them in a process that summarised none
        session.execute(MeasureSummary.__table__.delete().where(MeasureSummary.evaluation_id == world.jobs["open"]))
    assert summaries.summarise_stored(world.engine, [_qrels(world).id], shown_only=True) == 1
    with read_only(world.engine) as session:
        shown = summaries.shown_measures(session, _qrels(world).id)
    held = {m for _, m in _stored(world, world.jobs["open"])}
    assert {"AP", "nDCG@10", "Judged@10"} <= held <= shown and "P@20" not in held
    assert summaries.summarise_stored(world.engine, [_qrels(world).id], shown_only=True) == 0  # nothing lacking now


def test_an_evaluation_without_summaries_is_summarised_once_the_queue_is_empty(world: World) -> None:
    with unit_of_work(world.engine) as session:  # as stored before jobs summarised every measure
        session.execute(
            MeasureSummary.__table__.delete().where(
                MeasureSummary.evaluation_id == world.jobs["open"], MeasureSummary.measure != "AP"
            )
        )
    assert _refresh(world) >= 1
    row = _stored(world, world.jobs["open"])[(summaries.ALL_TOPICS, "P@20")]
    assert (row.mean, row.ci_low, row.ci_high) == pytest.approx(_reference(world, "red-open", "P@20"), rel=1e-12)


def test_the_board_reads_the_stored_summary_and_computes_what_is_not_stored(world: World) -> None:
    evaluation = world.jobs["open"]
    with unit_of_work(world.engine) as session:
        session.execute(
            update(MeasureSummary)
            .where(MeasureSummary.evaluation_id == evaluation, MeasureSummary.measure == "AP")
            .values(mean=0.123456)
        )
    red = ranking.leaderboard(world.engine, qrels_name="sample", measures=["AP"], runs={"red-open"})
    assert red.rows[0].values["AP"][0] == 0.123456  # read, not recomputed
    with unit_of_work(world.engine) as session:
        session.execute(MeasureSummary.__table__.delete().where(MeasureSummary.evaluation_id == evaluation))
    again = ranking.leaderboard(world.engine, qrels_name="sample", measures=["AP", "Judged@10"], runs={"red-open"})
    assert again.rows[0].values["AP"] == pytest.approx(_reference(world, "red-open", "AP"), rel=1e-12)
    assert again.rows[0].topics == 3 and again.rows[0].judged_at_10 is not None


def test_a_new_evaluation_refreshes_the_board_and_its_tiers(world: World, client: TestClient) -> None:
    world.submit("open", "red-two", text=run_text(TOPICS, tag="red-two", shift=3))
    assert _refresh(world) >= 1
    board = client.get("/api/v1/tasks/open/leaderboard?measure=AP").json()
    assert {r["run"] for r in board["rows"]} == {"red-open", "red-two"}
    two = next(r for r in board["rows"] if r["run"] == "red-two")
    assert tuple(two["scores"]["AP"].values()) == pytest.approx(_reference(world, "red-two", "AP"), rel=1e-12)
    # the page's letters are the stored ones: changed in the store, the page shows the change
    with read_only(world.engine) as session:
        keys = list(session.scalars(select(BoardTiers.key)))
    assert keys
    with unit_of_work(world.engine) as session:
        session.execute(update(BoardTiers).values(letters={"red-open": "qq", "red-two": "qq"}))
    page = client.get("/tasks/open?measure=AP", headers=world.headers("owner"))
    assert page.status_code == 200 and '<td class="tier">qq</td>' in page.text
    # one more run: a new board state, whose letters the worker stores and the page reads
    world.submit("open", "blue-three", team_user="blue", text=run_text(TOPICS, tag="blue-three", shift=5))
    assert _refresh(world) >= 1
    page = client.get("/tasks/open?measure=AP", headers=world.headers("owner"))
    assert page.status_code == 200 and "qq" not in page.text and "blue-three" in page.text
    # nothing left to do: the stored letters are current
    assert _refresh(world) == 0


def _five_runs_refreshed(world: World) -> list[str]:
    """What the idle worker stores for the open task's five runs (the ``five_runs`` world); the
    task's runs."""
    _refresh(world)
    return ["red-open", *(f"run-{i}" for i in range(4))]


def _stored_and_computed(world: World, measure: str, runs: list[str]) -> tuple[dict[str, str] | None, dict[str, str]]:
    """The board's letters on ``measure`` as the worker stored them, and as a page computes them."""
    qrels = _qrels(world)
    board = ranking.leaderboard(world.engine, qrels_name="sample", measures=[measure], runs=set(runs))
    means = [(r.run, r.values[measure][0]) for r in board.rows]
    with read_only(world.engine) as session:
        stored = ranking.stored_tiers(session, ranking.tiers_key("sample", qrels.content_hash, measure, means, "all"))
        return stored, ranking.compute_tiers(session, qrels, measure, runs, None)


def test_stored_letters_equal_the_letters_computed_on_the_page(five_runs: World) -> None:
    world = five_runs
    runs = _five_runs_refreshed(world)
    stored, computed = _stored_and_computed(world, "AP", runs)
    assert stored == computed and set(computed) == set(runs)


def test_letters_are_stored_for_every_measure_the_runs_hold(five_runs: World, five_runs_client: TestClient) -> None:
    world, client = five_runs, five_runs_client
    runs = _five_runs_refreshed(world)
    with read_only(world.engine) as session:
        held = set(session.scalars(select(MeasureSummary.measure).where(MeasureSummary.topics > 0)))
        stored = len(list(session.scalars(select(BoardTiers.key))))
    assert {"P@20", "Rprec", "Bpref"} <= held and stored >= len(held)
    for measure in ("P@20", "Rprec", "Bpref"):  # not on the board by default
        letters, computed = _stored_and_computed(world, measure, runs)
        assert letters == computed and set(computed) == set(runs)
    # the page reads them: changed in the store, the page shows the change
    with unit_of_work(world.engine) as session:
        session.execute(update(BoardTiers).values(letters={run: "qq" for run in runs}))
    page = client.get("/tasks/open?measure=P@20", headers=world.headers("owner"))
    assert page.status_code == 200 and '<td class="tier">qq</td>' in page.text


@pytest.mark.parametrize("caller", ["anon", "red", "blue", "organiser", "viewer"])
def test_a_hidden_tasks_stored_board_stays_hidden(world: World, client: TestClient, caller: str) -> None:
    assert _stored(world, world.jobs["secret"])  # its summaries are stored like any other's
    world.submit("secret", "red-secret-two", text=run_text(TOPICS, tag="red-secret-two", shift=4))
    _refresh(world)
    board = client.get("/api/v1/tasks/secret/leaderboard", headers=world.headers(caller))
    if board.status_code == 200:
        assert board.json()["scores"] == tasks.HIDDEN and board.json()["rows"] == []
    else:
        assert board.status_code in (401, 403, 404)
    page = client.get("/tasks/secret", headers=world.headers(caller))
    mean = f"{_stored(world, world.jobs['secret'])[(summaries.ALL_TOPICS, 'AP')].mean:.4f}"
    assert mean not in page.text and '<td class="tier">' not in page.text
    owner = client.get("/api/v1/tasks/secret/leaderboard", headers=world.headers("owner")).json()
    assert owner["scores"] == "visible" and len(owner["rows"]) == 2


def test_a_split_tasks_public_and_private_summaries_are_stored(world: World, client: TestClient) -> None:
    task = tasks.create_task(
        world.engine, "split", qrels_name="sample", owner="owner", private_fraction=1 / 3, split_seed=11
    )
    (private,) = task.private_topics
    public = sorted(t for t in TOPICS if t != private)
    job = world.submit("split", "red-all", text=run_text(TOPICS, tag="red-all", shift=1))
    stored = _stored(world, job)
    public_scope = summaries.scope_of({private}, True)
    private_scope = summaries.scope_of({private}, False)
    assert stored[(public_scope, "AP")].topics == 2 and stored[(private_scope, "AP")].topics == 1
    row = stored[(public_scope, "AP")]
    assert (row.mean, row.ci_low, row.ci_high) == pytest.approx(_reference(world, "red-all", "AP", public), rel=1e-12)
    participant = client.get("/api/v1/tasks/split/leaderboard?measure=AP", headers=world.headers("red")).json()
    (only,) = participant["rows"]
    assert only["topics"] == 2 and only["scores"]["AP"]["mean"] == row.mean and "private" not in only
    owner = client.get("/api/v1/tasks/split/leaderboard?measure=AP", headers=world.headers("owner")).json()
    assert owner["rows"][0]["private"]["scores"]["AP"]["mean"] == stored[(private_scope, "AP")].mean


def test_a_summary_over_no_topic_in_its_scope_is_no_value() -> None:
    from evalstore.db.repositories import PerQueryValues

    values = PerQueryValues(["1", "2"], {"AP": np.array([0.5, 0.25])}, {})
    made = summaries.summarise(values, {"all": None, "none": (frozenset({"9"}), False)})
    by_scope = {s.scope: s for s in made}
    assert by_scope["none"].topics == 0 and by_scope["all"].topics == 2 and by_scope["all"].mean == 0.375


def test_the_server_prepares_its_pages_before_the_first_request(world: World) -> None:
    # a new process, as after a restart: the mappers configured and the templates compiled by
    # create_app, before any request (the first page would pay for them otherwise)
    check = (
        "from sqlalchemy import inspect\n"
        "from evalstore.db.models import Evaluation\n"
        "from evalstore.web.app import create_app\n"
        "from evalstore.web.templating import templates\n"
        "create_app()\n"
        "assert inspect(Evaluation).configured\n"
        "compiled = {key[1] for key in templates.env.cache}\n"
        "assert {'leaderboard.html', 'base.html', 'run.html'} <= compiled, compiled\n"
    )
    url = world.engine.url.render_as_string(hide_password=False)
    env = {**os.environ, "EVALSTORE_DATABASE_URL": url, "EVALSTORE_MLFLOW": "off"}
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
