"""Pages never compute on a GET what the worker stores: in the middle of a burst of submissions a
task's leaderboard and compare pages read what the worker stored (each job's pairs, the letters of
the board as it last stored them) and say when the letters are behind; a busy worker refreshes the
letters once they are a set time behind, on the board's measures, and every measure once its queue
is empty."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update
from sqlalchemy.exc import OperationalError

from evalstore.db.models import BoardTiers, HealthReportRow, MeasureSummary, PairTests, QrelsSet, Task, TopicMedians
from evalstore.db.session import read_only, unit_of_work
from evalstore.services import jobs, lab_reports, reports, store
from evalstore.services.comparisons import pairwise
from evalstore.services.kinds import ranking
from evalstore.services.kinds.ranking import pairs
from evalstore.services.reports import runs as reports_runs
from evalstore.services.worker import Worker, WorkerSettings
from tests.http.conftest import World, as_principal, run_text

TOPICS = ("301", "302", "303")
BEHIND = "newer evaluations are being added"
PREPARING = "The significance letters are being prepared"
BOARD = ("AP", "nDCG@10", "P@10", "RR")  # the open task's board measures


def _counts(world: World) -> dict[str, int]:
    with read_only(world.engine) as session:
        return {
            table.__name__: session.scalar(select(func.count()).select_from(table)) or 0
            for table in (BoardTiers, PairTests, MeasureSummary, HealthReportRow)
        }


def _queued(world: World, count: int) -> None:
    for index in range(count):
        world.submit("open", f"run-{index}", text=run_text(TOPICS, tag=f"run-{index}", shift=2 + index), evaluate=False)


def _worker(world: World, behind: float = 3600.0, **settings: Any) -> Worker:
    """A running worker (registered, as `evalstore worker` is) that takes one job at a time (no
    batch), its boards at most ``behind`` seconds behind."""
    worker = Worker(
        world.engine, WorkerSettings(index_runs=False, boards_behind=behind, batch=jobs.BatchBound(jobs=1), **settings)
    )
    jobs.register_worker(world.engine, worker.worker_id)
    return worker


def _refuse(*args: object, **kwargs: object) -> None:
    raise AssertionError("computed on a GET")


@contextmanager
def nothing_computed() -> Iterator[None]:
    """Whatever computes letters or paired tests raises in the block: a page may only read them."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ranking, "compute_tiers", _refuse)
        patch.setattr(pairwise, "compare_matrix", _refuse)
        patch.setattr(pairs, "paired_arrays", _refuse)
        yield


def _letters(page: str) -> list[str]:
    return re.findall(r'<td class="tier">([^<]*)</td>', page)


def _board(world: World, client: TestClient) -> str:
    with nothing_computed():
        page = client.get("/tasks/open?measure=AP", headers=world.headers("owner"))
    assert page.status_code == 200, page.text
    return page.text


def _pages(world: World, client: TestClient) -> dict[str, str]:
    shown = {}
    for url in (
        "/tasks/open?measure=AP",
        "/tasks/open/compare?run=red-open&run=run-0&measure=AP",
        "/tasks/open/compare?run=run-1&run=run-0&run=red-open&measure=AP",
    ):
        page = client.get(url, headers=world.headers("owner"))
        assert page.status_code == 200, page.text
        shown[url] = page.text
    return shown


def test_a_get_in_the_middle_of_a_burst_computes_nothing_and_writes_nothing(world: World, client: TestClient) -> None:
    _queued(world, 4)
    worker = _worker(world)
    assert worker.process_one() and worker.process_one()  # two of four done: the queue is busy
    with nothing_computed():
        before = _counts(world)
        shown = _pages(world, client)
        assert _counts(world) == before  # a GET never writes
    board = shown["/tasks/open?measure=AP"]
    assert PREPARING in board and set(_letters(board)) == {""}  # no letters stored yet: none computed
    assert "These tests are being prepared" not in shown["/tasks/open/compare?run=red-open&run=run-0&measure=AP"]


