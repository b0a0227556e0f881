"""Logging stored evaluations to MLflow, each stored result exactly once.

MLflow logging is a small job of its own on every evaluation (``mlflow_state``):
``pending`` -> ``logging`` (held under a lease) -> ``logged``; on any failure it goes back to
``pending`` with the error, and the worker or ``evalstore mlflow sync`` tries again later. The
evaluation itself is committed before MLflow is touched, so MLflow being down loses nothing.

Never twice: every MLflow run carries the tags ``evalstore.evaluation_id`` and
``evalstore.results_version``. Before logging, a finished run with both is looked for, so a
process that died after MLflow finished but before our database recorded it does not log again;
an unfinished one (died midway) is deleted and logged afresh.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, and_, or_, select, update

from evalstore import __version__, config
from evalstore.db.models import Evaluation, QrelsSet, Run
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import TrackingError
from evalstore.metrics import mlflow_key, parse_measure
from evalstore.services import jobs
from evalstore.services.evaluations import StoredResults, results

if TYPE_CHECKING:
    import pandas as pd
    from mlflow import MlflowClient

    from evalstore.services.classification import Evaluated
    from evalstore.services.comparisons import Comparison

log = logging.getLogger("evalstore.mlflow")

# MLflow's HTTP client retries 7 times with exponential back-off by default (minutes against a
# dead server); a worker should put the logging back to pending quickly and carry on with its
# jobs. The user's own settings win.
for _key, _value in (("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2"), ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1"),
                     ("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")):
    os.environ.setdefault(_key, _value)

MLFLOW_LEASE = timedelta(minutes=5)
MAIN_MEASURES = ("AP", "nDCG@10", "P@10", "RR")


@dataclass
class SyncReport:
    logged: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)
    left_pending: int = 0


def pending_count(engine: Engine) -> int:
    with read_only(engine) as session:
        return len(session.scalars(select(Evaluation.id).where(
            Evaluation.state == "done", Evaluation.mlflow_state.in_(("pending", "logging")))).all())


def log_pending(engine: Engine, *, only: list[int] | None = None, limit: int | None = None,
                tracking_uri: str | None = None,
                known: dict[int, StoredResults | Evaluated] | None = None) -> SyncReport:
    """Log every finished evaluation MLflow has not received (or only ``only``).

    ``known`` holds results the caller has in memory (a worker that just stored them): used
    when they are the stored version, which saves reading ~700k values back for a large run.
    Stops at the first failure, since the next ones would most likely fail the same way; the
    rest stay pending. Returns what was logged and what failed.
    """
    report = SyncReport()
    if not config.mlflow_enabled():
        return report
    uri = tracking_uri or config.mlflow_tracking_uri()
    while limit is None or len(report.logged) < limit:
        claimed = _claim(engine, only)
        if claimed is None:
            break
        evaluation_id, version, first_attempt = claimed
        try:
            client = _client(uri)
            stored = (known or {}).get(evaluation_id)
            if stored is None or stored.header["results_version"] != version:
                stored = results_for(engine, evaluation_id)
            run_id = _log_one(client, uri, stored, version, first_attempt)
        except Exception as error:
            message = f"{type(error).__name__}: {error}".strip()[:2000]
            _give_back(engine, evaluation_id, version, message)
            report.failed[evaluation_id] = message
            log.warning("evaluation %d: MLflow logging failed (left pending): %s", evaluation_id, message)
            break
        _mark_logged(engine, evaluation_id, version, run_id)
        report.logged.append(evaluation_id)
        log.info("evaluation %d: logged to MLflow run %s", evaluation_id, run_id)
    report.left_pending = pending_count(engine) if only is None else 0
    return report


def results_for(engine: Engine, evaluation_id: int) -> StoredResults | Evaluated:
    """A finished evaluation read back as MLflow gets it: a ranking run's results, or a
    classification's aggregates, per-group values and curve points."""
    with read_only(engine) as session:
        row = session.execute(select(Run.name, QrelsSet.name, Evaluation.prediction_set_id)
                              .select_from(Evaluation).outerjoin(Run, Evaluation.run_id == Run.id)
                              .outerjoin(QrelsSet, QrelsSet.id == Evaluation.qrels_id)
                              .where(Evaluation.id == evaluation_id)).one()
    if row[2] is not None:
        from evalstore.services.classification import stored_evaluation

        return stored_evaluation(engine, evaluation_id)
    return results(engine, qrels_name=row[1], run_name=row[0], evaluation_id=evaluation_id)


