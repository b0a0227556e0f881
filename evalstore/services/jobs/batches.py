"""Claiming queued ranking jobs that share qrels and options as one batch, in one transaction.

A worker evaluates the runs of a batch in one pass (the qrels read once, the rankings stacked,
:mod:`evalstore.metrics.stacked`), and stores each as its own evaluation. Every job of a batch is
claimed as :func:`~evalstore.services.jobs.queue.claim` claims one: its own state, attempt and
lease, so a worker that dies loses none of them (each is claimed again when its lease runs out)
and a job that fails is failed, retried or released alone.

Only ranking jobs against relevance qrels evaluated locally are batched, and only with jobs asked
with the same options (measures, -l, -M, -J, missing topics, --known); a classification, a job on
DuckDB or Spark, and one against subtopic or preference judgments go one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, and_, func, or_, select
from sqlalchemy.orm import Session

from evalstore import config
from evalstore.backends import Backend
from evalstore.db.models import Evaluation, QrelsSet, Run, Worker
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import InvalidParameterError
from evalstore.services.jobs.options import DEFAULT_LEASE, ClaimedJob, as_utc, db_now
from evalstore.services.jobs.queue import claim_in, take

# a batch's default bound: its runs' rows stacked at once (as evalstore.metrics.stacked.STACK_CELLS,
# 5 robust03 runs, 11 DL-sized ones) and a number of jobs, so that one worker does not take a
# whole campaign from the others
BATCH_JOBS = 16
BATCH_ROWS = 500_000
# seconds of quiet in the queue before the worker inside `evalstore serve` claims (arrivals_settle_in)
SERVE_SETTLE = 0.5


@dataclass(frozen=True)
class BatchBound:
    """The most one batch holds: ``jobs`` jobs, whose runs have ``rows`` stored rows together (a
    run larger than that is a batch of its own). ``jobs=1`` turns batching off."""

    jobs: int = BATCH_JOBS
    rows: int = BATCH_ROWS


def batch_bound_from_env() -> BatchBound:
    """The batch bound `evalstore worker` takes from --batch-jobs and --batch-rows, from their
    environment variables (the worker inside `evalstore serve` has no options of its own)."""
    try:
        return BatchBound(jobs=config.batch_jobs(BATCH_JOBS), rows=config.batch_rows(BATCH_ROWS))
    except config.SettingsError as error:
        raise InvalidParameterError(str(error)) from None


def claim_batch(
    engine: Engine,
    worker_id: str,
    *,
    lease: timedelta = DEFAULT_LEASE,
    only: list[int] | None = None,
    bound: BatchBound = BatchBound(),
) -> list[ClaimedJob]:
    """The oldest claimable job (as :func:`claim`) and, when it is a ranking job that batches,
    the oldest claimable ones with its qrels and options, up to ``bound`` and to this worker's
    fair share of them among the live workers; all claimed in one transaction. Empty when there
    was nothing to claim."""
    with unit_of_work(engine) as session:
        first = claim_in(session, worker_id, lease=lease, only=only)
        if first is None:
            return []
        if bound.jobs <= 1 or first.kind != "ranking" or not first.backend.local:
            return [first]
        return [first, *_companions(session, first, worker_id, lease, only, bound)]


def _companions(
    session: Session, first: ClaimedJob, worker_id: str, lease: timedelta, only: list[int] | None, bound: BatchBound
) -> list[ClaimedJob]:
    """The jobs claimed beside ``first`` (claimed in this transaction): the oldest that fit the
    bound, and of those no more than this worker's share among the live workers."""
    qrels_kind = session.scalar(select(QrelsSet.kind).where(QrelsSet.id == first.qrels_id))
    rows = session.scalar(select(Run.row_count).where(Run.id == first.run_id)) or 0
    if qrels_kind != "relevance" or rows >= bound.rows:
        return []
    row = session.get(Evaluation, first.evaluation_id)
    assert row is not None, "claimed in this transaction"
    now = db_now(session)
    statement = (
        select(Evaluation, Run.row_count)
        .join(Run, Run.id == Evaluation.run_id)
        .where(
            Evaluation.qrels_id == first.qrels_id,
            Evaluation.prediction_set_id.is_(None),
            Evaluation.measures == row.measures,  # the options' one long part: most others differ here
            Evaluation.id != first.evaluation_id,
            or_(
                Evaluation.state == "queued",
                # a job whose attempts ran out is failed by claim_in, when it comes first
                and_(
                    Evaluation.state == "running",
                    Evaluation.lease_expires_at < now,
                    Evaluation.attempts < Evaluation.max_attempts,
                ),
            ),
        )
        .order_by(Evaluation.id)
        .limit(8 * bound.jobs)  # some with other options may be among them
    )
    if only is not None:
        statement = statement.where(Evaluation.id.in_(only))
    if session.get_bind().dialect.name == "postgresql":
        statement = statement.with_for_update(skip_locked=True, of=Evaluation)
    matching = [
        (job, run_rows)
        for job, run_rows in session.execute(statement)
        if job.options == first.options and Backend.from_stored(job.backend).local
    ]
    # a fair share of what waits: the other live workers find the rest (one worker taking all ten
    # queued jobs while the other idled halved a two-worker service's throughput)
    live = _live_workers(session, worker_id, now, lease)
    wanted = min(bound.jobs, -(-(len(matching) + 1) // live)) - 1
    taken: list[ClaimedJob] = []
    for job, run_rows in matching:
        if len(taken) >= wanted:
            break
        if rows + run_rows <= bound.rows:
            rows += run_rows
            taken.append(take(session, job, worker_id, now, lease, "ranking"))
    return taken


def _live_workers(session: Session, worker_id: str, now: datetime, lease: timedelta) -> int:
    """The workers that said they were alive within two leases (this one counted)."""
    others = session.scalar(
        select(func.count())
        .select_from(Worker)
        .where(Worker.state == "running", Worker.heartbeat_at >= now - 2 * lease, Worker.id != worker_id)
    )
    return 1 + (others or 0)


def jobs_waiting(engine: Engine, only: list[int] | None = None) -> bool:
    """Whether a queued job is waiting (of ``only``, when given): an idle worker's chores stop
    for it (:class:`~evalstore.services.jobs.options.ChoreInterrupted`)."""
    chosen = select(Evaluation.id).where(Evaluation.state == "queued")
    if only is not None:
        chosen = chosen.where(Evaluation.id.in_(only))
    with read_only(engine) as session:
        return session.scalar(chosen.limit(1)) is not None


def arrivals_settle_in(engine: Engine, settle: float, longest: float) -> float:
    """Seconds until the queue has been quiet for ``settle`` seconds: 0 when no job arrived in
    the last ``settle`` seconds, or when the oldest queued job has waited ``longest`` already (a
    steady stream of submissions does not starve the first). The worker beside `evalstore serve`
    waits this long before claiming, so a burst of submissions is stored before any of them is
    evaluated (the server and the worker share the cores and SQLite's write lock), and is then
    claimed in batches."""
    with read_only(engine) as session:
        row = session.execute(
            select(func.min(Evaluation.created_at), func.max(Evaluation.created_at)).where(Evaluation.state == "queued")
        ).one()
    oldest: datetime | None = row[0]
    newest: datetime | None = row[1]
    if oldest is None or newest is None:
        return 0.0
    now = datetime.now(UTC)
    if (now - as_utc(oldest)).total_seconds() >= longest:
        return 0.0
    return max(0.0, settle - (now - as_utc(newest)).total_seconds())
