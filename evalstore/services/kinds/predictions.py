"""The classifier and clustering kinds: prediction sets evaluated against their gold labels with
:mod:`evalstore.metrics.classification`, results stored per prediction set and per group.

The sets themselves are stored and read by :mod:`evalstore.services.labels`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore import plots
from evalstore._version import __version__
from evalstore.backends import LOCAL, Backend
from evalstore.db import repositories as repo
from evalstore.db.models import AggregateResult, Evaluation, LabelSet, PredictionSet
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import ConflictError, EvaluationError, InvalidParameterError, NotFoundError
from evalstore.io.labels import Gold, indicator, read_cost_matrix
from evalstore.metrics import classification as measures
from evalstore.metrics import headline_measures, higher_is_better
from evalstore.services import jobs
from evalstore.services.context import AppContext, context_for
from evalstore.services.kinds import out_of_core
from evalstore.services.kinds.base import (
    ComputedJob,
    EvaluationSummary,
    JobTimings,
    Leaderboard,
    MlflowRun,
    StoredEvaluation,
    per_query_values,
    store_computed,
)
from evalstore.services.labels import get_label_set, get_prediction_set, read_with_gold

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported where a frame is built, not here: every command that touches the queue loads
# this module (the kinds are registered together), and pandas costs ~0.15 s of their start-up


@dataclass(frozen=True)
class Aligned:
    """A prediction set aligned with its gold labels, as the codes the measures take (multilabel:
    (items, classes) indicator matrices)."""

    classes: list[str]
    y_true: np.ndarray
    y_pred: np.ndarray | None
    score: np.ndarray | None
    scores: np.ndarray | None
    groups: np.ndarray | None
    group_names: list[str]
    weights: np.ndarray | None
    multilabel: bool


def aligned(prediction_set: PredictionSet, label_set: LabelSet, gold: Gold, tables: list[pa.Table]) -> Aligned:
    """Predictions in the gold labels' order, as codes (registration made sure both hold the same items)."""
    table = tables[0]
    classes = list(label_set.classes)
    items = table["item_id"]
    if len(items) == len(gold.items) and pc.all(pc.equal(gold.items, items)).as_py():
        # already in the gold labels' order (SQLite reads both by primary key; PostgreSQL in
        # storage order, which is file order when the files share it): checking costs ~0.2 s for
        # 10M items, hashing them ~2.5 s
        at = pa.array(np.arange(len(items)))
    else:
        at = pc.index_in(gold.items, value_set=items.combine_chunks())
    class_set = pa.array(classes, pa.string())
    multilabel = label_set.multilabel and prediction_set.kind != "clustering"
    if multilabel:
        y_true = indicator(gold.labels, classes)
    else:
        y_true = pc.index_in(gold.labels, value_set=class_set).to_numpy(zero_copy_only=False).astype(np.int64)
    y_pred = None
    if prediction_set.has_label:
        labels = table["label"].take(at)
        if multilabel:
            y_pred = indicator(labels, classes)
        elif prediction_set.kind == "clustering":
            y_pred = pc.dictionary_encode(labels).combine_chunks().indices.to_numpy(zero_copy_only=False)
        else:
            y_pred = pc.index_in(labels, value_set=class_set).to_numpy(zero_copy_only=False).astype(np.int64)
    score = table["score"].to_numpy()[at.to_numpy(zero_copy_only=False)] if prediction_set.has_score else None
    scores = None
    if prediction_set.score_classes:
        long = tables[1]
        rows = pc.index_in(long["item_id"], value_set=gold.items.combine_chunks()).to_numpy(zero_copy_only=False)
        columns = pc.index_in(long["class_label"], value_set=class_set).to_numpy(zero_copy_only=False)
        scores = np.zeros((len(gold.items), len(classes)))
        scores[rows, columns] = long["score"].to_numpy()
    group_column = table["group_id"].take(at) if table["group_id"].null_count == 0 else gold.groups
    groups, group_names = None, []
    if group_column is not None:
        encoded = pc.dictionary_encode(group_column).combine_chunks()
        groups = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        group_names = encoded.dictionary.to_pylist()
    return Aligned(classes, y_true, y_pred, score, scores, groups, group_names, gold.weights, multilabel)


