"""The batching worker: queued ranking jobs with one qrels and one set of options are claimed and
computed together and stored each as its own evaluation, exactly as one at a time (every stored
row, bit for bit, and what MLflow receives); a failing job fails alone, a dead worker's batch is
claimed again, the bound holds, and other kinds still go one at a time. SQLite and PostgreSQL."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mlflow import MlflowClient
from sqlalchemy import Engine, select

from evalstore.backends import Backend
from evalstore.db.models import AggregateResult, Evaluation, EvaluationQueries, QrelsSet, QueryValues, Run
from evalstore.db.repositories import PerQueryValues
from evalstore.db.session import read_only
from evalstore.metrics import stacked
from evalstore.services import jobs, store, tracking
from evalstore.services import labels as classification
from evalstore.services.jobs import BatchBound, EvaluationOptions
from evalstore.services.kinds import predictions
from evalstore.services.worker import Worker, WorkerSettings
from tests.factories import SYNTHETIC_TOPICS, synthetic_qrels_text, synthetic_run_text

ONE_AT_A_TIME = BatchBound(jobs=1)


def _runs(folder: Path) -> dict[str, str]:
    """Five runs unlike each other: full ones, one missing topics, one cut to 6 documents a topic
    (another depth, stacked apart), one with ties and a topic the qrels lack."""
    cut = "".join(line + "\n" for line in synthetic_run_text(3, "cut").splitlines() if int(line.split()[3]) <= 6)
    tied = (
        "".join(  # scores tied in pairs (ranked by docno), and a topic the qrels lack
            f"{t} Q0 d{d} {d + 1} {(12 - d) // 2}.0 tied\n" for t in SYNTHETIC_TOPICS for d in range(12)
        )
        + "999 Q0 d1 1 5.0 tied\n"
    )
    texts = {
        "full1": synthetic_run_text(1, "full1"),
        "full2": synthetic_run_text(2, "full2"),
        "cut": cut,
        "tied": tied,
        "half": synthetic_run_text(5, "half", SYNTHETIC_TOPICS[::2]),
    }
    for name, text in texts.items():
        (folder / f"{name}.run").write_text(text)
    return texts


@pytest.fixture
def two_qrels(engine: Engine, tmp_path: Path) -> Engine:
    """The same judgments under two names, 'batched' and 'alone', and five runs."""
    (tmp_path / "qrels").write_text(synthetic_qrels_text())
    for name in ("batched", "alone"):
        store.import_qrels(engine, tmp_path / "qrels", name=name)
    for name in _runs(tmp_path):
        store.register_run(engine, tmp_path / f"{name}.run", name=name, system="s", metadata={"k1": "0.9"})
    return engine


def _worker(engine: Engine, bound: BatchBound, **settings: Any) -> Worker:
    return Worker(
        engine,
        WorkerSettings(batch=bound, until_empty=True, poll_interval=0.01, index_runs=False, **settings),
    )


def _stored(engine: Engine, qrels_name: str) -> dict[str, Any]:
    """Every row stored for the evaluations against ``qrels_name``, by run name; what may differ
    between two evaluations of the same run (ids, times, the worker) left out."""
    found: dict[str, Any] = {}
    with read_only(engine) as session:
        rows = session.execute(
            select(Evaluation, Run.name)
            .join(Run, Run.id == Evaluation.run_id)
            .join(QrelsSet, QrelsSet.id == Evaluation.qrels_id)
            .where(QrelsSet.name == qrels_name)
        )
        for evaluation, run_name in rows:
            eid = evaluation.id
            found[run_name] = {
                "evaluation": {
                    column: getattr(evaluation, column)
                    for column in (
                        "state",
                        "attempts",
                        "max_attempts",
                        "error",
                        "evalstore_version",
                        "run_hash",
                        "qrels_hash",
                        "options_hash",
                        "options",
                        "measures",
                        "results_version",
                        "mlflow_state",
                        "mlflow_error",
                        "mlflow_attempts",
                        "settings",
                        "backend",
                    )
                },
                "queries": session.scalar(
                    select(EvaluationQueries.query_ids).where(EvaluationQueries.evaluation_id == eid)
                ),
                "values": sorted(
                    (row.measure, row.numbers, row.texts)
                    for row in session.scalars(select(QueryValues).where(QueryValues.evaluation_id == eid))
                ),
                "aggregates": sorted(
                    (
                        row.measure,
                        np.float64(row.value).tobytes() if row.value is not None else None,
                        row.text_value,
                        row.query_count,
                    )
                    for row in session.scalars(select(AggregateResult).where(AggregateResult.evaluation_id == eid))
                ),
            }
    return found


def _mlflow_runs(uri: str, experiment: str, folder: Path) -> dict[str, Any]:
    """What MLflow holds for each run evaluated on ``experiment`` (the qrels), less what names
    the evaluation and its qrels."""
    folder.mkdir()
    client = MlflowClient(uri)
    found = client.get_experiment_by_name(f"evalstore/{experiment}")
    assert found is not None
    runs = {}
    for run in client.search_runs([found.experiment_id]):
        tags = {k: v for k, v in run.data.tags.items() if k not in ("evalstore.evaluation_id", "evalstore.qrels")}
        tags = {k: v for k, v in tags.items() if not k.startswith("mlflow.")}
        artifacts = sorted(a.path for a in client.list_artifacts(run.info.run_id))
        text = Path(client.download_artifacts(run.info.run_id, "trec_eval.txt", str(folder))).read_text()
        runs[run.info.run_name] = (run.info.status, run.data.metrics, run.data.params, tags, artifacts, text)
    return runs


def test_batched_results_equal_one_at_a_time_bit_for_bit(
    two_qrels: Engine, mlflow_store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = two_qrels
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_store)
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    batched = [r.evaluation_id for r in jobs.enqueue(engine, qrels_name="batched", run_names=None)]
    alone = [r.evaluation_id for r in jobs.enqueue(engine, qrels_name="alone", run_names=None)]

    worker = Worker(engine, WorkerSettings(index_runs=False), only=batched)
    assert worker.process_one()
    assert sorted(worker.done) == sorted(batched)  # all five in one batch (two depths: two stacks)
    one_by_one = Worker(engine, WorkerSettings(index_runs=False, batch=ONE_AT_A_TIME), only=alone)
    for done in range(1, 6):
        assert one_by_one.process_one()
        assert len(one_by_one.done) == done
    # the jobs are done with their delivery pending; the deliverer logs each of them once
    assert {run["evaluation"]["mlflow_state"] for run in _stored(engine, "batched").values()} == {"pending"}
    assert sorted(tracking.deliver(engine).logged) == sorted(batched + alone)

    with_batching, without = _stored(engine, "batched"), _stored(engine, "alone")
    assert sorted(with_batching) == ["cut", "full1", "full2", "half", "tied"]
    assert with_batching == without
    assert {run["evaluation"]["mlflow_state"] for run in with_batching.values()} == {"logged"}
    assert with_batching["half"]["queries"] == SYNTHETIC_TOPICS  # missing topics scored 0, as alone
    logged = _mlflow_runs(mlflow_store, "batched", tmp_path / "batched")
    assert sorted(logged) == sorted(with_batching)
    assert logged == _mlflow_runs(mlflow_store, "alone", tmp_path / "alone")


def test_a_failing_run_fails_alone_and_the_rest_store(two_qrels: Engine, tmp_path: Path) -> None:
    engine = two_qrels
    (tmp_path / "elsewhere.run").write_text(synthetic_run_text(9, "elsewhere", ["1", "2"]))
    store.register_run(engine, tmp_path / "elsewhere.run", name="elsewhere")
    skip = EvaluationOptions(("AP", "nDCG@10"), missing_topics="skip")
    refs = jobs.enqueue(engine, qrels_name="batched", run_names=["full1", "elsewhere", "cut"], options=skip)
    worker = _worker(engine, BatchBound())
    assert worker.process_one() and not worker.process_one()
    states = jobs.job_states(engine, [r.evaluation_id for r in refs])
    assert [states[r.evaluation_id] for r in refs] == ["done", "failed", "done"]
    with read_only(engine) as session:
        failed = session.get(Evaluation, refs[1].evaluation_id)
        assert failed is not None and failed.error == (
            "Run 'elsewhere' and qrels 'batched' share no topic; check the topic ids."
        )


def test_an_error_in_the_stacked_kernels_leaves_each_job_to_itself(
    two_qrels: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should the one pass fail, the jobs are computed alone: the error goes with its own job."""
    engine = two_qrels

    def broken(*_: Any, **__: Any) -> Any:
        raise MemoryError("the stack did not fit")

    monkeypatch.setattr("evalstore.services.kinds.ranking.batch.compute_stacked", broken)
    refs = jobs.enqueue(engine, qrels_name="batched", run_names=["full1", "full2"], options=EvaluationOptions(("AP",)))
    worker = _worker(engine, BatchBound())
    assert worker.process_one()
    assert sorted(worker.done) == sorted(r.evaluation_id for r in refs)


