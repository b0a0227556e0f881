"""Classification and clustering: gold labels and predictions in the store, evaluated with
:mod:`evalstore.classification`, results stored per prediction set and per group.

One transaction per write; a bad file is refused before anything is stored.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine, delete, select

from evalstore import classification as measures
from evalstore.db import repositories as repo
from evalstore.db.models import (
    AggregateResult,
    Evaluation,
    GoldLabel,
    LabelSet,
    Prediction,
    PredictionScore,
    PredictionSet,
)
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import ConflictError, EvaluationError, InvalidParameterError, NotFoundError
from evalstore.io.labels import Gold, read_cost_matrix, read_gold, read_predictions
from evalstore.services import jobs
from evalstore.services.evaluations import EvaluationSummary, JobTimings, per_query_table

KINDS = ("classifier", "clustering")


@dataclass(frozen=True)
class SetSummary:
    kind: str  # labels | classifier | clustering
    name: str
    rows: int
    content_hash: str
    created_at: datetime
    details: dict[str, Any]
    created: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "rows": self.rows, "created_at": self.created_at.isoformat(),
                "content_hash": self.content_hash, **self.details}


def _label_summary(label_set: LabelSet, created: bool = True) -> SetSummary:
    return SetSummary("labels", label_set.name, label_set.row_count, label_set.content_hash, label_set.created_at,
                      {"classes": list(label_set.classes), "groups": label_set.group_count,
                       "description": label_set.description, "source": label_set.source}, created)


def _prediction_summary(prediction_set: PredictionSet, labels: str, created: bool = True) -> SetSummary:
    provides = [what for what, has in (("label", prediction_set.has_label), ("score", prediction_set.has_score),
                                       ("class scores", bool(prediction_set.score_classes))) if has]
    return SetSummary(prediction_set.kind, prediction_set.name, prediction_set.row_count,
                      prediction_set.content_hash, prediction_set.created_at,
                      {"labels": labels, "system": prediction_set.system, "provides": provides,
                       "probabilities": prediction_set.probabilities, "metadata": dict(prediction_set.metadata_ or {}),
                       "description": prediction_set.description, "source": prediction_set.source}, created)


def _get_label_set(session: Any, name: str) -> LabelSet:
    return _named(session, LabelSet, name, f"No gold labels named '{name}'. Import them with 'evalstore labels "
                                           f"import PATH --name {name}'.")


def _get_prediction_set(session: Any, name: str) -> PredictionSet:
    return _named(session, PredictionSet, name, f"No predictions named '{name}'. Register them with 'evalstore "
                                                f"predictions register PATH --name {name} --labels GOLD' (or "
                                                "'evalstore clusters register').")


def _named(session: Any, model: Any, name: str, missing: str) -> Any:
    found = session.scalar(select(model).where(model.name == name))
    if found is None:
        raise NotFoundError(missing)
    return found


def _copy(session: Any, table_name: str, table: pa.Table) -> None:
    repo.copy_batches(session, table_name, table.to_batches(max_chunksize=repo.BATCH_ROWS))


# --- gold labels -----------------------------------------------------------------------------


def import_labels(engine: Engine, path: Path, *, name: str, description: str | None = None,
                  replace: bool = False) -> SetSummary:
    """Store gold labels (item_id, label [, group]); the same content under the same name again
    stores nothing, other content needs ``replace`` (refused while predictions use the labels)."""
    gold = read_gold(path)
    with unit_of_work(engine) as session:
        existing = session.scalar(select(LabelSet).where(LabelSet.name == name))
        if existing is not None:
            if existing.content_hash == gold.content_hash:
                return _label_summary(existing, created=False)
            if not replace:
                raise ConflictError(f"Gold labels named '{name}' exist with other content. Pass --replace to "
                                    "replace them, or choose another --name.")
            users = list(session.scalars(select(PredictionSet.name).where(PredictionSet.label_set_id == existing.id)))
            if users:
                raise ConflictError(f"Gold labels '{name}' are used by {', '.join(users)}; delete those "
                                    "predictions first, or import the new labels under another --name.")
            session.execute(delete(GoldLabel).where(GoldLabel.label_set_id == existing.id))
            session.delete(existing)
            session.flush()
        groups = gold.groups
        label_set = LabelSet(name=name, description=description, content_hash=gold.content_hash,
                             row_count=len(gold.items), classes=gold.classes,
                             group_count=0 if groups is None else pc.count_distinct(groups).as_py(),
                             source=str(path))
        session.add(label_set)
        session.flush()
        _copy(session, "gold_labels", pa.table({
            "label_set_id": pa.array(np.full(len(gold.items), label_set.id, np.int64)),
            "item_id": gold.items, "label": gold.labels,
            "group_id": groups if groups is not None else pa.nulls(len(gold.items), pa.string())}))
        return _label_summary(label_set)


def list_label_sets(engine: Engine) -> list[SetSummary]:
    with read_only(engine) as session:
        return [_label_summary(s) for s in session.scalars(select(LabelSet).order_by(LabelSet.name))]


def _read_gold(session: Any, label_set: LabelSet) -> Gold:
    return _read_with_gold(session, label_set, [])[0]


# --- predictions -----------------------------------------------------------------------------


def register_predictions(engine: Engine, path: Path, *, name: str, labels_name: str, kind: str = "classifier",
                         system: str | None = None, metadata: dict[str, Any] | None = None,
                         description: str | None = None, probabilities: bool = False,
                         replace: bool = False) -> SetSummary:
    """Store a classifier's predictions (label, score, or score_<class> columns; optional group)
    or a clustering (cluster_id), after checking them against the gold labels."""
    if kind not in KINDS:
        raise InvalidParameterError(f"kind must be one of {', '.join(KINDS)}")
    with read_only(engine) as session:
        label_set = _get_label_set(session, labels_name)
        gold = _read_gold(session, label_set)
    parsed = read_predictions(path, gold, probabilities=probabilities, clustering=kind == "clustering")
    content_hash = hashlib.sha256(f"{parsed.content_hash}:{label_set.content_hash}:{kind}".encode()).hexdigest()
    with unit_of_work(engine) as session:
        existing = session.scalar(select(PredictionSet).where(PredictionSet.name == name))
        if existing is not None:
            if existing.content_hash == content_hash:
                return _prediction_summary(existing, labels_name, created=False)
            if not replace:
                raise ConflictError(f"Predictions named '{name}' exist with other content. Pass --replace to "
                                    "replace them (their evaluations go with them), or choose another --name.")
            repo.delete_prediction_set(session, existing)
        prediction_set = PredictionSet(
            name=name, label_set_id=label_set.id, kind=kind, system=system, description=description,
            metadata_=metadata or {}, content_hash=content_hash, row_count=len(parsed.items),
            has_label=parsed.labels is not None, has_score=parsed.score is not None,
            score_classes=sorted(parsed.class_scores), probabilities=probabilities, source=str(path))
        session.add(prediction_set)
        session.flush()
        n = len(parsed.items)
        _copy(session, "predictions", pa.table({
            "prediction_set_id": pa.array(np.full(n, prediction_set.id, np.int64)),
            "item_id": parsed.items,
            "label": parsed.labels if parsed.labels is not None else pa.nulls(n, pa.string()),
            "score": pa.array(parsed.score) if parsed.score is not None else pa.nulls(n, pa.float64()),
            "group_id": parsed.groups if parsed.groups is not None else pa.nulls(n, pa.string())}))
        for label, values in sorted(parsed.class_scores.items()):
            _copy(session, "prediction_scores", pa.table({
                "prediction_set_id": pa.array(np.full(n, prediction_set.id, np.int64)), "item_id": parsed.items,
                "class_label": pa.array(np.full(n, label, dtype=object), pa.string()), "score": pa.array(values)}))
        return _prediction_summary(prediction_set, labels_name)


def list_prediction_sets(engine: Engine, labels_name: str | None = None) -> list[SetSummary]:
    with read_only(engine) as session:
        query = select(PredictionSet, LabelSet.name).join(LabelSet, LabelSet.id == PredictionSet.label_set_id)
        if labels_name is not None:
            query = query.where(LabelSet.id == _get_label_set(session, labels_name).id)
        return [_prediction_summary(p, labels) for p, labels in session.execute(query.order_by(PredictionSet.name))]


def delete_predictions(engine: Engine, name: str) -> None:
    with unit_of_work(engine) as session:
        prediction_set = _get_prediction_set(session, name)
        repo.delete_prediction_set(session, prediction_set)


# --- evaluation ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Aligned:
    """A prediction set aligned with its gold labels, as the codes the measures take."""

    classes: list[str]
    y_true: np.ndarray
    y_pred: np.ndarray | None
    score: np.ndarray | None
    scores: np.ndarray | None
    groups: np.ndarray | None
    group_names: list[str]


def _prediction_reads(prediction_set: PredictionSet) -> list[tuple[Any, list[str], list[pa.DataType]]]:
    """The SELECTs of a prediction set's rows (and its per-class scores), for repo.read_arrow_together."""
    reads = [(select(Prediction.item_id, Prediction.label, Prediction.score, Prediction.group_id)
              .where(Prediction.prediction_set_id == prediction_set.id),
              ["item_id", "label", "score", "group_id"], [pa.string(), pa.string(), pa.float64(), pa.string()])]
    if prediction_set.score_classes:
        reads.append((select(PredictionScore.item_id, PredictionScore.class_label, PredictionScore.score)
                      .where(PredictionScore.prediction_set_id == prediction_set.id),
                      ["item_id", "class_label", "score"], [pa.string(), pa.string(), pa.float64()]))
    return reads


