"""The queue's state machine: asking for jobs (enqueue, reusing an equal finished one), claiming them
under a lease, heartbeats, and the steps that store a job's results or give it back.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, TypedDict, cast

from sqlalchemy import CursorResult, Engine, and_, case, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalstore._version import __version__
from evalstore.backends import LOCAL, Backend
from evalstore.db import repositories as repo
from evalstore.db.models import Evaluation, PredictionSet, QrelsSet, Run, Worker
from evalstore.db.session import unit_of_work
from evalstore.errors import InvalidParameterError, NotFoundError, Remedy
from evalstore.metrics.registry import JUDGMENTS_NAMED
from evalstore.services.jobs import summaries
from evalstore.services.jobs.options import (
    DEFAULT_LEASE,
    ClaimedJob,
    EvaluationOptions,
    JobLost,
    JobRef,
    db_now,
    for_judgments,
    options_hash,
)

JOBS_LISTED = Remedy(cli="See 'evalstore jobs list'.")


class ResultsHeader(TypedDict):
    """What a job's results are stored under: its inputs' hashes and the versions (a TypedDict:
    each kind adds its own keys to it for MLflow's tags)."""

    run_hash: str | None  # None where the evaluation row has none (a kind whose inputs are not a run on qrels)
    qrels_hash: str | None
    options_hash: str
    evalstore_version: str
    results_version: int


def enqueue(
    engine: Engine,
    *,
    qrels_name: str,
    run_names: list[str] | None,
    options: EvaluationOptions = EvaluationOptions(),
    force: bool = False,
    max_attempts: int = 3,
    backend: Backend = LOCAL,
) -> list[JobRef]:
    """Queue one job per run (every run when ``run_names`` is None), in one transaction.

    The same inputs and options map to the same job: a done one is reused (``force`` queues it
    again), a queued or running one is returned as it is, a failed or cancelled one is queued again.
    ``backend`` is where the job's join of the run with the qrels runs (relevance qrels only).
    """
    if max_attempts < 1:
        raise InvalidParameterError(f"max_attempts must be at least 1; got {max_attempts}.")
    with unit_of_work(engine) as session:
        qrels = repo.get_qrels(session, qrels_name)
        resolved = for_judgments(options, qrels)
        if not backend.local and qrels.kind != "relevance":
            raise InvalidParameterError(
                f"The {backend.name} backend joins runs with relevance judgments; qrels "
                f"'{qrels.name}' hold {JUDGMENTS_NAMED[qrels.kind]} judgments, which the local engine evaluates.",
                remedy=Remedy(cli="Leave --backend out."),
            )
        if options.known_qrels is not None:  # its content decides the numbers: a new version is a new job
            known = repo.get_qrels(session, options.known_qrels)
            if known.kind != "relevance" or qrels.kind != "relevance":
                raise InvalidParameterError(
                    "The known relevant documents are relevance qrels, for runs evaluated on relevance qrels.",
                    remedy=Remedy(cli="Name relevance qrels with --known."),
                )
            resolved["known_qrels_hash"] = known.content_hash
        names = run_names if run_names is not None else [r.name for r in repo.list_runs(session)]
        if not names:
            raise NotFoundError(
                "No runs to evaluate.",
                remedy=Remedy(cli="Register one with 'evalstore runs register PATH --name NAME'."),
            )
        refs = []
        for name in dict.fromkeys(names):
            run = repo.get_run(session, name)
            refs.append(_enqueue_one(session, run, qrels, resolved, force, max_attempts, backend))
        return refs


def enqueue_run(session: Session, run: Run, qrels: QrelsSet, options: EvaluationOptions | dict[str, Any]) -> JobRef:
    """:func:`enqueue` for one run, inside the caller's transaction (a task's submission queues its
    evaluation in the transaction that stores the run). ``options`` may come resolved already
    (:func:`for_judgments` on these qrels): a submission resolves them before its write
    transaction, where every other writer would wait for the ~100 measure names to be parsed."""
    resolved = options if isinstance(options, dict) else for_judgments(options, qrels)
    return _enqueue_one(session, run, qrels, resolved, False, 3)


def _enqueue_one(
    session: Session,
    run: Run,
    qrels: QrelsSet,
    options: dict[str, Any],
    force: bool,
    max_attempts: int,
    backend: Backend = LOCAL,
) -> JobRef:
    return enqueue_job(
        session,
        (run.name, qrels.name),
        {"run_id": run.id, "qrels_id": qrels.id},
        options_hash(options, run.content_hash, qrels.content_hash),
        options,
        force=force,
        max_attempts=max_attempts,
        backend=backend,
        measures=json.dumps(options["measures"]),
        run_hash=run.content_hash,
        qrels_hash=qrels.content_hash,
    )


def enqueue_job(
    session: Session,
    names: tuple[str, str],
    inputs: dict[str, int],
    digest: str,
    options: dict[str, Any],
    *,
    force: bool,
    max_attempts: int,
    kind: str = "ranking",
    backend: Backend = LOCAL,
    **columns: Any,
) -> JobRef:
    """The job for these inputs (run and qrels ids, or a prediction set id) and options hash:
    created, returned as it is, or queued again (see :func:`enqueue`). ``names`` are the inputs'
    and the judgments' names, as messages show them. A job created, queued again or still waiting
    takes ``backend``; a done one keeps the backend that computed it (the numbers are the same)."""
    key = [getattr(Evaluation, column) == value for column, value in inputs.items()]
    key.append(Evaluation.options_hash == digest)
    job = session.scalar(select(Evaluation).where(*key))
    if job is None:
        try:
            with session.begin_nested():  # another client may insert the same job at the same moment
                job = Evaluation(
                    **inputs,
                    options_hash=digest,
                    options=options,
                    state="queued",
                    attempts=0,
                    max_attempts=max_attempts,
                    mlflow_state="none",
                    created_at=db_now(session),
                    backend=backend.stored(),
                    **columns,
                )
                session.add(job)
            return JobRef(job.id, *names, "queued", "queued", kind)
        except IntegrityError:
            job = session.scalar(select(Evaluation).where(*key))
            assert job is not None, "the conflicting insert committed"
    if job.state == "queued":
        job.backend = backend.stored()
    if job.state in ("queued", "running"):
        return JobRef(job.id, *names, job.state, "already queued", kind)
    if job.state == "done" and not force:
        return JobRef(job.id, *names, "done", "reused", kind)
    requeue(job, max_attempts)
    job.backend = backend.stored()
    return JobRef(job.id, *names, "queued", "requeued", kind)


def requeue(job: Evaluation, max_attempts: int | None = None) -> None:
    job.state, job.attempts, job.error, job.worker_id = "queued", 0, None, None
    job.lease_expires_at = job.heartbeat_at = None
    if max_attempts is not None:
        job.max_attempts = max_attempts


def claim(
    engine: Engine, worker_id: str, *, lease: timedelta = DEFAULT_LEASE, only: list[int] | None = None
) -> ClaimedJob | None:
    """Take the oldest claimable job (queued, or running with an expired lease), or None."""
    with unit_of_work(engine) as session:
        return claim_in(session, worker_id, lease=lease, only=only)


def claim_in(
    session: Session, worker_id: str, *, lease: timedelta = DEFAULT_LEASE, only: list[int] | None = None
) -> ClaimedJob | None:
    """A step: :func:`claim` in the caller's unit of work."""
    now = db_now(session)
    while True:
        job = first_claimable(
            session,
            or_(Evaluation.state == "queued", and_(Evaluation.state == "running", Evaluation.lease_expires_at < now)),
            only,
        )
        if job is None:
            return None
        if job.state == "running" and job.attempts >= job.max_attempts:
            job.state, job.finished_at = "failed", now
            job.error = (
                f"gave up after {job.attempts} attempts: worker {job.worker_id} stopped renewing "
                f"its lease (killed or lost its connection). "
                f"Run 'evalstore jobs retry {job.id}' to try again."
            )
            job.lease_expires_at = None
            continue
        return take(session, job, worker_id, now, lease, kind_of(session, job.id))


def take(session: Session, job: Evaluation, worker_id: str, now: Any, lease: timedelta, kind: str) -> ClaimedJob:
    """A step: mark ``job`` (claimable, locked by this transaction) as this worker's, under a
    lease from ``now``."""
    job.state, job.worker_id = "running", worker_id
    job.attempts += 1
    job.started_at, job.heartbeat_at, job.lease_expires_at = now, now, now + lease
    return ClaimedJob(
        job.id,
        job.run_id,
        job.qrels_id,
        dict(job.options),
        job.attempts,
        worker_id,
        job.prediction_set_id,
        kind,
        Backend.from_stored(job.backend),
    )


def kind_of(session: Session, evaluation_id: int) -> str:
    """The kind of an evaluation: ``ranking`` (a run on qrels), ``answers`` (an answer run on a
    nugget bank), else its prediction set's kind."""
    kind = session.scalar(
        select(
            func.coalesce(PredictionSet.kind, case((Evaluation.answer_run_id.is_not(None), "answers"), else_="ranking"))
        )
        .select_from(Evaluation)
        .outerjoin(PredictionSet, PredictionSet.id == Evaluation.prediction_set_id)
        .where(Evaluation.id == evaluation_id)
    )
    if kind is None:
        raise NotFoundError(f"No job {evaluation_id}.", remedy=JOBS_LISTED)
    return str(kind)


def first_claimable(session: Session, condition: Any, only: list[int] | None) -> Evaluation | None:
    """The oldest evaluation meeting ``condition`` (among ``only``), locked for this transaction;
    on PostgreSQL rows other workers hold are skipped, not waited for."""
    statement = select(Evaluation).where(condition).order_by(Evaluation.id).limit(1)
    if only is not None:
        statement = statement.where(Evaluation.id.in_(only))
    if session.get_bind().dialect.name == "postgresql":
        statement = statement.with_for_update(skip_locked=True)
    return session.scalar(statement)


def claimable(session: Session, condition: Any, only: list[int] | None, most: int) -> list[Evaluation]:
    """The ``most`` oldest evaluations meeting ``condition`` (among ``only``), locked for this
    transaction as :func:`first_claimable` locks one."""
    statement = select(Evaluation).where(condition).order_by(Evaluation.id).limit(most)
    if only is not None:
        statement = statement.where(Evaluation.id.in_(only))
    if session.get_bind().dialect.name == "postgresql":
        statement = statement.with_for_update(skip_locked=True)
    return list(session.scalars(statement))


def heartbeat(engine: Engine, job: ClaimedJob, *, lease: timedelta = DEFAULT_LEASE) -> bool:
    """Extend the lease; False when the job is no longer this worker's (cancelled or reclaimed)."""
    with unit_of_work(engine) as session:
        now = db_now(session)
        result = session.execute(  # an UPDATE's result is a cursor result: it has a rowcount
            update(Evaluation)
            .where(
                Evaluation.id == job.evaluation_id, Evaluation.worker_id == job.worker_id, Evaluation.state == "running"
            )
            .values(heartbeat_at=now, lease_expires_at=now + lease)
        )
        # the worker is alive too, however long the job: `evaluate --wait` must not think it gone
        session.execute(update(Worker).where(Worker.id == job.worker_id).values(heartbeat_at=now))
        return bool(cast(CursorResult[Any], result).rowcount)


def _held(session: Session, job: ClaimedJob) -> Evaluation:
    statement = select(Evaluation).where(Evaluation.id == job.evaluation_id)
    if session.get_bind().dialect.name == "postgresql":
        statement = statement.with_for_update()
    row = session.scalar(statement)
    if row is None or row.state != "running" or row.worker_id != job.worker_id:
        raise JobLost(f"job {job.evaluation_id} is no longer held by {job.worker_id}")
    return row


def results_header(session: Session, job: ClaimedJob) -> ResultsHeader:
    """A step: the header the job's results will be stored under (hashes, the next results
    version), as :func:`evaluations.results` gives it; JobLost if the job is no longer held. Call
    it, then :func:`store_results`, in one unit of work."""
    row = _held(session, job)
    return ResultsHeader(
        run_hash=row.run_hash,
        qrels_hash=row.qrels_hash,
        options_hash=row.options_hash,
        evalstore_version=__version__,
        results_version=row.results_version + 1,
    )


def store_results(
    session: Session,
    job: ClaimedJob,
    header: ResultsHeader,
    per_query: repo.PerQueryValues,
    aggregates: list[repo.AggregateRow],
    settings: dict[str, Any] | None = None,
    *,
    summarised: list[summaries.Summary] | None = None,
) -> None:
    """A step: store the results (and a classification's settings) under ``header``
    (:func:`results_header`, in the same unit of work) and mark the job done, with MLflow pending;
    a ranking job's summaries of every numeric measure with them (``summarised``: made
    before the unit of work by :func:`.summaries.summaries_for`, so the write lock is not held
    while they are computed; else made here). Never commits."""
    row = session.get(Evaluation, job.evaluation_id)  # held and loaded by results_header: no round trip
    assert row is not None and row.worker_id == job.worker_id, "results_header first, in this unit of work"
    repo.replace_results(session, row.id, per_query, aggregates)
    if job.kind == "ranking" and job.qrels_id is not None:
        made = summarised if summarised is not None else summaries.summarise_job(session, job.qrels_id, per_query)
        summaries.store_summaries(session, row.id, made)
    if settings is not None:
        row.settings = settings
    row.state, row.error, row.lease_expires_at = "done", None, None
    row.finished_at = db_now(session)
    row.evalstore_version = __version__
    row.results_version = header["results_version"]
    row.mlflow_state, row.mlflow_error, row.mlflow_attempts, row.mlflow_run_id = "pending", None, 0, None


def complete(
    engine: Engine,
    job: ClaimedJob,
    per_query: repo.PerQueryValues,
    aggregates: list[repo.AggregateRow],
    settings: dict[str, Any] | None = None,
) -> ResultsHeader:
    """Store the results (and a classification's settings) and mark the job done, in one
    transaction; JobLost if no longer held. Returns the stored results' header (hashes,
    versions)."""
    with unit_of_work(engine) as session:
        header = results_header(session, job)
        store_results(session, job, header, per_query, aggregates, settings)
        return header


def fail(engine: Engine, job: ClaimedJob, error: str, *, retryable: bool) -> str:
    """Record an error; queue the job again while attempts remain and the error may pass."""
    with unit_of_work(engine) as session:
        try:
            row = _held(session, job)
        except JobLost:
            return "lost"
        row.error, row.lease_expires_at = error, None
        if retryable and row.attempts < row.max_attempts:
            row.state, row.worker_id = "queued", None
        else:
            row.state, row.finished_at = "failed", db_now(session)
        return row.state


def release(engine: Engine, job: ClaimedJob, *, reason: str | None = None) -> None:
    """Give a job back untouched (the worker is stopping, or waits out an outage: ``reason``,
    shown as its error until it is done); the attempt does not count."""
    with unit_of_work(engine) as session:
        try:
            row = _held(session, job)
        except JobLost:
            return
        row.state, row.worker_id, row.lease_expires_at = "queued", None, None
        if reason is not None:
            row.error = reason
        row.attempts = max(0, row.attempts - 1)
