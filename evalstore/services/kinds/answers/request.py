"""Answer runs' evaluations asked for (:func:`evalstore.services.orchestration.evaluate`): the
request, and the report of its jobs."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from evalstore.services.jobs import JobRef, JobView
from evalstore.services.kinds.answers.board import DEFAULT_MEASURES
from evalstore.services.kinds.answers.queueing import enqueue
from evalstore.services.kinds.answers.readback import stored_evaluation
from evalstore.services.kinds.base import Report


@dataclass(frozen=True)
class AnswerRequest:
    """Answer runs (every run assessed on the bank when ``answers`` is None) against a nugget
    bank's assignments by ``assessor`` (``human``, or ``judge:NAME``)."""

    bank: str
    answers: list[str] | None
    assessor: str = "human"
    force: bool = False
    max_attempts: int = 3

    def enqueue(self, engine: Engine) -> list[JobRef]:
        return enqueue(
            engine,
            bank_name=self.bank,
            answer_names=self.answers,
            assessor=self.assessor,
            force=self.force,
            max_attempts=self.max_attempts,
        )

    def report(self, engine: Engine, views: list[JobView], waited: bool) -> Report:
        """The jobs; once waited for, each finished evaluation's headline measures."""
        if not waited:
            return Report(
                "evaluations", ["id", "run", "qrels", "state", "attempts", "mlflow_state"], [v.as_dict() for v in views]
            )
        rows = []
        for view in views:
            if view.state != "done":
                continue
            result = stored_evaluation(engine, view.id, with_topics=False)
            rows.append(
                {
                    "evaluation": result.evaluation_id,
                    "answers": result.answers,
                    **{m: result.aggregates.get(m) for m in DEFAULT_MEASURES},
                    "topics": max(result.topic_counts.values(), default=0),
                    "mlflow_state": view.mlflow_state,
                }
            )
        return Report(
            f"evaluations on nugget bank '{self.bank}' ({self.assessor} assignments)",
            ["evaluation", "answers", *DEFAULT_MEASURES, "topics", "mlflow_state"],
            rows,
        )