@dataclass(frozen=True)
class Evaluated:
    """A classification evaluation: computed by a worker just now, or read back from the store."""

    predictions: str
    labels: str
    kind: str
    evaluation_id: int
    aggregates: dict[str, float | None]  # None: not finite (an AUC with one class present)
    settings: dict[str, Any]  # threshold used, confusion matrix, curve points (binary scores)
    options: dict[str, Any]
    created: bool
    header: dict[str, Any]  # hashes and versions, as MLflow tags them
    per_group: pd.DataFrame | None = None  # group x measure (sorted by group), when read
    metadata: dict[str, Any] | None = None  # the prediction set's system and metadata


def _evaluation_options(session: Session, label_set: LabelSet, *, cost_matrix: Path | None,
                        threshold: float | str | None, positive: str | None, prior: float | None, beta: float,
                        baseline: str | None) -> dict[str, Any]:
    """Check the options and write them out as stored (the cost matrix and baseline included, so
    the job needs nothing but its row)."""
    if isinstance(threshold, str) and threshold not in measures.THRESHOLD_RULES:
        try:
            threshold = float(threshold)
        except ValueError:
            raise InvalidParameterError(
                f"--threshold must be a number or one of {', '.join(measures.THRESHOLD_RULES)}, not "
                f"'{threshold}'.") from None
    if prior is not None and not 0 < prior < 1:
        raise InvalidParameterError(f"--prior must be between 0 and 1 (P(positive class)), not {prior}.")
    classes = list(label_set.classes)
    if label_set.multilabel:
        given = [flag for flag, value in (("--positive", positive), ("--cost-matrix", cost_matrix),
                                          ("--baseline", baseline), ("--prior", prior)) if value is not None]
        if isinstance(threshold, str):
            given.append(f"--threshold {threshold}")
        if given:
            raise InvalidParameterError(f"'{label_set.name}' is multilabel: {', '.join(given)} applies to binary or "
                                        "multiclass labels only. A number for --threshold cuts per-class scores.")
    if positive is not None and positive not in classes:
        raise InvalidParameterError(f"--positive '{positive}' is not a gold class ({', '.join(classes)}).")
    base_set = get_prediction_set(session, baseline) if baseline else None
    costs = read_cost_matrix(cost_matrix, classes) if cost_matrix is not None else None
    positive_code = classes.index(positive) if positive is not None else len(classes) - 1
    return {"threshold": threshold, "positive": classes[positive_code] if len(classes) == 2 else None,
            "prior": prior, "beta": beta, "cost_matrix": costs.tolist() if costs is not None else None,
            "baseline": base_set.name if base_set else None,
            "baseline_hash": base_set.content_hash if base_set else None}