def test_a_dead_workers_batch_is_claimed_again(two_qrels: Engine) -> None:
    engine = two_qrels
    refs = jobs.enqueue(engine, qrels_name="batched", run_names=None, options=EvaluationOptions(("AP",)))
    # a worker claims the five and dies: its leases run out at once
    dead = jobs.claim_batch(engine, "dead-worker", lease=timedelta(0))
    assert sorted(job.evaluation_id for job in dead) == sorted(r.evaluation_id for r in refs)
    worker = _worker(engine, BatchBound())
    assert worker.process_one()
    assert sorted(worker.done) == sorted(r.evaluation_id for r in refs)
    with read_only(engine) as session:
        rows = session.scalars(select(Evaluation).where(Evaluation.id.in_(worker.done))).all()
        assert {(row.state, row.attempts, row.worker_id) for row in rows} == {("done", 2, worker.worker_id)}
    # the dead worker's results could not be stored now
    with pytest.raises(jobs.JobLost):
        jobs.complete(engine, dead[0], *_nothing())


def _nothing() -> tuple[PerQueryValues, list[Any]]:
    return PerQueryValues([], {}, {}), []


def test_the_bound_holds_in_jobs_and_in_rows(two_qrels: Engine) -> None:
    engine = two_qrels
    options = EvaluationOptions(("AP",))
    jobs.enqueue(engine, qrels_name="batched", run_names=None, options=options)
    sizes = []
    while claimed := jobs.claim_batch(engine, "w", bound=BatchBound(jobs=2)):
        sizes.append(len(claimed))
    assert sizes == [2, 2, 1]
    jobs.enqueue(engine, qrels_name="alone", run_names=None, options=options)
    # 96 rows a run (8 topics x 12), 48 for 'cut' and 'half': at most 200 rows a batch
    sizes = []
    while claimed := jobs.claim_batch(engine, "w", bound=BatchBound(jobs=16, rows=200)):
        with read_only(engine) as session:
            rows = [store_rows(session, job.run_id) for job in claimed]
        assert sum(rows) <= 200
        sizes.append(len(claimed))
    assert sum(sizes) == 5 and max(sizes) > 1