# --- the state machine in our database ---------------------------------------------------------


def _claim(engine: Engine, only: list[int] | None) -> tuple[int, int, bool] | None:
    with unit_of_work(engine) as session:
        now = jobs.db_now(session)
        row = jobs.first_claimable(session, and_(
            Evaluation.state == "done",
            or_(Evaluation.mlflow_state == "pending",
                and_(Evaluation.mlflow_state == "logging", Evaluation.mlflow_lease_expires_at < now))), only)
        if row is None:
            return None
        row.mlflow_state, row.mlflow_lease_expires_at = "logging", now + MLFLOW_LEASE
        row.mlflow_attempts += 1
        return row.id, row.results_version, row.mlflow_attempts == 1


def _held(evaluation_id: int, version: int) -> Any:
    return and_(Evaluation.id == evaluation_id, Evaluation.results_version == version,
                Evaluation.mlflow_state == "logging")


def _mark_logged(engine: Engine, evaluation_id: int, version: int, run_id: str) -> None:
    with unit_of_work(engine) as session:
        session.execute(update(Evaluation).where(_held(evaluation_id, version)).values(
            mlflow_state="logged", mlflow_run_id=run_id, mlflow_error=None, mlflow_lease_expires_at=None))


def _give_back(engine: Engine, evaluation_id: int, version: int, error: str) -> None:
    with unit_of_work(engine) as session:
        session.execute(update(Evaluation).where(_held(evaluation_id, version)).values(
            mlflow_state="pending", mlflow_error=error, mlflow_lease_expires_at=None))


# --- MLflow ------------------------------------------------------------------------------------


_clients: dict[str, MlflowClient] = {}


def _client(uri: str) -> MlflowClient:
    """This process's client for ``uri``, opened once: a worker logs job after job, and opening
    one checks the tracking store each time (a failed opening is simply tried again next time)."""
    client = _clients.get(uri)
    if client is not None:
        return client
    from mlflow import MlflowClient

    # mlflow sets its loggers to INFO on import and announces its own database set-up each time
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    with _local_store_lock(uri):
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)  # a new local store creates its schema here
    _clients[uri] = client
    return client


