"""What a principal may see of tasks: their views, who manages them, whether scores are visible, and
the jobs, submissions and results of a task as the asker may see them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NotRequired, Protocol, TypedDict

import numpy as np
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import (
    Evaluation,
    NuggetBank,
    QrelsSet,
    Run,
    Submission,
    Task,
    TopicSet,
    User,
)
from evalstore.db.session import read_only
from evalstore.errors import (
    AccessDenied,
    InvalidParameterError,
    NotFoundError,
    Remedy,
)
from evalstore.metrics import headline_measures, resolve_measures
from evalstore.metrics.answers import answer_measure
from evalstore.services import jobs
from evalstore.services.access import Principal
from evalstore.services.kinds import ranking

RUN_TYPES = ("automatic", "manual")


HIDDEN = "hidden until the organisers release the task"
NO_TASK = Remedy(cli="See 'evalstore tasks list'.")


LEADERBOARD_MEASURES = tuple(headline_measures("ranking"))  # the registry's headline measures


@dataclass(frozen=True)
class TaskView:
    name: str
    qrels: str | None  # None: a task over a nugget bank (``nuggets``), which takes answers
    owner: str | None
    hidden: bool
    released_at: datetime | None
    opens_at: datetime | None
    closes_at: datetime | None
    max_runs_per_team: int | None
    measures: list[str]
    created_at: datetime
    description: str | None = None
    daily_cap: int | None = None
    official_measure: str | None = None
    private_topics: tuple[str, ...] = ()  # a public/private split's private topics (empty: no split)
    private_fraction: float | None = None
    split_seed: int | None = None
    nuggets: str | None = None
    release_at: datetime | None = None  # a scheduled release, not yet performed
    topics: str | None = None  # the topic set participants download

    @property
    def takes_answers(self) -> bool:
        return self.nuggets is not None

    @property
    def opening_measure(self) -> str:
        """The measure the task's compare and run pages open on (:func:`jobs.opening_measure`)."""
        return jobs.opening_measure(self.official_measure)

    def as_dict(self) -> dict[str, Any]:
        """The task as anyone who may see it sees it: a split says how many topics are private and
        how they were drawn, never which (the organisers' `tasks show` lists them)."""
        return {
            "name": self.name,
            "qrels": self.qrels,
            "nuggets": self.nuggets,
            "takes": "answers" if self.takes_answers else "runs",
            "owner": self.owner,
            "hidden": self.hidden,
            "released_at": iso_text(self.released_at),
            "opens_at": iso_text(self.opens_at),
            "closes_at": iso_text(self.closes_at),
            "max_runs_per_team": self.max_runs_per_team,
            "daily_cap": self.daily_cap,
            "measures": self.measures,
            "created_at": iso_text(self.created_at),
            "description": self.description,
            "official_measure": self.official_measure,
            "private_topics": len(self.private_topics) if self.private_topics else None,
            "private_fraction": self.private_fraction,
            "split_seed": self.split_seed,
            "release_at": iso_text(self.release_at),
            "topics": self.topics,
        }


def iso_text(value: datetime | None) -> str | None:
    return jobs.as_utc(value).isoformat(timespec="seconds") if value else None


def task_view(session: Session, task: Task) -> TaskView:
    qrels_name = session.scalar(select(QrelsSet.name).where(QrelsSet.id == task.qrels_id)) if task.qrels_id else None
    bank_name = (
        session.scalar(select(NuggetBank.name).where(NuggetBank.id == task.nugget_bank_id))
        if task.nugget_bank_id
        else None
    )
    owner = session.scalar(select(User.name).where(User.id == task.owner_id)) if task.owner_id else None
    topics = (
        session.scalar(select(TopicSet.name).where(TopicSet.id == task.topic_set_id)) if task.topic_set_id else None
    )
    return TaskView(
        task.name,
        qrels_name,
        owner,
        task.hidden,
        task.released_at,
        task.opens_at,
        task.closes_at,
        task.max_runs_per_team,
        list(task.measures or []),
        task.created_at,
        task.description,
        task.daily_cap,
        task.official_measure,
        tuple(task.private_topics or ()),
        task.private_fraction,
        task.split_seed,
        bank_name,
        task.release_at,
        topics,
    )


def task_measures(measures: Sequence[str], *, answers: bool) -> list[str]:
    """A task's measures by their canonical names: ranking measures, or the answer measures
    (nuggetizer's names taken too) on a task over a nugget bank."""
    if not measures:
        return []
    if answers:
        return list(dict.fromkeys(answer_measure(m).family.name for m in measures))
    return [str(m) for m in resolve_measures(list(measures))]


def get_task(session: Session, name: str) -> Task:
    return repo.get_named(session, Task, name, f"No task named '{name}'.", NO_TASK)


