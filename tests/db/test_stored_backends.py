"""`evaluate --backend duckdb|spark`: a stored run or prediction set evaluated by DuckDB or Spark
(read from the store a batch at a time) gets the local engine's numbers, is stored and read back
like any evaluation, on SQLite and PostgreSQL.

Ranking values are compared to the bit; so are AUC, GAUC and every confusion-matrix measure,
overall and per group. Average precision, log loss and the Brier score are floating sums each
engine takes in its own order: to 1e-12.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from evalstore.backends import Backend
from evalstore.cli import app
from evalstore.errors import InvalidParameterError
from evalstore.metrics.classification import CURVE_MEASURES
from evalstore.services import jobs, labels, store
from evalstore.services.kinds.ranking import results
from evalstore.services.orchestration import RankingRequest, evaluate, evaluate_predictions, evaluate_runs
from tests.cli.usage import usage_message
from tests.conftest import Templates, migrated_copy, shared_path

SUMMED = {"average_precision", "log_loss", "brier"}  # floating sums: equal to rounding


@pytest.fixture(params=["duckdb", "spark"])
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == "spark":
        request.getfixturevalue("spark")  # the test session's local[2] Spark, or a skip with the reason
        return Backend("spark", master="local[2]")
    return Backend("duckdb", memory_limit="500MB")


def _tied_run(path: Path) -> Path:
    """Scores with many ties across 3 of the golden topics plus one the qrels lack."""
    rng = np.random.default_rng(7)
    lines = [
        f"{topic} Q0 {doc} 0 {rng.integers(0, 4) / 2} tied\n"
        for topic in ("301", "302", "303", "999")
        for doc in rng.choice(
            [f"FBIS3-{i}" for i in range(10, 60)] + ["FBIS3-10010", "FR940104-0-00001"], 40, replace=False
        )
    ]
    path.write_text("".join(lines))
    return path


@pytest.mark.parametrize(
    ("run", "options"),
    [
        ("golden", {}),
        ("golden", {"max_docs": 100, "judged_only": True, "relevance_level": 2}),
        ("tied", {"missing_topics": "skip"}),
        ("robust03", {}),  # a real TREC 2003 run: 100 topics x 1,000, 128k judgments
    ],
)
def test_a_stored_run_gets_the_local_bits_on_every_backend(
    engine: Engine, backend: Backend, tmp_path: Path, run: str, options: dict
) -> None:  # type: ignore[type-arg]
    if run == "robust03" and backend.name == "spark" and engine.dialect.name == "postgresql":
        # Spark reads a stored run the same way from either database (the golden and tied runs
        # show it on PostgreSQL); its JVM on a 100k-row run is the suite's single largest cost
        pytest.skip("Spark on robust03 runs on SQLite; on PostgreSQL with the golden and tied runs")
    if run == "robust03":
        store.import_qrels(engine, shared_path("robust03", "robust03_qrels.txt"), name="q")
        path = shared_path("robust03", "runs", "input.pircRBa1.gz")
    else:
        store.import_qrels(engine, shared_path("trec_eval_test", "qrels.test"), name="q")
        path = shared_path("trec_eval_test", "results.test") if run == "golden" else _tied_run(tmp_path / "tied.run")
    store.register_run(engine, path, name="r")
    measures = ["all_trec", "nDCG@10", "RR@10", "RBP(p=0.8)", "ERR@20", "Judged@10", "infAP"]
    [local] = evaluate_runs(engine, qrels_name="q", run_names=["r"], measures=measures, **options)
    expected = results(engine, qrels_name="q", run_name="r")
    [other] = evaluate_runs(
        engine, qrels_name="q", run_names=["r"], measures=measures, force=True, backend=backend, **options
    )
    got = results(engine, qrels_name="q", run_name="r")
    assert other.evaluation_id == local.evaluation_id and not other.reused
    assert got.frame.equals(expected.frame) and got.aggregates == expected.aggregates
    assert len(got.topics) >= 3 and len(got.measures) > 100  # not two empty results
    assert jobs.show_job(engine, other.evaluation_id).backend == backend.name


def test_known_qrels_are_joined_by_the_backend_too(sqlite_engine: Engine, tmp_path: Path) -> None:
    store.import_qrels(sqlite_engine, shared_path("trec_eval_test", "qrels.test"), name="q")
    known = tmp_path / "known.qrels"
    lines = shared_path("trec_eval_test", "qrels.test").read_text().splitlines(True)
    known.write_text("".join(line for i, line in enumerate(lines) if line.split()[3] != "0" and i % 2))  # some
    store.import_qrels(sqlite_engine, known, name="known")
    store.register_run(sqlite_engine, shared_path("trec_eval_test", "results.test"), name="r")
    options = jobs.EvaluationOptions(
        ("AP", "Coverage", "Novelty", "RelativeRecall", "RecallEffort"), known_qrels="known"
    )
    evaluate(sqlite_engine, RankingRequest("q", ["r"], options), wait=True)
    expected = results(sqlite_engine, qrels_name="q", run_name="r")
    evaluate(sqlite_engine, RankingRequest("q", ["r"], options, force=True, backend=Backend("duckdb")), wait=True)
    got = results(sqlite_engine, qrels_name="q", run_name="r")
    assert got.frame.equals(expected.frame) and got.aggregates == expected.aggregates
    assert 0 < got.aggregates["Coverage"] < 1


def _binary_set(tmp_path: Path) -> tuple[Path, Path]:
    """3,000 items in 400 groups (many of one class, some of one item), scores tied in steps of
    0.05, a predicted label that disagrees with the score's 0.5 cut."""
    rng = np.random.default_rng(3)
    n = 3000
    y = rng.integers(0, 2, n)
    score = np.round(np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0, 1) / 0.05) * 0.05
    group = rng.integers(0, 400, n)
    gold = tmp_path / "gold.csv"
    gold.write_text(
        "item_id,label,group\n" + "".join(f"i{i},{'yes' if y[i] else 'no'},u{group[i]}\n" for i in range(n))
    )
    predicted = tmp_path / "pred.csv"
    predicted.write_text(
        "item_id,score,label\n"
        + "".join(f"i{i},{score[i]:.2f},{'yes' if score[i] > 0.42 else 'no'}\n" for i in range(n))
    )
    return gold, predicted