@contextlib.contextmanager
def _local_store_lock(uri: str) -> Iterator[None]:
    """MLflow creates its SQLite schema on first use; two local processes doing that at once
    collide, so they take turns (a server-backed store needs no lock)."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    lock_path = Path(uri.removeprefix("sqlite:///") + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _experiment_id(client: MlflowClient, uri: str, name: str) -> str:
    from mlflow.exceptions import MlflowException

    with _local_store_lock(uri):
        experiment = client.get_experiment_by_name(name)
        if experiment is not None:
            return str(experiment.experiment_id)
        root = config.mlflow_artifact_root(uri)
        location = (root / name.replace("/", "_")).as_uri() if root else None
        try:
            return str(client.create_experiment(name, artifact_location=location,
                                                tags={"evalstore.version": __version__}))
        except MlflowException:  # created by another process meanwhile
            experiment = client.get_experiment_by_name(name)
            if experiment is None:
                raise
            return str(experiment.experiment_id)


def _log_one(client: MlflowClient, uri: str, stored: StoredResults | Evaluated, version: int,
             first_attempt: bool) -> str:
    from evalstore.services.classification import Evaluated

    experiment_id = _experiment_id(client, uri, config.mlflow_experiment_name(
        stored.labels if isinstance(stored, Evaluated) else stored.qrels))
    # an earlier attempt at these results may have reached MLflow; the first attempt cannot have
    found = [] if first_attempt else client.search_runs(
        [experiment_id],
        filter_string=f"tags.`evalstore.evaluation_id` = '{stored.evaluation_id}' "
                      f"and tags.`evalstore.results_version` = '{version}'",
    )
    for previous in found:
        if previous.info.status == "FINISHED":
            return str(previous.info.run_id)
        client.delete_run(previous.info.run_id)  # a logger died midway: start over
    if isinstance(stored, Evaluated):
        run_id = _log_classification(client, experiment_id, stored, version)
    else:
        run_id = _log_ranking(client, experiment_id, stored, version)
    client.set_terminated(run_id, "FINISHED")
    return run_id


def _log_batches(client: MlflowClient, run_id: str, aggregates: dict[str, float | None],
                 params: dict[str, Any]) -> None:
    """Every finite aggregate as a metric and every param, 100 of each per request."""
    from mlflow.entities import Metric, Param, RunTag

    metrics = [Metric(mlflow_key(name), float(value), 0, 0) for name, value in aggregates.items()
               if value is not None and value == value]
    param_list = [Param(key, str(value)[:6000]) for key, value in params.items()]
    for start in range(0, max(len(metrics), len(param_list)), 100):
        client.log_batch(run_id, metrics=metrics[start:start + 100], params=param_list[start:start + 100],
                         tags=[RunTag("evalstore.logged_by", "evalstore")] if start == 0 else [])


def _log_ranking(client: MlflowClient, experiment_id: str, stored: StoredResults, version: int) -> str:
    meta = stored.header
    tags = {
        "evalstore.evaluation_id": str(stored.evaluation_id), "evalstore.results_version": str(version),
        "evalstore.run": stored.run, "evalstore.qrels": stored.qrels, "evalstore.run_hash": meta["run_hash"],
        "evalstore.qrels_hash": meta["qrels_hash"], "evalstore.options_hash": meta["options_hash"],
        "evalstore.version": meta["evalstore_version"] or __version__,
    }
    params: dict[str, Any] = {f"run.{k}": v for k, v in meta["run_metadata"].items()}
    params.update({"run.system": meta["system"] or "", "run.tag": stored.run_tag or ""})
    options = stored.options
    params.update({k: options[k] for k in ("relevance_level", "max_docs", "judged_only", "missing_topics", "tie_rule")})
    params["measures"] = len(options["measures"])
    params["topics"] = len(stored.topics)
    run_id = str(client.create_run(experiment_id, run_name=stored.run, tags=tags).info.run_id)
    _log_batches(client, run_id, stored.aggregates, params)
    _log_artifacts(client, run_id, stored)
    return run_id


def _log_classification(client: MlflowClient, experiment_id: str, result: Evaluated, version: int) -> str:
    """A classification evaluation as an MLflow run in the gold labels' experiment: options and
    the prediction set's metadata as params, every aggregate as a metric, the per-group table, and
    the ROC and precision-recall curves (binary scores) as figures."""
    meta = result.header
    tags = {"evalstore.evaluation_id": str(result.evaluation_id), "evalstore.results_version": str(version),
            "evalstore.kind": result.kind, "evalstore.predictions": result.predictions,
            "evalstore.labels": result.labels, "evalstore.predictions_hash": meta["predictions_hash"],
            "evalstore.labels_hash": meta["labels_hash"], "evalstore.options_hash": meta["options_hash"],
            "evalstore.version": meta["evalstore_version"] or __version__}
    params = {**{f"predictions.{k}": v for k, v in (result.metadata or {}).items()},
              **{k: v for k, v in result.options.items() if k != "baseline_hash"},
              "threshold_used": result.settings.get("threshold")}
    run_id = str(client.create_run(experiment_id, run_name=result.predictions, tags=tags).info.run_id)
    _log_batches(client, run_id, result.aggregates, params)
    client.log_dict(run_id, {"evaluation_id": result.evaluation_id, "options": result.options,
                             **{k: v for k, v in result.settings.items() if k != "curve"}, **meta},
                    "evaluation.json")
    if result.per_group is not None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "per_group.parquet"
            result.per_group.to_parquet(path)
            client.log_artifact(run_id, str(path))
        client.log_table(run_id, _for_log_table(result.per_group.reset_index()), artifact_file="per_group_table.json")
    for name, figure in _curve_figures(result):
        client.log_figure(run_id, figure, name)
        figure.clear()
    return run_id


def _log_artifacts(client: MlflowClient, run_id: str, stored: StoredResults) -> None:

    frame = stored.frame.rename_axis("query_id")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "per_query.parquet"
        frame.to_parquet(path)
        client.log_artifact(run_id, str(path))
    client.log_table(run_id, _for_log_table(frame.reset_index()), artifact_file="per_query_table.json")
    text = stored.as_trec_eval(per_query=True)
    client.log_text(run_id, text, "trec_eval.txt")
    client.log_dict(run_id, {"evaluation_id": stored.evaluation_id, "run": stored.run, "qrels": stored.qrels,
                             **stored.options, **{k: v for k, v in stored.header.items() if k != "run_metadata"}},
                    "evaluation.json")
    for name, figure in _figures(stored):
        client.log_figure(run_id, figure, name)
        figure.clear()


def _for_log_table(table: pd.DataFrame) -> pd.DataFrame:
    """Text columns as categoricals for MLflow's log_table (same JSON). MLflow 3.17 looks for
    images cell by cell in every column as soon as one column is `object` (0.65 s for 7k topics
    x 99 measures), and selecting `object` columns while pandas 3 `str` columns exist warns."""
    import pandas as pd

    return table.astype({c: "category" for c in table.columns if pd.api.types.is_string_dtype(table[c])})


def _figures(stored: StoredResults) -> Iterator[tuple[str, Any]]:
    import matplotlib

    matplotlib.use("Agg")  # no screen on workers
    from matplotlib.figure import Figure

    main = next((m for m in MAIN_MEASURES if m in stored.measures), None)
    if main is not None:
        values = sorted(zip(stored.frame[main].astype(float).tolist(), stored.topics, strict=True), reverse=True)
        # fixed margins: constrained layout measures every label and took ~0.1 s a figure
        figure = Figure(figsize=(8.0, 4.0), dpi=90)
        figure.subplots_adjust(left=0.08, right=0.98, top=0.9, bottom=0.22)
        axes = figure.add_subplot()
        heights = [v for v, _ in values]
        # one filled outline, not a patch per topic, and only the 5 best and 5 worst topics named:
        # a label for every topic tripled the drawing time (~0.1 s a job); fill_between's steps
        # draw what stairs(fill=True) does, which took 0.3 s to build for 7,000 topics (0.01 s)
        axes.fill_between(range(len(values) + 1), [*heights, heights[-1]], step="post", color="#4c72b0",
                          linewidth=0)
        named = sorted({*range(min(5, len(values))), *range(max(0, len(values) - 5), len(values))})
        axes.set_xticks([i + 0.5 for i in named], [values[i][1] for i in named], rotation=90, fontsize=7)
        mean = stored.aggregates.get(main)
        if mean is not None:
            axes.axhline(mean, color="#c44e52", linestyle="--", label=f"mean {mean:.4f}")
            axes.legend(loc="upper right")
        axes.set_xlabel(f"topics, best to worst ({len(values)})")
        axes.set_ylabel(main)
        axes.set_title(f"{main} per topic: {stored.run} on {stored.qrels}", y=1.0, pad=6)
        yield f"per_topic_{mlflow_key(main)}.png", figure
    curve = sorted((parse_measure(m).param("recall"), value) for m, value in stored.aggregates.items()
                   if parse_measure(m).family == "IPrec")
    if len(curve) >= 2:
        figure, axes = _curve_axes("recall", "interpolated precision", f"Interpolated precision-recall: {stored.run}")
        axes.plot([r for r, _ in curve], [p for _, p in curve], marker="o", color="#4c72b0")
        yield "precision_recall.png", figure


def _curve_axes(xlabel: str, ylabel: str, title: str) -> tuple[Any, Any]:
    """A figure for a curve on the unit square (precision-recall, ROC), labelled and gridded."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.0, 4.5), dpi=90)
    figure.subplots_adjust(left=0.14, right=0.96, top=0.9, bottom=0.12)
    axes = figure.add_subplot()
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.02)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title, y=1.0, pad=6)  # placed explicitly: matplotlib measures every tick to place it
    axes.grid(alpha=0.3)
    return figure, axes


