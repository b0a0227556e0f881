"""The evaluation queue in one process, on SQLite and PostgreSQL: one job per inputs and options,
claims with leases, a lost lease taken over, attempts running out, retry, cancel and release."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import Engine, func, select

from evalstore.db.models import Evaluation, QueryValues
from evalstore.db.session import read_only
from evalstore.errors import ConflictError, NotFoundError
from evalstore.services import jobs, store
from evalstore.services.jobs import EvaluationOptions
from evalstore.services.kinds.ranking import results, run_job
from tests.factories import SAMPLE

FAST = EvaluationOptions(measures=("AP", "P@10", "RelString"))


@pytest.fixture
def stored(engine: Engine) -> Engine:
    store.import_qrels(engine, SAMPLE / "qrels.test", name="test")
    store.register_run(engine, SAMPLE / "results.test", name="std")
    return engine


def _job(engine: Engine, job_id: int) -> Evaluation:
    with read_only(engine) as session:
        job = session.get(Evaluation, job_id)
        assert job is not None
        return job


def test_same_request_is_one_job_until_forced(stored: Engine) -> None:
    [first] = jobs.enqueue(stored, qrels_name="test", run_names=["std"], options=FAST)
    [again] = jobs.enqueue(
        stored, qrels_name="test", run_names=["std"], options=EvaluationOptions(measures=("map", "P_10", "relstring"))
    )
    assert (first.outcome, again.outcome) == ("queued", "already queued")
    assert again.evaluation_id == first.evaluation_id
    job = jobs.claim(stored, "w1")
    assert job is not None
    run_job(stored, job)
    [reused] = jobs.enqueue(stored, qrels_name="test", run_names=["std"], options=FAST)
    assert (reused.outcome, reused.state) == ("reused", "done")
    [forced] = jobs.enqueue(stored, qrels_name="test", run_names=["std"], options=FAST, force=True)
    assert (forced.outcome, forced.evaluation_id) == ("requeued", first.evaluation_id)
    other = jobs.enqueue(
        stored,
        qrels_name="test",
        run_names=["std"],
        options=EvaluationOptions(measures=("AP", "P@10", "RelString"), relevance_level=2),
    )
    assert other[0].evaluation_id != first.evaluation_id


def test_concurrent_requests_make_one_job(stored: Engine) -> None:
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def ask() -> None:
        barrier.wait()
        outcomes.extend(r.outcome for r in jobs.enqueue(stored, qrels_name="test", run_names=["std"], options=FAST))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["already queued"] * 3 + ["queued"]
    with read_only(stored) as session:
        assert session.scalar(select(func.count()).select_from(Evaluation)) == 1


def test_claim_run_and_read_back(stored: Engine) -> None:
    [ref] = jobs.enqueue(stored, qrels_name="test", run_names=["std"], options=FAST)
    job = jobs.claim(stored, "w1")
    assert job is not None and job.evaluation_id == ref.evaluation_id and job.attempt == 1
    assert jobs.claim(stored, "w2") is None  # held under its lease
    summary = run_job(stored, job)
    assert summary.topics == 3
    done = _job(stored, job.evaluation_id)
    assert (done.state, done.attempts, done.worker_id, done.results_version, done.mlflow_state) == (
        "done",
        1,
        "w1",
        1,
        "pending",
    )
    back = results(stored, qrels_name="test", run_name="std")
    assert back.topics == ["301", "302", "303"]
    assert f"{back.aggregates['AP']:.4f}" == "0.1785"
    assert back.frame.loc["301", "RelString"] == "0000011000"  # text measures keep their text
    assert back.header["run_hash"] == done.run_hash


def test_expired_lease_is_taken_over_and_the_old_worker_cannot_write(stored: Engine) -> None:
    jobs.enqueue(stored, qrels_name="test", run_names=["std"], options=FAST)
    lost = jobs.claim(stored, "dead", lease=timedelta(seconds=0.2))
    assert lost is not None
    time.sleep(0.4)
    taken = jobs.claim(stored, "alive")
    assert taken is not None and taken.attempt == 2 and taken.evaluation_id == lost.evaluation_id
    with pytest.raises(jobs.JobLost):
        run_job(stored, lost)
    assert not jobs.heartbeat(stored, lost)
    run_job(stored, taken)
    assert _job(stored, taken.evaluation_id).worker_id == "alive"


def test_attempts_run_out_when_workers_keep_dying(stored: Engine) -> None:
    [ref] = jobs.enqueue(stored, qrels_name="test", run_names=["std"], options=FAST, max_attempts=2)
    for _ in range(2):
        assert jobs.claim(stored, "dies", lease=timedelta(seconds=0.1)) is not None
        time.sleep(0.25)
    assert jobs.claim(stored, "next") is None
    job = _job(stored, ref.evaluation_id)
    assert job.state == "failed"
    assert job.error == (
        f"gave up after 2 attempts: worker dies stopped renewing its lease (killed or lost its "
        f"connection). Run 'evalstore jobs retry {ref.evaluation_id}' to try again."
    )
    view = jobs.retry(stored, ref.evaluation_id)
    assert (view.state, view.attempts, view.error) == ("queued", 0, None)


def test_failures_retry_or_fail_and_release_does_not_count(stored: Engine) -> None:
    [ref] = jobs.enqueue(stored, qrels_name="test", run_names=["std"], options=FAST, max_attempts=2)
    job = jobs.claim(stored, "w")
    assert job is not None
    assert jobs.fail(stored, job, "OperationalError: server closed the connection", retryable=True) == "queued"
    job = jobs.claim(stored, "w")
    assert job is not None and job.attempt == 2
    jobs.release(stored, job)
    assert (_job(stored, ref.evaluation_id).state, _job(stored, ref.evaluation_id).attempts) == ("queued", 1)
    job = jobs.claim(stored, "w")
    assert job is not None
    assert jobs.fail(stored, job, "bad input", retryable=False) == "failed"
    assert _job(stored, ref.evaluation_id).error == "bad input"


def test_cancel_drops_a_running_result_and_refuses_finished_jobs(stored: Engine) -> None:
    [ref] = jobs.enqueue(stored, qrels_name="test", run_names=["std"], options=FAST)
    job = jobs.claim(stored, "w")
    assert job is not None
    assert jobs.cancel(stored, ref.evaluation_id).state == "cancelled"
    with pytest.raises(jobs.JobLost):
        run_job(stored, job)
    with read_only(stored) as session:
        assert session.scalar(select(func.count()).select_from(QueryValues)) == 0
    with pytest.raises(
        ConflictError,
        match=f"Job {ref.evaluation_id} is already cancelled; only queued or running jobs can be cancelled.",
    ):
        jobs.cancel(stored, ref.evaluation_id)
    with pytest.raises(NotFoundError, match=r"^No job 999\.$"):
        jobs.show_job(stored, 999)


def test_replacing_a_run_drops_its_queued_jobs(stored: Engine, write) -> None:  # type: ignore[no-untyped-def]
    jobs.enqueue(stored, qrels_name="test", run_names=["std"], options=FAST)
    store.register_run(stored, write("new.run", "301 Q0 d1 1 1.0 x\n"), name="std", replace=True)
    assert jobs.claim(stored, "w") is None and jobs.list_jobs(stored) == []