@pytest.mark.parametrize("threshold", [None, 0.35])
def test_stored_predictions_get_the_local_numbers_on_every_backend(
    engine: Engine, backend: Backend, tmp_path: Path, threshold: float | None
) -> None:
    gold, predicted = _binary_set(tmp_path)
    labels.import_labels(engine, gold, name="clicks")
    labels.register_predictions(engine, predicted, name="model", labels_name="clicks", probabilities=True)
    [local] = evaluate_predictions(engine, labels_name="clicks", prediction_names=["model"], threshold=threshold)
    [other] = evaluate_predictions(
        engine, labels_name="clicks", prediction_names=["model"], threshold=threshold, force=True, backend=backend
    )
    assert other.created and other.evaluation_id == local.evaluation_id
    left_out = {name for name in local.aggregates if name.startswith(CURVE_MEASURES) or name in CURVE_MEASURES}
    assert set(other.aggregates) == set(local.aggregates) - left_out
    assert set(other.settings["not_computed"]) == set(CURVE_MEASURES)
    for name, value in other.aggregates.items():
        if name in SUMMED:
            assert value == pytest.approx(local.aggregates[name], rel=1e-12, abs=0), name
        else:
            assert value == local.aggregates[name], name
    assert other.settings["confusion"] == local.settings["confusion"]
    assert other.settings.get("threshold") == local.settings.get("threshold")
    assert other.per_group is not None and local.per_group is not None
    assert list(other.per_group.columns) == list(local.per_group.columns)
    assert other.per_group.index.tolist() == local.per_group.index.tolist()
    for name in other.per_group.columns:
        mine, theirs = other.per_group[name].to_numpy(), local.per_group[name].to_numpy()
        if name in SUMMED:
            np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=0)
        else:
            assert np.array_equal(mine, theirs, equal_nan=True), name
    assert 0.5 < other.aggregates["auc"] < 1 and other.aggregates["gauc_groups_skipped"] > 0
    assert other.settings["backend"] == backend.name