def log_comparison(comparison: Comparison, figure: Any | None = None) -> str:
    """Log a comparison as its own MLflow run in the qrels' experiment: settings as params, the
    count of significant differences per measure as metrics, the table (CSV, JSON and an MLflow
    table) and the plot as artifacts. Returns the MLflow run id."""
    import pandas as pd
    from mlflow.entities import Metric, Param, RunTag

    settings = comparison.settings
    uri = config.mlflow_tracking_uri()
    try:
        client = _client(uri)
        experiment_id = _experiment_id(client, uri, config.mlflow_experiment_name(settings.qrels))
        name = f"compare: {', '.join(settings.runs)}"
        run = client.create_run(experiment_id, run_name=name if len(name) <= 250 else name[:247] + "...",
                                tags={"evalstore.kind": "comparison", "evalstore.qrels": settings.qrels,
                                      "evalstore.version": __version__})
        run_id = str(run.info.run_id)
        params = {"test": settings.test, "correction": settings.correction, "alpha": settings.alpha,
                  "resamples": settings.resamples, "seed": settings.seed, "baseline": settings.baseline,
                  "missing": settings.missing, "runs": ",".join(settings.runs),
                  "measures": ",".join(settings.measures), "topics": len(comparison.matrix.topics),
                  **{f"evaluation.{k}": v for k, v in settings.evaluation_options.items()}}
        metrics = [Metric(f"significant_pairs.{mlflow_key(measure)}",
                          float(sum(p.significant for p in comparison.pairs if p.measure == measure)), 0, 0)
                   for measure in settings.measures]
        client.log_batch(run_id, metrics=metrics, params=[Param(k, str(v)[:6000]) for k, v in params.items()],
                         tags=[RunTag("evalstore.logged_by", "evalstore")])
        table = pd.DataFrame([p.as_dict() for p in comparison.pairs])
        client.log_table(run_id, _for_log_table(table), artifact_file="comparison_table.json")
        client.log_text(run_id, table.to_csv(index=False), "comparison.csv")
        client.log_dict(run_id, comparison.as_dict(), "comparison.json")
        if figure is not None:
            client.log_figure(run_id, figure, "per_topic_differences.png")
        client.set_terminated(run_id, "FINISHED")
    except Exception as exc:  # MLflow raises its own and transport errors; the user needs one message
        raise TrackingError(f"Could not log the comparison to MLflow at {uri}: {exc}. The comparison itself is "
                            "printed; run the command again once MLflow is reachable.") from exc
    return run_id


def _curve_figures(result: Evaluated) -> Iterator[tuple[str, Any]]:
    """The ROC and precision-recall plots, from the curve points the evaluation stored."""
    import matplotlib

    matplotlib.use("Agg")

    points = result.settings.get("curve")
    if not points:
        return
    for name, x, y, xlabel, ylabel, value in (
            ("roc_curve.png", points["fpr"], points["tpr"], "false positive rate", "true positive rate",
             f"AUC {_shown(result.aggregates.get('auc'))}"),
            ("precision_recall_curve.png", points["recall"], points["precision"], "recall", "precision",
             f"AP {_shown(result.aggregates.get('average_precision'))}")):
        figure, axes = _curve_axes(xlabel, ylabel, f"{result.predictions} on {result.labels}")
        axes.plot(x, y, color="#4c72b0", label=value)
        if name == "roc_curve.png":
            axes.plot([0, 1], [0, 1], color="#999999", linestyle=":")
        axes.legend(loc="lower right")
        yield name, figure


def _shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


__all__ = ["SyncReport", "log_comparison", "log_pending", "pending_count", "results_for"]
