"""The classifier and clustering kinds as the registry of kinds holds them
(evalstore.services.kinds.KINDS).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from evalstore.services import jobs
from evalstore.services.context import AppContext
from evalstore.services.kinds.base import (
    ComputedJob,
    Leaderboard,
    MlflowRun,
    StoredEvaluation,
)
from evalstore.services.kinds.predictions.board import leaderboard, leaderboard_view
from evalstore.services.kinds.predictions.evaluated import Evaluated
from evalstore.services.kinds.predictions.job import compute_job
from evalstore.services.kinds.predictions.payload import mlflow_run
from evalstore.services.kinds.predictions.readback import stored_evaluation


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

    def leaderboard(
        self,
        engine: Engine,
        *,
        judgments: str,
        measures: list[str],
        sort: str | None,
        options: dict[str, Any] | None = None,
    ) -> Leaderboard:
        names = list(dict.fromkeys([sort, *measures] if sort else measures))
        frame = leaderboard(engine, labels_name=judgments, measure_names=names)
        return leaderboard_view(judgments, [str(c) for c in frame.columns[3:]], frame)


CLASSIFIER = PredictionKind("classifier")


CLUSTERING = PredictionKind("clustering")