@pytest.mark.parametrize(
    ("gold", "predictions", "options", "message"),
    [
        (
            "item_id,label\n1,a\n2,b\n3,c\n",
            "item_id,label\n1,a\n2,b\n3,c\n",
            {},
            "The duckdb backend evaluates binary predictions with one score per item (it computes AUC, GAUC, "
            "average precision, log loss, Brier score and the confusion-matrix measures), and gold labels 'g' have "
            "3 classes. Leave --backend out: the local engine computes the whole suite.",
        ),
        (
            "item_id,label\n1,a\n2,b\n",
            "item_id,score\n1,0.2\n2,0.9\n",
            {"threshold": "youden"},
            "The duckdb backend evaluates binary predictions with one score per item (it computes AUC, GAUC, "
            "average precision, log loss, Brier score and the confusion-matrix measures), and the threshold rule "
            "'youden' searches the whole ROC curve. Give --threshold a number, or leave --backend out: the local "
            "engine computes the whole suite.",
        ),
        (
            "item_id,label\n1,a\n2,b\n",
            "item_id,label\n1,a\n2,b\n",
            {},
            "The duckdb backend evaluates binary predictions with one score per item (it computes AUC, GAUC, "
            "average precision, log loss, Brier score and the confusion-matrix measures); 'p' is predictions without "
            "a score column. Leave --backend out: the local engine evaluates it.",
        ),
    ],
)
def test_what_the_out_of_core_suite_cannot_honour_is_refused_before_queueing(
    sqlite_engine: Engine, write, gold: str, predictions: str, options: dict, message: str
) -> None:  # type: ignore[no-untyped-def,type-arg]
    labels.import_labels(sqlite_engine, write("gold.csv", gold), name="g")
    labels.register_predictions(sqlite_engine, write("p.csv", predictions), name="p", labels_name="g")
    with pytest.raises(InvalidParameterError) as refused:
        evaluate_predictions(
            sqlite_engine, labels_name="g", prediction_names=["p"], backend=Backend("duckdb"), **options
        )
    assert refused.value.on_the_command_line() == message
    assert refused.value.remedy is not None and str(refused.value) == message.split(" Give --")[0].split(" Leave --")[0]
    assert jobs.list_jobs(sqlite_engine) == []


def test_backends_take_relevance_qrels_only(sqlite_engine: Engine, write) -> None:  # type: ignore[no-untyped-def]
    store.import_qrels(sqlite_engine, write("web.qrels", "1 1 a 1\n1 2 b 1\n"), name="web", kind="subtopics")
    store.register_run(sqlite_engine, write("r.run", "1 Q0 a 1 2.0 r\n1 Q0 b 2 1.0 r\n"), name="r")
    with pytest.raises(InvalidParameterError) as refused:
        evaluate_runs(sqlite_engine, qrels_name="web", run_names=["r"], backend=Backend("spark"))
    assert refused.value.on_the_command_line() == (
        "The spark backend joins runs with relevance judgments; qrels 'web' hold subtopic "
        "judgments, which the local engine evaluates. Leave --backend out."
    )