def test_a_batch_is_no_more_than_a_fair_share_among_live_workers(two_qrels: Engine) -> None:
    engine = two_qrels
    jobs.enqueue(engine, qrels_name="batched", run_names=None, options=EvaluationOptions(("AP",)))
    jobs.register_worker(engine, "other")  # alive: it takes its share of the five
    sizes = []
    while claimed := jobs.claim_batch(engine, "w"):
        sizes.append(len(claimed))
    assert sizes == [3, 1, 1]  # then one each


def test_the_serve_worker_waits_for_a_burst_to_settle_then_claims_it_in_one_batch(two_qrels: Engine) -> None:
    """The worker inside `evalstore serve` claims nothing while jobs keep arriving (the server
    and it share the cores and SQLite's write lock), then the burst in one batch; a job that has
    waited `settle_longest` is claimed whatever arrives."""
    engine = two_qrels
    assert jobs.arrivals_settle_in(engine, 0.5, 10.0) == 0.0  # nothing queued
    refs = jobs.enqueue(engine, qrels_name="batched", run_names=None, options=EvaluationOptions(("AP",)))
    assert 0.3 < jobs.arrivals_settle_in(engine, 0.5, 10.0) <= 0.5  # they just arrived
    assert jobs.arrivals_settle_in(engine, 0.5, 0.0) == 0.0  # the oldest has waited long enough
    worker = Worker(engine, WorkerSettings(settle=0.3))
    started = time.monotonic()
    assert worker.process_one()
    assert time.monotonic() - started >= 0.25  # it waited for the quiet
    assert sorted(worker.done) == sorted(r.evaluation_id for r in refs)  # then took the five at once
    assert jobs.arrivals_settle_in(engine, 0.5, 10.0) == 0.0


