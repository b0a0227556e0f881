"""Organising tasks: creating, releasing, listing them, bringing stored runs in, exporting their qrels."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
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
    Remedy,
)
from evalstore.io.texts import TopicStatement
from evalstore.metrics import JUDGMENTS_NAMED, resolve_measures
from evalstore.metrics.answers import ANSWER_MEASURES, answer_measure
from evalstore.services import answers, collections, jobs, store
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
    description: str | None = None,
    topics: TopicFile | None = None,
    by: Principal | None = None,
) -> TaskView:
    """A task over stored qrels (teams submit runs), or over a nugget bank (``nuggets_name``: teams
    submit generated answers, scored on the bank's assignments); one of the two. ``owner`` (a
    user's name; default: ``by``) is the organiser who manages it; ``daily_cap`` caps each team's
    runs per UTC day (default: the server's setting). With ``private_fraction``, that share of the
    qrels' topics is drawn (from ``split_seed``; drawn at random and recorded when not given) as
    the private topics. ``topics`` (statements read from a file) are stored with the task, in the
    same unit of work, for its participants to download."""
    if (qrels_name is None) == (nuggets_name is None):
        raise InvalidParameterError(
            "A task evaluates runs against qrels or answers on a nugget bank: name one of the two."
        )
    if nuggets_name is not None and private_fraction is not None:
        raise InvalidParameterError("A task over a nugget bank keeps no private topics; leave the split out.")
    _check_limits(opens, closes, max_runs_per_team, daily_cap, description)
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
            check_measures(qrels, names)
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
            description=description or None,
        )
        session.add(task)
        session.flush()
        if private_fraction is not None:
            draw_split(session, task, private_fraction, split_seed)
        if topics is not None:
            task.topic_set_id = collections.add_topic_set(
                session, collections.free_topic_set_name(session, f"{name}-topics"), topics.statements, topics.source
            ).id
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
            f"{what} belong to no task yet; an admin creates the first task over them, naming its organiser.",
            remedy=Remedy(cli="An admin names the organiser with --owner.", web="Ask an admin to create it for you."),
        )


def release_task(engine: Engine, name: str, *, by: Principal | None = None) -> TaskView:
    """Make a hidden task's scores visible to everyone who may see the task."""
    with unit_of_work(engine) as session:
        task = _managed_task(session, name, by)
        task.released_at = task.released_at or jobs.db_now(session)
        task.release_at = None  # released now: no later release is pending
        audit(session, by.name if by else None, "tasks.release", name)
        return task_view(session, task)


# a task's description is a few paragraphs for participants, not a document store
DESCRIPTION_CHARACTERS = 20_000


@dataclass(frozen=True)
class TaskSettings:
    """A task's settings as the organiser's form shows them, all at once: its submission window, a
    team's quota and daily cap, its measures, its official measure and its description."""

    opens: datetime | None
    closes: datetime | None
    max_runs_per_team: int | None
    measures: Sequence[str]
    description: str | None
    daily_cap: int | None = None
    official_measure: str | None = None


def update_task(engine: Engine, name: str, settings: TaskSettings, *, by: Principal | None = None) -> TaskView:
    """Change a task's settings, all at once (the organiser's form shows every one): its
    submission window, a team's quota and daily cap, its measures (runs submitted from now on are
    evaluated with them; past evaluations keep theirs) and its description. Only its organiser and
    admins."""
    with unit_of_work(engine) as session:
        task = _managed_task(session, name, by)
        change_settings(session, task, settings)
        audit(
            session,
            by.name if by else None,
            "tasks.update",
            name,
            {
                "opens": iso_text(settings.opens),
                "closes": iso_text(settings.closes),
                "max_runs_per_team": settings.max_runs_per_team,
                "daily_cap": settings.daily_cap,
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
        current = TaskSettings(
            opens=jobs.as_utc(task.opens_at) if task.opens_at else None,
            closes=jobs.as_utc(task.closes_at) if task.closes_at else None,
            max_runs_per_team=task.max_runs_per_team,
            daily_cap=task.daily_cap,
            measures=list(task.measures or []),
            description=task.description,
            official_measure=task.official_measure,
        )
        merged = replace(current, **changes)
        change_settings(session, task, replace(merged, measures=merged.measures or []))
        audit(
            session,
            by.name if by else None,
            "tasks.update",
            name,
            {k: iso_text(v) if isinstance(v, datetime) else v for k, v in changes.items() if k != "description"},
        )
        return task_view(session, task)


def change_settings(session: Session, task: Task, settings: TaskSettings) -> None:
    """The step of :func:`update_task`: check the settings as create_task does, and set them."""
    qrels = session.get(QrelsSet, task.qrels_id) if task.qrels_id is not None else None  # None: answers
    names, official = _checked_settings(qrels, settings)
    task.opens_at, task.closes_at = _utc(settings.opens), _utc(settings.closes)
    task.max_runs_per_team = settings.max_runs_per_team
    task.daily_cap = settings.daily_cap
    task.measures = names
    task.official_measure = official
    task.description = settings.description or None


def check_settings(engine: Engine, name: str, settings: TaskSettings) -> None:
    """Refuse settings :func:`update_task` would refuse, changing nothing (the console checks them
    before it asks to confirm a change)."""
    with read_only(engine) as session:
        task = get_task(session, name)
        qrels = session.get(QrelsSet, task.qrels_id) if task.qrels_id is not None else None  # None: answers
        _checked_settings(qrels, settings)


def _checked_settings(qrels: QrelsSet | None, settings: TaskSettings) -> tuple[list[str], str | None]:
    """The settings checked: the measures by their canonical names, and the official measure
    (``qrels`` None: a task over a nugget bank, whose measures are answer measures)."""
    _check_limits(settings.opens, settings.closes, settings.max_runs_per_team, settings.daily_cap, settings.description)
    names = task_measures(settings.measures, answers=qrels is None)
    if qrels is not None:
        check_measures(qrels, names)
    return names, _official(settings.official_measure, names, answers=qrels is None)


def _check_limits(
    opens: datetime | None,
    closes: datetime | None,
    max_runs_per_team: int | None,
    daily_cap: int | None,
    description: str | None,
) -> None:
    """The checks a task's settings pass when it is created and when they change."""
    if max_runs_per_team is not None and max_runs_per_team < 1:
        raise InvalidParameterError(f"The quota per team must be at least 1 run; got {max_runs_per_team}.")
    _check_runs(max_runs_per_team, "The quota per team")
    _check_daily_cap(daily_cap)
    if opens is not None and closes is not None and closes <= opens:
        raise InvalidParameterError(
            f"The window must close ({closes.isoformat()}) after it opens ({opens.isoformat()})."
        )
    _check_description(description)


def _check_description(description: str | None) -> None:
    if description is not None and len(description) > DESCRIPTION_CHARACTERS:
        raise InvalidParameterError(
            f"The description has {len(description)} characters; at most {DESCRIPTION_CHARACTERS} fit."
        )


@dataclass(frozen=True)
class TopicFile:
    """Topic statements read from a file, and where they came from (the file's name)."""

    statements: list[TopicStatement]
    source: str


# what the console offers to tick (each one checked against the qrels' judgments); any other
# measure the registry knows can still be typed
MEASURE_CHOICES = ("AP", "nDCG@10", "P@10", "RR", "nDCG@20", "P@5", "Rprec", "R@100", "R@1000", "Bpref", "nDCG")


def measure_choices(kind: str = "relevance") -> list[str]:
    """The measures offered for a task over judgments of ``kind``: those computed from them."""
    return [str(m) for m in resolve_measures(list(MEASURE_CHOICES)) if m.spec.judgments == kind]


def check_measures(qrels: QrelsSet, measures: Sequence[str]) -> None:
    """Refuse a measure the qrels cannot compute (a diversity measure needs subtopic judgments), when
    it is set rather than when every run's evaluation fails."""
    for measure in resolve_measures(list(measures)):
        if measure.spec.kind != "ranking" or measure.spec.judgments != qrels.kind:
            needs = JUDGMENTS_NAMED.get(measure.spec.judgments, measure.spec.judgments)
            raise InvalidParameterError(
                f"{measure} is computed from {needs} judgments, and qrels '{qrels.name}' hold "
                f"{JUDGMENTS_NAMED[qrels.kind]} judgments: a task over them cannot compute it."
            )


@dataclass(frozen=True)
class SettingsConflict:
    """Runs a task has accepted that new settings would have refused: they stay, and the organiser
    is told before saving. ``setting`` is the one that would have refused them."""

    setting: str
    message: str


def settings_conflicts(
    engine: Engine,
    name: str,
    *,
    opens: datetime | None,
    closes: datetime | None,
    max_runs_per_team: int | None,
    daily_cap: int | None,
) -> list[SettingsConflict]:
    """What the task's accepted submissions say about new settings: a team holding more runs than
    the new quota, or more in one UTC day than the new daily cap, runs submitted outside the new
    window. Accepted runs are never refused afterwards; these are for the organiser to confirm. A
    setting left as it is raises nothing (it was confirmed when set)."""
    with read_only(engine) as session:
        task = get_task(session, name)
        rows = session.execute(
            select(Submission.team, Submission.created_at).where(Submission.task_id == task.id)
        ).all()

    def same(new: datetime | None, old: datetime | None) -> bool:
        return (new is None and old is None) or (
            new is not None and old is not None and jobs.as_utc(new) == jobs.as_utc(old)
        )

    max_runs_per_team = None if max_runs_per_team == task.max_runs_per_team else max_runs_per_team
    daily_cap = None if daily_cap == task.daily_cap else daily_cap
    opens = None if same(opens, task.opens_at) else opens
    closes = None if same(closes, task.closes_at) else closes
    found: list[SettingsConflict] = []
    per_team = Counter(team for team, _ in rows)
    over = sorted(team for team, held in per_team.items() if max_runs_per_team is not None and held > max_runs_per_team)
    if over:
        found.append(
            SettingsConflict(
                "max_runs_per_team",
                f"{_teams(over)} already {'holds' if len(over) == 1 else 'hold'} more than {max_runs_per_team} "
                f"run{'s' if max_runs_per_team != 1 else ''}: "
                f"{'its runs stay and it submits' if len(over) == 1 else 'their runs stay and they submit'} no more.",
            )
        )
    per_day = Counter((team, jobs.as_utc(at).date()) for team, at in rows)
    busy = sorted({team for (team, _), held in per_day.items() if daily_cap is not None and held > daily_cap})
    if busy:
        found.append(
            SettingsConflict(
                "daily_cap",
                f"{_teams(busy)} submitted more than {daily_cap} run{'s' if daily_cap != 1 else ''} in one UTC day; "
                "those runs stay.",
            )
        )
    early = sum(1 for _, at in rows if opens is not None and jobs.as_utc(at) < jobs.as_utc(opens))
    late = sum(1 for _, at in rows if closes is not None and jobs.as_utc(at) > jobs.as_utc(closes))
    for count, when, setting in (
        (early, "before the new opening time", "opens"),
        (late, "after the new closing time", "closes"),
    ):
        if count:
            found.append(
                SettingsConflict(
                    setting,
                    f"{count} run{'s were' if count != 1 else ' was'} submitted {when}; "
                    f"{'they stay' if count != 1 else 'it stays'}.",
                )
            )
    if (
        closes is not None
        and jobs.as_utc(closes) <= datetime.now(UTC)
        and (task.closes_at is None or jobs.as_utc(task.closes_at) > datetime.now(UTC))
    ):
        found.append(
            SettingsConflict("closes", "The new closing time has passed: submissions close as soon as you save.")
        )
    return found


def _teams(names: list[str]) -> str:
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"Team{'s' if len(names) > 1 else ''} {shown}"


def schedule_release(engine: Engine, name: str, at: datetime, *, by: Principal | None = None) -> TaskView:
    """Release the task's scores at ``at`` (a worker performs it then: :func:`release_due`); a time
    already past is refused (release it now instead). A released task has nothing to schedule."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    with unit_of_work(engine) as session:
        task = _managed_task(session, name, by)
        if task.released_at is not None:
            raise ConflictError(f"Task '{name}' is released already; there is nothing to schedule.")
        if not task.hidden and not task.private_topics:
            raise ConflictError(f"Task '{name}' is public: its scores are shown already; there is nothing to release.")
        now = jobs.db_now(session)
        if at <= now:
            raise InvalidParameterError(
                f"The release time {iso_text(at)} has passed (now {iso_text(now)}); give a later time, or release now."
            )
        task.release_at = _utc(at)
        audit(session, by.name if by else None, "tasks.schedule_release", name, {"at": iso_text(at)})
        return task_view(session, task)


def cancel_scheduled_release(engine: Engine, name: str, *, by: Principal | None = None) -> TaskView:
    """Cancel the task's scheduled release; its scores stay hidden until released."""
    with unit_of_work(engine) as session:
        task = _managed_task(session, name, by)
        if task.release_at is None:
            raise ConflictError(f"Task '{name}' has no scheduled release to cancel.")
        audit(session, by.name if by else None, "tasks.cancel_release", name, {"at": iso_text(task.release_at)})
        task.release_at = None
        return task_view(session, task)


def set_topics(engine: Engine, name: str, topics: TopicFile, *, by: Principal | None = None) -> TaskView:
    """Give the task a new topics file (stored as a new topic set; the old one stays for whatever
    else names it): participants download this one from now on."""
    with unit_of_work(engine) as session:
        task = _managed_task(session, name, by)
        topic_set = collections.add_topic_set(
            session, collections.free_topic_set_name(session, f"{name}-topics"), topics.statements, topics.source
        )
        task.topic_set_id = topic_set.id
        audit(session, by.name if by else None, "tasks.topics", name, {"topics": topic_set.name})
        return task_view(session, task)


def task_topics(engine: Engine, principal: Principal, name: str) -> tuple[str, list[TopicStatement]]:
    """The topic statements of a task, for anyone who may see the task (statements are what
    participants run their systems on; which topics are private is never said)."""
    principal.require("tasks:read")
    with read_only(engine) as session:
        task = get_task(session, name)
        if task.topic_set_id is None:
            raise NotFoundError(f"Task '{name}' has no topics file.")
        return name, collections.topic_statements(session, task.topic_set_id)


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


@dataclass(frozen=True)
class AttachedRun:
    """A stored run made a task's submission, and its evaluation (a job id, or a reused one's)."""

    run: str
    team: str
    job: int
    state: str


def attach_runs(
    engine: Engine,
    task_name: str,
    run_names: Sequence[str],
    *,
    team: str | None = None,
    run_type: str = "automatic",
    by: Principal | None = None,
) -> list[AttachedRun]:
    """Make stored runs submissions of a task (a past campaign's runs brought into a task), all or
    none, each evaluated with the task's measures (a finished equal evaluation is reused). A run's
    team is ``team``, else its system, else its name. Windows and quotas are the organiser's to
    waive, so they are not checked."""
    if run_type not in RUN_TYPES:
        raise InvalidParameterError(
            f"A run's type is one of {', '.join(RUN_TYPES)}; not '{run_type}'.",
            remedy=Remedy(cli="Choose one with --run-type."),
        )
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
            attached.append(AttachedRun(name, run_team, ref.evaluation_id, ref.state))
        audit(session, by.name if by else None, "tasks.attach", task_name, {"runs": list(run_names)})
    return attached