def test_the_board_shows_the_last_stored_letters_and_says_they_are_behind(world: World, client: TestClient) -> None:
    _queued(world, 3)
    worker = _worker(world)
    assert worker.process_one() and worker.process_one()
    assert worker.refresh_boards(busy=True) >= 1  # letters of the board with three runs
    current = _board(world, client)
    assert "" not in _letters(current) and BEHIND not in current and PREPARING not in current
    assert worker.process_one()  # a fourth run: the stored letters are of the board as it was
    behind = _board(world, client)
    assert BEHIND in behind and "(3 of its 4 runs lettered)" in behind
    assert sorted(_letters(behind)) == sorted(["", *_letters(current)])  # the new run's cell empty
    worker.refresh_boards(busy=True)
    caught_up = _board(world, client)
    assert BEHIND not in caught_up and "" not in _letters(caught_up) and len(_letters(caught_up)) == 4


def _qrels_id(world: World) -> int:
    with read_only(world.engine) as session:
        found = session.scalar(select(QrelsSet.id).where(QrelsSet.name == "sample"))
    assert found is not None
    return found


def _slots(world: World) -> int:
    with read_only(world.engine) as session:
        return session.scalar(select(func.count(func.distinct(BoardTiers.slot)))) or 0


def test_a_busy_worker_refreshes_the_board_measures_letters_once_behind_and_every_measure_when_idle(
    world: World,
) -> None:
    _queued(world, 3)
    patient = _worker(world, behind=3600.0)
    assert patient.process_one() and not patient.boards_behind()
    eager = _worker(world, behind=0.0)
    assert eager.process_one() and eager.boards_behind()
    assert eager.refresh_boards(busy=True) >= len(BOARD)
    assert _slots(world) == len(BOARD)  # the board's measures alone while the queue is busy
    assert not eager.boards_behind() and eager.touched_qrels == {_qrels_id(world)}  # every measure still to do
    assert eager.process_one() and not eager.process_one()  # the queue is empty
    eager.refresh_boards()
    assert _slots(world) > 20 and not eager.touched_qrels  # every measure the runs hold


def test_a_worker_run_keeps_the_letters_within_bounds_during_a_burst(world: World) -> None:
    _queued(world, 3)
    settings = WorkerSettings(index_runs=False, until_empty=True, boards_behind=0.0, batch=jobs.BatchBound(jobs=1))
    worker = Worker(world.engine, settings)  # registers itself as it starts
    refreshed: list[bool] = []
    real = worker.refresh_boards

    def spy(*, busy: bool = False, interruptible: bool = False) -> int:
        refreshed.append(busy)
        assert interruptible != busy  # the idle refresh gives way to jobs; the busy one is short
        return real(busy=busy, interruptible=interruptible)

    worker.refresh_boards = spy  # type: ignore[method-assign]
    assert worker.run() == 3
    assert refreshed == [True, True, True, False]  # after each job (0 s behind allowed), then idle


@pytest.mark.parametrize("after", [0.0, 1.5])
def test_an_idle_workers_chores_wait_for_a_quiet_queue(world: World, after: float) -> None:
    """In a burst the queue empties between arrivals again and again: the chores wait until the
    worker has claimed nothing for ``chores_after`` seconds, then run once (0: at once)."""
    _queued(world, 2)
    settings = WorkerSettings(index_runs=False, poll_interval=0.05, chores_after=after, batch=jobs.BatchBound(jobs=1))
    worker = Worker(world.engine, settings)
    claims: list[float] = []
    idle: list[float] = []
    real_process, real_refresh = worker.process_one, worker.refresh_boards

    def process() -> bool:
        worked = real_process()
        if worked:
            claims.append(time.monotonic())
        return worked

    def refresh(*, busy: bool = False, interruptible: bool = False) -> int:
        if busy:
            return real_refresh(busy=busy, interruptible=interruptible)
        idle.append(time.monotonic())
        stored = real_refresh(busy=busy, interruptible=interruptible)
        worker.stopping = True  # the first idle chores are all this test waits for
        return stored

    worker.process_one = process  # type: ignore[method-assign]
    worker.refresh_boards = refresh  # type: ignore[method-assign]
    runner = threading.Thread(target=worker.run)
    runner.start()
    runner.join(timeout=30)
    assert not runner.is_alive()
    assert len(claims) == 2 and len(idle) == 1
    waited = idle[0] - claims[-1]
    assert after <= waited < after + 1.0, waited
    assert _slots(world) > 20  # every measure's letters, once


