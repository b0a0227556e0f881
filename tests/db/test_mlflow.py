"""MLflow logging: every aggregate, params, tags and artifacts; MLflow down leaves the evaluation
stored and its logging pending; a sync logs it; nothing is ever logged twice."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag
from sqlalchemy import Engine, update

from evalstore.db.models import Evaluation
from evalstore.db.session import read_only, unit_of_work
from evalstore.services import jobs, kinds, store
from evalstore.services.jobs import EvaluationOptions
from evalstore.services.tracking import log_pending, pending_count, results_for
from evalstore.services.tracking.client import PNG_COMPRESS_LEVEL
from evalstore.services.worker import Worker, WorkerSettings
from tests.factories import SAMPLE, queue_sample


@pytest.fixture
def tracking_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mlflow_store: str) -> str:
    uri = mlflow_store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    return uri


@pytest.fixture
def evaluated_offline(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> int:
    """One evaluation done by a worker while MLflow was unreachable."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    store.import_qrels(engine, SAMPLE / "qrels.test", name="test")
    store.register_run(engine, SAMPLE / "results.test", name="std", system="smart", metadata={"k1": "0.9"})
    [ref] = jobs.enqueue(engine, qrels_name="test", run_names=["std"], options=EvaluationOptions(("all_trec",)))
    worker = Worker(engine, WorkerSettings(mlflow=True))
    assert worker.process_one()
    return ref.evaluation_id


_queued_sample = queue_sample  # trec_eval's sample stored, its all_trec evaluation queued; its id


def _evaluation(engine: Engine, evaluation_id: int) -> Evaluation:
    with read_only(engine) as session:
        evaluation = session.get(Evaluation, evaluation_id)
        assert evaluation is not None
        return evaluation


def _logged_runs(uri: str) -> list:  # type: ignore[type-arg]
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("evalstore/test")
    assert experiment is not None
    return client.search_runs([experiment.experiment_id])


def test_mlflow_down_keeps_the_evaluation_and_sync_logs_it_once(
    engine: Engine, evaluated_offline: int, tracking_uri: str, tmp_path: Path
) -> None:
    offline = _evaluation(engine, evaluated_offline)
    assert (offline.state, offline.mlflow_state) == ("done", "pending")
    assert "ConnectionError" in (offline.mlflow_error or "") or "127.0.0.1" in (offline.mlflow_error or "")
    assert pending_count(engine) == 1

    report = log_pending(engine)
    assert (report.logged, report.failed, report.left_pending) == ([evaluated_offline], {}, 0)
    synced = _evaluation(engine, evaluated_offline)
    assert (synced.mlflow_state, synced.mlflow_error) == ("logged", None)
    assert log_pending(engine).logged == []

    [run] = _logged_runs(tracking_uri)
    experiment = MlflowClient(tracking_uri).get_experiment_by_name("evalstore/test")
    assert experiment is not None and experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert run.info.run_id == synced.mlflow_run_id and run.info.run_name == "std"
    assert run.info.status == "FINISHED"
    assert run.info.artifact_uri.startswith((tmp_path / "mlartifacts").as_uri())  # beside the store, not ./mlruns
    assert f"{run.data.metrics['AP']:.4f}" == "0.1785" and f"{run.data.metrics['P_at_10']:.4f}" == "0.3000"
    assert len(run.data.metrics) == 97  # every numeric aggregate of all_trec (relstring has none)
    assert run.data.params["run.k1"] == "0.9" and run.data.params["run.system"] == "smart"
    assert run.data.params["relevance_level"] == "1" and run.data.params["missing_topics"] == "zero"
    assert run.data.tags["evalstore.evaluation_id"] == str(evaluated_offline)
    assert run.data.tags["evalstore.run_hash"] == synced.run_hash
    artifacts = {a.path for a in MlflowClient(tracking_uri).list_artifacts(run.info.run_id)}
    assert artifacts == {
        "evaluation.json",
        "per_query.parquet",
        "per_query_table.json",
        "trec_eval.txt",
        "per_topic_AP.svg",
        "precision_recall.svg",
    }


