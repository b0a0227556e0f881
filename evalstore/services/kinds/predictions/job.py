"""A prediction set's evaluation job: its options checked and queued, the predictions aligned with the
gold labels (the context keeps the labels for the next job) and the suite computed.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore.backends import LOCAL, Backend
from evalstore.db.models import LabelSet, PredictionSet
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import ConflictError, InvalidParameterError, NotFoundError
from evalstore.io.labels import Gold, indicator, read_cost_matrix
from evalstore.metrics import classification as measures
from evalstore.services import jobs
from evalstore.services.context import AppContext, context_for
from evalstore.services.kinds import out_of_core
from evalstore.services.kinds.base import (
    ComputedJob,
    EvaluationSummary,
    JobTimings,
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


def _evaluation_options(
    session: Session,
    label_set: LabelSet,
    *,
    cost_matrix: Path | None,
    threshold: float | str | None,
    positive: str | None,
    prior: float | None,
    beta: float,
    baseline: str | None,
) -> dict[str, Any]:
    """Check the options and write them out as stored (the cost matrix and baseline included, so
    the job needs nothing but its row)."""
    if isinstance(threshold, str) and threshold not in measures.THRESHOLD_RULES:
        try:
            threshold = float(threshold)
        except ValueError:
            raise InvalidParameterError(
                f"--threshold must be a number or one of {', '.join(measures.THRESHOLD_RULES)}, not '{threshold}'."
            ) from None
    if prior is not None and not 0 < prior < 1:
        raise InvalidParameterError(f"--prior must be between 0 and 1 (P(positive class)), not {prior}.")
    classes = list(label_set.classes)
    if label_set.multilabel:
        given = [
            flag
            for flag, value in (
                ("--positive", positive),
                ("--cost-matrix", cost_matrix),
                ("--baseline", baseline),
                ("--prior", prior),
            )
            if value is not None
        ]
        if isinstance(threshold, str):
            given.append(f"--threshold {threshold}")
        if given:
            raise InvalidParameterError(
                f"'{label_set.name}' is multilabel: {', '.join(given)} applies to binary or "
                "multiclass labels only. A number for --threshold cuts per-class scores."
            )
    if positive is not None and positive not in classes:
        raise InvalidParameterError(f"--positive '{positive}' is not a gold class ({', '.join(classes)}).")
    base_set = get_prediction_set(session, baseline) if baseline else None
    costs = read_cost_matrix(cost_matrix, classes) if cost_matrix is not None else None
    positive_code = classes.index(positive) if positive is not None else len(classes) - 1
    return {
        "threshold": threshold,
        "positive": classes[positive_code] if len(classes) == 2 else None,
        "prior": prior,
        "beta": beta,
        "cost_matrix": costs.tolist() if costs is not None else None,
        "baseline": base_set.name if base_set else None,
        "baseline_hash": base_set.content_hash if base_set else None,
    }


def enqueue(
    engine: Engine,
    *,
    labels_name: str,
    prediction_names: list[str] | None,
    cost_matrix: Path | None = None,
    threshold: float | str | None = None,
    positive: str | None = None,
    prior: float | None = None,
    beta: float = 1.0,
    baseline: str | None = None,
    force: bool = False,
    max_attempts: int = 3,
    backend: Backend = LOCAL,
) -> list[jobs.JobRef]:
    """Queue one evaluation job per prediction set (all of the labels' when ``prediction_names``
    is None), in one transaction. The same set and options are one job, reused once done unless
    ``force``, as for ranking runs (:func:`evalstore.services.jobs.enqueue`). ``backend`` (DuckDB
    or Spark) takes binary predictions with a score (:mod:`evalstore.services.kinds.backends`)."""
    with unit_of_work(engine) as session:
        label_set = get_label_set(session, labels_name)
        names = prediction_names or list(
            session.scalars(
                select(PredictionSet.name)
                .where(PredictionSet.label_set_id == label_set.id)
                .order_by(PredictionSet.name)
            )
        )
        if not names:
            raise NotFoundError(
                f"No predictions are registered for '{labels_name}'. Register them with "
                f"'evalstore predictions register PATH --name NAME --labels {labels_name}'."
            )
        options = _evaluation_options(
            session,
            label_set,
            cost_matrix=cost_matrix,
            threshold=threshold,
            positive=positive,
            prior=prior,
            beta=beta,
            baseline=baseline,
        )
        if not backend.local:
            out_of_core.check_label_set(label_set, options, backend)
        refs = []
        for name in dict.fromkeys(names):
            prediction_set = get_prediction_set(session, name)
            if prediction_set.label_set_id != label_set.id:
                raise InvalidParameterError(
                    f"Predictions '{name}' were registered against other gold labels, not '{labels_name}'."
                )
            if not backend.local:
                out_of_core.check_prediction_set(prediction_set, backend)
            digest = hashlib.sha256(
                json.dumps({**options, "predictions_hash": prediction_set.content_hash}, sort_keys=True).encode()
            ).hexdigest()
            refs.append(
                jobs.enqueue_job(
                    session,
                    (name, labels_name),
                    {"prediction_set_id": prediction_set.id},
                    digest,
                    options,
                    force=force,
                    max_attempts=max_attempts,
                    kind=prediction_set.kind,
                    backend=backend,
                    measures="[]",
                )
            )
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
                raise ConflictError(
                    f"Baseline '{options['baseline']}' was deleted or replaced after this "
                    "evaluation was asked for; ask again with --baseline."
                )
            sets.append(base_set)
        classes = list(label_set.classes)
        positive = classes.index(options["positive"]) if options["positive"] is not None else len(classes) - 1
        costs = np.asarray(options["cost_matrix"], dtype=np.float64) if options["cost_matrix"] is not None else None
        metadata = {"system": prediction_set.system, **dict(prediction_set.metadata_ or {})}
        if not job.backend.local:  # DuckDB or Spark counts the stored set; the counts decide the measures
            by_label = options["threshold"] is None and prediction_set.has_label
            threshold = 0.5 if options["threshold"] is None else float(options["threshold"])
            counts = out_of_core.binary_counts(
                session, prediction_set, classes[positive], threshold, job.backend, by_label=by_label
            )
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
            suite = _suite(
                prediction_set,
                data,
                baseline[0] if baseline else None,
                threshold=options["threshold"],
                positive=positive,
                prior=options["prior"],
                costs=costs,
                beta=options["beta"],
            )
            group_names = data.group_names
    if not job.backend.local:  # which engine counted, as the settings (and MLflow's copy of them) say
        suite.settings["backend"] = job.backend.name
    settings = {k: v for k, v in suite.settings.items() if k != "classes"}
    if suite.curve is not None:
        settings["curve"] = measures.curve_points(suite.curve)
    per_group = _per_group_frame(group_names, suite.per_group)
    per_query = per_query_values(
        [] if per_group is None else per_group.index,
        {} if per_group is None else {str(m): per_group[m].to_numpy() for m in per_group},
    )
    aggregates = [
        {"measure": name, "value": _finite(value), "text_value": None, "query_count": len(group_names)}
        for name, value in suite.aggregates.items()
    ]
    values = {name: _finite(value) for name, value in suite.aggregates.items()}
    timings.compute = time.perf_counter() - started

    def evaluated_as(header: dict[str, Any]) -> Evaluated:
        return Evaluated(
            prediction_set.name,
            label_set.name,
            prediction_set.kind,
            job.evaluation_id,
            values,
            settings,
            dict(options),
            True,
            _header(header, prediction_set, label_set),
            per_group,
            metadata,
        )

    return ComputedJob(
        job.evaluation_id,
        prediction_set.name,
        label_set.name,
        len(group_names),
        (),
        timings,
        per_query,
        aggregates,
        settings,
        evaluated_as,
    )


def _suite(prediction_set: PredictionSet, data: Aligned, base: Aligned | None, **kwargs: Any) -> measures.Suite:
    if prediction_set.kind == "clustering":
        assert data.y_pred is not None, "a clustering is stored with a cluster id per item"
        # scikit-learn's clustering indices take no sample weights; the settings say they were not used
        return measures.Suite(
            measures.clustering_measures(data.y_true, data.y_pred),
            settings={"classes": data.classes, "weighted": False},
        )
    if data.multilabel:
        threshold = kwargs["threshold"]
        return measures.multilabel(
            data.y_true,
            data.classes,
            y_pred=data.y_pred,
            scores=data.scores,
            threshold=0.5 if threshold is None else float(threshold),
            groups=data.groups,
            n_groups=len(data.group_names),
            beta=kwargs["beta"],
            sample_weight=data.weights,
        )
    baseline_score = None
    if base is not None:
        baseline_score = (
            base.score
            if base.score is not None
            else (base.scores[:, kwargs["positive"]] if base.scores is not None else None)
        )
        if baseline_score is None or len(data.classes) != 2:
            raise InvalidParameterError("--baseline needs binary scores (its own and these) to compute RelaImpr.")
    return measures.evaluate(
        data.y_true,
        data.classes,
        y_pred=data.y_pred,
        score=data.score,
        scores=data.scores,
        groups=data.groups,
        n_groups=len(data.group_names),
        baseline_score=baseline_score,
        sample_weight=data.weights,
        **kwargs,
    )


def _per_group_frame(group_names: list[str], per_group: dict[str, np.ndarray]) -> pd.DataFrame | None:
    """Group x measure, groups sorted as text (as they read back from the store)."""
    if not per_group:
        return None
    import pandas as pd

    frame = pd.DataFrame(
        {m: per_group[m] for m in sorted(per_group)},
        index=pd.Index(np.asarray(group_names, dtype=object), name="group"),
    )
    return frame.sort_index()


def _header(header: dict[str, Any], prediction_set: PredictionSet, label_set: LabelSet) -> dict[str, Any]:
    return {
        "predictions_hash": prediction_set.content_hash,
        "labels_hash": label_set.content_hash,
        "options_hash": header["options_hash"],
        "evalstore_version": header["evalstore_version"],
        "results_version": header["results_version"],
    }


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None