_GOLD_READ = (["item_id", "label", "group_id"], [pa.string()] * 3)
_gold_cache: dict[tuple[int, str], Gold] = {}


def _read_with_gold(session: Any, label_set: LabelSet, prediction_sets: list[PredictionSet]
                    ) -> tuple[Gold, list[list[pa.Table]]]:
    """The gold labels and each prediction set's tables, read together. A worker evaluates set
    after set against the same gold labels, so the last ones read are kept (keyed by id and
    content hash: replaced labels are read afresh)."""
    key = (label_set.id, label_set.content_hash)
    reads = [read for p in prediction_sets for read in _prediction_reads(p)]
    if key not in _gold_cache:
        reads.insert(0, (select(GoldLabel.item_id, GoldLabel.label, GoldLabel.group_id)
                         .where(GoldLabel.label_set_id == label_set.id), *_GOLD_READ))
    tables = repo.read_arrow_together(session, reads)
    if key not in _gold_cache:
        _gold_cache.clear()
        table = tables.pop(0)
        groups = table["group_id"] if table["group_id"].null_count == 0 else None
        _gold_cache[key] = Gold(table["item_id"], table["label"], groups, label_set.content_hash)
    per_set = []
    for p in prediction_sets:
        count = 2 if p.score_classes else 1
        per_set.append(tables[:count])
        tables = tables[count:]
    return _gold_cache[key], per_set


