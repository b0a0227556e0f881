"""What MLflow receives for a finished classification or clustering evaluation."""

from __future__ import annotations

from collections.abc import Iterator

from evalstore import svg_charts
from evalstore._version import __version__
from evalstore.services.kinds.base import (
    MlflowRun,
)
from evalstore.services.kinds.predictions.evaluated import Evaluated


def mlflow_run(result: Evaluated) -> MlflowRun:
    """A classification evaluation as an MLflow run in the gold labels' experiment: options and
    the prediction set's metadata as params, every aggregate as a metric, the per-group table, and
    the ROC and precision-recall curves (binary scores) as figures."""
    meta = result.header
    tags = {
        "evalstore.evaluation_id": str(result.evaluation_id),
        "evalstore.results_version": str(meta["results_version"]),
        "evalstore.kind": result.kind,
        "evalstore.predictions": result.predictions,
        "evalstore.labels": result.labels,
        "evalstore.predictions_hash": meta["predictions_hash"],
        "evalstore.labels_hash": meta["labels_hash"],
        "evalstore.options_hash": meta["options_hash"],
        "evalstore.version": meta["evalstore_version"] or __version__,
    }
    params = {
        **{f"predictions.{k}": v for k, v in (result.metadata or {}).items()},
        **{k: v for k, v in result.options.items() if k != "baseline_hash"},
        "threshold_used": result.settings.get("threshold"),
    }
    per_group = {} if result.per_group is None else {"per_group.parquet": result.per_group}
    tables = {} if result.per_group is None else {"per_group_table.json": result.per_group.reset_index()}
    return MlflowRun(
        experiment=result.labels,
        name=result.predictions,
        tags=tags,
        params=params,
        metrics=dict(result.aggregates),
        parquet=per_group,
        tables=tables,
        dicts={
            "evaluation.json": {
                "evaluation_id": result.evaluation_id,
                "options": result.options,
                **{k: v for k, v in result.settings.items() if k != "curve"},
                **meta,
            }
        },
        figures=lambda: _curve_figures(result),
    )


def _curve_figures(result: Evaluated) -> Iterator[tuple[str, str]]:
    """The ROC and precision-recall figures (SVG), from the curve points the evaluation stored."""
    points = result.settings.get("curve")
    if not points:
        return
    title = f"{result.predictions} on {result.labels}"
    roc = svg_charts.Line(points["fpr"], points["tpr"], label=f"AUC {_shown(result.aggregates.get('auc'))}")
    chance = svg_charts.Line([0, 1], [0, 1], colour=svg_charts.GREY, dotted=True)
    yield (
        "roc_curve.svg",
        svg_charts.curves([roc, chance], xlabel="false positive rate", ylabel="true positive rate", title=title),
    )
    pr = svg_charts.Line(
        points["recall"], points["precision"], label=f"AP {_shown(result.aggregates.get('average_precision'))}"
    )
    yield "precision_recall_curve.svg", svg_charts.curves([pr], xlabel="recall", ylabel="precision", title=title)


def _shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"
