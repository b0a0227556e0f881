"""Shared tasks: an organiser's qrels, the runs teams submit to them, and who may see what.

A task evaluates every submitted run against its qrels with its measures. A hidden task shows
scores to its organiser (and admins) only, until the organiser releases it: before that, everyone
else sees that a run was evaluated and that its scores are hidden, never a number, a per-topic
value, an error message or an MLflow link that could tell them about the qrels.

Every function takes the :class:`~evalstore.services.access.Principal` asking and decides what
it may see; the HTTP routes only pass it on.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import (
    AggregateResult,
    Evaluation,
    QrelsSet,
    Run,
    Submission,
    Task,
    User,
)
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import (
    AccessDenied,
    ConflictError,
    InputFormatError,
    InvalidParameterError,
    LimitExceeded,
    NotFoundError,
)
from evalstore.metrics import resolve_measures
from evalstore.services import jobs, store
from evalstore.services.access import Principal, audit, get_user
from evalstore.services.kinds import ranking

RUN_TYPES = ("automatic", "manual")
HIDDEN = "hidden until the organisers release the task"
LEADERBOARD_MEASURES = ("AP", "nDCG@10", "P@10", "RR")
# a job's state as a slot in a team's quota: failed and cancelled runs give theirs back
_HOLDS_SLOT = ("queued", "running", "done")


@dataclass(frozen=True)
class TaskView:
    name: str
    qrels: str
    owner: str | None
    hidden: bool
    released_at: datetime | None
    opens_at: datetime | None
    closes_at: datetime | None
    max_runs_per_team: int | None
    measures: list[str]
    created_at: datetime
    description: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "qrels": self.qrels, "owner": self.owner, "hidden": self.hidden,
                "released_at": _iso(self.released_at), "opens_at": _iso(self.opens_at),
                "closes_at": _iso(self.closes_at), "max_runs_per_team": self.max_runs_per_team,
                "measures": self.measures, "created_at": _iso(self.created_at), "description": self.description}


def _iso(value: datetime | None) -> str | None:
    return jobs.as_utc(value).isoformat(timespec="seconds") if value else None


def _task_view(session: Session, task: Task) -> TaskView:
    qrels_name = session.scalar(select(QrelsSet.name).where(QrelsSet.id == task.qrels_id))
    owner = session.scalar(select(User.name).where(User.id == task.owner_id)) if task.owner_id else None
    return TaskView(task.name, str(qrels_name), owner, task.hidden, task.released_at, task.opens_at, task.closes_at,
                    task.max_runs_per_team, list(task.measures or []), task.created_at, task.description)


def _get_task(session: Session, name: str) -> Task:
    return repo.get_named(session, Task, name, f"No task named '{name}'. See 'evalstore tasks list'.")


class _TaskLike(Protocol):
    """A task row, or a board's snapshot of one."""

    @property
    def owner_id(self) -> int | None: ...
    @property
    def hidden(self) -> bool: ...
    @property
    def released_at(self) -> datetime | None: ...


def manages(principal: Principal, task: _TaskLike) -> bool:
    """Admins manage every task; an organiser the tasks they own."""
    return principal.is_admin or (principal.role == "organiser" and task.owner_id == principal.user_id)


def _scores_visible(principal: Principal, task: _TaskLike) -> bool:
    return not task.hidden or task.released_at is not None or manages(principal, task)


@dataclass(frozen=True)
class TaskAccess:
    """What a principal may do with a task's results: see its scores, open which teams' runs."""

    task: str
    qrels: str
    qrels_source: str | None
    scores_visible: bool
    manages: bool
    team: str | None  # a participant's team, whose runs they may open

    def may_open(self, team: str) -> bool:
        return self.manages or (self.team is not None and team == self.team)


def task_access(engine: Engine, principal: Principal, task_name: str) -> TaskAccess:
    with read_only(engine) as session:
        task = _get_task(session, task_name)
        qrels = session.get(QrelsSet, task.qrels_id)
        assert qrels is not None
        return TaskAccess(task.name, qrels.name, qrels.source, _scores_visible(principal, task),
                          manages(principal, task), principal.team if principal.role == "participant" else None)