class _TaskLike(Protocol):
    """A task row, or a board's snapshot of one."""

    @property
    def owner_id(self) -> int | None: ...
    @property
    def hidden(self) -> bool: ...
    @property
    def released_at(self) -> datetime | None: ...
    @property
    def private_topics(self) -> Sequence[str] | None: ...


def manages(principal: Principal, task: _TaskLike) -> bool:
    """Admins manage every task; an organiser the tasks they own."""
    return principal.is_admin or (principal.role == "organiser" and task.owner_id == principal.user_id)


def scores_are_visible(principal: Principal, task: _TaskLike) -> bool:
    return not task.hidden or task.released_at is not None or manages(principal, task)


def public_only(principal: Principal, task: _TaskLike) -> bool:
    """Whether the principal sees the task's public topics only: a task with a public/private
    split, before its release, to everyone but its organiser and admins (Kaggle's public board)."""
    return bool(task.private_topics) and task.released_at is None and not manages(principal, task)


def judgments_visible(principal: Principal, task: _TaskLike) -> bool:
    """Whether the principal may see the task's qrels' labels themselves (a document's grade):
    its organisers and admins always, everyone else once the task is released. Before, a
    participant's own runs' top documents with their grades would hand out the qrels a page at a
    time, past any quota, on an open task as on a hidden one."""
    return manages(principal, task) or task.released_at is not None


def public_topics(task: _TaskLike) -> ranking.TopicFilter:
    """The topics a split task's public board is over: every topic but the private ones (topics
    the qrels gain after the draw are public)."""
    return ranking.TopicFilter(frozenset(task.private_topics or ()), exclude=True)


def private_topics(task: _TaskLike) -> ranking.TopicFilter:
    return ranking.TopicFilter(frozenset(task.private_topics or ()))


@dataclass(frozen=True)
class TaskAccess:
    """What a principal may do with a task's results: see its scores, open which teams' runs."""

    task: str
    qrels: str | None  # None: a task over a nugget bank, which takes answers
    qrels_source: str | None
    scores_visible: bool
    manages: bool
    team: str | None  # a participant's team, whose runs they may open
    topics: ranking.TopicFilter | None = None  # the topics the principal may see values of (None: all)
    board_topics: ranking.TopicFilter | None = None  # what the board ranks on: a split task's public topics
    judgments_visible: bool = False  # the qrels' own labels: the organisers', everyone's after the release

    @property
    def aggregates_only(self) -> bool:
        """A split task before its release, to a participant: no per-topic value and no topic id
        (naming the public topics names the private ones, the rest of the qrels' topics)."""
        return self.topics is not None

    def may_open(self, team: str | None) -> bool:
        return self.manages or (self.team is not None and team == self.team)


def task_access(engine: Engine, principal: Principal, task_name: str) -> TaskAccess:
    with read_only(engine) as session:
        task = get_task(session, task_name)
        qrels = session.get(QrelsSet, task.qrels_id) if task.qrels_id is not None else None
        return TaskAccess(
            task.name,
            qrels.name if qrels else None,
            qrels.source if qrels else None,
            scores_are_visible(principal, task),
            manages(principal, task),
            principal.team if principal.role == "participant" else None,
            public_topics(task) if public_only(principal, task) else None,
            public_topics(task) if task.private_topics else None,
            judgments_visible(principal, task),
        )


def visible_submission(session: Session, principal: Principal, run_name: str) -> tuple[Submission, Task]:
    """The submission of the run, if the principal may see it (its team, the task's organiser, an
    admin); otherwise the same 'not found' as for a run that does not exist."""
    principal.require("runs:read")
    row = session.execute(
        select(Submission, Task)
        .join(Run, Run.id == Submission.run_id)
        .join(Task, Task.id == Submission.task_id)
        .where(Run.name == run_name)
    ).first()
    if row is None:
        if repo.find_run(session, run_name) is None:
            raise NotFoundError(f"No run named '{run_name}'.")
        if principal.is_admin:
            raise NotFoundError(
                f"Run '{run_name}' was not submitted to a task.", remedy=Remedy(cli="See 'evalstore results show'.")
            )
        raise name_taken(run_name)
    submission, task = row
    if not sees_submission(principal, submission, task):
        raise name_taken(run_name)
    return submission, task


def sees_submission(principal: Principal, submission: Submission, task: Task) -> bool:
    return manages(principal, task) or (principal.role == "participant" and submission.team == principal.team)


