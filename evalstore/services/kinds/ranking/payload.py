"""What MLflow receives for a finished ranking evaluation: params, metrics, the per-topic table,
trec_eval's text and two figures.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from evalstore import svg_charts
from evalstore._version import __version__
from evalstore.metrics import mlflow_key
from evalstore.services.kinds.base import (
    MlflowRun,
)
from evalstore.services.kinds.ranking.readback import MAIN_MEASURES, StoredResults, parsed_measure


def mlflow_run(stored: StoredResults) -> MlflowRun:
    """Params (the run's metadata and the options), every aggregate as a metric, the per-topic
    table (Parquet and an MLflow table), trec_eval's text, and two figures (SVG)."""
    meta = stored.header
    tags = {
        "evalstore.evaluation_id": str(stored.evaluation_id),
        "evalstore.results_version": str(meta["results_version"]),
        "evalstore.kind": stored.kind,
        "evalstore.run": stored.run,
        "evalstore.qrels": stored.qrels,
        "evalstore.run_hash": meta["run_hash"],
        "evalstore.qrels_hash": meta["qrels_hash"],
        "evalstore.options_hash": meta["options_hash"],
        "evalstore.version": meta["evalstore_version"] or __version__,
    }
    params: dict[str, Any] = {f"run.{k}": v for k, v in meta["run_metadata"].items()}
    params.update({"run.system": meta["system"] or "", "run.tag": stored.run_tag or ""})
    options = stored.options
    params.update({k: options[k] for k in ("relevance_level", "max_docs", "judged_only", "missing_topics", "tie_rule")})
    params["measures"] = len(options["measures"])
    params["topics"] = len(stored.topics)
    frame = stored.frame.rename_axis("query_id")
    return MlflowRun(
        experiment=stored.qrels,
        name=stored.run,
        tags=tags,
        params=params,
        metrics=dict(stored.aggregates),
        parquet={"per_query.parquet": frame},
        tables={"per_query_table.json": frame.reset_index()},
        texts={"trec_eval.txt": stored.as_trec_eval(per_query=True)},
        dicts={
            "evaluation.json": {
                "evaluation_id": stored.evaluation_id,
                "run": stored.run,
                "qrels": stored.qrels,
                **stored.options,
                **{k: v for k, v in meta.items() if k != "run_metadata"},
            }
        },
        figures=lambda: _figures(stored),
    )


def _figures(stored: StoredResults) -> Iterator[tuple[str, str]]:
    main = next((m for m in MAIN_MEASURES if m in stored.measures), None)
    if main is not None:
        values = sorted(zip(stored.frame[main].astype(float).tolist(), stored.topics, strict=True), reverse=True)
        yield (
            f"per_topic_{mlflow_key(main)}.svg",
            svg_charts.per_topic(
                values,
                stored.aggregates.get(main),
                ylabel=main,
                title=f"{main} per topic: {stored.run} on {stored.qrels}",
            ),
        )
    parsed = ((parsed_measure(m), value) for m, value in stored.aggregates.items())
    curve = sorted((measure.param("recall"), value) for measure, value in parsed if measure.family == "IPrec")
    if len(curve) >= 2:
        yield (
            "precision_recall.svg",
            svg_charts.curves(
                [svg_charts.Line([r for r, _ in curve], [p for _, p in curve], markers=True)],
                xlabel="recall",
                ylabel="interpolated precision",
                title=f"Interpolated precision-recall: {stored.run}",
            ),
        )
