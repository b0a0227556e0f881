"""Submitting runs to a task (one unit of work: the run, its evaluation job and the submission, or
nothing), registering runs over the service, and withdrawing them.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from sqlalchemy import Engine, func, select, true
from sqlalchemy.orm import Session

from evalstore import _kernels as kernels
from evalstore.db import repositories as repo
from evalstore.db.models import (
    AnswerRun,
    Evaluation,
    NuggetBank,
    QrelsSet,
    Run,
    RunTopic,
    Submission,
    Task,
)
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import (
    AccessDenied,
    ConflictError,
    InputFormatError,
    InvalidParameterError,
    LimitExceeded,
    NotFoundError,
    Remedy,
)
from evalstore.io import answers as answer_files
from evalstore.services import answers, claims, jobs, store
from evalstore.services.access import Principal, audit
from evalstore.services.context import AppContext, context_for
from evalstore.services.kinds import answers as answer_kind
from evalstore.services.tasks import coverage
from evalstore.services.tasks.visibility import (
    RUN_TYPES,
    get_task,
    iso_text,
    manages,
    name_taken,
    sees_submission,
    visible_submission,
)

log = logging.getLogger("evalstore.tasks")

# a job's state as a slot in a team's quota: failed and cancelled runs give theirs back
_HOLDS_SLOT = ("queued", "running", "done")
# what a quota counts, as its refusals say it
_COUNTED = (
    "evaluated runs count, and withdrawn ones whose scores the team could read; failed, cancelled and "
    "other withdrawn ones do not"
)


@dataclass(frozen=True)
class Submitted:
    run: store.Summary
    task: str
    team: str
    job: jobs.JobRef | None  # None: answers, evaluated once the task's organisers have assessed them
    warnings: tuple[str, ...]
    answers: answers.AnswerRunSummary | None = None  # submitted answers (``run``: their references)
    # where the submission's time went, in seconds: "slot" (waiting for one of the process's upload
    # slots), "parse" (reading and validating the file),
    # "stage" (ranking and staging its rows), "judged" (its coverage and judged ranks against the
    # task's qrels), "turn" (waiting for the write lock), "write" (the unit of work, committed)
    seconds: dict[str, float] = field(default_factory=dict)


def submit_run(
    engine: Engine,
    principal: Principal,
    task_name: str,
    path: Path,
    *,
    name: str,
    shown_path: str | None = None,
    team: str | None = None,
    run_type: str = "automatic",
    description: str | None = None,
    judging_precedence: int | None = None,
    metadata: dict[str, str] | None = None,
    server_daily_cap: int | None = None,
    context: AppContext | None = None,
) -> Submitted:
    """Validate a run file and store it as the team's submission to the task, with its evaluation
    queued, in one transaction; or refuse it and store nothing. Participants submit for their own
    team; admins and the task's organiser for any team they name. ``shown_path`` is what errors
    call the file (an upload's own name, not where the server kept it). ``server_daily_cap`` caps
    each team's runs per UTC day on tasks without a ``daily_cap`` of their own. The run's judged
    ranks against the task's qrels are worked out before the unit of work and kept with the run
    (:func:`_judged_ranks_to_keep`; the qrels from ``context``'s cache)."""
    if run_type not in RUN_TYPES:
        raise InvalidParameterError(f"run_type must be one of {', '.join(RUN_TYPES)}; got '{run_type}'.")
    with read_only(engine) as session:
        task = get_task(session, task_name)
        qrels = session.get(QrelsSet, task.qrels_id) if task.qrels_id is not None else None
        if qrels is None:
            raise InvalidParameterError(
                f"Task '{task_name}' takes generated answers (JSONL, as the TREC RAG track's), not a ranking run."
            )
        team = _submitting_team(principal, task, team)
        _check_window(task, jobs.db_now(session))
        _refuse_taken_name(session, principal, name)
        _check_quota(session, task, team, server_daily_cap)  # early, before parsing; again under the lock
    options = jobs.EvaluationOptions(measures=tuple(task.measures)) if task.measures else jobs.EvaluationOptions()
    shared = context_for(engine, context)
    # resolved here, not in the write transaction: parsing the ~100 measure names of the default
    # set is pure Python that every other writer would wait on (and kept: the task's next upload
    # resolves the same options)
    resolved = jobs.resolved_for(shared, options, qrels)
    meta = {**(metadata or {}), "task": task_name, "team": team, "run_type": run_type}
    if judging_precedence is not None:
        meta["judging_precedence"] = str(judging_precedence)
    seconds: dict[str, float] = {}
    # parsed, staged and stored in one of the process's few upload slots, waited for in turn
    with _upload_slot(shared, seconds), _named_as(path, shown_path), store.prepare_run(engine, path) as prepared:
        started = time.perf_counter()
        with read_only(engine) as session:  # read once (cached) for the coverage and the judged ranks
            judgments = store.qrels_table_kept(session, qrels, shared.qrels)
        found = coverage.coverage(prepared.counts["topic"].to_pylist(), kernels.unique(judgments["topic"]).to_pylist())
        covered = coverage.check(name, qrels.name, found, shared.settings)
        judged = _judged_ranks_to_keep(prepared, qrels, judgments)
        seconds.update(prepared.seconds, judged=time.perf_counter() - started)

        def submit() -> Submitted:  # the one unit of work: the run, its job, the submission, or nothing
            waiting = time.perf_counter()
            with store.run_unit_of_work(engine, prepared) as session:
                session.connection()  # the transaction begins: on SQLite, once this writer's turn comes
                writing = time.perf_counter()
                _refuse_taken_name(session, principal, name)  # again: a run may have taken it meanwhile
                registered = store.add_run(
                    session, prepared, name=name, system=team, metadata=meta, description=description
                )
                if not registered.created:  # the same content stored under this name meanwhile
                    _refuse_taken_name(session, principal, name)
                run = repo.get_run(session, name)
                ref = record_submission(
                    session,
                    principal,
                    task.id,
                    run,
                    qrels,
                    resolved,
                    team=team,
                    run_type=run_type,
                    judging_precedence=judging_precedence,
                    server_daily_cap=server_daily_cap,
                )
                if judged is not None:
                    repo.keep_judged_ranks(session, run, qrels, judged)
            seconds.update(turn=writing - waiting, write=time.perf_counter() - writing)
            said = (*registered.warnings, covered) if covered else registered.warnings
            return Submitted(registered.summary, task_name, team, ref, said, seconds=seconds)

        return store.retry_on_name_race(submit)


def submit_answers(
    engine: Engine,
    principal: Principal,
    task_name: str,
    path: Path,
    *,
    name: str,
    shown_path: str | None = None,
    team: str | None = None,
    run_type: str = "automatic",
    description: str | None = None,
    server_daily_cap: int | None = None,
    limits: answer_files.AnswerLimits | None = None,
) -> Submitted:
    """Validate an answer file (TREC RAG 2024 or 2025 JSONL, one run) and store it as the team's
    submission to a task over a nugget bank, with its references as a ranking run of the same
    name, in one transaction; or refuse it (``file:line`` for a bad line) and store nothing. The
    same team, window, name, quota and daily-cap rules as a ranking run's. Nothing is queued: the
    answers are evaluated once assessed on the task's bank (:func:`evaluate_answers`)."""
    if run_type not in RUN_TYPES:
        raise InvalidParameterError(f"run_type must be one of {', '.join(RUN_TYPES)}; got '{run_type}'.")
    with read_only(engine) as session:
        task = get_task(session, task_name)
        if task.nugget_bank_id is None:
            raise InvalidParameterError(
                f"Task '{task_name}' takes ranking runs; answers are submitted to a task over a nugget bank."
            )
        team = _submitting_team(principal, task, team)
        _check_window(task, jobs.db_now(session))
        _refuse_taken_name(session, principal, name)
        _check_quota(session, task, team, server_daily_cap)  # early, before parsing; again under the lock
    shown = shown_path or str(path)
    runs = answer_files.read_answers(path, limits=limits, shown=shown)
    if len(runs) > 1:
        raise InputFormatError(
            shown, None, f"the file holds {len(runs)} runs ({', '.join(r.name for r in runs[:3])}); submit one a file"
        )
    (run,) = runs
    if not any(a.references for a in run.answers):
        raise InputFormatError(shown, None, "no answer lists references; cite the segments the answers draw on")
    meta = {"task": task_name, "team": team, "run_type": run_type}
    with tempfile.TemporaryDirectory(prefix="evalstore-answers-") as scratch:
        references = answers.references_file(Path(scratch), run)
        assert references is not None

        def submit() -> Submitted:
            with store.prepare_run(engine, references) as prepared, store.run_unit_of_work(engine, prepared) as session:
                _refuse_taken_name(session, principal, name)  # again: a run may have taken it meanwhile
                summary = answers.add_answer_run(session, run, name, f"submission to {task_name}", prepared)
                if not summary.created:
                    _refuse_taken_name(session, principal, name)
                ranking_run = repo.get_run(session, name)
                ranking_run.system, ranking_run.description = team, description
                ranking_run.metadata_ = {**(ranking_run.metadata_ or {}), **meta}
                record_submission(
                    session,
                    principal,
                    task.id,
                    ranking_run,
                    None,
                    jobs.EvaluationOptions(),
                    team=team,
                    run_type=run_type,
                    judging_precedence=None,
                    server_daily_cap=server_daily_cap,
                )
                registered = store.run_summary(ranking_run)
            return Submitted(registered, task_name, team, None, (), summary)

        return store.retry_on_name_race(submit)


@dataclass(frozen=True)
class AnswersQueued:
    """What :func:`evaluate_answers` did with a task's answer runs: the jobs queued (or reused),
    and the runs left waiting, each with why."""

    task: str
    assessor: str
    jobs: tuple[tuple[str, jobs.JobRef], ...]
    waiting: tuple[tuple[str, str], ...]


def evaluate_answers(
    engine: Engine,
    task_name: str,
    *,
    assessor: str = "human",
    force: bool = False,
    by: Principal | None = None,
) -> AnswersQueued:
    """Queue the evaluation of every answer run submitted to the task on its bank with
    ``assessor``'s assignments (people's, or ``judge:NAME``'s), in one unit of work; each
    submission's evaluation becomes that job, which the leaderboard reads. A run with no label on
    the bank yet is left waiting (named in ``waiting``); one labelled in part is queued, and its
    job fails naming the topic. Only the task's organiser and admins."""
    queued: list[tuple[str, jobs.JobRef]] = []
    waiting: list[tuple[str, str]] = []
    with unit_of_work(engine) as session:
        task = get_task(session, task_name)
        if by is not None and not manages(by, task):
            raise AccessDenied(f"Task '{task_name}' is managed by its organiser; you may not evaluate its runs.")
        bank = session.get(NuggetBank, task.nugget_bank_id) if task.nugget_bank_id is not None else None
        if bank is None:
            raise InvalidParameterError(
                f"Task '{task_name}' takes ranking runs, which are evaluated as they are submitted."
            )
        if bank.drafted_by is not None and bank.accepted_at is None:
            raise InvalidParameterError(
                f"Nugget bank '{bank.name}' is a draft by {bank.drafted_by}, not reviewed yet; "
                "its nuggets are accepted before answers are scored on them."
            )
        labelled = set(answer_kind.assessed_runs(session, bank, assessor))
        rows = session.execute(
            select(Submission, AnswerRun)
            .join(AnswerRun, AnswerRun.ranking_run_id == Submission.run_id)
            .where(Submission.task_id == task.id)
            .order_by(AnswerRun.name)
        ).all()
        for submission, answer_run in rows:
            if answer_run.name not in labelled:
                waiting.append((answer_run.name, f"no {assessor} assignment on nugget bank '{bank.name}' yet"))
                continue
            ref = answer_kind.enqueue_run(session, answer_run, bank, assessor, force=force)
            submission.evaluation_id = ref.evaluation_id
            queued.append((answer_run.name, ref))
        audit(
            session,
            by.name if by else None,
            "tasks.evaluate",
            task_name,
            {"assessor": assessor, "jobs": [ref.evaluation_id for _, ref in queued]},
        )
    return AnswersQueued(task_name, assessor, tuple(queued), tuple(waiting))


def submission_warning(
    engine: Engine, principal: Principal, run_name: str, context: AppContext | None = None
) -> str | None:
    """The topic-coverage warning of a submitted run the principal may see (its team, the task's
    organiser), as its submission gave it; None when it has none."""
    shared = context_for(engine, context)
    with read_only(engine) as session:
        submission, task = visible_submission(session, principal, run_name)
        qrels = session.get(QrelsSet, task.qrels_id) if task.qrels_id is not None else None
        if qrels is None:  # answers: no qrels to cover
            return None
        topics = session.scalars(select(RunTopic.topic).where(RunTopic.run_id == submission.run_id)).all()
        judged = store.qrels_table_kept(session, qrels, shared.qrels)["topic"].to_pylist()
    found = coverage.coverage(topics, judged)
    if coverage.shares_no_topic(found):  # stored while the server scored such runs
        return coverage.no_shared_topic_message(run_name, qrels.name, found)
    return coverage.check(run_name, qrels.name, found, shared.settings)


def record_submission(
    session: Session,
    principal: Principal,
    task_id: int,
    run: Run,
    qrels: QrelsSet | None,
    options: jobs.EvaluationOptions | dict[str, Any],
    *,
    team: str,
    run_type: str,
    judging_precedence: int | None,
    server_daily_cap: int | None = None,
) -> jobs.JobRef | None:
    """A step, in the unit of work that stores the run: with the task locked, check its window and
    the team's quota again, queue the run's evaluation (``options`` as given, or resolved already
    by :func:`jobs.for_judgments`) and record the submission (audited). On a task over a nugget
    bank (``qrels`` None) ``run`` is the answers' references and nothing is queued: answers are
    evaluated once assessed (:func:`evaluate_answers`)."""
    locked = _lock(session, task_id)
    _check_window(locked, jobs.db_now(session))
    _check_quota(session, locked, team, server_daily_cap)
    ref = jobs.enqueue_run(session, run, qrels, options) if qrels is not None else None
    session.add(
        Submission(
            task_id=task_id,
            run_id=run.id,
            team=team,
            user_id=principal.user_id,
            evaluation_id=ref.evaluation_id if ref else None,
            run_type=run_type,
            judging_precedence=judging_precedence,
        )
    )
    audit(
        session,
        principal.name,
        "runs.submit",
        run.name,
        {"task": locked.name, "team": team, "job": ref.evaluation_id if ref else None},
    )
    return ref


def _judged_ranks_to_keep(prepared: store.PreparedRun, qrels: QrelsSet, judgments: pa.Table) -> bytes | None:
    """A step outside any transaction, for a run submitted to a task: its judged ranks against the
    task's relevance qrels (``judgments``, the qrels' table as the context keeps it), worked out
    from the rows this process holds (an Arrow hash join,
    :func:`repositories.judged_ranks_in_memory`) and encoded, for the submission's unit of work to
    keep (:func:`repositories.keep_judged_ranks`), so the worker reads one row instead of joining
    in the database. None where nothing is kept: other kinds of judgments, rows too many to hold
    (staged as a stream), or working them out failed (logged): the worker then joins in the
    database, as for any run."""
    if qrels.kind != "relevance" or prepared.staged.count is not None:
        return None
    try:
        return repo.judged_ranks_bytes(repo.judged_ranks_in_memory(prepared.staged.table, judgments))
    except Exception:  # noqa: BLE001 (a saving only: never the reason a submission is refused)
        log.warning(
            "the judged ranks of %s were not worked out; the worker will join them", prepared.path, exc_info=True
        )
        return None


def register_run(
    engine: Engine,
    principal: Principal,
    path: Path,
    *,
    name: str,
    shown_path: str | None = None,
    description: str | None = None,
    system: str | None = None,
) -> store.Registered:
    """A run stored outside any task (`runs register --server` without --task): an admin's, as
    `evalstore runs register` on the database is."""
    principal.require("runs:register")
    with read_only(engine) as session:
        if repo.find_run(session, name) is not None:
            raise ConflictError(f"A run named '{name}' exists already; register it under another name.")
    with _named_as(path, shown_path), store.prepare_run(engine, path) as prepared:

        def register() -> store.Registered:
            with store.run_unit_of_work(engine, prepared) as session:
                registered = store.add_run(session, prepared, name=name, system=system, description=description)
                if registered.created:
                    audit(session, principal.name, "runs.register", name)
                return registered

        return store.retry_on_name_race(register)


def _refuse_taken_name(session: Session, principal: Principal, name: str) -> None:
    """A taken name is a conflict when the caller may see the run holding it (their team's), and
    otherwise the very answer reading that run gets (no oracle between the two)."""
    run = repo.find_run(session, name)
    if run is None:
        return
    row = session.execute(
        select(Submission, Task).join(Task, Task.id == Submission.task_id).where(Submission.run_id == run.id)
    ).first()
    if principal.is_admin or (row is not None and sees_submission(principal, *row)):
        raise ConflictError(f"A run named '{name}' exists already; submit it under another name.")
    raise name_taken(name)


# How long a submission waits for an upload slot before it is refused as busy: well within the
# server's request budget (EVALSTORE_REQUEST_SECONDS, 120 s by default), so the refusal, not the
# budget's 503, is what the sender sees.
SLOT_WAIT_SECONDS = 60.0
SLOT_RETRY_AFTER = 30


@contextmanager
def _upload_slot(context: AppContext, seconds: dict[str, float]) -> Iterator[None]:
    """Hold one of ``context``'s upload slots (:attr:`AppContext.upload_slots`) for the block;
    the wait for it goes into ``seconds`` as "slot". A submission that waits longer than
    :data:`SLOT_WAIT_SECONDS` is refused as busy before anything of it is read, so its sender is
    told nothing was stored (a wait past the server's request budget would answer 503 while the
    upload went on and was stored after all)."""
    queued = time.perf_counter()
    if not context.upload_slots.acquire(timeout=SLOT_WAIT_SECONDS):
        raise LimitExceeded(
            "busy",
            f"The server is storing as many uploads as it may at once and none finished within "
            f"{SLOT_WAIT_SECONDS:g} s; nothing of this run was stored.",
            retry_after=SLOT_RETRY_AFTER,
            remedy=Remedy(cli="Submit it again in a minute.", web="Submit it again in a minute."),
        )
    try:
        seconds["slot"] = time.perf_counter() - queued
        yield
    finally:
        context.upload_slots.release()


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
        raise AccessDenied(
            f"Task '{task.name}' opens for submissions at {iso_text(task.opens_at)}; it is now {iso_text(now)}."
        )
    if task.closes_at is not None and now >= jobs.as_utc(task.closes_at):
        raise AccessDenied(
            f"Task '{task.name}' closed for submissions at {iso_text(task.closes_at)}; it is now {iso_text(now)}."
        )


def _lock(session: Session, task_id: int) -> Task:
    """The task, locked until the transaction ends, so two submissions of one team cannot both
    take its last slot. (Storing a run already serialises its transaction on both databases:
    SQLite has one writer at a time, BEGIN IMMEDIATE, and PostgreSQL's ATTACH PARTITION locks
    run_rows; the lock says what the quota relies on, whatever becomes of those.)"""
    task = session.scalar(select(Task).where(Task.id == task_id).with_for_update())
    if task is None:
        raise NotFoundError("The task was deleted while the run was being stored; nothing was stored.")
    return task


def _check_quota(session: Session, task: Task, team: str, server_daily_cap: int | None) -> None:
    _check_daily_cap(session, task, team, server_daily_cap)
    if task.max_runs_per_team is None:
        return
    if slots_used(session, task, team) >= task.max_runs_per_team:
        raise LimitExceeded(
            "quota",
            f"Team '{team}' has used its {task.max_runs_per_team} runs for task '{task.name}' ({_COUNTED}).",
        )


def _check_daily_cap(session: Session, task: Task, team: str, server_daily_cap: int | None) -> None:
    """The task's own daily cap, else the server's: each team's runs per UTC day, counted as the
    quota counts them (EvalAI's daily submission limit)."""
    cap = task.daily_cap if task.daily_cap is not None else server_daily_cap
    if cap is None:
        return
    day_start, resets = claims.utc_day(jobs.db_now(session))
    if claims.runs_today(session, task.id, team, day_start, _holds_slot(task)) >= cap:
        whose = "the task's" if task.daily_cap is not None else "this server's"
        raise LimitExceeded(
            "quota",
            f"Team '{team}' has used today's {cap} runs for task '{task.name}' ({whose} daily cap; {_COUNTED}). "
            f"The cap resets at {iso_text(resets)} (midnight UTC).",
        )


def slots_used(session: Session, task: Task, team: str) -> int:
    """How many of its quota's runs the team has used on the task: runs queued, running or done,
    and evaluated runs withdrawn since whose scores the team could read (a withdrawal gives no
    slot back once the scores were seen)."""
    held = _holds_slot(task)
    used = (
        session.scalar(
            select(func.count())
            .select_from(Submission)
            .outerjoin(Evaluation, Evaluation.id == Submission.evaluation_id)
            .where(
                Submission.task_id == task.id,
                Submission.team == team,
                true() if held is None else Evaluation.state.in_(held),
            )
        )
        or 0
    )
    return used + claims.withdrawn_slots(session, task.id, team)


def _holds_slot(task: Task) -> tuple[str, ...] | None:
    """The job states that keep a submission's slot; None: every submission keeps one (answers,
    whose evaluation waits for the organisers' assessment, not for the team)."""
    return None if task.nugget_bank_id is not None else _HOLDS_SLOT


def quota_used(engine: Engine, principal: Principal, task_name: str) -> int:
    """:func:`slots_used` for the principal's own team (0 for one without a team)."""
    if principal.team is None:
        return 0
    with read_only(engine) as session:
        return slots_used(session, get_task(session, task_name), principal.team)


def day_used(
    engine: Engine, principal: Principal, task_name: str, server_daily_cap: int | None
) -> tuple[int | None, int]:
    """The daily cap on each team's runs to the task (the task's, else ``server_daily_cap``; None:
    none) and how many of today's (UTC) the principal's team has used (0 for one without a team)."""
    with read_only(engine) as session:
        task = get_task(session, task_name)
        cap = task.daily_cap if task.daily_cap is not None else server_daily_cap
        if cap is None or principal.team is None:
            return cap, 0
        day_start, _ = claims.utc_day(jobs.db_now(session))
        return cap, claims.runs_today(session, task.id, principal.team, day_start, _holds_slot(task))


def _evaluated(session: Session, submission: Submission) -> bool:
    return (
        submission.evaluation_id is not None
        and session.scalar(select(Evaluation.state).where(Evaluation.id == submission.evaluation_id)) == "done"
    )


def withdrawal_keeps_slot(engine: Engine, principal: Principal, run_name: str) -> bool:
    """Whether withdrawing the run now would leave its slot in its team's quota taken (what the
    withdrawal's confirmation says)."""
    with read_only(engine) as session:
        submission, task = visible_submission(session, principal, run_name)
        return claims.keeps_slot(
            evaluated=_evaluated(session, submission), hidden=task.hidden, released=task.released_at is not None
        )


def withdraw_run(engine: Engine, principal: Principal, run_name: str) -> store.Summary:
    """Delete a submitted run and its evaluation: its team while the task is open, or the task's
    organiser. An evaluated run whose scores the team could read keeps its slot in the team's
    quota (:func:`claims.keeps_slot`); a pooled run is not withdrawn."""
    with unit_of_work(engine) as session:
        submission, task = visible_submission(session, principal, run_name)
        if not manages(principal, task):
            _check_window(task, jobs.db_now(session))
        claims.refuse_pooled_withdrawal(session, run_name)
        evaluated = _evaluated(session, submission)
        run = repo.get_run(session, run_name)
        summary = store.run_summary(run)
        answer_run = session.scalar(select(AnswerRun).where(AnswerRun.ranking_run_id == run.id))
        if answer_run is not None and task.nugget_bank_id is not None:  # answers go with their references
            session.delete(answer_run)
        repo.delete_run(session, run)
        audit(
            session,
            principal.name,
            claims.WITHDRAW_ACTION,
            run_name,
            {
                "task": task.name,
                "team": submission.team,
                "task_id": task.id,
                "evaluated": evaluated,
                "holds_slot": claims.keeps_slot(
                    evaluated=evaluated, hidden=task.hidden, released=task.released_at is not None
                ),
                "submitted_at": iso_text(submission.created_at),  # the day whose daily cap it counts in
            },
        )
        return summary