def test_a_worker_claims_a_job_with_its_backend_and_a_new_request_changes_a_waiting_one(sqlite_engine: Engine) -> None:
    store.import_qrels(sqlite_engine, shared_path("trec_eval_test", "qrels.test"), name="q")
    store.register_run(sqlite_engine, shared_path("trec_eval_test", "results.test"), name="r")
    spark = Backend("spark", master="spark://head:7077", staging="/shared/evalstore")
    jobs.enqueue(sqlite_engine, qrels_name="q", run_names=["r"], backend=Backend("duckdb"))
    [ref] = jobs.enqueue(sqlite_engine, qrels_name="q", run_names=["r"], backend=spark)
    assert ref.outcome == "already queued"
    claimed = jobs.claim(sqlite_engine, "w")
    assert claimed is not None and claimed.backend == spark


def test_cli_evaluate_with_a_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, templates: Templates) -> None:
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    monkeypatch.setenv("EVALSTORE_MLFLOW", "off")
    runner = CliRunner()
    url = ["--database-url", migrated_copy(templates, "sqlite", tmp_path)]  # as `db upgrade` leaves it

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(app, [*url, *args])

    assert invoke("qrels", "import", str(shared_path("trec_eval_test", "qrels.test")), "--name", "q").exit_code == 0
    assert invoke("runs", "register", str(shared_path("trec_eval_test", "results.test")), "--name", "r").exit_code == 0
    local = invoke("evaluate", "--qrels", "q", "--run", "r", "--wait", "--format", "csv")
    assert local.exit_code == 0, local.stderr
    again = invoke(
        "evaluate",
        "--qrels",
        "q",
        "--run",
        "r",
        "--wait",
        "--format",
        "csv",
        "--force",
        "--backend",
        "duckdb",
        "--memory-limit",
        "300MB",
    )
    assert again.exit_code == 0, again.stderr
    assert again.stdout == local.stdout and ",done,0.1785450603965694" in local.stdout
    shown = invoke("jobs", "show", "1", "--format", "json")
    assert '"backend": "duckdb"' in shown.stdout
    wrong = invoke("evaluate", "--qrels", "q", "--run", "r", "--backend", "spark", "--memory-limit", "1GB")
    assert wrong.exit_code == 2  # a usage error: options that do not go together
    assert usage_message(wrong.stderr) == "--memory-limit is a setting of --backend duckdb; this is --backend spark."
    unknown = invoke("evaluate", "--qrels", "q", "--run", "r", "--backend", "ray")
    assert unknown.exit_code == 2
    assert usage_message(unknown.stderr) == (
        "Invalid value for '--backend': Value error, 'ray' is not one of 'local', 'duckdb', 'spark'."
    )


@pytest.mark.usefixtures("mlflow_store")  # a made store at tmp_path/mlflow.db
def test_a_backend_evaluation_is_logged_to_mlflow_like_any(
    sqlite_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("EVALSTORE_HOME", str(tmp_path))
    gold, predicted = _binary_set(tmp_path)
    labels.import_labels(sqlite_engine, gold, name="clicks")
    labels.register_predictions(sqlite_engine, predicted, name="model", labels_name="clicks", probabilities=True)
    [result] = evaluate_predictions(
        sqlite_engine, labels_name="clicks", prediction_names=["model"], mlflow=True, backend=Backend("duckdb")
    )
    view = jobs.show_job(sqlite_engine, result.evaluation_id)
    assert view.mlflow_state == "logged" and view.backend == "duckdb"
    logged = MlflowClient(uri).get_run(view.mlflow_run_id)
    assert logged.data.metrics["auc"] == result.aggregates["auc"]
    assert logged.data.metrics["gauc"] == result.aggregates["gauc"]
    assert "threshold_youden" not in logged.data.metrics  # not computed out of core, so not logged as 0
    artifacts = {a.path for a in MlflowClient(uri).list_artifacts(logged.info.run_id)}
    assert {"per_group.parquet", "evaluation.json"} <= artifacts and "roc_curve.svg" not in artifacts


def test_the_cli_lists_every_backend() -> None:
    from evalstore.backends import BACKENDS
    from evalstore.cli.evaluate import BackendName

    assert tuple(BackendName) == BACKENDS
