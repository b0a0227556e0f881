"""Who may reach what beyond the role table: the rules against hostile participants, kept here so the task,
pool and judging services change by a line each.

- A pool belongs to the organisers of the tasks whose runs it pools (admins: every pool). A pool
  of runs no task holds is the admins'.
- A withdrawn run whose scores its team could read keeps its slot in the team's quota (a
  submit-read-withdraw loop would otherwise read the qrels out); the withdrawal's audit entry is
  the record. Every other withdrawn run gives its slot back: one not evaluated yet, failed or
  cancelled, or evaluated on a hidden task before its release (no score of it was shown).
- A run a pool uses cannot be withdrawn: the pool's review would lose it.
- Each team's runs per task per UTC day may be capped: by the task (``daily_cap``) or, for tasks
  without one, the server (``EVALSTORE_RUNS_PER_DAY``); the day's slots are counted as the quota's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, func, select, true
from sqlalchemy.orm import Session

from evalstore.db.models import AuditEntry, Evaluation, Pool, Run, Submission, Task
from evalstore.db.session import read_only
from evalstore.errors import ConflictError, NotFoundError
from evalstore.services.access import Principal

WITHDRAW_ACTION = "runs.withdraw"


def pool_runs(pool: Pool) -> list[str]:
    return [str(r) for r in (pool.params or {}).get("runs", [])]


def owns_pool(session: Session, principal: Principal, pool: Pool) -> bool:
    """Admins own every pool; an organiser the pools whose every run is a submission to a task of
    theirs."""
    if principal.is_admin:
        return True
    runs = pool_runs(pool)
    if not runs or principal.user_id is None:
        return False
    owners = session.execute(
        select(Run.name, Task.owner_id)
        .join(Submission, Submission.run_id == Run.id)
        .join(Task, Task.id == Submission.task_id)
        .where(Run.name.in_(runs))
    ).all()
    return len(owners) == len(set(runs)) and all(owner == principal.user_id for _, owner in owners)


def require_pool(session: Session, principal: Principal, name: str) -> Pool:
    """The pool, if ``principal`` owns it; otherwise the same 'not found' as a pool that is not."""
    pool = session.scalar(select(Pool).where(Pool.name == name))
    if pool is None or not owns_pool(session, principal, pool):
        raise NotFoundError(f"No pool named '{name}' of yours.")
    return pool


def refuse_pooled_withdrawal(session: Session, run_name: str) -> None:
    using = sorted(p.name for p in session.scalars(select(Pool)) if run_name in pool_runs(p))
    if using:
        raise ConflictError(
            f"Run '{run_name}' is in the judging pool(s) {', '.join(using)}; a pooled run cannot be "
            "withdrawn (the pool's judgments and review rest on it). Ask the task's organiser."
        )


def keeps_slot(*, evaluated: bool, hidden: bool, released: bool) -> bool:
    """Whether withdrawing a run leaves its slot taken: when its team could read its scores."""
    return evaluated and (not hidden or released)


def _holds_slot(detail: dict[str, object]) -> bool:
    # a withdrawal recorded before "holds_slot" was: its evaluation decided, the stricter reading
    return bool(detail.get("holds_slot", detail.get("evaluated")))


def withdrawn_slots(session: Session, task_id: int, team: str) -> int:
    """Runs of ``team`` withdrawn from the task after it could read their scores: each still
    holds its slot."""
    details = session.scalars(select(AuditEntry.detail).where(AuditEntry.action == WITHDRAW_ACTION))
    return sum(1 for d in details if d and d.get("task_id") == task_id and d.get("team") == team and _holds_slot(d))


def check_pool(engine: Engine, principal: Principal, name: str) -> None:
    """Raise the 'not found' of :func:`require_pool` unless ``principal`` owns the pool."""
    with read_only(engine) as session:
        require_pool(session, principal, name)


def utc_day(now: datetime) -> tuple[datetime, datetime]:
    """The UTC day ``now`` falls in: its start and the next day's (when a daily cap resets)."""
    start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return start, start + timedelta(days=1)


def runs_today(session: Session, task_id: int, team: str, day_start: datetime, holds_slot: Sequence[str] | None) -> int:
    """The team's runs submitted to the task since ``day_start`` that hold a slot (their job in
    ``holds_slot``; None: every submission holds one, as answers do before they are assessed),
    and those withdrawn since that keep their slot: the same slots a quota counts, within the UTC
    day."""
    made = (
        session.scalar(
            select(func.count())
            .select_from(Submission)
            .outerjoin(Evaluation, Evaluation.id == Submission.evaluation_id)
            .where(
                Submission.task_id == task_id,
                Submission.team == team,
                Submission.created_at >= day_start,
                true() if holds_slot is None else Evaluation.state.in_(holds_slot),
            )
        )
        or 0
    )
    # a run submitted today was withdrawn today; one withdrawn today may be yesterday's
    details = session.scalars(
        select(AuditEntry.detail).where(AuditEntry.action == WITHDRAW_ACTION, AuditEntry.at >= day_start)
    )
    return made + sum(
        1
        for d in details
        if d
        and d.get("task_id") == task_id
        and d.get("team") == team
        and _holds_slot(d)
        and _submitted_since(d.get("submitted_at"), day_start)
    )


def _submitted_since(submitted_at: object, day_start: datetime) -> bool:
    if not isinstance(submitted_at, str):
        return True  # withdrawn before withdrawals recorded it: counted, as the stricter reading
    moment = datetime.fromisoformat(submitted_at)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)) >= day_start