def test_an_idle_refresh_gives_way_to_a_queued_job_and_finishes_at_the_next_idle_moment(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    _queued(world, 2)
    worker = _worker(world)
    assert worker.process_one()
    # a job is waiting: the idle chores stop before their first step, their qrels kept for later
    with caplog.at_level("INFO", logger="evalstore.worker"):
        assert worker.refresh_boards(interruptible=True) == 0
    assert "put off" in caplog.text and worker.touched_qrels == {_qrels_id(world)}
    assert _slots(world) == 0
    assert worker.process_one() and not worker.process_one()  # the queue is empty
    worker._looked_for_jobs = 0.0  # as after half a second
    assert worker.refresh_boards(interruptible=True) > 0
    assert _slots(world) > 20 and not worker.touched_qrels  # every measure the runs hold
    # a stopping worker's chores stop too
    worker.touched_qrels = {_qrels_id(world)}
    worker.stopping = True
    with unit_of_work(world.engine) as session:
        session.execute(BoardTiers.__table__.delete())
    assert worker.refresh_boards(interruptible=True) == 0 and _slots(world) == 0


def test_an_idle_refresh_whose_look_for_jobs_fails_stops_and_the_worker_lives(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database failing between two chores: the look for queued jobs raised out of the
    refresh, past the run loop's wait for the database, and ended the worker (exit code 1)."""
    _queued(world, 1)
    worker = _worker(world)
    assert worker.process_one() and not worker.process_one()

    def failing(*_: object) -> bool:
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    monkeypatch.setattr(jobs, "jobs_waiting", failing)
    assert worker.refresh_boards(interruptible=True) == 0
    assert worker.touched_qrels == {_qrels_id(world)} and _slots(world) == 0  # for the next idle moment
    monkeypatch.undo()
    worker._looked_for_jobs = 0.0
    assert worker.refresh_boards(interruptible=True) > 0 and _slots(world) > 20


def test_with_no_worker_running_the_board_computes_its_letters(world: World, client: TestClient) -> None:
    """Runs evaluated by `evaluate --wait` alone: no worker will store their letters, so the page
    computes them (and keeps them in memory), as it did before any were stored."""
    for index in range(2):
        world.submit("open", f"run-{index}", text=run_text(TOPICS, tag=f"run-{index}", shift=2 + index))
    before = _counts(world)
    page = client.get("/tasks/open?measure=AP", headers=world.headers("owner"))
    assert page.status_code == 200 and _counts(world) == before
    assert "" not in _letters(page.text) and len(_letters(page.text)) == 3
    assert BEHIND not in page.text and PREPARING not in page.text


def _picture(page: reports.RunPage) -> tuple[object, ...]:
    return page.measure, page.topics, page.values, page.medians, page.task_runs


def test_the_run_page_reads_the_stored_medians_which_are_the_computed_ones(world: World, client: TestClient) -> None:
    for index in range(4):  # five runs, each job storing the task's medians as it finishes
        world.submit("open", f"run-{index}", text=run_text(TOPICS, tag=f"run-{index}", shift=2 + index))
    owner = as_principal(world.engine, "owner")
    with read_only(world.engine) as session:  # the measure the pages open on, as the jobs finish
        assert session.scalar(select(func.count()).select_from(TopicMedians)) == 1
    ranking.refresh_pairs(world.engine, [_qrels_id(world)])  # the idle worker's: the board's others
    with read_only(world.engine) as session:
        held = select(func.count()).select_from(TopicMedians).join(Task, Task.id == TopicMedians.task_id)
        assert session.scalar(held.where(Task.name == "open")) == len(BOARD)  # newest of each slot
    for run in ("red-open", "run-0", "run-3"):
        for measure in ("AP", "nDCG@10", "P@10"):
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(reports_runs, "median_peers", _refuse)
                stored = reports.run_page(world.engine, owner, run, measure)
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(ranking, "stored_medians", lambda *a, **k: None)
                computed = reports.run_page(world.engine, owner, run, measure)
            assert _picture(stored) == _picture(computed) and stored.task_runs == 5  # to the bit
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reports_runs, "median_peers", _refuse)
        page = client.get("/runs/run-0", headers=world.headers("owner"))
    assert page.status_code == 200
    # P@20 is not a measure the task evaluates: no medians stored, made from the runs' stored
    # values on the request, what the score matrix would give
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reports_runs, "median_peers", _refuse)
        from_values = reports.run_page(world.engine, owner, "run-0", "P@20")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reports_runs, "values_picture", lambda *a, **k: None)
        computed = reports.run_page(world.engine, owner, "run-0", "P@20")
    assert _picture(from_values) == _picture(computed) and computed.task_runs == 5


