"""The MLflow delivery state machine in our database (``evaluations.mlflow_state``), the outbox:

```
none (not finished) --results committed--> pending --claim (lease)--> logging --run FINISHED--> logged
                                              ^                          |
                                              +-------any failure--------+   (mlflow_error says why)
```

A claim is held under a short lease that its deliverer renews while it talks to MLflow
(:func:`renew`), so a dead deliverer's claim runs out in seconds. Every claim is fenced by the
attempt count (``mlflow_attempts``): a deliverer whose lease ran out, and whose delivery another
then claimed, changes nothing. :mod:`evalstore.services.tracking.deliverer` drives it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, Engine, and_, func, or_, select, update
from sqlalchemy.orm import Session

from evalstore.db.models import Evaluation
from evalstore.db.session import read_only, unit_of_work
from evalstore.services import jobs
from evalstore.services.embargo import embargoed


@dataclass(frozen=True)
class Claim:
    """One deliverer's claim on one result's delivery; ``attempt`` is its fencing token."""

    evaluation_id: int
    results_version: int
    attempt: int

    @property
    def first(self) -> bool:
        """No earlier claim on these results: nothing of them can be in MLflow yet."""
        return self.attempt == 1


def claim(engine: Engine, only: list[int] | None, lease: timedelta) -> Claim | None:
    """Claim the oldest deliverable results (or only ``only``): pending, or held by a deliverer
    whose lease ran out; never a hidden task's before its release. On PostgreSQL the row is taken
    with ``FOR UPDATE SKIP LOCKED`` (deliverers on other hosts skip it); on SQLite the unit of work
    holds the write lock from its start."""
    with unit_of_work(engine) as session:
        now = jobs.db_now(session)
        row = jobs.first_claimable(session, _claimable(now), only)
        if row is None:
            return None
        row.mlflow_state, row.mlflow_lease_expires_at = "logging", now + lease
        row.mlflow_attempts += 1
        return Claim(row.id, row.results_version, row.mlflow_attempts)


# A claim takes no more than this share of what is claimable: a deliverer's lane delivers its
# claims one after the other, so claims taken in fours at the end of a backlog left the other
# lanes idle while one delivered its last four (a deployment has four lanes: two beside `serve`,
# two beside the worker).
SHARED_AMONG = 4


def claim_many(engine: Engine, only: list[int] | None, lease: timedelta, most: int) -> list[Claim]:
    """Claim up to ``most`` deliverable results at once, as :func:`claim` claims one: one write
    transaction for several deliveries (each is then delivered, confirmed and recorded alone).
    Never more than a :data:`SHARED_AMONG` th of those claimable (one at least), so that the last
    ones are spread over the deliverers' lanes."""
    with unit_of_work(engine) as session:
        now = jobs.db_now(session)
        if most > 1:
            candidates = select(Evaluation.id).where(_claimable(now)).limit(most * SHARED_AMONG)
            if only is not None:
                candidates = candidates.where(Evaluation.id.in_(only))
            found = session.scalar(select(func.count()).select_from(candidates.subquery())) or 0
            most = max(1, min(most, found // SHARED_AMONG))
        claims = []
        for row in jobs.claimable(session, _claimable(now), only, most):
            row.mlflow_state, row.mlflow_lease_expires_at = "logging", now + lease
            row.mlflow_attempts += 1
            claims.append(Claim(row.id, row.results_version, row.mlflow_attempts))
        return claims


def _claimable(now: Any) -> Any:
    return and_(
        Evaluation.state == "done",
        ~embargoed(),
        or_(
            Evaluation.mlflow_state == "pending",
            and_(Evaluation.mlflow_state == "logging", Evaluation.mlflow_lease_expires_at < now),
        ),
    )


def any_claimable(engine: Engine) -> bool:
    """Whether :func:`claim` would find something: read first, so that an idle deliverer's look
    does not take SQLite's write lock (which the workers' commits queue on) twice a second."""
    with read_only(engine) as session:
        now = jobs.db_now(session)
        return session.scalar(select(Evaluation.id).where(_claimable(now)).limit(1)) is not None


def _held(held: Claim) -> Any:
    return and_(
        Evaluation.id == held.evaluation_id,
        Evaluation.results_version == held.results_version,
        Evaluation.mlflow_state == "logging",
        Evaluation.mlflow_attempts == held.attempt,
    )


def renew(engine: Engine, held: Claim, lease: timedelta) -> bool:
    """The heartbeat: extend the claim's lease; False when it is no longer this claim."""
    with unit_of_work(engine) as session:
        now = jobs.db_now(session)
        renewed = session.execute(
            update(Evaluation)
            .where(_held(held))
            .values(mlflow_lease_expires_at=now + lease)
            .execution_options(synchronize_session=False)
        )
        return bool(cast(CursorResult[Any], renewed).rowcount)  # an UPDATE's result is a cursor result


def renew_all(engine: Engine, held: list[Claim], lease: timedelta) -> set[int]:
    """:func:`renew` for several claims in one transaction; the evaluations still held."""
    kept: set[int] = set()
    with unit_of_work(engine) as session:
        now = jobs.db_now(session)
        for claim_ in held:
            renewed = session.execute(
                update(Evaluation)
                .where(_held(claim_))
                .values(mlflow_lease_expires_at=now + lease)
                .execution_options(synchronize_session=False)
            )
            if cast(CursorResult[Any], renewed).rowcount:
                kept.add(claim_.evaluation_id)
    return kept


def confirm(engine: Engine, held: Claim, lease: timedelta) -> str:
    """Before the MLflow run is finished: renew the claim if it is still this one and the results
    are not embargoed. "held", or why not: "embargoed" (given back as pending in the same
    transaction, to be delivered after the release), "replaced" (newer results were stored) or
    "lost" (another deliverer claimed them after the lease ran out, or the evaluation is gone)."""
    with unit_of_work(engine) as session:
        return _confirm(session, held, lease)


def still_held(engine: Engine, held: Claim, lease: timedelta) -> bool:
    """Whether the claim is still this one, its results not embargoed, with at least half its
    ``lease`` left: then :func:`confirm` would change nothing a reader needs (the lease keeper
    renews it every third of the lease), and a read does where a write took SQLite's one write
    lock, which the workers' commits queue on. False: call :func:`confirm` (it renews the lease,
    or says why not)."""
    with read_only(engine) as session:
        now = jobs.db_now(session)
        found = session.scalar(
            select(Evaluation.id).where(
                _held(held), ~embargoed(), Evaluation.mlflow_lease_expires_at >= now + lease / 2
            )
        )
        return found is not None


def _confirm(session: Session, held: Claim, lease: timedelta) -> str:
    now = jobs.db_now(session)
    renewed = session.execute(
        update(Evaluation)
        .where(_held(held), ~embargoed())
        .values(mlflow_lease_expires_at=now + lease)
        .execution_options(synchronize_session=False)
    )
    if cast(CursorResult[Any], renewed).rowcount:
        return "held"
    row = session.get(Evaluation, held.evaluation_id)
    if row is None:
        return "lost"
    if row.results_version != held.results_version:
        return "replaced"
    if row.mlflow_state != "logging" or row.mlflow_attempts != held.attempt:
        return "lost"
    row.mlflow_state, row.mlflow_error, row.mlflow_lease_expires_at = "pending", None, None
    return "embargoed"


def mark_all_logged(engine: Engine, finished: list[tuple[Claim, str]]) -> list[bool]:
    """Record each finished run (one transaction for a batch of deliveries); for each, whether it
    was recorded: False when its claim is no longer this one (nothing changed)."""
    with unit_of_work(engine) as session:
        return [_mark_logged(session, held, run_id) for held, run_id in finished]


def _mark_logged(session: Session, held: Claim, run_id: str) -> bool:
    done = session.execute(
        update(Evaluation)
        .where(_held(held))
        .values(mlflow_state="logged", mlflow_run_id=run_id, mlflow_error=None, mlflow_lease_expires_at=None)
        .execution_options(synchronize_session=False)
    )
    return bool(cast(CursorResult[Any], done).rowcount)


def give_back(engine: Engine, held: Claim, error: str | None) -> None:
    """Put the delivery back to pending with the reason (a failure); nothing if no longer held."""
    with unit_of_work(engine) as session:
        session.execute(
            update(Evaluation)
            .where(_held(held))
            .values(mlflow_state="pending", mlflow_error=error, mlflow_lease_expires_at=None)
            .execution_options(synchronize_session=False)
        )


def undelivered(engine: Engine) -> int:
    """Finished results MLflow has not received (pending, or being delivered)."""
    with read_only(engine) as session:
        return int(
            session.scalar(
                select(func.count())
                .select_from(Evaluation)
                .where(Evaluation.state == "done", Evaluation.mlflow_state.in_(("pending", "logging")))
            )
            or 0
        )
