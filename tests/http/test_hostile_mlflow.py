"""MLflow never shows what evalstore hides: a hidden task's results are not logged before the
task's release (MLflow has no roles: whoever reads it would read them), and are logged after."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow import MlflowClient
from sqlalchemy import Engine

from evalstore.db.models import Evaluation
from evalstore.db.session import read_only
from evalstore.services import access, store, tasks
from evalstore.services.tracking import deliver
from evalstore.services.worker import Worker, WorkerSettings
from tests.http.conftest import SAMPLE, as_principal, run_text


@pytest.fixture
def tracking_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mlflow_store: str) -> str:
    uri = mlflow_store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    monkeypatch.delenv("EVALSTORE_MLFLOW", raising=False)
    return uri


def _logged_run_names(uri: str) -> set[str]:
    client = MlflowClient(uri)
    experiments = client.search_experiments()
    return (
        {r.info.run_name for r in client.search_runs([e.experiment_id for e in experiments])} if experiments else set()
    )


def _mlflow_state(engine: Engine, evaluation_id: int) -> str:
    with read_only(engine) as session:
        evaluation = session.get(Evaluation, evaluation_id)
        assert evaluation is not None
        return evaluation.mlflow_state


def test_a_hidden_tasks_results_reach_mlflow_only_at_release(engine: Engine, tmp_path: Path, tracking_uri: str) -> None:
    store.import_qrels(engine, SAMPLE / "qrels.test", name="sample")
    access.add_user(engine, "owner", role="organiser")
    access.add_user(engine, "red", role="participant", team="red")
    tasks.create_task(engine, "secret", qrels_name="sample", hidden=True, owner="owner")
    tasks.create_task(engine, "open", qrels_name="sample", owner="owner")
    red = as_principal(engine, "red")
    ids = {}
    for task in ("secret", "open"):
        path = tmp_path / f"{task}.txt"
        path.write_text(run_text(tag=task))
        ids[task] = tasks.submit_run(engine, red, task, path, name=f"red-{task}").job.evaluation_id

    worker = Worker(engine, WorkerSettings())
    while worker.process_one():  # one batch (the tasks share their qrels), or one job after another
        pass
    assert sorted(worker.done) == sorted(ids.values())
    assert deliver(engine).logged == [ids["open"]]
    assert _logged_run_names(tracking_uri) == {"red-open"}  # the hidden task's run is not there
    assert _mlflow_state(engine, ids["secret"]) == "pending"
    assert deliver(engine).logged == []  # a sync does not log it either

    tasks.release_task(engine, "secret")
    assert deliver(engine).logged == [ids["secret"]]
    assert _logged_run_names(tracking_uri) == {"red-open", "red-secret"}
    assert _mlflow_state(engine, ids["secret"]) == "logged"
