"""What MLflow must not receive yet: the results of runs (or answers) submitted to a hidden task, or to a task
with private topics (a public/private split), that is not released. MLflow has no notion of
evalstore's roles, so whoever reads its experiments would read hidden scores (or the private
topics' values); such evaluations stay ``pending`` (never claimed for logging) until the task is
released, and are then logged like any other by the worker's idle sync or ``evalstore mlflow sync``."""

from __future__ import annotations

from sqlalchemy import ColumnElement, Engine, exists, select
from sqlalchemy.orm import Session

from evalstore.db.models import AnswerRun, Evaluation, Submission, Task
from evalstore.db.session import read_only


def embargoed() -> ColumnElement[bool]:
    """True for an evaluation whose run is a submission to an unreleased task that is hidden or
    keeps topics private (a split's private_fraction is set exactly while it has private topics),
    or whose answer run is: an answer submission is its references' ranking run, so any
    evaluation of those answers (on the task's bank, or another) waits too."""
    submitted_answers = select(AnswerRun.id).where(AnswerRun.ranking_run_id == Submission.run_id)
    return exists(
        select(Submission.id)
        .join(Task, Task.id == Submission.task_id)
        .where(
            (Submission.run_id == Evaluation.run_id) | Evaluation.answer_run_id.in_(submitted_answers),
            Task.released_at.is_(None),
            Task.hidden.is_(True) | Task.private_fraction.is_not(None),
        )
    )


def is_embargoed(engine: Engine, evaluation_id: int) -> bool:
    with read_only(engine) as session:
        return embargoed_in(session, evaluation_id)


def embargoed_in(session: Session, evaluation_id: int) -> bool:
    """A step: :func:`is_embargoed` in the caller's unit of work."""
    return bool(session.scalar(select(embargoed()).select_from(Evaluation).where(Evaluation.id == evaluation_id)))