def _aligned(prediction_set: PredictionSet, label_set: LabelSet, gold: Gold, tables: list[pa.Table]) -> Aligned:
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
    y_true = pc.index_in(gold.labels, value_set=class_set).to_numpy(zero_copy_only=False).astype(np.int64)
    y_pred = None
    if prediction_set.has_label:
        labels = table["label"].take(at)
        if prediction_set.kind == "clustering":
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
    return Aligned(classes, y_true, y_pred, score, scores, groups, group_names)


@dataclass(frozen=True)
class Evaluated:
    """A classification evaluation: computed by a worker just now, or read back from the store."""

    predictions: str
    labels: str
    kind: str
    evaluation_id: int
    aggregates: dict[str, float]
    settings: dict[str, Any]  # threshold used, confusion matrix, curve points (binary scores)
    options: dict[str, Any]
    created: bool
    header: dict[str, Any]  # hashes and versions, as MLflow tags them
    per_group: pd.DataFrame | None = None  # group x measure (sorted by group), when read
    metadata: dict[str, Any] | None = None  # the prediction set's system and metadata


def _evaluation_options(session: Any, label_set: LabelSet, *, cost_matrix: Path | None,
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
    if positive is not None and positive not in classes:
        raise InvalidParameterError(f"--positive '{positive}' is not a gold class ({', '.join(classes)}).")
    base_set = _get_prediction_set(session, baseline) if baseline else None
    costs = read_cost_matrix(cost_matrix, classes) if cost_matrix is not None else None
    positive_code = classes.index(positive) if positive is not None else len(classes) - 1
    return {"threshold": threshold, "positive": classes[positive_code] if len(classes) == 2 else None,
            "prior": prior, "beta": beta, "cost_matrix": costs.tolist() if costs is not None else None,
            "baseline": base_set.name if base_set else None,
            "baseline_hash": base_set.content_hash if base_set else None}


def enqueue(engine: Engine, *, labels_name: str, prediction_names: list[str] | None,
            cost_matrix: Path | None = None, threshold: float | str | None = None, positive: str | None = None,
            prior: float | None = None, beta: float = 1.0, baseline: str | None = None, force: bool = False,
            max_attempts: int = 3) -> list[jobs.JobRef]:
    """Queue one evaluation job per prediction set (all of the labels' when ``prediction_names``
    is None), in one transaction. The same set and options are one job, reused once done unless
    ``force``, as for ranking runs (:func:`evalstore.services.jobs.enqueue`)."""
    with unit_of_work(engine) as session:
        label_set = _get_label_set(session, labels_name)
        names = prediction_names or list(session.scalars(
            select(PredictionSet.name).where(PredictionSet.label_set_id == label_set.id).order_by(PredictionSet.name)))
        if not names:
            raise NotFoundError(f"No predictions are registered for '{labels_name}'. Register them with "
                                f"'evalstore predictions register PATH --name NAME --labels {labels_name}'.")
        options = _evaluation_options(session, label_set, cost_matrix=cost_matrix, threshold=threshold,
                                      positive=positive, prior=prior, beta=beta, baseline=baseline)
        refs = []
        for name in dict.fromkeys(names):
            prediction_set = _get_prediction_set(session, name)
            if prediction_set.label_set_id != label_set.id:
                raise InvalidParameterError(f"Predictions '{name}' were registered against other gold labels, "
                                            f"not '{labels_name}'.")
            digest = hashlib.sha256(json.dumps({**options, "predictions_hash": prediction_set.content_hash},
                                               sort_keys=True).encode()).hexdigest()
            refs.append(jobs.enqueue_job(session, (name, labels_name), {"prediction_set_id": prediction_set.id},
                                         digest, options, force=force, max_attempts=max_attempts, measures="[]"))
        return refs


def evaluate(engine: Engine, *, labels_name: str, prediction_names: list[str] | None, mlflow: bool = False,
             **options: Any) -> list[Evaluated]:
    """Queue the evaluations (:func:`enqueue`) and get them done from this process, as
    :func:`evalstore.services.evaluations.evaluate_runs` does for runs; the results in order."""
    from evalstore.services.worker import work_on

    refs = enqueue(engine, labels_name=labels_name, prediction_names=prediction_names, **options)
    done = work_on(engine, [r.evaluation_id for r in refs if r.outcome != "reused"], mlflow=mlflow)
    return [dataclasses.replace(stored_evaluation(engine, ref.evaluation_id), created=ref.evaluation_id in done)
            for ref in refs]


def run_job(engine: Engine, job: jobs.ClaimedJob) -> EvaluationSummary:
    """What a worker does with a claimed classification job: align the predictions with the gold
    labels, compute the suite, store aggregates and per-group values (raises jobs.JobLost if the
    job was taken away)."""
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
        gold, tables = _read_with_gold(session, label_set, sets)
        data, *baseline = [_aligned(p, label_set, gold, t) for p, t in zip(sets, tables, strict=True)]
        base = baseline[0] if baseline else None
        metadata = {"system": prediction_set.system, **dict(prediction_set.metadata_ or {})}
    timings.load = time.perf_counter() - started
    started = time.perf_counter()
    classes = list(label_set.classes)
    positive = classes.index(options["positive"]) if options["positive"] is not None else len(classes) - 1
    costs = np.asarray(options["cost_matrix"], dtype=np.float64) if options["cost_matrix"] is not None else None
    suite = _suite(prediction_set, data, base, threshold=options["threshold"], positive=positive,
                   prior=options["prior"], costs=costs, beta=options["beta"])
    settings = {k: v for k, v in suite.settings.items() if k != "classes"}
    if suite.curve is not None:
        settings["curve"] = measures.curve_points(suite.curve)
    per_group = _per_group_frame(data.group_names, suite.per_group)
    per_query = per_query_table([] if per_group is None else per_group.index.tolist(),
                                {} if per_group is None else {m: per_group[m].to_numpy() for m in per_group})
    aggregates = [{"measure": name, "value": _finite(value), "text_value": None, "query_count": len(data.group_names)}
                  for name, value in suite.aggregates.items()]
    timings.compute = time.perf_counter() - started
    started = time.perf_counter()
    header = jobs.complete(engine, job, per_query, aggregates, settings)
    timings.store = time.perf_counter() - started
    evaluated = Evaluated(prediction_set.name, label_set.name, prediction_set.kind, job.evaluation_id,
                          {a["measure"]: a["value"] for a in aggregates}, settings, dict(options), True,
                          _header(header, prediction_set, label_set), per_group, metadata)
    return EvaluationSummary(job.evaluation_id, prediction_set.name, label_set.name, False, len(data.group_names),
                             timings=timings, stored=evaluated)


def _suite(prediction_set: PredictionSet, data: Aligned, base: Aligned | None, **kwargs: Any) -> measures.Suite:
    if prediction_set.kind == "clustering":
        return measures.Suite(measures.clustering_measures(data.y_true, data.y_pred),  # type: ignore[arg-type]
                              settings={"classes": data.classes})
    baseline_score = None
    if base is not None:
        baseline_score = base.score if base.score is not None else (
            base.scores[:, kwargs["positive"]] if base.scores is not None else None)
        if baseline_score is None or len(data.classes) != 2:
            raise InvalidParameterError("--baseline needs binary scores (its own and these) to compute RelaImpr.")
    return measures.evaluate(data.y_true, data.classes, y_pred=data.y_pred, score=data.score, scores=data.scores,
                             groups=data.groups, n_groups=len(data.group_names), baseline_score=baseline_score,
                             **kwargs)


def _per_group_frame(group_names: list[str], per_group: dict[str, np.ndarray]) -> pd.DataFrame | None:
    """Group x measure, groups sorted as text (as they read back from the store)."""
    if not per_group:
        return None
    frame = pd.DataFrame({m: per_group[m] for m in sorted(per_group)},
                         index=pd.Index(np.asarray(group_names, dtype=object), name="group"))
    return frame.sort_index()


def _header(header: dict[str, Any], prediction_set: PredictionSet, label_set: LabelSet) -> dict[str, Any]:
    return {"predictions_hash": prediction_set.content_hash, "labels_hash": label_set.content_hash,
            "options_hash": header["options_hash"], "evalstore_version": header["evalstore_version"],
            "results_version": header["results_version"]}


def _finite(value: float) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


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


def _latest_evaluations(session: Any, label_set: LabelSet) -> list[tuple[PredictionSet, Evaluation]]:
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
    (error_rate, cost and fallout: lowest first)."""
    with read_only(engine) as session:
        label_set = _get_label_set(session, labels_name)
        latest = _latest_evaluations(session, label_set)
        if not latest:
            raise NotFoundError(f"Nothing is evaluated against '{labels_name}' yet. Run 'evalstore evaluate "
                                f"--labels {labels_name} --wait'.")
        ids = [e.id for _, e in latest]
        values = session.execute(select(AggregateResult.evaluation_id, AggregateResult.measure,
                                        AggregateResult.value)
                                 .where(AggregateResult.evaluation_id.in_(ids),
                                        AggregateResult.measure.in_(measure_names))).all()
    table = pd.DataFrame(values, columns=["evaluation_id", "measure", "value"]).pivot(
        index="evaluation_id", columns="measure", values="value")
    unknown = [m for m in measure_names if m not in table.columns]
    if unknown:
        raise InvalidParameterError(f"No stored values for {', '.join(unknown)}. Classification measures include "
                                    "accuracy, f1_macro, mcc, kappa, auc, gauc, average_precision; clusterings: "
                                    "purity, inverse_purity, purity_f, ari, nmi.")
    rows = [{"predictions": p.name, "system": p.system or "", "kind": p.kind,
             **{m: table.at[e.id, m] if e.id in table.index else None for m in measure_names}} for p, e in latest]
    frame = pd.DataFrame(rows)
    lower_is_better = measure_names[0].startswith(("error_rate", "cost", "fallout"))
    return frame.sort_values(measure_names[0], ascending=lower_is_better, na_position="last").reset_index(drop=True)


def group_values(engine: Engine, *, labels_name: str, prediction_name: str, measure: str) -> pd.Series:
    """The newest evaluation's per-group values of one measure, indexed by group."""
    with read_only(engine) as session:
        label_set = _get_label_set(session, labels_name)
        prediction_set = _get_prediction_set(session, prediction_name)
        latest = dict((p.id, e) for p, e in _latest_evaluations(session, label_set))
        evaluation = latest.get(prediction_set.id)
        if evaluation is None:
            raise NotFoundError(f"'{prediction_name}' is not evaluated yet; run 'evalstore evaluate --labels "
                                f"{labels_name} --predictions {prediction_name} --wait'.")
        table = repo.result_table(session, evaluation.id, [measure])
    if not table.num_rows:
        raise NotFoundError(f"No per-group values of {measure} for '{prediction_name}': per-group values need a "
                            "group column (in the gold labels or the predictions).")
    return pd.Series(table["value"].to_numpy(zero_copy_only=False), index=table["query_id"].to_pylist(),
                     name=prediction_name, dtype=float)


@dataclass(frozen=True)
class McNemar:
    first: str
    second: str
    only_first_right: int
    only_second_right: int
    statistic: float
    p_value: float


def mcnemar(engine: Engine, *, labels_name: str, first: str, second: str) -> McNemar:
    """McNemar's test on the items one classifier labels right and the other wrong (statsmodels;
    the exact binomial version below 25 discordant items, chi-square with continuity correction
    above). Binary scores are cut at the threshold of their newest evaluation."""
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    with read_only(engine) as session:
        label_set = _get_label_set(session, labels_name)
        sets = [_get_prediction_set(session, name) for name in (first, second)]
        gold, tables = _read_with_gold(session, label_set, sets)
        pair = [_aligned(p, label_set, gold, t) for p, t in zip(sets, tables, strict=True)]
        # scores are cut where their newest evaluation cut them (0.5 when never evaluated)
        latest = {p.id: ((e.settings or {}).get("threshold"), e.options["positive"])
                  for p, e in _latest_evaluations(session, label_set)}
    right = []
    for prediction_set, data in zip(sets, pair, strict=True):
        cut, positive_class = latest.get(prediction_set.id, (None, None))
        if data.score is not None and (data.y_pred is None or cut is not None):
            positive = data.classes.index(positive_class) if positive_class is not None else 1
            y_pred = measures.labels_at(data.score, 0.5 if cut is None else cut, positive)
        elif data.y_pred is not None:
            y_pred = data.y_pred
        else:
            y_pred = np.argmax(data.scores, axis=1)  # type: ignore[arg-type]
        right.append(y_pred == data.y_true)
    b = int((right[0] & ~right[1]).sum())
    c = int((~right[0] & right[1]).sum())
    table = [[int((right[0] & right[1]).sum()), b], [c, int((~right[0] & ~right[1]).sum())]]
    result = sm_mcnemar(table, exact=b + c < 25, correction=True)
    return McNemar(first, second, b, c, float(result.statistic), float(result.pvalue))


def pairs_of(names: list[str], baseline: str | None) -> list[tuple[str, str]]:
    """The pairs to compare: each name with the baseline, or every pair."""
    everyone = list(dict.fromkeys([*([baseline] if baseline else []), *names]))
    if len(everyone) < 2:
        raise InvalidParameterError("Name two prediction sets (or one and --baseline).")
    if baseline:
        return [(baseline, name) for name in everyone[1:]]
    return [(a, b) for i, a in enumerate(everyone) for b in everyone[i + 1:]]


def compare_groups(engine: Engine, *, labels_name: str, pairs: list[tuple[str, str]], measures_: list[str],
                   test: str, alpha: float, resamples: int, seed: int) -> list[dict[str, Any]]:
    """Paired tests over the groups both sets have a value for (the per-query comparison of
    ranking runs, with groups as topics), through :func:`evalstore.significance.paired_test`."""
    from evalstore import significance

    if test not in significance.TESTS:
        raise InvalidParameterError(f"--test must be mcnemar or one of {', '.join(significance.TESTS)}, not "
                                    f"'{test}'.")
    rng = np.random.default_rng(seed)
    rows = []
    for measure in measures_:
        for first, second in pairs:
            a = group_values(engine, labels_name=labels_name, prediction_name=first, measure=measure)
            b = group_values(engine, labels_name=labels_name, prediction_name=second, measure=measure)
            both = a.dropna().index.intersection(b.dropna().index)
            diffs = (a[both] - b[both]).to_numpy()  # first minus second, as ranking compare reports
            outcome = significance.paired_test(diffs[None, :], test, confidence=1 - alpha, resamples=resamples,
                                               rng=rng)
            rows.append({"measure": measure, "first": first, "second": second, "groups": len(both),
                         "mean first": float(a[both].mean()), "mean second": float(b[both].mean()),
                         "difference": float(diffs.mean()), "statistic": float(outcome.statistic[0]),
                         "p": float(outcome.p_value[0]), "significant": bool(outcome.p_value[0] < alpha)})
    return rows