def test_a_local_mlflow_store_is_put_in_wal_mode(engine: Engine, evaluated_offline: int, tracking_uri: str) -> None:
    """MLflow makes its SQLite store with a rollback journal; evalstore's client puts it in WAL
    mode (kept in the file), and logs into it as before."""
    path = tracking_uri.removeprefix("sqlite:///")
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("PRAGMA journal_mode = DELETE")
    log_pending(engine)
    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert len(_logged_runs(tracking_uri)) == 1


def test_wal_mode_goes_to_the_file_a_uri_with_a_query_names(tmp_path: Path) -> None:
    from evalstore.services.tracking.client import _write_ahead_log

    path = tmp_path / "m.db"
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE t (x)")
    _write_ahead_log(f"sqlite:///{path}?timeout=20")
    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("m.db-")) == ["m.db"]


def test_a_logged_run_holds_what_mlflows_own_log_calls_write(
    engine: Engine, evaluated_offline: int, tracking_uri: str, tmp_path: Path
) -> None:
    """evalstore writes the artifact files itself and uploads them at once: the run must hold
    the same tags, params, metrics and files, byte for byte, as MLflow's log_table, log_text,
    log_dict and log_figure give, with the tag by which the MLflow UI shows the table."""
    log_pending(engine)
    [logged] = _logged_runs(tracking_uri)
    client = MlflowClient(tracking_uri)
    payload = kinds.get("ranking").mlflow_run(results_for(engine, evaluated_offline))
    reference = client.create_run(logged.info.experiment_id, run_name=payload.name, tags=payload.tags).info.run_id
    client.log_batch(
        reference,
        metrics=[Metric(name, float(value), 0, 0) for name, value in logged.data.metrics.items()],
        params=[Param(key, value) for key, value in logged.data.params.items()],
        tags=[RunTag("evalstore.logged_by", "evalstore")],
    )
    for name, frame in payload.parquet.items():
        frame.to_parquet(tmp_path / name)
        client.log_artifact(reference, str(tmp_path / name))
    for name, table in payload.tables.items():  # text columns as categoricals: the same JSON, no pandas warning
        text = [c for c in table.columns if pd.api.types.is_string_dtype(table[c])]
        client.log_table(reference, table.astype(dict.fromkeys(text, "category")), artifact_file=name)
    for name, text in payload.texts.items():
        client.log_text(reference, text, name)
    for name, content in payload.dicts.items():
        client.log_dict(reference, content, name)
    for name, figure in payload.figures() if payload.figures else ():
        if isinstance(figure, str):  # SVG text
            client.log_text(reference, figure, name)
        else:
            client.log_figure(
                reference, figure, name, save_kwargs={"pil_kwargs": {"compress_level": PNG_COMPRESS_LEVEL}}
            )
    client.set_terminated(reference, "FINISHED")

    expected = client.get_run(reference)
    assert logged.data.tags["mlflow.loggedArtifacts"] == '[{"path": "per_query_table.json", "type": "table"}]'
    assert logged.data.tags == expected.data.tags
    assert (logged.data.params, logged.data.metrics) == (expected.data.params, expected.data.metrics)
    files = sorted(a.path for a in client.list_artifacts(logged.info.run_id))
    assert files == sorted(a.path for a in client.list_artifacts(reference))
    assert len(files) == 6
    for name in files:
        ours = Path(client.download_artifacts(logged.info.run_id, name, str(tmp_path / "ours"))).read_bytes()
        theirs = Path(client.download_artifacts(reference, name, str(tmp_path / "theirs"))).read_bytes()
        assert ours == theirs, name


def test_a_sync_that_died_after_mlflow_finished_does_not_log_again(
    engine: Engine, evaluated_offline: int, tracking_uri: str
) -> None:
    log_pending(engine)
    first = _evaluation(engine, evaluated_offline).mlflow_run_id
    with unit_of_work(engine) as session:  # as if the process died before recording the success
        session.execute(update(Evaluation).values(mlflow_state="pending", mlflow_run_id=None))
    assert log_pending(engine).logged == [evaluated_offline]
    assert _evaluation(engine, evaluated_offline).mlflow_run_id == first
    assert len(_logged_runs(tracking_uri)) == 1


