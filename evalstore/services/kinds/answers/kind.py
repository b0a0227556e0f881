"""The answers kind as the registry of kinds holds it (evalstore.services.kinds.KINDS)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from evalstore.services import jobs
from evalstore.services.context import AppContext
from evalstore.services.kinds.answers.board import leaderboard
from evalstore.services.kinds.answers.evaluated import Evaluated
from evalstore.services.kinds.answers.job import compute_job
from evalstore.services.kinds.answers.payload import mlflow_run
from evalstore.services.kinds.answers.readback import stored_evaluation
from evalstore.services.kinds.base import ComputedJob, Leaderboard, MlflowRun, StoredEvaluation


class AnswerKind:
    """Answer runs against a nugget bank's assignments (and citation-support labels)."""

    name = "answers"

    def compute(self, engine: Engine, job: jobs.ClaimedJob, *, context: AppContext | None = None) -> ComputedJob:
        return compute_job(engine, job, context=context)

    def read_back(self, engine: Engine, evaluation_id: int) -> StoredEvaluation:
        return stored_evaluation(engine, evaluation_id)

    def mlflow_run(self, stored: StoredEvaluation) -> MlflowRun:
        assert isinstance(stored, Evaluated), f"the answers kind was handed a {stored.kind} evaluation"
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
        assessor = str((options or {}).get("assessor") or "human")
        return leaderboard(engine, bank_name=judgments, measures=measures, sort=sort, assessor=assessor)


ANSWERS = AnswerKind()