def _collection_pictures(world: World, run: str, measure: str) -> tuple[reports.RunPage, ...]:
    """A collection's run page as the page reads it (no median computed through the score
    matrix), from the runs' stored values only (no task's medians), and computed."""
    owner = as_principal(world.engine, "owner")
    pages = []
    for refused in (("median_peers",), ("median_peers", "stored_picture"), ("stored_picture", "values_picture")):
        with pytest.MonkeyPatch.context() as patch:
            for name in refused:  # as lab_reports calls them
                patch.setattr(reports, name, _refuse if name == "median_peers" else lambda *a, **k: None)
            pages.append(lab_reports.collection_run_page(world.engine, owner, "sample", run, measure))
    return tuple(pages)


@pytest.mark.both_databases  # the page's reads of stored medians, pairs and values
def test_a_collections_pages_read_what_a_task_over_its_qrels_stored(world: World, client: TestClient) -> None:
    """A collection's run and compare pages read the medians and paired tests a task over its
    qrels stored, when they are of the runs and evaluations the page shows (a median or a pair is
    its evaluations' alone, whichever task stored it); a collection of several tasks' runs has its
    medians from the runs' stored values. Both are what the page would compute, to the bit."""
    for index in range(3):
        world.submit("open", f"run-{index}", text=run_text(TOPICS, tag=f"run-{index}", shift=2 + index))
    ranking.refresh_pairs(world.engine, [_qrels_id(world)])
    run_page = "/collections/sample/runs/run-0?measure=AP"
    compare = "/collections/sample/compare?run=red-open&run=run-0&measure=AP"
    # the collection also holds the secret task's run: no task stored the medians of its runs
    for run in ("red-open", "run-0", "red-secret"):
        read, from_values, computed = _collection_pictures(world, run, "AP")
        assert _picture(read) == _picture(from_values) == _picture(computed) and read.task_runs == 5
    with nothing_computed(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(reports, "median_peers", _refuse)
        for url in (run_page, compare):  # a pair of the open task's runs is the open task's stored pair
            assert client.get(url, headers=world.headers("owner")).status_code == 200, url
    store.delete_run(world.engine, "red-secret")  # now the collection's runs are the open task's
    for run in ("red-open", "run-0", "run-2"):
        for measure in ("AP", "nDCG@10", "P@10"):
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(reports, "median_peers", _refuse)
                patch.setattr(reports, "values_picture", _refuse)  # the task's stored medians are read
                stored = lab_reports.collection_run_page(
                    world.engine, as_principal(world.engine, "owner"), "sample", run, measure
                )
            _, from_values, computed = _collection_pictures(world, run, measure)
            assert _picture(stored) == _picture(from_values) == _picture(computed) and stored.task_runs == 4
    with nothing_computed(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(reports, "median_peers", _refuse)
        for url in (run_page, compare, compare.replace("measure=AP", "measure=P%4010")):
            page = client.get(url, headers=world.headers("owner"))
            assert page.status_code == 200, (url, page.text)


def test_a_run_page_computes_while_the_stored_medians_are_not_of_the_runs_evaluations(world: World) -> None:
    """Stored medians of other evaluations than the page's are not read: the page makes them from
    the runs' stored values, or through the score matrix where those are missing."""
    world.submit("open", "run-0", text=run_text(TOPICS, tag="run-0", shift=2))
    world.submit("open", "run-1", text=run_text(TOPICS, tag="run-1", shift=3), evaluate=False)  # queued
    owner = as_principal(world.engine, "owner")
    expected = _picture(reports.run_page(world.engine, owner, "run-0", "AP"))
    assert expected[-1] == 2  # run-1 not on the board yet
    with unit_of_work(world.engine) as session:  # as if another evaluation were newer than the stored one
        session.execute(update(TopicMedians).values(runs={"red-open": 1, "run-0": 999999}, medians=b"\0" * 24))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reports_runs, "median_peers", _refuse)
        assert _picture(reports.run_page(world.engine, owner, "run-0", "AP")) == expected  # the values'
        patch.setattr(reports_runs, "values_picture", lambda *a, **k: None)
        with pytest.raises(AssertionError, match="computed on a GET"):
            reports.run_page(world.engine, owner, "run-0", "AP")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reports_runs, "values_picture", lambda *a, **k: None)
        assert _picture(reports.run_page(world.engine, owner, "run-0", "AP")) == expected
