"""Real `evalstore worker` processes through database outages: PostgreSQL cut off by a TCP proxy
this test controls (the shared server itself is never stopped), and a SQLite store whose write
lock another process holds when the worker starts. The worker waits them out, says so once per
change on stderr, and then finishes the queued jobs with every value stored."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.engine import make_url

from evalstore.db.engine import make_engine
from evalstore.db.models import AggregateResult, Evaluation, QueryValues
from evalstore.db.session import read_only
from evalstore.services import jobs, store
from evalstore.services.jobs import EvaluationOptions
from evalstore.services.worker import Worker, WorkerSettings
from tests.conftest import Templates, fill_disk, migrated_copy
from tests.factories import SAMPLE
from tests.proxy import TcpProxy

EVALSTORE = str(Path(sys.executable).parent / "evalstore")
MEASURES = ("AP", "P@10", "nDCG@10", "RR")
# how long a worker process may take to get somewhere (to start, meet the outage, finish): the
# bound only ends a test that would never get there (a worker starting at a load average of 35-40
# had logged nothing after 60 s)
PROGRESS_SECONDS = 600


def _start_worker(url: str, log: Path, *args: str, **env: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as handle:
        return subprocess.Popen(
            [EVALSTORE, "--database-url", url, "worker", "--no-mlflow", "--poll-interval", "0.1", *args],
            env={**os.environ, "EVALSTORE_MLFLOW": "off", "EVALSTORE_RETRY_LONGEST_SECONDS": "2", **env},
            stdout=subprocess.DEVNULL,
            stderr=handle,
        )


def _enqueue(engine: Engine, run: str) -> int:
    [ref] = jobs.enqueue(engine, qrels_name="q", run_names=[run], options=EvaluationOptions(MEASURES))
    return ref.evaluation_id


def _wait_done(engine: Engine, ids: list[int], *logs: Path, timeout: float = PROGRESS_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with read_only(engine) as session:
            states = session.execute(
                select(Evaluation.id, Evaluation.state, Evaluation.error).where(Evaluation.id.in_(ids))
            ).all()
        if all(state == "done" for _, state, _ in states):
            return
        assert time.monotonic() < deadline and all(state != "failed" for _, state, _ in states), (
            states,
            [log.read_text() for log in logs],
        )
        time.sleep(0.05)


def _stored(engine: Engine, job_id: int) -> tuple[dict[str, float | None], int]:
    """The job's aggregate values and how many per-query value rows it has."""
    with read_only(engine) as session:
        aggregates = dict(
            session.execute(
                select(AggregateResult.measure, AggregateResult.value).where(AggregateResult.evaluation_id == job_id)
            ).all()
        )
        rows = session.scalar(select(func.count()).select_from(QueryValues).where(QueryValues.evaluation_id == job_id))
    return aggregates, int(rows or 0)


def _stop(worker: subprocess.Popen[bytes]) -> int:
    worker.send_signal(signal.SIGTERM)
    return worker.wait(timeout=PROGRESS_SECONDS)


@pytest.fixture
def postgres_store(templates: Templates, tmp_path: Path) -> Iterator[tuple[Engine, str]]:
    """A migrated PostgreSQL database holding qrels 'q' and runs a-d (the sample run): an engine
    straight to it, and its URL (to be pointed through a proxy)."""
    url = migrated_copy(templates, "postgres", tmp_path)
    engine = make_engine(url)
    store.import_qrels(engine, SAMPLE / "qrels.test", name="q")
    for name in "abcd":
        store.register_run(engine, SAMPLE / "results.test", name=name)
    yield engine, url
    engine.dispose()
    templates.drop(url)


@pytest.mark.postgres
def test_workers_live_through_a_postgres_outage_and_finish_the_jobs(
    postgres_store: tuple[Engine, str], tmp_path: Path
) -> None:
    engine, url = postgres_store
    parsed = make_url(url)
    proxy = TcpProxy((parsed.host or "127.0.0.1", parsed.port or 5432))
    proxied = parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    logs = [tmp_path / "running.log", tmp_path / "started-in-outage.log"]
    # a short lease: heartbeats and the register's "alive" writes every second, so the outage hits them
    running = _start_worker(proxied, logs[0], "--lease-seconds", "3")
    first = _enqueue(engine, "a")
    _wait_done(engine, [first])
    proxy.cut()
    started_in_outage = _start_worker(proxied, logs[1], "--lease-seconds", "3")
    later = [_enqueue(engine, run) for run in "bcd"]  # straight to the database, past the proxy
    cut_at = time.monotonic()
    for log in logs:  # each has met the outage (a process starting on a loaded machine takes seconds)
        while "is not answering" not in log.read_text():
            assert time.monotonic() - cut_at < PROGRESS_SECONDS, log.read_text()
            time.sleep(0.05)
    time.sleep(max(2.0, 5 - (time.monotonic() - cut_at)))  # cut ~5 s, and a few tries after both met it
    assert running.poll() is None, logs[0].read_text()
    assert started_in_outage.poll() is None, logs[1].read_text()
    proxy.restore()
    _wait_done(engine, later, *logs)
    assert _stop(running) == 0, logs[0].read_text()
    assert _stop(started_in_outage) == 0, logs[1].read_text()
    proxy.close()
    reference, rows = _stored(engine, first)
    assert set(reference) >= set(MEASURES) and rows > 0
    for job_id in later:
        assert _stored(engine, job_id) == (reference, rows)
    shown = make_url(proxied).render_as_string(hide_password=True)
    for log in logs:
        text = log.read_text()
        assert "Traceback" not in text, text
        # one line when the outage began, one when it ended: not one per try
        assert text.count(f"the database {shown} is not answering") == 1, text
        assert text.count("the database answers again after") == 1, text