# --- organising ---------------------------------------------------------------------------------


def create_task(engine: Engine, name: str, *, qrels_name: str, hidden: bool = False, opens: datetime | None = None,
                closes: datetime | None = None, max_runs_per_team: int | None = None,
                measures: Sequence[str] = (), owner: str | None = None, by: Principal | None = None) -> TaskView:
    """A task over stored qrels. ``owner`` (a user's name; default: ``by``) is the organiser who
    manages it."""
    if max_runs_per_team is not None and max_runs_per_team < 1:
        raise InvalidParameterError(f"--max-runs-per-team must be at least 1; got {max_runs_per_team}.")
    if opens is not None and closes is not None and closes <= opens:
        raise InvalidParameterError(f"--closes ({closes.isoformat()}) must come after --opens ({opens.isoformat()}).")
    names = [str(m) for m in resolve_measures(list(measures))] if measures else []
    with unit_of_work(engine) as session:
        if session.scalar(select(Task.id).where(Task.name == name)) is not None:
            raise ConflictError(f"A task named '{name}' exists already; choose another name.")
        qrels = repo.get_qrels(session, qrels_name)
        if qrels.kind != "relevance":
            raise InvalidParameterError(f"Tasks evaluate against relevance qrels; '{qrels_name}' holds {qrels.kind}.")
        owner_id = get_user(session, owner).id if owner else by.user_id if by else None
        if by is not None and not by.is_admin:
            if owner_id != by.user_id:
                raise AccessDenied("An organiser creates tasks they own; only an admin names another owner.")
            # a task's organiser may export its qrels: one organiser's qrels (hidden ones above all)
            # must not be had by creating a task over them
            others = set(session.scalars(select(Task.owner_id).where(Task.qrels_id == qrels.id))) - {by.user_id}
            if others:
                raise AccessDenied(f"Qrels '{qrels_name}' are the judgments of another organiser's task; an admin "
                                   "may create a task over them for you.")
        task = Task(name=name, qrels_id=qrels.id, owner_id=owner_id, hidden=hidden, opens_at=opens, closes_at=closes,
                    max_runs_per_team=max_runs_per_team, measures=names)
        session.add(task)
        session.flush()
        audit(session, by.name if by else None, "tasks.create", name, {"qrels": qrels_name, "hidden": hidden})
        return _task_view(session, task)


def release_task(engine: Engine, name: str, *, by: Principal | None = None) -> TaskView:
    """Make a hidden task's scores visible to everyone who may see the task."""
    with unit_of_work(engine) as session:
        task = _managed_task(session, name, by)
        task.released_at = task.released_at or jobs.db_now(session)
        audit(session, by.name if by else None, "tasks.release", name)
        return _task_view(session, task)


# a task's description is a few paragraphs for participants, not a document store
DESCRIPTION_CHARACTERS = 20_000


def update_task(engine: Engine, name: str, *, opens: datetime | None, closes: datetime | None,
                max_runs_per_team: int | None, measures: Sequence[str], description: str | None,
                by: Principal | None = None) -> TaskView:
    """Change a task's settings, all at once (the organiser's form shows every one): its
    submission window, a team's quota, its measures (runs submitted from now on are evaluated with
    them; past evaluations keep theirs) and its description. Only its organiser and admins."""
    with unit_of_work(engine) as session:
        task = _managed_task(session, name, by)
        change_settings(session, task, opens=opens, closes=closes, max_runs_per_team=max_runs_per_team,
                        measures=measures, description=description)
        audit(session, by.name if by else None, "tasks.update", name,
              {"opens": _iso(opens), "closes": _iso(closes), "max_runs_per_team": max_runs_per_team,
               "measures": list(task.measures)})
        return _task_view(session, task)


