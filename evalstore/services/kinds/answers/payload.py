"""What MLflow receives for a finished answer evaluation."""

from __future__ import annotations

from evalstore._version import __version__
from evalstore.services.kinds.answers.evaluated import Evaluated
from evalstore.services.kinds.base import MlflowRun


def mlflow_run(result: Evaluated) -> MlflowRun:
    """An answer evaluation as an MLflow run in the nugget bank's experiment: the options as
    params, each measure's mean as a metric, the per-topic values as a table."""
    meta = result.header
    tags = {
        "evalstore.evaluation_id": str(result.evaluation_id),
        "evalstore.results_version": str(meta["results_version"]),
        "evalstore.kind": result.kind,
        "evalstore.answers": result.answers,
        "evalstore.nuggets": result.bank,
        "evalstore.answers_hash": meta["answers_hash"],
        "evalstore.bank_hash": meta["bank_hash"],
        "evalstore.options_hash": meta["options_hash"],
        "evalstore.version": meta["evalstore_version"] or __version__,
    }
    per_topic = {} if result.per_topic is None else {"per_topic.parquet": result.per_topic}
    tables = {} if result.per_topic is None else {"per_topic_table.json": result.per_topic.reset_index()}
    return MlflowRun(
        experiment=result.bank,
        name=result.answers,
        tags=tags,
        params={**result.options, **{f"topics.{m}": n for m, n in result.topic_counts.items()}},
        metrics=dict(result.aggregates),
        parquet=per_topic,
        tables=tables,
        dicts={"evaluation.json": {"evaluation_id": result.evaluation_id, "options": result.options, **meta}},
    )
