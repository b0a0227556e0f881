"""A prediction set's evaluation job as a worker runs it: the predictions aligned with the gold
labels (the context keeps the labels for the next job) and the suite computed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore.db.models import LabelSet, PredictionSet
from evalstore.db.repositories import AggregateRow
from evalstore.db.session import read_only
from evalstore.errors import ConflictError, InvalidParameterError, Remedy
from evalstore.metrics import classification as measures
from evalstore.services import jobs
from evalstore.services.context import AppContext, context_for
from evalstore.services.kinds import out_of_core
from evalstore.services.kinds.base import (
    ComputedJob,
    EvaluationSummary,
    JobTimings,
    PerQueryValues,
    per_query_values,
    store_computed,
)
from evalstore.services.kinds.predictions.alignment import Aligned, aligned
from evalstore.services.labels import read_with_gold

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported where a frame is built, not here: every command that touches the queue loads
# this module (the kinds are registered together), and pandas costs ~0.15 s of their start-up


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
            sets.append(_baseline(session, options))
        classes = list(label_set.classes)
        positive = classes.index(options["positive"]) if options["positive"] is not None else len(classes) - 1
        costs = np.asarray(options["cost_matrix"], dtype=np.float64) if options["cost_matrix"] is not None else None
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
    settings, per_query, aggregates = _results(suite, group_names)
    timings.compute = time.perf_counter() - started

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
    )


def _baseline(session: Session, options: Mapping[str, Any]) -> PredictionSet:
    """The baseline's predictions, as they were when the evaluation was asked for."""
    base_set = session.scalar(select(PredictionSet).where(PredictionSet.name == options["baseline"]))
    if base_set is None or base_set.content_hash != options["baseline_hash"]:
        raise ConflictError(
            f"Baseline '{options['baseline']}' was deleted or replaced after this evaluation was asked for.",
            remedy=Remedy(cli="Ask again with --baseline."),
        )
    return base_set


def _results(
    suite: measures.Suite, group_names: list[str]
) -> tuple[dict[str, Any], PerQueryValues, list[AggregateRow]]:
    """The suite as a job's results: its settings (with the curve's points), the per-group values
    and the aggregates' rows."""
    settings = {k: v for k, v in suite.settings.items() if k != "classes"}
    if suite.curve is not None:
        settings["curve"] = measures.curve_points(suite.curve)
    per_group = _per_group_frame(group_names, suite.per_group)
    per_query = per_query_values(
        [] if per_group is None else per_group.index,
        {} if per_group is None else {str(m): per_group[m].to_numpy() for m in per_group},
    )
    aggregates: list[AggregateRow] = [
        {"measure": name, "value": _finite(value), "text_value": None, "query_count": len(group_names)}
        for name, value in suite.aggregates.items()
    ]
    return settings, per_query, aggregates


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
            raise InvalidParameterError(
                "A baseline needs binary scores (its own and these) to compute RelaImpr.",
                remedy=Remedy(cli="Leave --baseline out."),
            )
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


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None
