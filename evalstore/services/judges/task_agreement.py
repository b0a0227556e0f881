"""`judgments compare` for a task's organiser (the page /tasks/TASK/judgments): two qrels of the
task's lineage (its qrels, the versions of the lineage they belong to, and the lineage's plain
qrels, e.g. the human ones), compared by the same service as the command, over the task's runs.

The report is computed in the request from the runs and the labels, as the command computes it,
and stores nothing. A leaderboard on a version reads stored evaluations, though: the page lists
the task's runs not yet evaluated on either qrels, and :func:`queue_missing` queues them.
The caller checks that the principal manages the task (services.organising.managed).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import Evaluation, QrelsSet, QrelsVersion, Run, Submission, Task
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import InvalidParameterError, NotFoundError, Remedy
from evalstore.services import jobs
from evalstore.services.judges import compare


def _task(session: Session, name: str) -> Task:
    task = session.scalar(select(Task).where(Task.name == name))
    if task is None:
        raise NotFoundError(f"No task named '{name}'.", remedy=Remedy(cli="See 'evalstore tasks list'."))
    return task


def _choices(session: Session, task: Task) -> list[str]:
    """The task's qrels first, then its lineage's plain qrels and versions (oldest first)."""
    current = session.get(QrelsSet, task.qrels_id)
    assert current is not None
    lineage = session.scalar(select(QrelsVersion.name).where(QrelsVersion.qrels_id == current.id))
    lineage = lineage or current.name
    names = [current.name]
    if repo.find_qrels(session, lineage) is not None:
        names.append(lineage)
    names += list(
        session.scalars(
            select(QrelsSet.name)
            .join(QrelsVersion, QrelsVersion.qrels_id == QrelsSet.id)
            .where(QrelsVersion.name == lineage)
            .order_by(QrelsVersion.version)
        )
    )
    return list(dict.fromkeys(names))


def qrels_choices(engine: Engine, task: str) -> list[str]:
    with read_only(engine) as session:
        return _choices(session, _task(session, task))


def _runs(session: Session, task: Task) -> list[Run]:
    return list(
        session.scalars(
            select(Run)
            .join(Submission, Submission.run_id == Run.id)
            .where(Submission.task_id == task.id)
            .order_by(Run.name)
        )
    )


def _missing(session: Session, task: Task, names: list[str]) -> dict[str, list[str]]:
    """Per qrels, the task's runs with no finished evaluation on it."""
    missing = {}
    for name in names:
        qrels = repo.get_qrels(session, name)
        done = set(
            session.scalars(
                select(Evaluation.run_id).where(Evaluation.qrels_id == qrels.id, Evaluation.state == "done")
            )
        )
        missing[name] = [run.name for run in _runs(session, task) if run.id not in done]
    return missing


def _chosen(session: Session, task: Task, names: list[str]) -> None:
    choices = _choices(session, task)
    for name in names:
        if name not in choices:
            raise InvalidParameterError(
                f"Task '{task.name}' is compared on its qrels' lineage ({', '.join(choices)}); not '{name}'."
            )


class TaskAgreementReport(compare.AgreementReport):
    """The agreement of two qrels over a task's runs, as the agreement page shows it (a TypedDict,
    as :class:`~evalstore.services.judges.compare.AgreementReport` is); ``missing``: per qrels, the
    task's runs with no finished evaluation on it."""

    missing: dict[str, list[str]]


@dataclass(frozen=True)
class QueuedEvaluation:
    """A task's run queued for evaluation on one of the qrels (a job already queued is reused)."""

    run: str
    qrels: str
    job: int
    state: str


def task_report(
    engine: Engine,
    task: str,
    first: str,
    second: str,
    *,
    measures: list[str] | None = None,
    top_k: int = 5,
    test: str = "t",
    alpha: float = 0.05,
) -> TaskAgreementReport:
    """The agreement report of ``second`` with ``first`` over the task's runs, and the runs with
    no stored evaluation on either (``missing``)."""
    with read_only(engine) as session:
        found = _task(session, task)
        _chosen(session, found, [first, second])
        runs = [run.name for run in _runs(session, found)]
        missing = _missing(session, found, [first, second])
        measures = measures or list(found.measures[:2]) or None
    # uncorrected, as the agreement page states its test (the command corrects, by Holm's method unless told)
    report = compare.compare(
        engine, first, second, measures=measures, runs=runs, top_k=top_k, test=test, alpha=alpha, correction="none"
    )
    return {**report, "missing": missing}


def queue_missing(engine: Engine, task: str, qrels: list[str]) -> list[QueuedEvaluation]:
    """Queue the evaluation, with the task's measures, of each of the task's runs that has none
    finished on each of ``qrels``; the jobs queued (a job already queued is reused)."""
    with unit_of_work(engine) as session:
        found = _task(session, task)
        _chosen(session, found, qrels)
        options = jobs.EvaluationOptions(measures=tuple(found.measures)) if found.measures else jobs.EvaluationOptions()
        queued = []
        for name, runs in _missing(session, found, qrels).items():
            target = repo.get_qrels(session, name)
            for run in runs:
                ref = jobs.enqueue_run(session, repo.get_run(session, run), target, options)
                queued.append(QueuedEvaluation(run, name, ref.evaluation_id, ref.state))
        return queued