def change_settings(session: Session, task: Task, *, opens: datetime | None, closes: datetime | None,
                    max_runs_per_team: int | None, measures: Sequence[str], description: str | None) -> None:
    """The step of :func:`update_task`: check the settings as create_task does, and set them."""
    if max_runs_per_team is not None and max_runs_per_team < 1:
        raise InvalidParameterError(f"The quota per team must be at least 1 run; got {max_runs_per_team}.")
    if opens is not None and closes is not None and closes <= opens:
        raise InvalidParameterError(f"The window must close ({closes.isoformat()}) after it opens "
                                    f"({opens.isoformat()}).")
    if description is not None and len(description) > DESCRIPTION_CHARACTERS:
        raise InvalidParameterError(f"The description has {len(description)} characters; "
                                    f"at most {DESCRIPTION_CHARACTERS} fit.")
    task.opens_at, task.closes_at, task.max_runs_per_team = opens, closes, max_runs_per_team
    task.measures = [str(m) for m in resolve_measures(list(measures))] if measures else []
    task.description = description or None


def _managed_task(session: Session, name: str, by: Principal | None) -> Task:
    task = _get_task(session, name)
    if by is not None and not manages(by, task):
        raise AccessDenied(f"Task '{name}' is managed by its organiser; you may not change it.")
    return task


def list_tasks(engine: Engine) -> list[TaskView]:
    with read_only(engine) as session:
        return [_task_view(session, t) for t in session.scalars(select(Task).order_by(Task.name))]


def show_task(engine: Engine, name: str) -> TaskView:
    with read_only(engine) as session:
        return _task_view(session, _get_task(session, name))


def computed_measures(engine: Engine, name: str) -> list[str]:
    """The measures some finished evaluation of the task's runs holds a number for: what its
    leaderboard can show (counts such as num_ret are left out: they rank nothing)."""
    with read_only(engine) as session:
        task = _get_task(session, name)
        found = session.scalars(
            select(AggregateResult.measure).distinct()
            .join(Submission, Submission.evaluation_id == AggregateResult.evaluation_id)
            .join(Evaluation, Evaluation.id == AggregateResult.evaluation_id)
            .where(Submission.task_id == task.id, Evaluation.state == "done", AggregateResult.value.is_not(None)))
        return sorted((m for m in found if not m.startswith("num_")), key=str.lower)


def export_qrels(engine: Engine, principal: Principal, qrels_name: str) -> tuple[store.Summary, pa.Table]:
    """A qrels set's judgments, for admins and for the organisers of a task that uses them."""
    with read_only(engine) as session:
        qrels = repo.find_qrels(session, qrels_name)
        owners = set(session.scalars(select(Task.owner_id).where(Task.qrels_id == qrels.id))) if qrels else set()
    if qrels is None or not (principal.is_admin or principal.user_id in owners):
        raise NotFoundError(f"No qrels named '{qrels_name}' that you organise.")
    return store.qrels_rows(engine, qrels_name)


# --- submitting ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Submitted:
    run: store.Summary
    task: str
    team: str
    job: jobs.JobRef
    warnings: tuple[str, ...]