def enqueue(engine: Engine, *, labels_name: str, prediction_names: list[str] | None,
            cost_matrix: Path | None = None, threshold: float | str | None = None, positive: str | None = None,
            prior: float | None = None, beta: float = 1.0, baseline: str | None = None, force: bool = False,
            max_attempts: int = 3, backend: Backend = LOCAL) -> list[jobs.JobRef]:
    """Queue one evaluation job per prediction set (all of the labels' when ``prediction_names``
    is None), in one transaction. The same set and options are one job, reused once done unless
    ``force``, as for ranking runs (:func:`evalstore.services.jobs.enqueue`). ``backend`` (DuckDB
    or Spark) takes binary predictions with a score (:mod:`evalstore.services.kinds.backends`)."""
    with unit_of_work(engine) as session:
        label_set = get_label_set(session, labels_name)
        names = prediction_names or list(session.scalars(
            select(PredictionSet.name).where(PredictionSet.label_set_id == label_set.id).order_by(PredictionSet.name)))
        if not names:
            raise NotFoundError(f"No predictions are registered for '{labels_name}'. Register them with "
                                f"'evalstore predictions register PATH --name NAME --labels {labels_name}'.")
        options = _evaluation_options(session, label_set, cost_matrix=cost_matrix, threshold=threshold,
                                      positive=positive, prior=prior, beta=beta, baseline=baseline)
        if not backend.local:
            out_of_core.check_label_set(label_set, options, backend)
        refs = []
        for name in dict.fromkeys(names):
            prediction_set = get_prediction_set(session, name)
            if prediction_set.label_set_id != label_set.id:
                raise InvalidParameterError(f"Predictions '{name}' were registered against other gold labels, "
                                            f"not '{labels_name}'.")
            if not backend.local:
                out_of_core.check_prediction_set(prediction_set, backend)
            digest = hashlib.sha256(json.dumps({**options, "predictions_hash": prediction_set.content_hash},
                                               sort_keys=True).encode()).hexdigest()
            refs.append(jobs.enqueue_job(session, (name, labels_name), {"prediction_set_id": prediction_set.id},
                                         digest, options, force=force, max_attempts=max_attempts,
                                         kind=prediction_set.kind, backend=backend, measures="[]"))
        return refs


def run_job(engine: Engine, job: jobs.ClaimedJob, *, context: AppContext | None = None) -> EvaluationSummary:
    """Compute a claimed classification job and store its aggregates and per-group values
    (raises jobs.JobLost if the job was taken away)."""
    return store_computed(engine, job, compute_job(engine, job, context=context))


def compute_job(engine: Engine, job: jobs.ClaimedJob, *, context: AppContext | None = None) -> ComputedJob:
    """What a worker does with a claimed classification job: align the predictions with the gold
    labels and compute the suite, storing nothing (raises jobs.JobLost if the predictions were
    deleted). ``context`` keeps the gold labels read for the next job."""
    gold_cache = context_for(engine, context).gold
    timings = JobTimings()
    started = time.perf_counter()
    options = job.options
    with read_only(engine) as session:
        prediction_set = session.get(PredictionSet, job.prediction_set_id)
        if prediction_set is None:  # deleted or replaced since: the job went with it
            raise jobs.JobLost(f"the predictions of job {job.evaluation_id} were deleted")
        label_set = session.get(LabelSet, prediction_set.label_set_id)
        assert label_set is not None, "labels in use cannot be deleted"
        sets = [prediction_set]
        if options["baseline"] is not None:
            base_set = session.scalar(select(PredictionSet).where(PredictionSet.name == options["baseline"]))
            if base_set is None or base_set.content_hash != options["baseline_hash"]:
                raise ConflictError(f"Baseline '{options['baseline']}' was deleted or replaced after this "
                                    "evaluation was asked for; ask again with --baseline.")
            sets.append(base_set)
        classes = list(label_set.classes)
        positive = classes.index(options["positive"]) if options["positive"] is not None else len(classes) - 1
        costs = np.asarray(options["cost_matrix"], dtype=np.float64) if options["cost_matrix"] is not None else None
        metadata = {"system": prediction_set.system, **dict(prediction_set.metadata_ or {})}
        if not job.backend.local:  # DuckDB or Spark counts the stored set; the counts decide the measures
            by_label = options["threshold"] is None and prediction_set.has_label
            threshold = 0.5 if options["threshold"] is None else float(options["threshold"])
            counts = out_of_core.binary_counts(session, prediction_set, classes[positive], threshold, job.backend,
                                               by_label=by_label)
            timings.load = time.perf_counter() - started
            started = time.perf_counter()
            suite = measures.binary_suite_from_counts(counts, classes, positive, beta=options["beta"], costs=costs)
            if not by_label:
                suite.settings.update(threshold=threshold, threshold_rule="given")
            group_names = counts.group_names or []
        else:
            gold, tables = read_with_gold(session, label_set, sets, cache=gold_cache)
            data, *baseline = [aligned(p, label_set, gold, t) for p, t in zip(sets, tables, strict=True)]
            timings.load = time.perf_counter() - started
            started = time.perf_counter()
            suite = _suite(prediction_set, data, baseline[0] if baseline else None, threshold=options["threshold"],
                           positive=positive, prior=options["prior"], costs=costs, beta=options["beta"])
            group_names = data.group_names
    if not job.backend.local:  # which engine counted, as the settings (and MLflow's copy of them) say
        suite.settings["backend"] = job.backend.name
    settings = {k: v for k, v in suite.settings.items() if k != "classes"}
    if suite.curve is not None:
        settings["curve"] = measures.curve_points(suite.curve)
    per_group = _per_group_frame(group_names, suite.per_group)
    per_query = per_query_values([] if per_group is None else per_group.index,
                                {} if per_group is None else {str(m): per_group[m].to_numpy() for m in per_group})
    aggregates = [{"measure": name, "value": _finite(value), "text_value": None, "query_count": len(group_names)}
                  for name, value in suite.aggregates.items()]
    values = {name: _finite(value) for name, value in suite.aggregates.items()}
    timings.compute = time.perf_counter() - started

    def evaluated_as(header: dict[str, Any]) -> Evaluated:
        return Evaluated(prediction_set.name, label_set.name, prediction_set.kind, job.evaluation_id,
                         values, settings, dict(options), True,
                         _header(header, prediction_set, label_set), per_group, metadata)

    return ComputedJob(job.evaluation_id, prediction_set.name, label_set.name, len(group_names), (), timings,
                       per_query, aggregates, settings, evaluated_as)


