"""A comparison as its own MLflow run: what MLflow receives (:mod:`evalstore.services.tracking`
delivers it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalstore._version import __version__
from evalstore.services import tracking
from evalstore.services.kinds.base import MlflowRun

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from evalstore.services.comparisons.pairwise import Comparison


def log_comparison(comparison: Comparison, figure: Figure | None = None) -> str:
    """Log a comparison as its own MLflow run in the qrels' experiment: settings as params, the
    count of significant differences per measure as metrics, the table (CSV, JSON and an MLflow
    table) and the plot as artifacts. Returns the MLflow run id."""
    import pandas as pd  # pandas costs ~0.3 s to import; only logging builds this frame

    settings = comparison.settings
    name = f"compare: {', '.join(settings.runs)}"
    params = {
        "test": settings.test,
        "correction": settings.correction,
        "alpha": settings.alpha,
        "resamples": settings.resamples,
        "seed": settings.seed,
        "baseline": settings.baseline,
        "missing": settings.missing,
        "runs": ",".join(settings.runs),
        "measures": ",".join(settings.measures),
        "topics": len(comparison.matrix.topics),
        **{f"evaluation.{k}": v for k, v in settings.evaluation_options.items()},
    }
    metrics: dict[str, float | None] = {
        f"significant_pairs.{measure}": float(sum(p.significant for p in comparison.pairs if p.measure == measure))
        for measure in settings.measures
    }
    table = pd.DataFrame([p.as_dict() for p in comparison.pairs])
    payload = MlflowRun(
        experiment=settings.qrels,
        name=name if len(name) <= 250 else name[:247] + "...",
        tags={"evalstore.kind": "comparison", "evalstore.qrels": settings.qrels, "evalstore.version": __version__},
        params=params,
        metrics=metrics,
        tables={"comparison_table.json": table},
        texts={"comparison.csv": table.to_csv(index=False)},
        dicts={"comparison.json": comparison.as_dict()},
        figures=(lambda: iter([("per_topic_differences.png", figure)])) if figure is not None else None,
    )
    return tracking.log_now(payload, "the comparison")