def submit_run(engine: Engine, principal: Principal, task_name: str, path: Path, *, name: str,
               shown_path: str | None = None, team: str | None = None, run_type: str = "automatic",
               description: str | None = None, judging_precedence: int | None = None,
               metadata: dict[str, str] | None = None) -> Submitted:
    """Validate a run file and store it as the team's submission to the task, with its evaluation
    queued, in one transaction; or refuse it and store nothing. Participants submit for their own
    team; admins and the task's organiser for any team they name. ``shown_path`` is what errors
    call the file (an upload's own name, not where the server kept it)."""
    if run_type not in RUN_TYPES:
        raise InvalidParameterError(f"run_type must be one of {', '.join(RUN_TYPES)}; got '{run_type}'.")
    with read_only(engine) as session:
        task = _get_task(session, task_name)
        qrels = session.get(QrelsSet, task.qrels_id)
        assert qrels is not None
        team = _submitting_team(principal, task, team)
        _check_window(task, jobs.db_now(session))
        if repo.find_run(session, name) is not None:
            raise ConflictError(f"A run named '{name}' exists already; submit it under another name.")
        _check_quota(session, task, team)  # early, before parsing; checked again under the lock
    options = jobs.EvaluationOptions(measures=tuple(task.measures)) if task.measures else jobs.EvaluationOptions()
    refs: list[jobs.JobRef] = []

    def record(session: Session, run: Run) -> None:
        locked = _lock(session, task.id)
        _check_window(locked, jobs.db_now(session))
        _check_quota(session, locked, team)
        ref = jobs.enqueue_run(session, run, qrels, options)
        session.add(Submission(task_id=task.id, run_id=run.id, team=team, user_id=principal.user_id,
                               evaluation_id=ref.evaluation_id, run_type=run_type,
                               judging_precedence=judging_precedence))
        audit(session, principal.name, "runs.submit", name, {"task": task_name, "team": team, "job": ref.evaluation_id})
        refs.append(ref)

    meta = {**(metadata or {}), "task": task_name, "team": team, "run_type": run_type}
    if judging_precedence is not None:
        meta["judging_precedence"] = str(judging_precedence)
    with _named_as(path, shown_path):
        registered = store.register_run(engine, path, name=name, system=team, metadata=meta,
                                        description=description, within=record)
    if not registered.created:  # the same content stored under this name meanwhile
        raise ConflictError(f"A run named '{name}' exists already; submit it under another name.")
    return Submitted(registered.summary, task_name, team, refs[0], registered.warnings)


def attach_runs(engine: Engine, task_name: str, run_names: Sequence[str], *, team: str | None = None,
                run_type: str = "automatic", by: Principal | None = None) -> list[dict[str, Any]]:
    """Make stored runs submissions of a task (a past campaign's runs brought into a task), all or
    none, each evaluated with the task's measures (a finished equal evaluation is reused). A run's
    team is ``team``, else its system, else its name. Windows and quotas are the organiser's to
    waive, so they are not checked."""
    if run_type not in RUN_TYPES:
        raise InvalidParameterError(f"--run-type must be one of {', '.join(RUN_TYPES)}; got '{run_type}'.")
    attached = []
    with unit_of_work(engine) as session:
        task = _managed_task(session, task_name, by)
        qrels = session.get(QrelsSet, task.qrels_id)
        assert qrels is not None
        options = jobs.EvaluationOptions(measures=tuple(task.measures)) if task.measures else jobs.EvaluationOptions()
        for name in run_names:
            run = repo.get_run(session, name)
            if session.scalar(select(Submission.id).where(Submission.run_id == run.id)) is not None:
                raise ConflictError(f"Run '{name}' is a submission already; a run belongs to one task.")
            ref = jobs.enqueue_run(session, run, qrels, options)
            run_team = team or run.system or run.name
            session.add(Submission(task_id=task.id, run_id=run.id, team=run_team, user_id=by.user_id if by else None,
                                   evaluation_id=ref.evaluation_id, run_type=run_type))
            attached.append({"run": name, "team": run_team, "job": ref.evaluation_id, "state": ref.state})
        audit(session, by.name if by else None, "tasks.attach", task_name, {"runs": list(run_names)})
    return attached


def register_run(engine: Engine, principal: Principal, path: Path, *, name: str, shown_path: str | None = None,
                 description: str | None = None, system: str | None = None) -> store.Registered:
    """A run stored outside any task (`runs register --server` without --task): an admin's, as
    `evalstore runs register` on the database is."""
    principal.require("runs:register")
    with read_only(engine) as session:
        if repo.find_run(session, name) is not None:
            raise ConflictError(f"A run named '{name}' exists already; register it under another name.")
    with _named_as(path, shown_path):
        return store.register_run(engine, path, name=name, system=system, description=description,
                                  within=lambda session, run: audit(session, principal.name, "runs.register", run.name))