def _suite(prediction_set: PredictionSet, data: Aligned, base: Aligned | None, **kwargs: Any) -> measures.Suite:
    if prediction_set.kind == "clustering":
        assert data.y_pred is not None, "a clustering is stored with a cluster id per item"
        # scikit-learn's clustering indices take no sample weights; the settings say they were not used
        return measures.Suite(measures.clustering_measures(data.y_true, data.y_pred),
                              settings={"classes": data.classes, "weighted": False})
    if data.multilabel:
        threshold = kwargs["threshold"]
        return measures.multilabel(data.y_true, data.classes, y_pred=data.y_pred, scores=data.scores,
                                   threshold=0.5 if threshold is None else float(threshold), groups=data.groups,
                                   n_groups=len(data.group_names), beta=kwargs["beta"], sample_weight=data.weights)
    baseline_score = None
    if base is not None:
        baseline_score = base.score if base.score is not None else (
            base.scores[:, kwargs["positive"]] if base.scores is not None else None)
        if baseline_score is None or len(data.classes) != 2:
            raise InvalidParameterError("--baseline needs binary scores (its own and these) to compute RelaImpr.")
    return measures.evaluate(data.y_true, data.classes, y_pred=data.y_pred, score=data.score, scores=data.scores,
                             groups=data.groups, n_groups=len(data.group_names), baseline_score=baseline_score,
                             sample_weight=data.weights, **kwargs)


def _per_group_frame(group_names: list[str], per_group: dict[str, np.ndarray]) -> pd.DataFrame | None:
    """Group x measure, groups sorted as text (as they read back from the store)."""
    if not per_group:
        return None
    import pandas as pd

    frame = pd.DataFrame({m: per_group[m] for m in sorted(per_group)},
                         index=pd.Index(np.asarray(group_names, dtype=object), name="group"))
    return frame.sort_index()