def name_taken(run_name: str) -> AccessDenied:
    """What reading, withdrawing or submitting under the name of a run the caller may not see
    answers, alike (403): run names are unique across teams, so a submission under a taken name
    must be refused, which tells that it exists; reading it saying "not found" would only make
    the two answers an oracle that tells the caller which names belong to someone else. It says
    no "choose another name": the same words answer someone only reading the run."""
    return AccessDenied(
        f"The run name '{run_name}' belongs to another team's run (or one you may not see): it can "
        "be neither read nor submitted under."
    )


class TaskJob(TypedDict):
    """A submitted run's job as the API sends it (a TypedDict: it goes to JSON as built), with
    the run, task and team it is for. ``mlflow_run_id`` only for the task's organiser and admins."""

    id: int
    state: str
    queue_position: int | None
    worker: str | None
    heartbeat_at: str | None
    attempts: int
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    error: str | None
    mlflow_run_id: NotRequired[str | None]
    run: str
    task: str
    team: str


class SubmittedRun(TypedDict):
    """A submitted run as the API sends it (``task``: when shown alone, not in its task's list)."""

    run: str
    team: str
    run_type: str
    judging_precedence: int | None
    description: str | None
    rows: int
    topics: int
    submitted_at: str | None
    job: int | None
    state: str | None
    task: NotRequired[str]


def _task_job(
    session: Session, principal: Principal, job: Evaluation, task: Task, *, run_name: str, team: str
) -> TaskJob:
    """A job as the principal may see it: before a hidden task's release, a participant sees the
    state and the queue, never the error text (it may quote the qrels) or the MLflow run."""
    position = None
    if job.state == "queued":
        position = 1 + (
            session.scalar(
                select(func.count()).select_from(Evaluation).where(Evaluation.state == "queued", Evaluation.id < job.id)
            )
            or 0
        )
    open_ = scores_are_visible(principal, task)
    shown = TaskJob(
        id=job.id,
        state=job.state,
        queue_position=position,
        worker=job.worker_id,
        heartbeat_at=iso_text(job.heartbeat_at),
        attempts=job.attempts,
        created_at=iso_text(job.created_at),
        started_at=iso_text(job.started_at),
        finished_at=iso_text(job.finished_at),
        error=job.error if open_ else (HIDDEN if job.error else None),
        mlflow_run_id=job.mlflow_run_id,
        run=run_name,
        task=task.name,
        team=team,
    )
    if not manages(principal, task):
        del shown["mlflow_run_id"]
    return shown


def show_job(engine: Engine, principal: Principal, job_id: int) -> TaskJob | jobs.JobView:
    """A submitted run's job: its team, the task's organiser and admins see it (admins: any job,
    one not of a task as `jobs show` gives it)."""
    principal.require("jobs:read")
    found = submitted_job(engine, principal, job_id, admin_any=True)
    return jobs.show_job(engine, job_id) if found is None else found


def submitted_job(engine: Engine, principal: Principal, job_id: int, *, admin_any: bool = False) -> TaskJob | None:
    """A submitted run's job as its team, the task's organiser and admins see it; NotFoundError for
    anyone else (``admin_any``: None for an admin asking for a job not of a task)."""
    principal.require("jobs:read")
    with read_only(engine) as session:
        row = session.execute(_submitted_jobs().where(Evaluation.id == job_id)).first()
        if row is None and admin_any and principal.is_admin:
            return None
        if row is None or not (
            manages(principal, row[2]) or (principal.role == "participant" and row[1].team == principal.team)
        ):
            raise NotFoundError(f"No job {job_id} of yours.")
        job, submission, task, run_name = row
        return _task_job(session, principal, job, task, run_name=run_name, team=submission.team)


PENDING = ("queued", "running")
LIVE_JOBS_MAX = 100  # the jobs one page follows at most: a poll's cost stays bounded


@dataclass(frozen=True)
class LiveJob:
    """A submitted run's job as a page following it sees it now: its state, its place in the
    queue while queued, and its error as the caller may read it."""

    id: int
    state: str
    queue_position: int | None
    error: str | None