@contextmanager
def _named_as(path: Path, shown_path: str | None) -> Iterator[None]:
    """Input errors about ``path`` name the file as ``shown_path`` (an upload's own name, not
    where the server kept it)."""
    try:
        yield
    except InputFormatError as error:
        if shown_path is None:
            raise
        raise InputFormatError(shown_path, error.line, error.problem.replace(str(path), shown_path)) from None


def _submitting_team(principal: Principal, task: Task, team: str | None) -> str:
    principal.require("runs:submit")
    if principal.role == "participant":
        if team not in (None, principal.team):
            raise AccessDenied(f"You submit for your own team ({principal.team}), not for '{team}'.")
        assert principal.team is not None, "participants have a team (users.add_user)"
        return principal.team
    if not manages(principal, task):
        raise AccessDenied(f"Only participants, the task's organiser and admins submit runs to '{task.name}'.")
    if not team:
        raise InvalidParameterError("Name the team the run is submitted for (team).")
    return team


def _check_window(task: Task, now: datetime) -> None:
    if task.opens_at is not None and now < jobs.as_utc(task.opens_at):
        raise AccessDenied(f"Task '{task.name}' opens for submissions at {_iso(task.opens_at)}; it is now "
                           f"{_iso(now)}.")
    if task.closes_at is not None and now >= jobs.as_utc(task.closes_at):
        raise AccessDenied(f"Task '{task.name}' closed for submissions at {_iso(task.closes_at)}; it is now "
                           f"{_iso(now)}.")


def _lock(session: Session, task_id: int) -> Task:
    """The task, locked until the transaction ends, so two submissions of one team cannot both
    take its last slot. (Storing a run already serialises its transaction on both databases:
    SQLite has one writer at a time, BEGIN IMMEDIATE, and PostgreSQL's ATTACH PARTITION locks
    run_rows; the lock says what the quota relies on, whatever becomes of those.)"""
    task = session.scalar(select(Task).where(Task.id == task_id).with_for_update())
    if task is None:
        raise NotFoundError("The task was deleted while the run was being stored; nothing was stored.")
    return task


def _check_quota(session: Session, task: Task, team: str) -> None:
    if task.max_runs_per_team is None:
        return
    used = session.scalar(
        select(func.count()).select_from(Submission)
        .join(Evaluation, Evaluation.id == Submission.evaluation_id)
        .where(Submission.task_id == task.id, Submission.team == team, Evaluation.state.in_(_HOLDS_SLOT))) or 0
    if used >= task.max_runs_per_team:
        raise LimitExceeded("quota", f"Team '{team}' has used its {task.max_runs_per_team} runs for task "
                                     f"'{task.name}'; withdraw one (DELETE /api/v1/runs/NAME) to submit another.")


def withdraw_run(engine: Engine, principal: Principal, run_name: str) -> store.Summary:
    """Delete a submitted run and its evaluation: its team while the task is open, or the task's
    organiser; the slot in the team's quota is free again."""
    with unit_of_work(engine) as session:
        submission, task = _visible_submission(session, principal, run_name)
        if not manages(principal, task):
            _check_window(task, jobs.db_now(session))
        run = repo.get_run(session, run_name)
        summary = store.run_summary(run)
        repo.delete_run(session, run)
        audit(session, principal.name, "runs.withdraw", run_name, {"task": task.name, "team": submission.team})
        return summary


def _visible_submission(session: Session, principal: Principal, run_name: str) -> tuple[Submission, Task]:
    """The submission of the run, if the principal may see it (its team, the task's organiser, an
    admin); otherwise the same 'not found' as for a run that does not exist."""
    principal.require("runs:read")
    row = session.execute(select(Submission, Task).join(Run, Run.id == Submission.run_id)
                          .join(Task, Task.id == Submission.task_id).where(Run.name == run_name)).first()
    if row is None:
        if principal.is_admin and repo.find_run(session, run_name) is not None:
            raise NotFoundError(f"Run '{run_name}' was not submitted to a task; see 'evalstore results show'.")
        raise NotFoundError(f"No run named '{run_name}' of yours.")
    submission, task = row
    if not (manages(principal, task) or (principal.role == "participant" and submission.team == principal.team)):
        raise NotFoundError(f"No run named '{run_name}' of yours.")
    return submission, task


