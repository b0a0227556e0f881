"""The MLflow logging state machine in our database (``evaluations.mlflow_state``): claims under a
lease, fenced by the attempt count (a logger whose lease ran out, and whose results were claimed
again, changes nothing), and what ends them. :mod:`evalstore.services.tracking` drives it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, Engine, and_, or_, update

from evalstore.db.models import Evaluation
from evalstore.db.session import unit_of_work
from evalstore.services import jobs
from evalstore.services.embargo import embargoed

MLFLOW_LEASE = timedelta(minutes=5)


def claim(engine: Engine, only: list[int] | None) -> tuple[int, int, bool, int] | None:
    """Claim the oldest loggable results (or only ``only``): (id, version, first attempt, attempts)."""
    with unit_of_work(engine) as session:
        now = jobs.db_now(session)
        row = jobs.first_claimable(
            session,
            and_(
                Evaluation.state == "done",
                ~embargoed(),  # hidden tasks' results wait for the release
                or_(
                    Evaluation.mlflow_state == "pending",
                    and_(Evaluation.mlflow_state == "logging", Evaluation.mlflow_lease_expires_at < now),
                ),
            ),
            only,
        )
        if row is None:
            return None
        attempt = take(row, now)
        return row.id, row.results_version, attempt == 1, attempt


def take(row: Evaluation, now: datetime) -> int:
    """A step: claim ``row``'s results for logging, in the caller's unit of work (``logging``,
    under the lease, one more attempt); the claim's attempt count, its fencing token."""
    row.mlflow_state, row.mlflow_lease_expires_at = "logging", now + MLFLOW_LEASE
    row.mlflow_attempts += 1
    return row.mlflow_attempts


def held(evaluation_id: int, version: int, attempt: int | None = None) -> Any:
    """The claim on these results for logging; ``attempt``: that very claim (its mlflow_attempts),
    so a logger whose lease ran out and was claimed again changes nothing (a fencing token)."""
    claimed = and_(
        Evaluation.id == evaluation_id, Evaluation.results_version == version, Evaluation.mlflow_state == "logging"
    )
    return claimed if attempt is None else and_(claimed, Evaluation.mlflow_attempts == attempt)


def mark_logged(engine: Engine, evaluation_id: int, version: int, run_id: str, attempt: int | None = None) -> bool:
    """Record the run; False when the claim is no longer this logger's (nothing is changed)."""
    with unit_of_work(engine) as session:
        done = session.execute(
            update(Evaluation)
            .where(held(evaluation_id, version, attempt))
            .values(mlflow_state="logged", mlflow_run_id=run_id, mlflow_error=None, mlflow_lease_expires_at=None)
            .execution_options(synchronize_session=False)
        )
        return bool(cast(CursorResult[Any], done).rowcount)


def give_back(engine: Engine, evaluation_id: int, version: int, error: str | None, attempt: int | None = None) -> None:
    with unit_of_work(engine) as session:
        session.execute(
            update(Evaluation)
            .where(held(evaluation_id, version, attempt))
            .values(mlflow_state="pending", mlflow_error=error, mlflow_lease_expires_at=None)
            .execution_options(synchronize_session=False)
        )


def confirm_held(engine: Engine, evaluation_id: int, version: int, attempt: int) -> str:
    """Before finishing the run of a claim :func:`~evalstore.services.tracking.hold_ahead` made (its
    ``attempt``): renew its lease if it is still
    this claim (no later attempt counted) and the results are not embargoed. "held", or why not:
    "embargoed" (given back as pending, in the same transaction, to be logged after the release),
    "replaced" (newer results were stored) or "lost" (another logger claimed them after the lease
    ran out, or the evaluation is gone)."""
    with unit_of_work(engine) as session:
        now = jobs.db_now(session)
        mine = held(evaluation_id, version, attempt)
        renewed = session.execute(
            update(Evaluation)
            .where(mine, ~embargoed())
            .values(mlflow_lease_expires_at=now + MLFLOW_LEASE)
            .execution_options(synchronize_session=False)
        )
        if cast(CursorResult[Any], renewed).rowcount:  # an UPDATE's result is a cursor result
            return "held"
        row = session.get(Evaluation, evaluation_id)
        if row is None:
            return "lost"
        if row.results_version != version:
            return "replaced"
        if row.mlflow_state != "logging" or row.mlflow_attempts != attempt:
            return "lost"
        row.mlflow_state, row.mlflow_error, row.mlflow_lease_expires_at = "pending", None, None
        return "embargoed"
