"""Organising tasks: creating, releasing, listing them, bringing stored runs in, exporting their qrels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from sqlalchemy import ColumnElement, Engine, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import (
    AggregateResult,
    Evaluation,
    QrelsSet,
    Submission,
    Task,
)
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import (
    AccessDenied,
    ConflictError,
    InvalidParameterError,
    NotFoundError,
)
from evalstore.metrics import resolve_measures
from evalstore.metrics.answers import ANSWER_MEASURES, answer_measure
from evalstore.services import answers, jobs, store
from evalstore.services.access import Principal, audit, get_user
from evalstore.services.tasks.topic_split import draw_split
from evalstore.services.tasks.visibility import (
    RUN_TYPES,
    TaskView,
    get_task,
    iso_text,
    manages,
    task_measures,
    task_view,
)


def create_task(
    engine: Engine,
    name: str,
    *,
    qrels_name: str | None = None,
    nuggets_name: str | None = None,
    hidden: bool = False,
    opens: datetime | None = None,
    closes: datetime | None = None,
    max_runs_per_team: int | None = None,
    measures: Sequence[str] = (),
    owner: str | None = None,
    daily_cap: int | None = None,
    official_measure: str | None = None,
    private_fraction: float | None = None,
    split_seed: int | None = None,
    by: Principal | None = None,
) -> TaskView:
    """A task over stored qrels (teams submit runs), or over a nugget bank (``nuggets_name``: teams
    submit generated answers, scored on the bank's assignments); one of the two. ``owner`` (a
    user's name; default: ``by``) is the organiser who manages it; ``daily_cap`` caps each team's
    runs per UTC day (default: the server's setting). With ``private_fraction``, that share of the
    qrels' topics is drawn (from ``split_seed``; drawn at random and recorded when not given) as
    the private topics."""
    if (qrels_name is None) == (nuggets_name is None):
        raise InvalidParameterError(
            "A task evaluates runs against qrels or answers on a nugget bank: name one of the two."
        )
    if nuggets_name is not None and private_fraction is not None:
        raise InvalidParameterError("A task over a nugget bank keeps no private topics; leave the split out.")
    if max_runs_per_team is not None and max_runs_per_team < 1:
        raise InvalidParameterError(f"--max-runs-per-team must be at least 1; got {max_runs_per_team}.")
    _check_runs(max_runs_per_team, "The quota per team")
    _check_daily_cap(daily_cap)
    if opens is not None and closes is not None and closes <= opens:
        raise InvalidParameterError(f"--closes ({closes.isoformat()}) must come after --opens ({opens.isoformat()}).")
    names = task_measures(measures, answers=nuggets_name is not None)
    with unit_of_work(engine) as session:
        if session.scalar(select(Task.id).where(Task.name == name)) is not None:
            raise ConflictError(f"A task named '{name}' exists already; choose another name.")
        owner_id = get_user(session, owner).id if owner else by.user_id if by else None
        if by is not None and not by.is_admin and owner_id != by.user_id:
            raise AccessDenied("An organiser creates tasks they own; only an admin names another owner.")
        qrels_id = bank_id = None
        if qrels_name is not None:
            qrels = repo.get_qrels(session, qrels_name)
            if qrels.kind != "relevance":
                raise InvalidParameterError(
                    f"Tasks evaluate against relevance qrels; '{qrels_name}' holds {qrels.kind}."
                )
            qrels_id = qrels.id
            _refuse_others_judgments(session, by, Task.qrels_id == qrels.id, f"Qrels '{qrels_name}'", "judgments")
        else:
            assert nuggets_name is not None
            bank = answers.get_bank(session, nuggets_name)
            bank_id = bank.id
            _refuse_others_judgments(
                session, by, Task.nugget_bank_id == bank.id, f"Nugget bank '{nuggets_name}'", "nuggets"
            )
        task = Task(
            name=name,
            qrels_id=qrels_id,
            nugget_bank_id=bank_id,
            owner_id=owner_id,
            hidden=hidden,
            opens_at=_utc(opens),
            closes_at=_utc(closes),
            max_runs_per_team=max_runs_per_team,
            daily_cap=daily_cap,
            measures=names,
            official_measure=_official(official_measure, names, answers=bank_id is not None),
        )
        session.add(task)
        session.flush()
        if private_fraction is not None:
            draw_split(session, task, private_fraction, split_seed)
        audit(
            session,
            by.name if by else None,
            "tasks.create",
            name,
            {"qrels": qrels_name, "nuggets": nuggets_name, "hidden": hidden, "daily_cap": daily_cap},
        )
        return task_view(session, task)


def _refuse_others_judgments(
    session: Session, by: Principal | None, over: ColumnElement[bool], what: str, held: str
) -> None:
    """A task's organiser may export its qrels and read its assignments: one organiser's judgments
    (hidden ones above all) must not be had by creating a task over them; judgments no task uses
    yet belong to no organiser, so an admin creates the first task over them."""
    if by is None or by.is_admin:
        return
    owners = set(session.scalars(select(Task.owner_id).where(over)))
    if owners - {by.user_id}:
        raise AccessDenied(
            f"{what} are the {held} of another organiser's task; an admin may create a task over them for you."
        )
    if not owners:
        raise AccessDenied(
            f"{what} belong to no task yet; an admin creates the first task over them, naming its organiser (--owner)."
        )


def release_task(engine: Engine, name: str, *, by: Principal | None = None) -> TaskView:
    """Make a hidden task's scores visible to everyone who may see the task."""
    with unit_of_work(engine) as session:
        task = _managed_task(session, name, by)
        task.released_at = task.released_at or jobs.db_now(session)
        audit(session, by.name if by else None, "tasks.release", name)
        return task_view(session, task)


# a task's description is a few paragraphs for participants, not a document store
DESCRIPTION_CHARACTERS = 20_000


def update_task(
    engine: Engine,
    name: str,
    *,
    opens: datetime | None,
    closes: datetime | None,
    max_runs_per_team: int | None,
    measures: Sequence[str],
    description: str | None,
    daily_cap: int | None = None,
    official_measure: str | None = None,
    by: Principal | None = None,
) -> TaskView:
    """Change a task's settings, all at once (the organiser's form shows every one): its
    submission window, a team's quota and daily cap, its measures (runs submitted from now on are
    evaluated with them; past evaluations keep theirs) and its description. Only its organiser and
    admins."""
    with unit_of_work(engine) as session:
        task = _managed_task(session, name, by)
        change_settings(
            session,
            task,
            opens=opens,
            closes=closes,
            max_runs_per_team=max_runs_per_team,
            measures=measures,
            description=description,
            daily_cap=daily_cap,
            official_measure=official_measure,
        )
        audit(
            session,
            by.name if by else None,
            "tasks.update",
            name,
            {
                "opens": iso_text(opens),
                "closes": iso_text(closes),
                "max_runs_per_team": max_runs_per_team,
                "daily_cap": daily_cap,
                "measures": list(task.measures),
                "official_measure": task.official_measure,
            },
        )
        return task_view(session, task)


TASK_SETTINGS = ("opens", "closes", "max_runs_per_team", "daily_cap", "measures", "description", "official_measure")


def patch_task(engine: Engine, name: str, changes: Mapping[str, Any], *, by: Principal | None = None) -> TaskView:
    """Change some of a task's settings (``changes``, keyed by :data:`TASK_SETTINGS`; None clears
    one), keeping the others: the API's and the CLI's edit, checked as :func:`update_task`."""
    unknown = sorted(set(changes) - set(TASK_SETTINGS))
    if unknown:
        raise InvalidParameterError(
            f"A task has no setting {', '.join(unknown)}; its settings: {', '.join(TASK_SETTINGS)}."
        )
    with unit_of_work(engine) as session:
        task = _managed_task(session, name, by)
        current: dict[str, Any] = {
            "opens": jobs.as_utc(task.opens_at) if task.opens_at else None,
            "closes": jobs.as_utc(task.closes_at) if task.closes_at else None,
            "max_runs_per_team": task.max_runs_per_team,
            "daily_cap": task.daily_cap,
            "measures": list(task.measures or []),
            "description": task.description,
            "official_measure": task.official_measure,
        }
        merged = {**current, **changes}
        merged["measures"] = merged["measures"] or []
        change_settings(session, task, **merged)
        audit(
            session,
            by.name if by else None,
            "tasks.update",
            name,
            {k: iso_text(v) if isinstance(v, datetime) else v for k, v in changes.items() if k != "description"},
        )
        return task_view(session, task)


def change_settings(
    session: Session,
    task: Task,
    *,
    opens: datetime | None,
    closes: datetime | None,
    max_runs_per_team: int | None,
    measures: Sequence[str],
    description: str | None,
    daily_cap: int | None = None,
    official_measure: str | None = None,
) -> None:
    """The step of :func:`update_task`: check the settings as create_task does, and set them."""
    _check_daily_cap(daily_cap)
    if max_runs_per_team is not None and max_runs_per_team < 1:
        raise InvalidParameterError(f"The quota per team must be at least 1 run; got {max_runs_per_team}.")
    _check_runs(max_runs_per_team, "The quota per team")
    if opens is not None and closes is not None and closes <= opens:
        raise InvalidParameterError(
            f"The window must close ({closes.isoformat()}) after it opens ({opens.isoformat()})."
        )
    if description is not None and len(description) > DESCRIPTION_CHARACTERS:
        raise InvalidParameterError(
            f"The description has {len(description)} characters; at most {DESCRIPTION_CHARACTERS} fit."
        )
    task.opens_at, task.closes_at, task.max_runs_per_team = _utc(opens), _utc(closes), max_runs_per_team
    task.daily_cap = daily_cap
    task.measures = task_measures(measures, answers=task.nugget_bank_id is not None)
    task.official_measure = _official(official_measure, task.measures, answers=task.nugget_bank_id is not None)
    task.description = description or None


def _check_daily_cap(daily_cap: int | None) -> None:
    if daily_cap is not None and daily_cap < 1:
        raise InvalidParameterError(
            f"The daily cap is at least 1 run per team per day (none: the server's setting); got {daily_cap}."
        )
    _check_runs(daily_cap, "The daily cap")


# a quota or a daily cap is a 32-bit column; a million runs is no limit in practice (a larger
# number was a 500 from the database's driver)
MAX_RUNS_SETTING = 1_000_000


def _check_runs(runs: int | None, what: str) -> None:
    if runs is not None and runs > MAX_RUNS_SETTING:
        raise InvalidParameterError(
            f"{what} is at most {MAX_RUNS_SETTING:,} runs (leave it empty for no limit); got {runs:,}."
        )


def _utc(moment: datetime | None) -> datetime | None:
    """A time with an offset as UTC: SQLite keeps no offset, so 12:00+01:00 would read back as 12:00 UTC."""
    return moment.astimezone(UTC) if moment is not None and moment.tzinfo is not None else moment


def _official(measure: str | None, measures: Sequence[str], *, answers: bool = False) -> str | None:
    """The official measure by its canonical name; it must be one the task evaluates (with the
    default measures: one of evaluate's defaults; on an answer task, any answer measure, as every
    one is computed), or the board could not rank by it."""
    if not measure:
        return None
    if answers:
        name = answer_measure(measure).family.name
        evaluated = list(measures) or list(ANSWER_MEASURES)
    else:
        name = str(resolve_measures([measure])[0])
        evaluated = list(measures) or [str(m) for m in resolve_measures(list(jobs.EvaluationOptions().measures))]
    if name not in evaluated:
        listed = ", ".join(measures) if measures else "evaluate's defaults"
        raise InvalidParameterError(
            f"The official measure {name} is not one the task evaluates ({listed}); add it to the measures."
        )
    return name


def set_split(
    engine: Engine,
    name: str,
    *,
    private_fraction: float,
    split_seed: int | None = None,
    official_measure: str | None = None,
    by: Principal | None = None,
) -> TaskView:
    """Draw (or, with a fraction of 0, remove) the task's public/private topic split, and set its
    official measure when given. The drawn topics are stored: a split is fixed once a run has been
    submitted (redrawing then could favour runs already seen)."""
    with unit_of_work(engine) as session:
        task = _managed_task(session, name, by)
        if task.private_topics and session.scalar(select(Submission.id).where(Submission.task_id == task.id).limit(1)):
            raise ConflictError(
                f"Task '{name}' has submissions: its private topics are fixed (seed {task.split_seed}). "
                "Create a new task to split its topics otherwise."
            )
        if task.nugget_bank_id is not None:
            raise InvalidParameterError(f"Task '{name}' takes answers on a nugget bank; it keeps no private topics.")
        if official_measure is not None:
            task.official_measure = _official(official_measure, task.measures)
        if private_fraction == 0:
            task.private_topics = task.private_fraction = task.split_seed = None
        else:
            draw_split(session, task, private_fraction, split_seed)
        audit(
            session,
            by.name if by else None,
            "tasks.split",
            name,
            {"private_fraction": private_fraction, "seed": task.split_seed, "official_measure": task.official_measure},
        )
        return task_view(session, task)


def computed_measures(engine: Engine, name: str) -> list[str]:
    """The measures some finished evaluation of the task's runs holds a number for: what its
    leaderboard can show (counts such as num_ret are left out: they rank nothing)."""
    with read_only(engine) as session:
        task = get_task(session, name)
        found = session.scalars(
            select(AggregateResult.measure)
            .distinct()
            .join(Submission, Submission.evaluation_id == AggregateResult.evaluation_id)
            .join(Evaluation, Evaluation.id == AggregateResult.evaluation_id)
            .where(Submission.task_id == task.id, Evaluation.state == "done", AggregateResult.value.is_not(None))
        )
        return sorted((m for m in found if not m.startswith("num_")), key=str.lower)


def _managed_task(session: Session, name: str, by: Principal | None) -> Task:
    task = get_task(session, name)
    if by is not None and not manages(by, task):
        raise AccessDenied(f"Task '{name}' is managed by its organiser; you may not change it.")
    return task


def list_tasks(engine: Engine) -> list[TaskView]:
    with read_only(engine) as session:
        return [task_view(session, t) for t in session.scalars(select(Task).order_by(Task.name))]


def show_task(engine: Engine, name: str) -> TaskView:
    with read_only(engine) as session:
        return task_view(session, get_task(session, name))


def export_qrels(engine: Engine, principal: Principal, qrels_name: str) -> tuple[store.Summary, pa.Table]:
    """A qrels set's judgments, for admins and for the organisers of a task that uses them."""
    with read_only(engine) as session:
        qrels = repo.find_qrels(session, qrels_name)
        owners = set(session.scalars(select(Task.owner_id).where(Task.qrels_id == qrels.id))) if qrels else set()
    if qrels is None or not (principal.is_admin or principal.user_id in owners):
        raise NotFoundError(f"No qrels named '{qrels_name}' that you organise.")
    return store.qrels_rows(engine, qrels_name)


def attach_runs(
    engine: Engine,
    task_name: str,
    run_names: Sequence[str],
    *,
    team: str | None = None,
    run_type: str = "automatic",
    by: Principal | None = None,
) -> list[dict[str, Any]]:
    """Make stored runs submissions of a task (a past campaign's runs brought into a task), all or
    none, each evaluated with the task's measures (a finished equal evaluation is reused). A run's
    team is ``team``, else its system, else its name. Windows and quotas are the organiser's to
    waive, so they are not checked."""
    if run_type not in RUN_TYPES:
        raise InvalidParameterError(f"--run-type must be one of {', '.join(RUN_TYPES)}; got '{run_type}'.")
    attached = []
    with unit_of_work(engine) as session:
        task = _managed_task(session, task_name, by)
        qrels = session.get(QrelsSet, task.qrels_id) if task.qrels_id is not None else None
        if qrels is None:
            raise InvalidParameterError(
                f"Task '{task_name}' takes generated answers; stored ranking runs cannot be brought into it."
            )
        options = jobs.EvaluationOptions(measures=tuple(task.measures)) if task.measures else jobs.EvaluationOptions()
        for name in run_names:
            run = repo.get_run(session, name)
            if session.scalar(select(Submission.id).where(Submission.run_id == run.id)) is not None:
                raise ConflictError(f"Run '{name}' is a submission already; a run belongs to one task.")
            ref = jobs.enqueue_run(session, run, qrels, options)
            run_team = team or run.system or run.name
            session.add(
                Submission(
                    task_id=task.id,
                    run_id=run.id,
                    team=run_team,
                    user_id=by.user_id if by else None,
                    evaluation_id=ref.evaluation_id,
                    run_type=run_type,
                )
            )
            attached.append({"run": name, "team": run_team, "job": ref.evaluation_id, "state": ref.state})
        audit(session, by.name if by else None, "tasks.attach", task_name, {"runs": list(run_names)})
    return attached