# --- reading ------------------------------------------------------------------------------------


def _job_dict(session: Session, principal: Principal, job: Evaluation, task: Task) -> dict[str, Any]:
    """A job as the principal may see it: before a hidden task's release, a participant sees the
    state and the queue, never the error text (it may quote the qrels) or the MLflow run."""
    position = None
    if job.state == "queued":
        position = 1 + (session.scalar(select(func.count()).select_from(Evaluation).where(
            Evaluation.state == "queued", Evaluation.id < job.id)) or 0)
    open_ = _scores_visible(principal, task)
    out: dict[str, Any] = {
        "id": job.id, "state": job.state, "queue_position": position, "worker": job.worker_id,
        "heartbeat_at": _iso(job.heartbeat_at), "attempts": job.attempts, "created_at": _iso(job.created_at),
        "started_at": _iso(job.started_at), "finished_at": _iso(job.finished_at),
        "error": job.error if open_ else (HIDDEN if job.error else None),
    }
    if manages(principal, task):
        out["mlflow_run_id"] = job.mlflow_run_id
    return out


def show_job(engine: Engine, principal: Principal, job_id: int) -> dict[str, Any]:
    """A submitted run's job: its team, the task's organiser and admins see it (admins: any job)."""
    principal.require("jobs:read")
    with read_only(engine) as session:
        row = session.execute(_submitted_jobs().where(Evaluation.id == job_id)).first()
        if row is None and principal.is_admin:  # a job not of a task: an admin sees it as `jobs show` does
            return jobs.show_job(engine, job_id).as_dict()
        if row is None or not (
                manages(principal, row[2]) or (principal.role == "participant" and row[1].team == principal.team)):
            raise NotFoundError(f"No job {job_id} of yours.")
        job, submission, task, run_name = row
        return {**_job_dict(session, principal, job, task), "run": run_name, "task": task.name,
                "team": submission.team}


def _submitted_jobs() -> Any:
    """Jobs of submitted runs, with (job, submission, task, run name)."""
    return (select(Evaluation, Submission, Task, Run.name).join(Submission, Submission.evaluation_id == Evaluation.id)
            .join(Task, Task.id == Submission.task_id).join(Run, Run.id == Submission.run_id))


def queue(engine: Engine, principal: Principal, *, states: Sequence[str] = ("queued", "running"),
          limit: int = 200) -> list[dict[str, Any]]:
    """The queue as organisers see it: every job of their tasks (admins: every job)."""
    principal.require("queue:read")
    with read_only(engine) as session:
        statement = _submitted_jobs().where(Evaluation.state.in_(states)).order_by(Evaluation.id).limit(limit)
        if not principal.is_admin:
            statement = statement.where(Task.owner_id == principal.user_id)
        return [{**_job_dict(session, principal, job, task), "run": run_name, "task": task.name,
                 "team": submission.team} for job, submission, task, run_name in session.execute(statement)]


def task_runs(engine: Engine, principal: Principal, task_name: str) -> list[dict[str, Any]]:
    """The task's runs the principal may see: their team's, or all for the organiser."""
    principal.require("runs:read")
    with read_only(engine) as session:
        task = _get_task(session, task_name)
        statement = (select(Submission, Run, Evaluation).join(Run, Run.id == Submission.run_id)
                     .outerjoin(Evaluation, Evaluation.id == Submission.evaluation_id)
                     .where(Submission.task_id == task.id).order_by(Submission.id))
        if not manages(principal, task):
            if principal.role != "participant":
                return []
            statement = statement.where(Submission.team == principal.team)
        return [_submission_dict(submission, run, job) for submission, run, job in session.execute(statement)]


