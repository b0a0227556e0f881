"""Large stored runs get a docno-hash index from an idle worker (PostgreSQL): evaluations of the
run then read its judged rows through the index, with the same results as the hash join."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import Engine, text

from evalstore.db import repositories as repo
from evalstore.db.session import read_only
from evalstore.services import jobs, store
from evalstore.services.jobs import EvaluationOptions
from evalstore.services.kinds import ranking
from evalstore.services.worker import Worker, WorkerSettings
from tests.factories import SAMPLE


def _evaluate(engine: Engine, worker: Worker) -> ranking.StoredResults:
    jobs.enqueue(engine, qrels_name="sample", run_names=["large"], options=EvaluationOptions(("all_trec",)), force=True)
    assert worker.process_one()
    return ranking.results(engine, qrels_name="sample", run_name="large")


def _index_scans(engine: Engine, run_id: int) -> int:
    with read_only(engine) as session:
        return int(
            session.scalar(
                text("SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes WHERE indexrelname = :name"),
                {"name": repo.run_doc_index(run_id)},
            )
            or 0
        )


def test_an_idle_worker_indexes_large_runs_and_evaluations_read_through_the_index(
    engine: Engine, write, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(store.runs, "INDEXED_RUN_ROWS", 1000)  # the sample run's 1,500 rows count as large
    store.import_qrels(engine, SAMPLE / "qrels.test", name="sample")
    store.register_run(engine, SAMPLE / "results.test", name="large")
    store.register_run(engine, write("small.run", "401 Q0 d1 1 1.0 t\n"), name="small")
    with read_only(engine) as session:
        large, small = repo.get_run(session, "large").id, repo.get_run(session, "small").id
    worker = Worker(engine, WorkerSettings(poll_interval=0.01, index_interval=0.0))
    before = _evaluate(engine, worker)

    loop = threading.Thread(target=worker.run)
    loop.start()
    try:
        deadline = time.monotonic() + 30
        while engine.dialect.name == "postgresql" and time.monotonic() < deadline:
            with read_only(engine) as session:
                if repo.run_indexed(session, large):
                    break
            time.sleep(0.05)
    finally:
        worker.stopping = True
        loop.join()

    with read_only(engine) as session:
        indexed = {run_id: repo.run_indexed(session, run_id) for run_id in (large, small)}
    if engine.dialect.name != "postgresql":  # nothing to index: the laptop database joins as it did
        assert indexed == {large: False, small: False} and store.index_next_run(engine) is None
        return
    assert indexed == {large: True, small: False}  # the small run is below INDEXED_RUN_ROWS
    assert store.index_next_run(engine) is None  # nothing left to do
    scans = _index_scans(engine, large)
    after = _evaluate(engine, worker)
    assert after.frame.equals(before.frame) and after.aggregates == before.aggregates
    deadline = time.monotonic() + 10  # the server publishes its index statistics within a second or so
    while _index_scans(engine, large) == scans and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _index_scans(engine, large) > scans, "the judged rows were not read through the index"
