"""MLflow up, hung or down, with a real `evalstore worker` process: the jobs finish at full speed
whatever MLflow does, since only the deliverer beside the worker talks to it. A hung MLflow is a
local server that accepts connections and never answers; a down one, a port nobody listens on.
Once MLflow answers again, every result is delivered, each exactly once. SQLite and PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mlflow import MlflowClient
from sqlalchemy import Engine, select

from evalstore.db.models import Evaluation
from evalstore.db.session import read_only
from evalstore.services import jobs, store
from evalstore.services.jobs import EvaluationOptions
from evalstore.services.tracking import deliver
from tests.factories import SAMPLE
from tests.helpers.servers import HungMlflow, refusing_uri

EVALSTORE = str(Path(sys.executable).parent / "evalstore")
RUNS = 6
# MLflow's HTTP client gives up on a request after this long: a worker that waited on a hung
# MLflow would take at least this per job, and a stop that waited for the deliverer's request at
# least this. The bounds below are fractions of it, so a loaded machine's slowness (seconds) never
# reaches them and waiting on MLflow (the whole timeout) always does.
HTTP_TIMEOUT = 600


@pytest.fixture
def queued(engine: Engine) -> list[int]:
    store.import_qrels(engine, SAMPLE / "qrels.test", name="test")
    for i in range(RUNS):
        store.register_run(engine, SAMPLE / "results.test", name=f"run{i}")
    refs = jobs.enqueue(engine, qrels_name="test", run_names=None, options=EvaluationOptions(("AP", "P@10")))
    return [ref.evaluation_id for ref in refs]


def _evaluations(engine: Engine) -> list[Evaluation]:
    with read_only(engine) as session:
        return list(session.scalars(select(Evaluation).order_by(Evaluation.id)))


def _until(condition: Callable[[], bool], seconds: float = HTTP_TIMEOUT / 2) -> None:
    """Wait for ``condition``: its bound only ends a test that would never get there (a process
    that imports MLflow takes minutes of wall time at a load average of 30)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s"
        time.sleep(0.05)


@pytest.fixture
def worker_at(engine: Engine, tmp_path: Path) -> Iterator[Callable[[str], subprocess.Popen[bytes]]]:
    """Starts `evalstore worker` (one job at a time) delivering to the MLflow at the URI given."""
    started: list[subprocess.Popen[bytes]] = []

    def start(uri: str) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "EVALSTORE_DATABASE_URL": engine.url.render_as_string(hide_password=False),
            "EVALSTORE_HOME": str(tmp_path),
            "EVALSTORE_MLFLOW": "on",
            "MLFLOW_TRACKING_URI": uri,
            "MLFLOW_HTTP_REQUEST_TIMEOUT": str(HTTP_TIMEOUT),
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
            "EVALSTORE_MLFLOW_LEASE": "2",  # a claim left by this worker runs out soon after it stops
        }
        with (tmp_path / "worker.log").open("wb") as log:
            process = subprocess.Popen(
                [EVALSTORE, "worker", "--poll-interval", "0.1", "--batch-jobs", "1", "--no-index-runs"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def _jobs_done_at_full_speed(engine: Engine, worker: subprocess.Popen[bytes], log: Path) -> None:
    _until(lambda: all(e.state == "done" for e in _evaluations(engine)) or worker.poll() is not None)
    assert worker.poll() is None, log.read_text()
    evaluations = _evaluations(engine)
    assert [e.state for e in evaluations] == ["done"] * RUNS
    first = min(e.started_at for e in evaluations if e.started_at is not None)
    last = max(e.finished_at for e in evaluations if e.finished_at is not None)
    # one job after another, none waiting on MLflow: below a single HTTP timeout in all (a job that
    # waited on a hung MLflow would take a whole one)
    assert (last - first).total_seconds() < HTTP_TIMEOUT / 2, log.read_text()


def _stopped_promptly(worker: subprocess.Popen[bytes], log: Path) -> None:
    worker.send_signal(signal.SIGTERM)
    try:
        # the deliverer's thread, stuck on MLflow, does not hold the stop: held, it would take the
        # request's whole timeout
        assert worker.wait(timeout=HTTP_TIMEOUT / 2) == 0, log.read_text()
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker did not stop within {HTTP_TIMEOUT / 2:g} s: {log.read_text()}")


def _each_logged_once(engine: Engine, uri: str, queued: list[int]) -> None:
    evaluations = _evaluations(engine)
    assert [(e.mlflow_state, e.mlflow_error) for e in evaluations] == [("logged", None)] * RUNS
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("evalstore/test")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(int(r.data.tags["evalstore.evaluation_id"]) for r in runs) == sorted(queued)
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert {r.info.run_id for r in runs} == {e.mlflow_run_id for e in evaluations}


def test_mlflow_up_every_job_is_done_and_delivered_by_the_worker_process_once(
    engine: Engine,
    queued: list[int],
    mlflow_store: str,
    worker_at: Callable[[str], subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    worker = worker_at(mlflow_store)
    _jobs_done_at_full_speed(engine, worker, tmp_path / "worker.log")
    _until(lambda: all(e.mlflow_state == "logged" for e in _evaluations(engine)))
    _stopped_promptly(worker, tmp_path / "worker.log")
    _each_logged_once(engine, mlflow_store, queued)


@pytest.mark.parametrize("outage", ["hung", "down"])
def test_mlflow_hung_or_down_costs_the_queue_nothing_and_deliveries_catch_up(
    engine: Engine,
    queued: list[int],
    mlflow_store: str,
    worker_at: Callable[[str], subprocess.Popen[bytes]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    outage: str,
) -> None:
    hung = HungMlflow() if outage == "hung" else None
    try:
        worker = worker_at(hung.uri if hung else refusing_uri())
        _jobs_done_at_full_speed(engine, worker, tmp_path / "worker.log")
        if hung is not None:
            _until(lambda: len(hung.accepted) >= 1)  # the deliverer is waiting on it meanwhile
        else:
            _until(lambda: any(e.mlflow_error for e in _evaluations(engine)))  # tried, refused, pending
        assert {e.mlflow_state for e in _evaluations(engine)} <= {"pending", "logging"}
        _stopped_promptly(worker, tmp_path / "worker.log")
    finally:
        if hung is not None:
            hung.close()

    # MLflow is back: what the worker's deliverer held runs out by its 2 s lease, and a
    # deliverer delivers everything, each once
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_store)
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    delivered: list[int] = []
    _until(lambda: len(delivered.__iadd__(deliver(engine).logged)) == RUNS)
    assert sorted(delivered) == sorted(queued)
    _each_logged_once(engine, mlflow_store, queued)