def _header(header: dict[str, Any], prediction_set: PredictionSet, label_set: LabelSet) -> dict[str, Any]:
    return {"predictions_hash": prediction_set.content_hash, "labels_hash": label_set.content_hash,
            "options_hash": header["options_hash"], "evalstore_version": header["evalstore_version"],
            "results_version": header["results_version"]}


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def stored_evaluation(engine: Engine, evaluation_id: int, *, with_groups: bool = True) -> Evaluated:
    """A finished classification evaluation read back (with its per-group values)."""
    with read_only(engine) as session:
        row = session.execute(select(Evaluation, PredictionSet, LabelSet)
                              .join(PredictionSet, PredictionSet.id == Evaluation.prediction_set_id)
                              .join(LabelSet, LabelSet.id == PredictionSet.label_set_id)
                              .where(Evaluation.id == evaluation_id)).first()
        if row is None:
            raise NotFoundError(f"No classification evaluation {evaluation_id}. See 'evalstore jobs list'.")
        evaluation, prediction_set, label_set = row
        if evaluation.state != "done":
            raise EvaluationError(f"Evaluation {evaluation_id} of '{prediction_set.name}' is {evaluation.state}"
                                  + (f": {evaluation.error}" if evaluation.error else "."))
        aggregates = {a.measure: a.value for a in repo.aggregate_values(session, evaluation_id)}
        per_group = None
        if with_groups:
            table = repo.result_table(session, evaluation_id).to_pandas()
            if len(table):
                per_group = table.pivot(index="query_id", columns="measure", values="value").sort_index()
                per_group.index.name, per_group.columns.name = "group", None
        header = {"options_hash": evaluation.options_hash, "evalstore_version": evaluation.evalstore_version,
                  "results_version": evaluation.results_version}
        return Evaluated(prediction_set.name, label_set.name, prediction_set.kind, evaluation.id, aggregates,
                         dict(evaluation.settings or {}), dict(evaluation.options), False,
                         _header(header, prediction_set, label_set), per_group,
                         {"system": prediction_set.system, **dict(prediction_set.metadata_ or {})})


def newest_results(engine: Engine, *, labels_name: str, prediction_name: str,
                   measures: list[str] | None = None) -> Evaluated:
    """The newest finished evaluation of a prediction set on its gold labels, read back with its
    per-group values; with ``measures``, only those (each a stored name: ``f1_macro``,
    ``precision.cat``), refused with the names that exist when one does not."""
    with read_only(engine) as session:
        label_set = get_label_set(session, labels_name)
        prediction_set = get_prediction_set(session, prediction_name)
        evaluation = dict((p.id, e) for p, e in latest_evaluations(session, label_set)).get(prediction_set.id)
    if evaluation is None:
        raise NotFoundError(f"'{prediction_name}' is not evaluated on '{labels_name}' yet; run 'evalstore evaluate "
                            f"--labels {labels_name} --predictions {prediction_name} --wait'.")
    result = stored_evaluation(engine, evaluation.id)
    if not measures:
        return result
    absent = [m for m in measures if m not in result.aggregates]
    if absent:
        raise NotFoundError(f"No stored value of '{absent[0]}' in evaluation {result.evaluation_id}; it holds "
                            f"{', '.join(sorted(result.aggregates))}.")
    per_group = result.per_group
    if per_group is not None:
        kept = [m for m in measures if m in per_group.columns]
        per_group = per_group[kept] if kept else None
    return dataclasses.replace(result, aggregates={m: result.aggregates[m] for m in measures}, per_group=per_group)


def latest_evaluations(session: Session, label_set: LabelSet) -> list[tuple[PredictionSet, Evaluation]]:
    rows = session.execute(select(PredictionSet, Evaluation)
                           .join(Evaluation, Evaluation.prediction_set_id == PredictionSet.id)
                           .where(PredictionSet.label_set_id == label_set.id, Evaluation.state == "done")
                           .order_by(PredictionSet.name, Evaluation.finished_at.desc(), Evaluation.id.desc())).all()
    latest: dict[int, tuple[PredictionSet, Evaluation]] = {}
    for prediction_set, evaluation in rows:
        latest.setdefault(prediction_set.id, (prediction_set, evaluation))
    return list(latest.values())