def live_jobs(engine: Engine, principal: Principal, job_ids: Sequence[int]) -> list[LiveJob]:
    """The jobs among ``job_ids`` the caller may see (their team's, their tasks', an admin any
    submitted run's); the others are left out, as jobs that are not there. One query, whatever
    their number (at most ``LIVE_JOBS_MAX``): each queued job's place is counted in it."""
    principal.require("runs:read")
    if len(job_ids) > LIVE_JOBS_MAX:
        raise InvalidParameterError(f"Follow at most {LIVE_JOBS_MAX} jobs at once; this asked for {len(job_ids)}.")
    # an id no row can have (a job's id is a 32-bit integer) is a job that is not there: the
    # database is not asked about a number its column cannot hold
    job_ids = [j for j in job_ids if 1 <= j <= 2**31 - 1]
    if not job_ids:
        return []
    ahead = Evaluation.__table__.alias("ahead")
    place = (
        select(func.count())
        .select_from(ahead)
        .where(ahead.c.state == "queued", ahead.c.id < Evaluation.id)
        .scalar_subquery()
    )
    statement = (
        select(Evaluation.id, Evaluation.state, Evaluation.error, place, Submission.team, Task)
        .join(Submission, Submission.evaluation_id == Evaluation.id)
        .join(Task, Task.id == Submission.task_id)
        .where(Evaluation.id.in_(sorted(set(job_ids))))
        .order_by(Evaluation.id)
    )
    if not principal.is_admin:  # the rows of others are not read at all
        mine = Submission.team == principal.team if principal.role == "participant" else None
        statement = statement.where(Task.owner_id == principal.user_id if mine is None else mine)
    with read_only(engine) as session:
        return [
            LiveJob(
                id=job_id,
                state=state,
                queue_position=1 + int(before or 0) if state == "queued" else None,
                error=(error if scores_are_visible(principal, task) else HIDDEN) if error else None,
            )
            for job_id, state, error, before, team, task in session.execute(statement)
            if manages(principal, task) or (principal.role == "participant" and team == principal.team)
        ]


def _submitted_jobs() -> Any:
    """Jobs of submitted runs, with (job, submission, task, run name)."""
    return (
        select(Evaluation, Submission, Task, Run.name)
        .join(Submission, Submission.evaluation_id == Evaluation.id)
        .join(Task, Task.id == Submission.task_id)
        .join(Run, Run.id == Submission.run_id)
    )


def queue(
    engine: Engine, principal: Principal, *, states: Sequence[str] = ("queued", "running"), limit: int = 200
) -> list[TaskJob]:
    """The queue as organisers see it: every job of their tasks (admins: every job)."""
    principal.require("queue:read")
    with read_only(engine) as session:
        statement = _submitted_jobs().where(Evaluation.state.in_(states)).order_by(Evaluation.id).limit(limit)
        if not principal.is_admin:
            statement = statement.where(Task.owner_id == principal.user_id)
        return [
            _task_job(session, principal, job, task, run_name=run_name, team=submission.team)
            for job, submission, task, run_name in session.execute(statement)
        ]


def task_runs(engine: Engine, principal: Principal, task_name: str) -> list[SubmittedRun]:
    """The task's runs the principal may see: their team's, or all for the organiser."""
    principal.require("runs:read")
    with read_only(engine) as session:
        task = get_task(session, task_name)
        statement = (
            select(Submission, Run, Evaluation)
            .join(Run, Run.id == Submission.run_id)
            .outerjoin(Evaluation, Evaluation.id == Submission.evaluation_id)
            .where(Submission.task_id == task.id)
            .order_by(Submission.id)
        )
        if not manages(principal, task):
            if principal.role != "participant":
                return []
            statement = statement.where(Submission.team == principal.team)
        return [_submission_dict(submission, run, job) for submission, run, job in session.execute(statement)]


def show_submission(engine: Engine, principal: Principal, run_name: str) -> SubmittedRun:
    """A submitted run as its team, the task's organiser and admins see it."""
    with read_only(engine) as session:
        submission, task = visible_submission(session, principal, run_name)
        run = repo.get_run(session, run_name)
        job = session.get(Evaluation, submission.evaluation_id) if submission.evaluation_id else None
        shown = _submission_dict(submission, run, job)
        shown["task"] = task.name
        return shown


class SubmissionState(SubmittedRun):
    """A submitted run with its job's queue position, error (as the asker may read it) and
    attempts, as the organiser's console and the team's runs page list it."""

    queue_position: int | None
    error: str | None
    attempts: int | None


def submission_state(engine: Engine, principal: Principal, run: SubmittedRun) -> SubmissionState:
    """``run`` (from :func:`task_runs`) with its job's state; its job is read as :func:`show_job`
    would show it to ``principal``."""
    job = submitted_job(engine, principal, run["job"]) if run["job"] else None
    return SubmissionState(
        **run,
        queue_position=job["queue_position"] if job else None,
        error=job["error"] if job else None,
        attempts=job["attempts"] if job else None,
    )


def _submission_dict(submission: Submission, run: Run, job: Evaluation | None) -> SubmittedRun:
    return SubmittedRun(
        run=run.name,
        team=submission.team,
        run_type=submission.run_type,
        judging_precedence=submission.judging_precedence,
        description=run.description,
        rows=run.row_count,
        topics=run.topic_count,
        submitted_at=iso_text(submission.created_at),
        job=submission.evaluation_id,
        state=job.state if job is not None else None,
    )


def number_text(value: Any) -> Any:
    if isinstance(value, float | np.floating):
        return None if np.isnan(value) else float(value)
    return value
