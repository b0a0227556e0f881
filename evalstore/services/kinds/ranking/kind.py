"""The ranking kind as the registry of kinds holds it (evalstore.services.kinds.KINDS)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from evalstore.services.context import AppContext
from evalstore.services.jobs import ClaimedJob
from evalstore.services.kinds.base import (
    ComputedJob,
    Leaderboard,
    MlflowRun,
    StoredEvaluation,
)
from evalstore.services.kinds.ranking.board import Selection, leaderboard, leaderboard_view
from evalstore.services.kinds.ranking.job import compute_job
from evalstore.services.kinds.ranking.payload import mlflow_run
from evalstore.services.kinds.ranking.readback import StoredResults, read_back


class RankingKind:
    """Runs against qrels: see the module's functions."""

    name = "ranking"

    def compute(self, engine: Engine, job: ClaimedJob, *, context: AppContext | None = None) -> ComputedJob:
        return compute_job(engine, job, context=context)

    def read_back(self, engine: Engine, evaluation_id: int) -> StoredEvaluation:
        return read_back(engine, evaluation_id)

    def mlflow_run(self, stored: StoredEvaluation) -> MlflowRun:
        assert isinstance(stored, StoredResults), f"a ranking kind was handed a {stored.kind} evaluation"
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
        board = leaderboard(
            engine,
            qrels_name=judgments,
            measures=measures or None,
            sort=sort,
            selection=Selection(**options) if options else None,
        )
        return leaderboard_view(judgments, board, sort)


RANKING = RankingKind()
