"""The classifier and clustering kinds: prediction sets evaluated against their gold labels with
:mod:`evalstore.metrics.classification`, results stored per prediction set and per group.

The sets themselves are stored and read by :mod:`evalstore.services.labels`.

The package's modules, by job: queueing (options checked, one job per prediction set), alignment
(predictions in the gold labels' order, as codes), job (a worker computing the suite), evaluated
(the evaluation as the kind hands it on), readback (finished evaluations read back), board (the
leaderboard of prediction sets on one set of gold labels), payload (what MLflow receives) and kind
(the classifier and clustering kinds the registry holds).
"""

from __future__ import annotations

from evalstore.services.kinds.predictions.alignment import (
    Aligned,
    aligned,
)
from evalstore.services.kinds.predictions.board import (
    DEFAULT_LEADERBOARD,
    MULTILABEL_LEADERBOARD,
    SHOWN_MEASURES,
    leaderboard,
)
from evalstore.services.kinds.predictions.evaluated import (
    Evaluated,
)
from evalstore.services.kinds.predictions.job import (
    compute_job,
    run_job,
)
from evalstore.services.kinds.predictions.kind import (
    CLASSIFIER,
    CLUSTERING,
    PredictionKind,
)
from evalstore.services.kinds.predictions.payload import (
    mlflow_run,
)
from evalstore.services.kinds.predictions.queueing import (
    enqueue,
)
from evalstore.services.kinds.predictions.readback import (
    group_values,
    latest_evaluations,
    newest_results,
    stored_evaluation,
)

__all__ = [
    "Aligned",
    "CLASSIFIER",
    "CLUSTERING",
    "DEFAULT_LEADERBOARD",
    "Evaluated",
    "MULTILABEL_LEADERBOARD",
    "PredictionKind",
    "SHOWN_MEASURES",
    "aligned",
    "compute_job",
    "enqueue",
    "group_values",
    "latest_evaluations",
    "leaderboard",
    "mlflow_run",
    "newest_results",
    "run_job",
    "stored_evaluation",
]