def store_rows(session: Any, run_id: int | None) -> int:
    run = session.get(Run, run_id)
    assert run is not None
    return run.row_count


def test_other_kinds_and_other_options_go_one_at_a_time(two_qrels: Engine, tmp_path: Path) -> None:
    engine = two_qrels
    (tmp_path / "gold.csv").write_text("item_id,label\n1,a\n2,b\n3,a\n")
    (tmp_path / "p.csv").write_text("item_id,label\n1,a\n2,a\n3,a\n")
    classification.import_labels(engine, tmp_path / "gold.csv", name="gold")
    for name in ("p1", "p2"):
        classification.register_predictions(engine, tmp_path / "p.csv", name=name, labels_name="gold")
    predicted = predictions.enqueue(engine, labels_name="gold", prediction_names=["p1", "p2"])
    ap = jobs.enqueue(engine, qrels_name="batched", run_names=["full1"], options=EvaluationOptions(("AP",)))
    cut = jobs.enqueue(
        engine, qrels_name="batched", run_names=["full2"], options=EvaluationOptions(("AP",), max_docs=5)
    )
    more = jobs.enqueue(engine, qrels_name="batched", run_names=["cut", "half"], options=EvaluationOptions(("AP",)))
    on_duckdb = jobs.enqueue(
        engine, qrels_name="batched", run_names=["tied"], options=EvaluationOptions(("AP",)), backend=Backend("duckdb")
    )
    batches = []
    while claimed := jobs.claim_batch(engine, "w"):
        batches.append([job.evaluation_id for job in claimed])
    ids = [[r.evaluation_id for r in refs] for refs in (predicted, ap, cut, more, on_duckdb)]
    assert batches == [
        [ids[0][0]],
        [ids[0][1]],
        [ids[1][0], *ids[3]],  # AP, with the later AP jobs; not with -M 5's
        ids[2],
        ids[4],
    ]


def test_the_worker_command_defaults_are_the_bound() -> None:
    """`evalstore worker` writes the defaults out (it does not import the services to parse)."""
    import inspect

    from evalstore.cli.worker import worker

    defaults = inspect.signature(worker).parameters
    assert defaults["batch_jobs"].default == jobs.BATCH_JOBS
    assert defaults["batch_rows"].default == jobs.BATCH_ROWS
    assert jobs.BATCH_ROWS == stacked.STACK_CELLS


def test_the_serve_worker_takes_the_bound_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalstore.errors import InvalidParameterError

    monkeypatch.delenv("EVALSTORE_BATCH_JOBS", raising=False)
    monkeypatch.delenv("EVALSTORE_BATCH_ROWS", raising=False)
    assert jobs.batch_bound_from_env() == BatchBound()
    monkeypatch.setenv("EVALSTORE_BATCH_JOBS", "1")
    monkeypatch.setenv("EVALSTORE_BATCH_ROWS", "1000")
    assert jobs.batch_bound_from_env() == BatchBound(jobs=1, rows=1000)
    monkeypatch.setenv("EVALSTORE_BATCH_JOBS", "many")
    with pytest.raises(InvalidParameterError) as refused:
        jobs.batch_bound_from_env()
    assert str(refused.value) == (
        "EVALSTORE_BATCH_JOBS='many' is not a whole number from 1 to 10000; unset it for the default (16)."
    )


def test_a_second_stop_signal_gives_back_the_jobs_not_yet_stored(
    two_qrels: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalstore.services.worker import StopNow

    engine = two_qrels
    refs = jobs.enqueue(engine, qrels_name="batched", run_names=None, options=EvaluationOptions(("AP",)))
    real_store = jobs.store_results
    stored = []

    def stop_at_the_second(*args: Any, **kwargs: Any) -> None:
        if stored:
            raise StopNow
        stored.append(real_store(*args, **kwargs))

    monkeypatch.setattr(jobs, "store_results", stop_at_the_second)
    worker = _worker(engine, BatchBound())
    with pytest.raises(StopNow):
        worker.process_one()
    with read_only(engine) as session:
        rows = session.scalars(select(Evaluation).where(Evaluation.id.in_([r.evaluation_id for r in refs]))).all()
        states = sorted((row.state, row.attempts, row.worker_id) for row in rows)
    assert states == [("done", 1, worker.worker_id)] + [("queued", 0, None)] * 4