def show_submission(engine: Engine, principal: Principal, run_name: str) -> dict[str, Any]:
    """A submitted run as its team, the task's organiser and admins see it."""
    with read_only(engine) as session:
        submission, task = _visible_submission(session, principal, run_name)
        run = repo.get_run(session, run_name)
        job = session.get(Evaluation, submission.evaluation_id) if submission.evaluation_id else None
        return {**_submission_dict(submission, run, job), "task": task.name}


def _submission_dict(submission: Submission, run: Run, job: Evaluation | None) -> dict[str, Any]:
    return {"run": run.name, "team": submission.team, "run_type": submission.run_type,
            "judging_precedence": submission.judging_precedence, "description": run.description,
            "rows": run.row_count, "topics": run.topic_count, "submitted_at": _iso(submission.created_at),
            "job": submission.evaluation_id, "state": job.state if job is not None else None}


def run_results(engine: Engine, principal: Principal, run_name: str, *, per_query: bool = False,
                measures: Sequence[str] = ()) -> dict[str, Any]:
    """A submitted run's scores on its task, or, before a hidden task's release, that it was
    evaluated and its scores are hidden."""
    with read_only(engine) as session:
        submission, task = _visible_submission(session, principal, run_name)
        job = session.get(Evaluation, submission.evaluation_id) if submission.evaluation_id else None
        qrels_name = str(session.scalar(select(QrelsSet.name).where(QrelsSet.id == task.qrels_id)))
        out: dict[str, Any] = {"run": run_name, "task": task.name, "team": submission.team,
                               "state": job.state if job is not None else None}
        if not _scores_visible(principal, task):
            return {**out, "scores": HIDDEN}
    if job is None or job.state != "done":
        return {**out, "scores": None}
    stored = ranking.results(engine, qrels_name=qrels_name, run_name=run_name, measures=list(measures) or None,
                             evaluation_id=job.id)
    out["aggregates"] = {m: _number(v) for m, v in stored.aggregates.items()}
    out["topics"] = len(stored.topics)
    if per_query:
        out["per_query"] = {topic: {m: _number(v) for m, v in row.items()}
                            for topic, row in stored.frame.to_dict(orient="index").items()}
    return out


def _number(value: Any) -> Any:
    if isinstance(value, float | np.floating):
        return None if np.isnan(value) else float(value)
    return value


class _BoardCache:
    """Leaderboards already computed (their bootstrap intervals cost ~10 ms a run), by task,
    measures, visibility and a fingerprint of the task's finished evaluations: a new result, a
    submission or a release changes the fingerprint, and the board is computed afresh."""

    def __init__(self, size: int = 64) -> None:
        self._boards: OrderedDict[tuple[Any, ...], TaskBoard] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> TaskBoard | None:
        with self._lock:
            board = self._boards.get(key)
            if board is not None:
                self._boards.move_to_end(key)
            return board

    def put(self, key: tuple[Any, ...], board: TaskBoard) -> None:
        with self._lock:
            self._boards[key] = board
            while len(self._boards) > self._size:
                self._boards.popitem(last=False)


def _board_cache(engine: Engine) -> _BoardCache:
    """Each database's boards (a server has one; a test process opens many, one after another)."""
    cache = _boards.get(engine)
    if cache is None:
        cache = _boards[engine] = _BoardCache()
    return cache


_boards: weakref.WeakKeyDictionary[Engine, _BoardCache] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class TaskBoard:
    """A task's leaderboard as the API sends it: ``body``, and the same as JSON bytes, encoded once
    per computed board (50 clients reading one board should not each pay for encoding it)."""

    body: dict[str, Any]
    json: bytes

    @classmethod
    def of(cls, body: dict[str, Any]) -> TaskBoard:
        return cls(body, json.dumps(body, separators=(",", ":")).encode())