def leaderboard(engine: Engine, *, labels_name: str, measure_names: list[str]) -> pd.DataFrame:
    """One row per prediction set (its newest evaluation), sorted by the first measure, best first
    (the registry says which way: error_rate, cost and fallout lowest first); no measures named:
    the defaults for the labels' kind of task."""
    with read_only(engine) as session:
        label_set = get_label_set(session, labels_name)
        measure_names = measure_names or (MULTILABEL_LEADERBOARD if label_set.multilabel else DEFAULT_LEADERBOARD)
        latest = latest_evaluations(session, label_set)
        if not latest:
            raise NotFoundError(f"Nothing is evaluated against '{labels_name}' yet. Run 'evalstore evaluate "
                                f"--labels {labels_name} --wait'.")
        ids = [e.id for _, e in latest]
        values = session.execute(select(AggregateResult.evaluation_id, AggregateResult.measure,
                                        AggregateResult.value)
                                 .where(AggregateResult.evaluation_id.in_(ids),
                                        AggregateResult.measure.in_(measure_names))).all()
    import pandas as pd

    table = pd.DataFrame(values, columns=["evaluation_id", "measure", "value"]).pivot(
        index="evaluation_id", columns="measure", values="value")
    unknown = [m for m in measure_names if m not in table.columns]
    if unknown:
        raise InvalidParameterError(
            f"No stored values for {', '.join(unknown)}. Classification measures include "
            f"{', '.join(headline_measures('classifier'))}; clusterings: {', '.join(headline_measures('clustering'))} "
            "('evalstore measures --kind classifier' lists them all).")
    rows = [{"predictions": p.name, "system": p.system or "", "kind": p.kind,
             **{m: table.at[e.id, m] if e.id in table.index else None for m in measure_names}} for p, e in latest]
    frame = pd.DataFrame(rows)
    best_first = not higher_is_better(measure_names[0])
    return frame.sort_values(measure_names[0], ascending=best_first, na_position="last").reset_index(drop=True)


DEFAULT_LEADERBOARD = ["f1_macro", "accuracy", "mcc"]
MULTILABEL_LEADERBOARD = ["f1_macro", "jaccard_samples", "subset_accuracy", "hamming_loss"]
# what `evaluate --labels --wait` shows of each evaluation (the columns no set has are left out)
SHOWN_MEASURES = [*headline_measures("classifier"), *headline_measures("clustering")]


def _leaderboard_view(labels_name: str, names: list[str], frame: pd.DataFrame) -> Leaderboard:
    records = frame.to_dict("records")
    cells = [{"#": str(i), **{str(k): (f"{v:.4f}" if isinstance(v, float) else v) for k, v in row.items()}}
             for i, row in enumerate(records, start=1)]
    return Leaderboard(title=f"leaderboard: {labels_name} (by {names[0]})",
                       record_columns=["predictions", "system", "kind", *names],
                       records=[{str(k): v for k, v in row.items()} for row in records],
                       cell_columns=["#", "predictions", "system", *names], cells=cells)


def group_values(engine: Engine, *, labels_name: str, prediction_name: str, measure: str) -> pd.Series:
    """The newest evaluation's per-group values of one measure, indexed by group."""
    with read_only(engine) as session:
        label_set = get_label_set(session, labels_name)
        prediction_set = get_prediction_set(session, prediction_name)
        latest = dict((p.id, e) for p, e in latest_evaluations(session, label_set))
        evaluation = latest.get(prediction_set.id)
        if evaluation is None:
            raise NotFoundError(f"'{prediction_name}' is not evaluated yet; run 'evalstore evaluate --labels "
                                f"{labels_name} --predictions {prediction_name} --wait'.")
        table = repo.result_table(session, evaluation.id, [measure])
    if not table.num_rows:
        raise NotFoundError(f"No per-group values of {measure} for '{prediction_name}': per-group values need a "
                            "group column (in the gold labels or the predictions).")
    import pandas as pd

    return pd.Series(table["value"].to_numpy(zero_copy_only=False), index=table["query_id"].to_pylist(),
                     name=prediction_name, dtype=float)




# --- MLflow --------------------------------------------------------------------------------------


