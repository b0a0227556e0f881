"""What MLflow must not receive yet: the results of runs (or answers) submitted to a hidden task, or to a task
with private topics (a public/private split), that is not released. MLflow has no notion of
evalstore's roles, so whoever reads its experiments would read hidden scores (or the private
topics' values); such evaluations stay ``pending`` (never claimed for logging) until the task is
released, and are then logged like any other by the worker's idle sync or ``evalstore mlflow sync``."""

from __future__ import annotations

from sqlalchemy import ColumnElement, Engine, exists, select
from sqlalchemy.orm import Session

from evalstore.db.models import AnswerRun, Evaluation, Submission, Task
from evalstore.db.session import read_only, unit_of_work
from evalstore.services import jobs
from evalstore.services.access import audit


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


def release_due(engine: Engine) -> list[str]:
    """Release every task whose scheduled time has come (the worker calls this between jobs), each
    once: the row is locked and read again, so two workers release it once. The names released.
    Here, below the worker, so that an idle worker performs it (tasks.schedule_release sets it)."""
    with read_only(engine) as session:
        now = jobs.db_now(session)
        scheduled = session.execute(select(Task.id, Task.release_at).where(Task.release_at.is_not(None))).all()
        # compared here, not in SQL: SQLite keeps times as text without their offset
        due = [task_id for task_id, at in scheduled if at is not None and jobs.as_utc(at) <= now]
    released = []
    for task_id in due:
        with unit_of_work(engine) as session:
            task = session.scalar(select(Task).where(Task.id == task_id).with_for_update())
            if task is None or task.release_at is None or jobs.as_utc(task.release_at) > jobs.db_now(session):
                continue
            task.released_at = task.released_at or task.release_at
            scheduled_at = jobs.as_utc(task.release_at).isoformat(timespec="seconds")
            audit(session, None, "tasks.release", task.name, {"scheduled": scheduled_at})
            task.release_at = None
            released.append(task.name)
    return released
