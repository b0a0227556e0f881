"""What MLflow receives for a finished classification or clustering evaluation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from evalstore import plots
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


def _curve_figures(result: Evaluated) -> Iterator[tuple[str, Any]]:
    """The ROC and precision-recall plots, from the curve points the evaluation stored."""
    points = result.settings.get("curve")
    if not points:
        return
    for name, x, y, xlabel, ylabel, value in (
        (
            "roc_curve.png",
            points["fpr"],
            points["tpr"],
            "false positive rate",
            "true positive rate",
            f"AUC {_shown(result.aggregates.get('auc'))}",
        ),
        (
            "precision_recall_curve.png",
            points["recall"],
            points["precision"],
            "recall",
            "precision",
            f"AP {_shown(result.aggregates.get('average_precision'))}",
        ),
    ):
        figure, axes = plots.curve_axes(xlabel, ylabel, f"{result.predictions} on {result.labels}")
        axes.plot(x, y, color=plots.BLUE, label=value)
        if name == "roc_curve.png":
            axes.plot([0, 1], [0, 1], color=plots.GREY, linestyle=":")
        axes.legend(loc="lower right")
        yield name, figure


def _shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"