def test_recomputed_results_are_logged_as_a_new_run(engine: Engine, evaluated_offline: int, tracking_uri: str) -> None:
    log_pending(engine)
    jobs.enqueue(engine, qrels_name="test", run_names=["std"], options=EvaluationOptions(("all_trec",)), force=True)
    assert Worker(engine, WorkerSettings(mlflow=True)).process_one()
    recomputed = _evaluation(engine, evaluated_offline)
    assert (recomputed.results_version, recomputed.mlflow_state) == (2, "logged")
    runs = _logged_runs(tracking_uri)
    assert sorted(r.data.tags["evalstore.results_version"] for r in runs) == ["1", "2"]
    # version 1 was read back from the database by the sync, version 2 logged by the worker from
    # the results it had just computed: the same content either way
    client = MlflowClient(tracking_uri)
    synced, from_memory = sorted(runs, key=lambda r: r.data.tags["evalstore.results_version"])
    assert synced.data.metrics == from_memory.data.metrics and synced.data.params == from_memory.data.params

    def artifact(run, name: str) -> bytes:  # type: ignore[no-untyped-def]
        return Path(client.download_artifacts(run.info.run_id, name)).read_bytes()

    for name in ("trec_eval.txt", "per_query_table.json"):
        assert artifact(synced, name) == artifact(from_memory, name)
    frames = [pd.read_parquet(client.download_artifacts(r.info.run_id, "per_query.parquet")) for r in runs]
    pd.testing.assert_frame_equal(frames[0], frames[1])


def test_an_experiment_made_before_is_marked_as_model_development_once(
    engine: Engine, evaluated_offline: int, tracking_uri: str
) -> None:
    """Experiments an older evalstore (or a person) made without a kind get it; a kind chosen in
    MLflow's UI is left alone."""
    client = MlflowClient(tracking_uri)
    client.create_experiment("evalstore/test")
    log_pending(engine)
    experiment = client.get_experiment_by_name("evalstore/test")
    assert experiment is not None and experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    other = client.create_experiment("evalstore/other", tags={"mlflow.experimentKind": "finetuning"})
    store.import_qrels(engine, SAMPLE / "qrels.test", name="other")
    [ref] = jobs.enqueue(engine, qrels_name="other", run_names=["std"], options=EvaluationOptions(("AP",)))
    assert Worker(engine, WorkerSettings(mlflow=True)).process_one()
    assert client.get_experiment(other).tags["mlflow.experimentKind"] == "finetuning"
    assert _evaluation(engine, ref.evaluation_id).mlflow_state == "logged"


