"""MLflow delivery (the outbox): every aggregate, params, tags and artifacts; a worker stores its
results with their delivery pending and never talks to MLflow; the deliverer logs each result
exactly once (a half-done delivery is replaced or adopted by its run tags, never duplicated),
under a short lease it renews while it works, and never a hidden task's before its release."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag
from sqlalchemy import Engine, update

from evalstore.db.models import Evaluation
from evalstore.db.session import read_only, unit_of_work
from evalstore.services import jobs, kinds, store, tracking
from evalstore.services.jobs import EvaluationOptions
from evalstore.services.tracking import client as mlflow_client
from evalstore.services.tracking import deliver, pending_count, results_for, states
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
    """One evaluation done by a worker, and a delivery tried while MLflow was unreachable."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    store.import_qrels(engine, SAMPLE / "qrels.test", name="test")
    store.register_run(engine, SAMPLE / "results.test", name="std", system="smart", metadata={"k1": "0.9"})
    [ref] = jobs.enqueue(engine, qrels_name="test", run_names=["std"], options=EvaluationOptions(("all_trec",)))
    assert Worker(engine, WorkerSettings()).process_one()
    assert (_evaluation(engine, ref.evaluation_id).mlflow_state, pending_count(engine)) == ("pending", 1)
    report = deliver(engine)
    assert (report.logged, list(report.failed), report.left_pending) == ([], [ref.evaluation_id], 1)
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
    assert (offline.state, offline.mlflow_state, offline.mlflow_lease_expires_at) == ("done", "pending", None)
    assert "ConnectionError" in (offline.mlflow_error or "") or "127.0.0.1" in (offline.mlflow_error or "")
    assert pending_count(engine) == 1

    report = deliver(engine)
    assert (report.logged, report.failed, report.left_pending) == ([evaluated_offline], {}, 0)
    synced = _evaluation(engine, evaluated_offline)
    assert (synced.mlflow_state, synced.mlflow_error) == ("logged", None)
    assert deliver(engine).logged == []

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
    deliver(engine)
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
    deliver(engine)
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
    deliver(engine)
    first = _evaluation(engine, evaluated_offline).mlflow_run_id
    with unit_of_work(engine) as session:  # as if the process died before recording the success
        session.execute(update(Evaluation).values(mlflow_state="pending", mlflow_run_id=None))
    assert deliver(engine).logged == [evaluated_offline]
    assert _evaluation(engine, evaluated_offline).mlflow_run_id == first
    assert len(_logged_runs(tracking_uri)) == 1


def test_recomputed_results_are_logged_as_a_new_run(engine: Engine, evaluated_offline: int, tracking_uri: str) -> None:
    deliver(engine)
    jobs.enqueue(engine, qrels_name="test", run_names=["std"], options=EvaluationOptions(("all_trec",)), force=True)
    assert Worker(engine, WorkerSettings()).process_one()
    assert _evaluation(engine, evaluated_offline).mlflow_state == "pending"  # version 2, not yet delivered
    assert deliver(engine).logged == [evaluated_offline]
    recomputed = _evaluation(engine, evaluated_offline)
    assert (recomputed.results_version, recomputed.mlflow_state) == (2, "logged")
    runs = _logged_runs(tracking_uri)
    assert sorted(r.data.tags["evalstore.results_version"] for r in runs) == ["1", "2"]
    # the same results computed twice: the same content in both runs
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
    deliver(engine)
    experiment = client.get_experiment_by_name("evalstore/test")
    assert experiment is not None and experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    other = client.create_experiment("evalstore/other", tags={"mlflow.experimentKind": "finetuning"})
    store.import_qrels(engine, SAMPLE / "qrels.test", name="other")
    [ref] = jobs.enqueue(engine, qrels_name="other", run_names=["std"], options=EvaluationOptions(("AP",)))
    assert Worker(engine, WorkerSettings()).process_one()
    assert deliver(engine).logged == [ref.evaluation_id]
    assert client.get_experiment(other).tags["mlflow.experimentKind"] == "finetuning"
    assert _evaluation(engine, ref.evaluation_id).mlflow_state == "logged"


def _expire_lease(engine: Engine) -> None:
    """As if the deliverer holding the claim had died: its lease has run out."""
    from datetime import UTC, datetime, timedelta

    with unit_of_work(engine) as session:
        session.execute(update(Evaluation).values(mlflow_lease_expires_at=datetime.now(UTC) - timedelta(seconds=1)))