def mlflow_run(result: Evaluated) -> MlflowRun:
    """A classification evaluation as an MLflow run in the gold labels' experiment: options and
    the prediction set's metadata as params, every aggregate as a metric, the per-group table, and
    the ROC and precision-recall curves (binary scores) as figures."""
    meta = result.header
    tags = {"evalstore.evaluation_id": str(result.evaluation_id),
            "evalstore.results_version": str(meta["results_version"]),
            "evalstore.kind": result.kind, "evalstore.predictions": result.predictions,
            "evalstore.labels": result.labels, "evalstore.predictions_hash": meta["predictions_hash"],
            "evalstore.labels_hash": meta["labels_hash"], "evalstore.options_hash": meta["options_hash"],
            "evalstore.version": meta["evalstore_version"] or __version__}
    params = {**{f"predictions.{k}": v for k, v in (result.metadata or {}).items()},
              **{k: v for k, v in result.options.items() if k != "baseline_hash"},
              "threshold_used": result.settings.get("threshold")}
    per_group = {} if result.per_group is None else {"per_group.parquet": result.per_group}
    tables = {} if result.per_group is None else {"per_group_table.json": result.per_group.reset_index()}
    return MlflowRun(
        experiment=result.labels, name=result.predictions, tags=tags, params=params,
        metrics=dict(result.aggregates), parquet=per_group, tables=tables,
        dicts={"evaluation.json": {"evaluation_id": result.evaluation_id, "options": result.options,
                                   **{k: v for k, v in result.settings.items() if k != "curve"}, **meta}},
        figures=lambda: _curve_figures(result))


def _curve_figures(result: Evaluated) -> Iterator[tuple[str, Any]]:
    """The ROC and precision-recall plots, from the curve points the evaluation stored."""
    points = result.settings.get("curve")
    if not points:
        return
    for name, x, y, xlabel, ylabel, value in (
            ("roc_curve.png", points["fpr"], points["tpr"], "false positive rate", "true positive rate",
             f"AUC {_shown(result.aggregates.get('auc'))}"),
            ("precision_recall_curve.png", points["recall"], points["precision"], "recall", "precision",
             f"AP {_shown(result.aggregates.get('average_precision'))}")):
        figure, axes = plots.curve_axes(xlabel, ylabel, f"{result.predictions} on {result.labels}")
        axes.plot(x, y, color=plots.BLUE, label=value)
        if name == "roc_curve.png":
            axes.plot([0, 1], [0, 1], color=plots.GREY, linestyle=":")
        axes.legend(loc="lower right")
        yield name, figure


def _shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


class PredictionKind:
    """Prediction sets against gold labels: ``classifier`` (labels and/or scores) or
    ``clustering`` (cluster ids); both share the job, the read-back and the leaderboard, which
    ranks every prediction set on the gold labels, of either kind."""

    def __init__(self, name: str) -> None:
        self.name = name

    def compute(self, engine: Engine, job: jobs.ClaimedJob, *, context: AppContext | None = None) -> ComputedJob:
        return compute_job(engine, job, context=context)

    def read_back(self, engine: Engine, evaluation_id: int) -> StoredEvaluation:
        return stored_evaluation(engine, evaluation_id)

    def mlflow_run(self, stored: StoredEvaluation) -> MlflowRun:
        assert isinstance(stored, Evaluated), f"a {self.name} kind was handed a {stored.kind} evaluation"
        return mlflow_run(stored)

    def leaderboard(self, engine: Engine, *, judgments: str, measures: list[str], sort: str | None,
                    options: dict[str, Any] | None = None) -> Leaderboard:
        names = list(dict.fromkeys([sort, *measures] if sort else measures))
        frame = leaderboard(engine, labels_name=judgments, measure_names=names)
        return _leaderboard_view(judgments, [str(c) for c in frame.columns[3:]], frame)


CLASSIFIER = PredictionKind("classifier")
CLUSTERING = PredictionKind("clustering")