def test_a_worker_logs_while_it_stores_and_finishes_the_run_once_the_results_are_committed(
    engine: Engine, tracking_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    evaluation_id = _queued_sample(engine)
    with caplog.at_level("INFO", logger="evalstore.worker"):
        assert Worker(engine, WorkerSettings(mlflow=True)).process_one()
    assert "after the store" in caplog.text and "alongside it" in caplog.text
    evaluation = _evaluation(engine, evaluation_id)
    assert (evaluation.state, evaluation.mlflow_state, evaluation.mlflow_error) == ("done", "logged", None)
    [run] = _logged_runs(tracking_uri)
    assert (run.info.run_id, run.info.status) == (evaluation.mlflow_run_id, "FINISHED")
    assert run.data.tags["evalstore.results_version"] == str(evaluation.results_version) == "1"


def test_results_that_fail_to_store_leave_no_mlflow_run_and_the_retry_logs_one(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.entities import ViewType

    from evalstore.db import repositories

    evaluation_id = _queued_sample(engine)
    replace_results = repositories.replace_results

    def the_disk_is_full(*args: object, **kwargs: object) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(repositories, "replace_results", the_disk_is_full)
    worker = Worker(engine, WorkerSettings(mlflow=True))
    assert worker.process_one()
    failed = _evaluation(engine, evaluation_id)
    assert (failed.state, failed.error) == ("queued", "OSError: No space left on device")
    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("evalstore/test")
    assert experiment is not None  # the logging had begun alongside the store
    assert client.search_runs([experiment.experiment_id]) == []
    [deleted] = client.search_runs([experiment.experiment_id], run_view_type=ViewType.DELETED_ONLY)

    monkeypatch.setattr(repositories, "replace_results", replace_results)
    assert worker.process_one()
    done = _evaluation(engine, evaluation_id)
    assert (done.state, done.mlflow_state) == ("done", "logged")
    [run] = _logged_runs(tracking_uri)
    assert run.info.run_id == done.mlflow_run_id != deleted.info.run_id and run.info.status == "FINISHED"


def test_a_retried_job_deletes_the_run_an_attempt_that_died_left_unfinished(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.entities import ViewType

    from evalstore.db import repositories
    from evalstore.services import tracking

    _queued_sample(engine)
    replace_results = repositories.replace_results

    def the_worker_dies(*args: object, **kwargs: object) -> None:
        raise OSError("killed")

    # the first attempt dies while storing: nothing gets to delete the run it began logging
    monkeypatch.setattr(repositories, "replace_results", the_worker_dies)
    monkeypatch.setattr(tracking, "abandon_ahead", lambda ahead: ahead.thread.join())
    worker = Worker(engine, WorkerSettings(mlflow=True))
    assert worker.process_one()
    [orphan] = _logged_runs(tracking_uri)
    assert orphan.info.status == "RUNNING"

    monkeypatch.setattr(repositories, "replace_results", replace_results)
    assert worker.process_one()  # attempt 2
    [run] = _logged_runs(tracking_uri)
    assert run.info.run_id != orphan.info.run_id and run.info.status == "FINISHED"
    experiment = MlflowClient(tracking_uri).get_experiment_by_name("evalstore/test")
    assert experiment is not None
    [deleted] = MlflowClient(tracking_uri).search_runs([experiment.experiment_id], run_view_type=ViewType.DELETED_ONLY)
    assert deleted.info.run_id == orphan.info.run_id


def test_a_worker_that_cannot_record_the_run_deletes_it_and_a_sync_logs_the_results_afresh(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalstore.services import tracking

    evaluation_id = _queued_sample(engine)
    mark_logged = tracking._mark_logged

    def the_database_went_away(*args: object) -> None:
        raise ConnectionError("server closed the connection unexpectedly")

    monkeypatch.setattr(tracking, "_mark_logged", the_database_went_away)
    assert Worker(engine, WorkerSettings(mlflow=True)).process_one()  # the worker carries on
    assert _evaluation(engine, evaluation_id).state == "done"
    assert _logged_runs(tracking_uri) == []  # the run it could not record is deleted

    monkeypatch.setattr(tracking, "_mark_logged", mark_logged)
    with unit_of_work(engine) as session:  # as if the claim's lease had run out
        session.execute(update(Evaluation).values(mlflow_state="pending"))
    assert log_pending(engine).logged == [evaluation_id]
    [run] = _logged_runs(tracking_uri)
    assert (run.info.run_id, run.info.status) == (_evaluation(engine, evaluation_id).mlflow_run_id, "FINISHED")


def test_results_are_stored_held_for_logging_and_a_worker_dying_before_the_runs_finish_loses_nothing(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker claims the logging in the commit that stores the results (tracking.hold_ahead): if
    it dies before finishing the MLflow run, nothing else logs them while its lease lasts, and the
    next logger's attempt, not the first, deletes the run it left unfinished and logs one afresh."""
    from datetime import UTC, datetime, timedelta

    from mlflow.entities import ViewType

    from evalstore.services import tracking

    class Died(BaseException):
        pass

    def dies(engine: Engine, ahead: tracking.AheadLog) -> bool:
        assert ahead.thread is not None
        ahead.thread.join()
        raise Died

    evaluation_id = _queued_sample(engine)
    monkeypatch.setattr(tracking, "finish_ahead", dies)
    with pytest.raises(Died):
        Worker(engine, WorkerSettings(mlflow=True)).process_one()
    held = _evaluation(engine, evaluation_id)
    assert (held.state, held.mlflow_state, held.mlflow_attempts) == ("done", "logging", 1)
    assert held.mlflow_lease_expires_at is not None
    [orphan] = _logged_runs(tracking_uri)
    assert orphan.info.status == "RUNNING"
    assert log_pending(engine).logged == []  # held under the lease

    with unit_of_work(engine) as session:  # the lease runs out
        session.execute(update(Evaluation).values(mlflow_lease_expires_at=datetime.now(UTC) - timedelta(seconds=1)))
    assert log_pending(engine).logged == [evaluation_id]
    [run] = _logged_runs(tracking_uri)
    logged = _evaluation(engine, evaluation_id)
    assert (run.info.run_id, run.info.status, logged.mlflow_state) == (logged.mlflow_run_id, "FINISHED", "logged")
    experiment = MlflowClient(tracking_uri).get_experiment_by_name("evalstore/test")
    assert experiment is not None
    [deleted] = MlflowClient(tracking_uri).search_runs([experiment.experiment_id], run_view_type=ViewType.DELETED_ONLY)
    assert deleted.info.run_id == orphan.info.run_id


def _ahead_held_back(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """The worker's ahead thread (named mlflow-<id>) waits before making its MLflow run, as it does
    while MLflow is slow to answer (its client retries for minutes): (reached, go)."""
    from evalstore.services import tracking

    reached, go = threading.Event(), threading.Event()
    log_run = tracking._log_run

    def held_back(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name.startswith("mlflow-"):
            reached.set()
            assert go.wait(60)
        return log_run(*args, **kwargs)

    monkeypatch.setattr(tracking, "_log_run", held_back)
    return reached, go


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "not within a minute"
        time.sleep(0.02)


def test_a_sync_that_claims_the_results_after_the_workers_lease_ran_out_logs_them_once(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLflow is slower than the lease the worker's results were stored under: a sync claims and
    logs them meanwhile, and the worker, finding its claim taken (a later attempt counted), deletes
    the run it was making instead of finishing a second one."""
    from datetime import UTC, datetime, timedelta

    evaluation_id = _queued_sample(engine)
    reached, go = _ahead_held_back(monkeypatch)
    worker = threading.Thread(target=Worker(engine, WorkerSettings(mlflow=True)).process_one)
    worker.start()
    assert reached.wait(60)
    _until(lambda: _evaluation(engine, evaluation_id).state == "done")
    with unit_of_work(engine) as session:  # the lease runs out
        session.execute(update(Evaluation).values(mlflow_lease_expires_at=datetime.now(UTC) - timedelta(seconds=1)))
    assert log_pending(engine).logged == [evaluation_id]  # `evalstore mlflow sync`: attempt 2, no run yet
    go.set()
    worker.join(60)
    [run] = _logged_runs(tracking_uri)
    logged = _evaluation(engine, evaluation_id)
    assert (run.info.run_id, run.info.status, logged.mlflow_state) == (logged.mlflow_run_id, "FINISHED", "logged")


def test_results_that_become_hidden_while_the_worker_logs_them_are_not_logged(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run becomes a submission to a hidden task after the worker's unit of work found it not
    embargoed and before the MLflow run is finished: the run is deleted and the results wait,
    pending, for the task's release."""
    from evalstore.services import tasks

    evaluation_id = _queued_sample(engine)
    tasks.create_task(engine, "secret", qrels_name="test", hidden=True)
    reached, go = _ahead_held_back(monkeypatch)
    worker = threading.Thread(target=Worker(engine, WorkerSettings(mlflow=True)).process_one)
    worker.start()
    assert reached.wait(60)
    _until(lambda: _evaluation(engine, evaluation_id).state == "done")
    tasks.attach_runs(engine, "secret", ["std"])
    go.set()
    worker.join(60)
    assert _logged_runs(tracking_uri) == []
    waiting = _evaluation(engine, evaluation_id)
    assert (waiting.mlflow_state, waiting.mlflow_run_id, waiting.mlflow_lease_expires_at) == ("pending", None, None)
    assert log_pending(engine).logged == []  # embargoed until the release