@pytest.mark.postgres
def test_a_worker_stopped_while_it_waits_for_the_database_exits_cleanly(
    postgres_store: tuple[Engine, str], tmp_path: Path
) -> None:
    _, url = postgres_store
    parsed = make_url(url)
    proxy = TcpProxy((parsed.host or "127.0.0.1", parsed.port or 5432))
    proxy.cut()
    log = tmp_path / "worker.log"
    worker = _start_worker(parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False), log)
    deadline = time.monotonic() + PROGRESS_SECONDS
    while "is not answering" not in log.read_text():  # still waiting for its schema check
        assert worker.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    assert _stop(worker) == 0, log.read_text()  # not killed by the signal it had no handler for yet
    proxy.close()
    text = log.read_text()
    assert "worker stopped before it took a job: 0 jobs done" in text and "Traceback" not in text, text


def test_a_worker_started_while_sqlite_is_locked_waits_and_then_works(templates: Templates, tmp_path: Path) -> None:
    url = migrated_copy(templates, "sqlite", tmp_path)
    engine = make_engine(url)
    store.import_qrels(engine, SAMPLE / "qrels.test", name="q")
    store.register_run(engine, SAMPLE / "results.test", name="a")
    job = _enqueue(engine, "a")
    path = make_url(url).database
    assert path is not None
    holder = sqlite3.connect(path, isolation_level=None)  # another process's writer, stalled
    holder.execute("BEGIN IMMEDIATE")
    log = tmp_path / "worker.log"
    try:
        worker = _start_worker(url, log, "--until-empty", EVALSTORE_SQLITE_BUSY_SECONDS="0.5")
        deadline = time.monotonic() + PROGRESS_SECONDS
        while "is locked by another writer" not in log.read_text():
            assert worker.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        time.sleep(1.5)  # locked a while longer: a few tries, no more lines
        assert worker.poll() is None, log.read_text()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert worker.wait(timeout=PROGRESS_SECONDS) == 0, log.read_text()
    aggregates, rows = _stored(engine, job)
    assert set(aggregates) >= set(MEASURES) and rows > 0
    text = log.read_text()
    assert (
        text.count(f"the database {path} is locked by another writer for longer than EVALSTORE_SQLITE_BUSY_SECONDS")
        == 1
    )
    assert text.count("the database answers again after") == 1
    assert "Traceback" not in text
    engine.dispose()


def test_a_full_disk_is_named_recorded_on_the_job_and_waited_out(
    templates: Templates, tmp_path: Path, small_disk: Path
) -> None:
    # 1,000 topics x 50 documents: all_trec's per-query values (~0.8 MB) do not fit in what the
    # disk has left, the claim and the note on the job do
    rows = [f"{t} Q0 d{t}_{d} {d + 1} {100 - d} r\n" for t in range(1000) for d in range(50)]
    qrels = [f"{t} 0 d{t}_{d} {int(d % 7 == 0)}\n" for t in range(1000) for d in range(0, 50, 2)]
    (tmp_path / "run").write_text("".join(rows))
    (tmp_path / "qrels").write_text("".join(qrels))
    built = make_engine(migrated_copy(templates, "sqlite", tmp_path))
    store.import_qrels(built, tmp_path / "qrels", name="q")
    store.register_run(built, tmp_path / "run", name="a")
    with built.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    built.dispose()
    path = small_disk / "evalstore.db"
    path.write_bytes((tmp_path / "evalstore.db").read_bytes())
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    [ref] = jobs.enqueue(engine, qrels_name="q", run_names=["a"], options=EvaluationOptions(("all_trec",)))
    # this connection stays open, so the -wal and -shm files stay (SQLite deletes them with the
    # last connection); the WAL's frames, checkpointed, are written again from its start
    keeper = sqlite3.connect(path, isolation_level=None)
    keeper.execute("CREATE TABLE pad (b BLOB)")
    keeper.execute("INSERT INTO pad VALUES (zeroblob(200000))")
    keeper.execute("DROP TABLE pad")
    keeper.execute("PRAGMA wal_checkpoint(PASSIVE)")
    filler = fill_disk(small_disk)
    log = tmp_path / "worker.log"
    worker = _start_worker(url, log)
    try:
        deadline = time.monotonic() + PROGRESS_SECONDS
        while True:
            with read_only(engine) as session:
                job = session.get(Evaluation, ref.evaluation_id)
                assert job is not None
            if job.error:
                break
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert (job.state, job.attempts) == ("queued", 0)
        assert job.error is not None and job.error.startswith(
            f"waiting: the disk holding {path} is full (database or disk is full, "
        ), job.error
        time.sleep(2)  # full a while longer: a few tries, no more lines
        assert worker.poll() is None, log.read_text()
        filler.unlink()
        _wait_done(engine, [ref.evaluation_id], log)
        assert _stop(worker) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
        keeper.close()
        engine.dispose()
    # the same job on a store with room: the same values, all of them
    roomy = make_engine(f"sqlite:///{tmp_path / 'evalstore.db'}")
    [same] = jobs.enqueue(roomy, qrels_name="q", run_names=["a"], options=EvaluationOptions(("all_trec",)))
    Worker(roomy, WorkerSettings(until_empty=True, index_runs=False)).run()
    assert _stored(engine, ref.evaluation_id) == _stored(roomy, same.evaluation_id)
    roomy.dispose()
    text = log.read_text()
    assert text.count(f"the disk holding {path} is full") == 1, text
    assert "not answering" not in text and "Traceback" not in text, text
    assert text.count("the database answers again after") == 1, text