@dataclass(frozen=True)
class _BoardState:
    """What decides a task's board, as read from the database at one moment: who may see its
    scores, its qrels and measures, and a fingerprint of its finished evaluations (a new result,
    submission or withdrawal changes it)."""

    task_id: int
    owner_id: int | None
    hidden: bool
    released_at: datetime | None
    qrels_name: str
    qrels_hash: str
    measures: tuple[str, ...]
    fingerprint: tuple[Any, ...]
    read_at: float


# How stale a board may be: each server process reads a task's state at most once a second and
# answers from memory in between. Reading it on every request (four round trips with the pool's
# ping) capped PostgreSQL at ~190 leaderboard requests/s, p95 470 ms, under 50 clients; a result
# or a release shows up at most a second later. Who asks is still checked on every request.
BOARD_FRESHNESS = 1.0
_states: weakref.WeakKeyDictionary[Engine, dict[str, _BoardState]] = weakref.WeakKeyDictionary()


def _board_state(engine: Engine, task_name: str) -> _BoardState:
    states = _states.setdefault(engine, {})
    state = states.get(task_name)
    if state is not None and time.monotonic() - state.read_at < BOARD_FRESHNESS:
        return state
    with read_only(engine) as session:
        found = session.execute(select(Task, QrelsSet.name, QrelsSet.content_hash)
                                .join(QrelsSet, QrelsSet.id == Task.qrels_id).where(Task.name == task_name)).first()
        if found is None:
            raise NotFoundError(f"No task named '{task_name}'. See 'evalstore tasks list'.")
        task, qrels_name, qrels_hash = found
        fingerprint = tuple(session.execute(
            select(func.count(Submission.id), func.max(Submission.id), func.max(Evaluation.id),
                   func.max(Evaluation.finished_at), func.max(Evaluation.results_version))
            .select_from(Submission).outerjoin(Evaluation, (Evaluation.id == Submission.evaluation_id)
                                               & (Evaluation.state == "done"))
            .where(Submission.task_id == task.id)).one())
    state = _BoardState(task.id, task.owner_id, task.hidden, task.released_at, qrels_name, qrels_hash,
                        tuple(task.measures or ()), fingerprint, time.monotonic())
    states[task_name] = state
    return state


def task_leaderboard(engine: Engine, principal: Principal, task_name: str,
                     measures: Sequence[str] = ()) -> TaskBoard:
    """The task's leaderboard (the numbers `evalstore leaderboard` gives for the task's runs), or,
    before a hidden task's release, only that its scores are hidden."""
    state = _board_state(engine, task_name)
    if not _scores_visible(principal, state):
        return TaskBoard.of({"task": task_name, "scores": HIDDEN, "rows": [], "notes": []})
    names = list(measures) or ([m for m in state.measures if "_" not in m][:6] or list(LEADERBOARD_MEASURES))
    key = (state.task_id, state.qrels_hash, tuple(names), state.fingerprint)
    cached = _board_cache(engine).get(key)
    if cached is not None:
        return cached
    with read_only(engine) as session:
        teams = {run: (team, run_type) for run, team, run_type in session.execute(
            select(Run.name, Submission.team, Submission.run_type).join(Submission, Submission.run_id == Run.id)
            .where(Submission.task_id == state.task_id))}
    body: dict[str, Any] = {"task": task_name, "scores": "visible", "rows": [], "notes": []}
    if state.fingerprint[2] is not None:  # some run has finished evaluating
        ranked = ranking.leaderboard(engine, qrels_name=state.qrels_name, measures=names, runs=set(teams))
        body["measures"] = ranked.names
        body["notes"] = ranked.notes
        body["rows"] = [{"rank": rank, "run": row.run, "team": teams[row.run][0], "run_type": teams[row.run][1],
                         "topics": row.topics, "judged_at_10": row.judged_at_10,
                         "scores": {m: {"mean": v[0], "ci_low": v[1], "ci_high": v[2]} for m, v in row.values.items()}}
                        for rank, row in enumerate(ranked.rows, start=1)]
    board = TaskBoard.of(body)
    _board_cache(engine).put(key, board)
    return board