def _deleted_runs(uri: str) -> list[str]:
    from mlflow.entities import ViewType

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("evalstore/test")
    assert experiment is not None
    return [r.info.run_id for r in client.search_runs([experiment.experiment_id], run_view_type=ViewType.DELETED_ONLY)]


def test_a_worker_stores_its_results_pending_and_never_calls_mlflow(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluation_id = _queued_sample(engine)
    open_client, start_run = mlflow_client.open_client, mlflow_client.start_run

    def not_on_the_jobs_path(*args: object, **kwargs: object) -> None:
        raise AssertionError("the worker called MLflow")

    monkeypatch.setattr(mlflow_client, "open_client", not_on_the_jobs_path)
    monkeypatch.setattr(mlflow_client, "start_run", not_on_the_jobs_path)
    worker = Worker(engine, WorkerSettings())
    assert worker.process_one() and list(worker.done) == [evaluation_id]
    stored = _evaluation(engine, evaluation_id)
    assert (stored.state, stored.mlflow_state, stored.mlflow_error, stored.mlflow_attempts) == (
        "done",
        "pending",
        None,
        0,
    )

    monkeypatch.setattr(mlflow_client, "open_client", open_client)
    monkeypatch.setattr(mlflow_client, "start_run", start_run)
    assert deliver(engine).logged == [evaluation_id]
    [run] = _logged_runs(tracking_uri)
    logged = _evaluation(engine, evaluation_id)
    assert (run.info.run_id, run.info.status, logged.mlflow_state) == (logged.mlflow_run_id, "FINISHED", "logged")
    assert run.data.tags["evalstore.results_version"] == "1" and logged.mlflow_attempts == 1


def test_a_delivery_left_half_done_by_a_dead_deliverer_is_replaced_not_duplicated(
    engine: Engine, tracking_uri: str
) -> None:
    """The deliverer was killed after MLflow's run was created and before it was finished: the
    run shows RUNNING. Nothing delivers again while its lease lasts; then the next claim finds that
    run by its tags, deletes it and logs the results once."""
    from datetime import timedelta

    evaluation_id = _queued_sample(engine)
    assert Worker(engine, WorkerSettings()).process_one()
    assert states.claim(engine, None, timedelta(seconds=60)) is not None
    client = MlflowClient(tracking_uri)
    experiment = mlflow_client.experiment_id(client, tracking_uri, "evalstore/test")
    payload = kinds.get("ranking").mlflow_run(results_for(engine, evaluation_id))
    orphan = mlflow_client.start_run(client, experiment, payload)  # ... and then the deliverer died
    assert client.get_run(orphan).info.status == "RUNNING"
    assert deliver(engine).logged == []  # held under the dead deliverer's lease

    _expire_lease(engine)
    assert deliver(engine).logged == [evaluation_id]
    [run] = _logged_runs(tracking_uri)
    logged = _evaluation(engine, evaluation_id)
    assert (run.info.run_id, run.info.status, logged.mlflow_state) == (logged.mlflow_run_id, "FINISHED", "logged")
    assert run.info.run_id != orphan and _deleted_runs(tracking_uri) == [orphan]
    assert logged.mlflow_attempts == 2


def _start_run_held_back(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """A deliverer on a thread named ``slow`` waits before making its MLflow run, as it does while
    MLflow is slow to answer: (reached, go)."""
    reached, go = threading.Event(), threading.Event()
    start_run = mlflow_client.start_run

    def held_back(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "slow":
            reached.set()
            assert go.wait(60)
        return start_run(*args, **kwargs)

    monkeypatch.setattr(mlflow_client, "start_run", held_back)
    return reached, go


def _slow_deliverer(engine: Engine) -> tuple[threading.Thread, list[tracking.SyncReport]]:
    reports: list[tracking.SyncReport] = []
    thread = threading.Thread(target=lambda: reports.append(deliver(engine)), name="slow")
    thread.start()
    return thread, reports


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "not within a minute"
        time.sleep(0.02)


def test_a_deliverer_whose_claim_was_taken_over_deletes_its_run_and_the_results_are_logged_once(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slow deliverer's lease runs out (as if its heartbeat had stopped) and another claims and
    logs the results; the slow one, finding its claim taken (a later attempt counted), deletes
    the run it made instead of finishing a second one."""
    evaluation_id = _queued_sample(engine)
    assert Worker(engine, WorkerSettings()).process_one()
    reached, go = _start_run_held_back(monkeypatch)
    slow, reports = _slow_deliverer(engine)
    assert reached.wait(60)
    _expire_lease(engine)
    assert deliver(engine).logged == [evaluation_id]  # attempt 2
    go.set()
    slow.join(60)
    assert [r.logged for r in reports] == [[]]
    [run] = _logged_runs(tracking_uri)
    logged = _evaluation(engine, evaluation_id)
    assert (run.info.run_id, run.info.status, logged.mlflow_state) == (logged.mlflow_run_id, "FINISHED", "logged")
    assert len(_deleted_runs(tracking_uri)) == 1


def test_results_that_become_hidden_while_they_are_delivered_are_not_logged(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run becomes a submission to a hidden task after the claim and before the MLflow run is
    finished: the run is deleted and the results wait, pending, for the task's release."""
    from evalstore.services import tasks

    evaluation_id = _queued_sample(engine)
    tasks.create_task(engine, "secret", qrels_name="test", hidden=True)
    assert Worker(engine, WorkerSettings()).process_one()
    reached, go = _start_run_held_back(monkeypatch)
    slow, reports = _slow_deliverer(engine)
    assert reached.wait(60)
    tasks.attach_runs(engine, "secret", ["std"])
    go.set()
    slow.join(60)
    assert [r.logged for r in reports] == [[]] and _logged_runs(tracking_uri) == []
    waiting = _evaluation(engine, evaluation_id)
    assert (waiting.mlflow_state, waiting.mlflow_run_id, waiting.mlflow_lease_expires_at) == ("pending", None, None)
    assert deliver(engine).logged == []  # embargoed until the release
    tasks.release_task(engine, "secret")
    assert deliver(engine).logged == [evaluation_id]
    assert len(_logged_runs(tracking_uri)) == 1


def test_a_dead_deliverers_claim_runs_out_in_seconds_and_a_live_one_keeps_its_claim(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a 1 s lease: a claim nobody renews is delivered by another deliverer about a second
    later (not after minutes); a deliverer slower than its lease renews it while it works, so no
    other claims the results meanwhile."""
    from datetime import timedelta

    monkeypatch.setenv("EVALSTORE_MLFLOW_LEASE", "1")
    evaluation_id = _queued_sample(engine)
    assert Worker(engine, WorkerSettings()).process_one()
    assert states.claim(engine, None, timedelta(seconds=1)) is not None  # its deliverer dies at once
    claimed = time.monotonic()
    _until(lambda: deliver(engine).logged == [evaluation_id])
    assert time.monotonic() - claimed < 10

    jobs.enqueue(engine, qrels_name="test", run_names=["std"], options=EvaluationOptions(("all_trec",)), force=True)
    assert Worker(engine, WorkerSettings()).process_one()
    reached, go = _start_run_held_back(monkeypatch)
    slow, reports = _slow_deliverer(engine)
    assert reached.wait(60)
    held_since = time.monotonic()
    while time.monotonic() - held_since < 2.5:  # two and a half leases
        assert deliver(engine).logged == []
        time.sleep(0.1)
    go.set()
    slow.join(60)
    assert [r.logged for r in reports] == [[evaluation_id]]
    assert sorted(r.data.tags["evalstore.results_version"] for r in _logged_runs(tracking_uri)) == ["1", "2"]


def test_the_background_deliverer_backs_off_while_mlflow_is_down_and_catches_up(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluation_id = _queued_sample(engine)
    assert Worker(engine, WorkerSettings()).process_one()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # down
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("EVALSTORE_MLFLOW_BACKOFF", "1")
    deliverer = tracking.BackgroundDeliverer(engine, poll_interval=0.05).start()
    try:
        _until(lambda: deliverer.failures >= 2)
        assert _evaluation(engine, evaluation_id).mlflow_state == "pending"
        monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri)  # back
        _until(lambda: _evaluation(engine, evaluation_id).mlflow_state == "logged")
    finally:
        assert deliverer.stop()
    assert deliverer.failures == 0 and len(_logged_runs(tracking_uri)) == 1


def test_the_background_deliverer_opens_mlflow_as_it_starts_not_at_its_first_delivery(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing is pending: MLflow is opened all the same, so the first results that come in
    are delivered without its import; the lanes wait for that opening, not beside it."""
    opened: list[str] = []
    real_open = mlflow_client.open_client

    def counted(uri: str, clients: Any) -> Any:
        opened.append(uri)
        return real_open(uri, clients)

    monkeypatch.setattr(mlflow_client, "open_client", counted)
    deliverer = tracking.BackgroundDeliverer(engine, poll_interval=0.05).start()
    try:
        _until(lambda: deliverer.context.mlflow_clients.get(tracking_uri) is not None)
        assert opened == [tracking_uri] and pending_count(engine) == 0
        evaluation_id = _queued_sample(engine)
        assert Worker(engine, WorkerSettings()).process_one()
        _until(lambda: _evaluation(engine, evaluation_id).mlflow_state == "logged")
    finally:
        assert deliverer.stop()
    assert set(opened) == {tracking_uri} and len(_logged_runs(tracking_uri)) == 1


def test_a_background_deliverer_with_mlflow_off_opens_nothing(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    deliverer = tracking.BackgroundDeliverer(engine, poll_interval=0.05).start()
    time.sleep(0.3)
    assert deliverer.stop()
    assert deliverer.context.mlflow_clients.get(tracking_uri) is None


def test_the_back_off_doubles_up_to_its_bound(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    deliverer = tracking.BackgroundDeliverer(engine, poll_interval=0.25)
    waits = []
    for failures in (0, 1, 2, 3, 6, 7, 40):
        deliverer.failures = failures
        waits.append(deliverer.next_wait())
    assert waits == [0.25, 1, 2, 4, 32, 60, 60]
    monkeypatch.setenv("EVALSTORE_MLFLOW_BACKOFF", "5")
    assert deliverer.next_wait() == 5


def test_db_upgrade_makes_the_mlflow_store_and_the_experiments(cli: Any, mlflow_store: str) -> None:
    """So that the first delivery need not: MLflow's store (a copy of a made one here), and an
    experiment for every qrels set already stored."""
    assert cli("db", "upgrade").exit_code == 0
    assert cli("qrels", "import", str(SAMPLE / "qrels.test"), "--name", "test").exit_code == 0
    upgraded = cli("db", "upgrade")
    assert upgraded.exit_code == 0
    assert upgraded.stderr.endswith(f"MLflow store {mlflow_store} ready (1 experiments)\n")
    experiment = MlflowClient(mlflow_store).get_experiment_by_name("evalstore/test")
    assert experiment is not None and experiment.tags["mlflow.experimentKind"] == "custom_model_development"


def test_a_bad_lease_setting_is_refused_with_what_to_do(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cli.upgrade()
    monkeypatch.setenv("EVALSTORE_MLFLOW_LEASE", "soon")
    refused = cli("mlflow", "sync")
    assert refused.exit_code == 1
    assert refused.stderr.endswith(
        "Error: EVALSTORE_MLFLOW_LEASE='soon' is not a number of seconds from 1 to 3600; unset it for the default (15).\n"
    )


def _pending(engine: Engine, how_many: int = 5) -> list[int]:
    store.import_qrels(engine, SAMPLE / "qrels.test", name="test")
    names = [f"std{i}" for i in range(how_many)]
    for name in names:
        store.register_run(engine, SAMPLE / "results.test", name=name)
    refs = jobs.enqueue(engine, qrels_name="test", run_names=names, options=EvaluationOptions(("P@10",)))
    worker = Worker(engine, WorkerSettings(until_empty=True, index_runs=False))
    while worker.process_one():
        pass
    return sorted(ref.evaluation_id for ref in refs)


def test_deliveries_are_claimed_together_confirmed_by_reads_and_recorded_together(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five results: three claims (four, one, and the one that finds none left), each delivery
    confirmed by a read while its lease has more than half to run, each claim's finished runs
    recorded in one transaction: 5 write transactions where a claim, a confirmation and a record
    each made 16 (SQLite has one write lock, which the workers' commits queue on); every result
    once."""
    ids = _pending(engine)
    monkeypatch.setenv(
        "EVALSTORE_MLFLOW_LEASE", "600"
    )  # no renewal on a slow machine: the writes counted are the claim's
    monkeypatch.setattr(states, "SHARED_AMONG", 1)  # a claim of four out of five: not shared with other lanes
    writes = []
    real = states.unit_of_work

    def counted(bound: Engine) -> Any:
        writes.append(1)
        return real(bound)

    monkeypatch.setattr(states, "unit_of_work", counted)
    report = deliver(engine)
    assert sorted(report.logged) == ids and report.failed == {} and report.left_pending == 0
    assert len(writes) == 3 + 2
    runs = _logged_runs(tracking_uri)
    assert sorted(int(r.data.tags["evalstore.evaluation_id"]) for r in runs) == ids
    assert {_evaluation(engine, i).mlflow_run_id for i in ids} == {r.info.run_id for r in runs}


def test_a_claim_is_confirmed_by_a_read_only_while_half_its_lease_is_left(engine: Engine) -> None:
    """A read says "held" only for this claim, on results not embargoed, with half its lease
    left; otherwise the write confirmation renews the lease or says why not."""
    [first, *_] = _pending(engine, 1)
    lease = timedelta(seconds=60)
    [held] = states.claim_many(engine, None, lease, 1)
    assert held.evaluation_id == first and states.still_held(engine, held, lease)
    with unit_of_work(engine) as session:  # 20 s of 60 left, as when the lease keeper fell behind
        now = jobs.db_now(session)
        session.execute(
            update(Evaluation).where(Evaluation.id == first).values(mlflow_lease_expires_at=now + lease / 3)
        )
    assert not states.still_held(engine, held, lease)
    assert states.confirm(engine, held, lease) == "held" and states.still_held(engine, held, lease)  # renewed
    taken_over = states.Claim(held.evaluation_id, held.results_version, held.attempt + 1)
    assert not states.still_held(engine, taken_over, lease) and states.confirm(engine, taken_over, lease) == "lost"


class _Died(BaseException):
    """The deliverer's process ending where it stands (no handler of ours runs)."""


def test_a_deliverer_that_dies_before_recording_its_batch_has_the_runs_adopted_not_logged_again(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim's finished runs are recorded together when the claim is done: a deliverer that
    dies after MLflow finished them and before that write leaves them FINISHED and unrecorded.
    After the lease, the next claim adopts each by its tags: every result logged once."""
    ids = _pending(engine, 4)
    monkeypatch.setattr(states, "SHARED_AMONG", 1)  # the four in one claim

    def died(*_: object) -> list[bool]:
        raise _Died

    with monkeypatch.context() as dying, pytest.raises(_Died):
        dying.setattr(states, "mark_all_logged", died)
        deliver(engine)
    finished = {r.info.run_id for r in _logged_runs(tracking_uri)}
    assert len(finished) == 4 and {_evaluation(engine, i).mlflow_state for i in ids} == {"logging"}
    assert deliver(engine).logged == []  # held under the dead deliverer's lease
    _expire_lease(engine)
    assert sorted(deliver(engine).logged) == ids
    assert {r.info.run_id for r in _logged_runs(tracking_uri)} == finished and _deleted_runs(tracking_uri) == []
    assert {_evaluation(engine, i).mlflow_run_id for i in ids} == finished


def test_the_last_deliveries_are_claimed_one_at_a_time_for_the_other_lanes_to_share(engine: Engine) -> None:
    """A lane claims up to four at once while many wait, never more than a quarter of those
    claimable: the last few are spread over the lanes, not delivered one after the other by one."""
    ids = _pending(engine, 9)
    lease = timedelta(seconds=60)
    assert [c.evaluation_id for c in states.claim_many(engine, None, lease, 4)] == ids[:2]  # a quarter of 9
    assert [c.evaluation_id for c in states.claim_many(engine, None, lease, 4)] == ids[2:3]  # of 7: one
    assert [c.evaluation_id for c in states.claim_many(engine, ids[5:], lease, 4)] == ids[5:6]


def test_a_failure_within_a_claim_gives_it_and_the_rest_back_and_keeps_the_ones_before(
    engine: Engine, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _pending(engine)
    real = mlflow_client.start_run
    started = []

    def third_fails(client: Any, experiment: str, payload: Any) -> str:
        started.append(1)
        if len(started) == 3:
            raise ConnectionError("MLflow went away")
        return real(client, experiment, payload)

    monkeypatch.setattr(mlflow_client, "start_run", third_fails)
    report = deliver(engine)
    assert report.logged == ids[:2] and list(report.failed) == [ids[2]]
    states_now = [(_evaluation(engine, i).mlflow_state, _evaluation(engine, i).mlflow_error) for i in ids]
    assert states_now[:2] == [("logged", None)] * 2
    assert states_now[2] == ("pending", "ConnectionError: MLflow went away")
    assert states_now[3:] == [("pending", None)] * 2  # given back untried, not failed
    assert sorted(deliver(engine).logged) == ids[2:]
    assert len(_logged_runs(tracking_uri)) == 5
