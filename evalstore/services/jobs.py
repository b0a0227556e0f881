"""The evaluation queue. A job is an ``evaluations`` row: one per (run, qrels, measures, options),
or one per (prediction set, options) for classifier predictions and clusterings.

States: queued -> running -> done | failed | cancelled. A worker *claims* a job in one short
write transaction and holds it by a lease that its heartbeat extends. A job whose lease ran out
(its worker died) is claimed again; after ``max_attempts`` claims it is failed with the reason.

- PostgreSQL: ``SELECT ... FOR UPDATE SKIP LOCKED``, so workers on many hosts never wait on each
  other or take the same job. Times come from the database clock, so hosts' clocks may differ.
- SQLite: every write transaction starts with BEGIN IMMEDIATE (one writer at a time), which
  makes the claim's read-then-update atomic without row locks.

Results are written by :func:`complete` in the same transaction that marks the job done, and only
if the caller still holds the job: a worker that lost its lease cannot overwrite anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, Engine, and_, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalstore._version import __version__
from evalstore.backends import LOCAL, Backend
from evalstore.db import repositories as repo
from evalstore.db.models import AggregateResult, Evaluation, LabelSet, PredictionSet, QrelsSet, Run, Worker
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import ConflictError, InvalidParameterError, NotFoundError
from evalstore.metrics import parse_measure, resolve_measures
from evalstore.metrics._registry import JUDGMENTS_NAMED
from evalstore.metrics.preferences import PREFS_MEASURES

STATES = ("queued", "running", "done", "failed", "cancelled")
TERMINAL = frozenset({"done", "failed", "cancelled"})
DEFAULT_MEASURE_SET = ("all_trec", "Judged@10", "ERR@20", "nDCG(gain=exp)@10")
DEFAULT_LEASE = timedelta(seconds=60)
MISSING_POLICIES = ("zero", "skip")


@dataclass(frozen=True)
class EvaluationOptions:
    """Everything besides the inputs that decides an evaluation's numbers."""

    measures: tuple[str, ...] = DEFAULT_MEASURE_SET
    relevance_level: int = 1
    max_docs: int | None = None
    judged_only: bool = False
    missing_topics: str = "zero"
    known_qrels: str | None = None  # the relevant documents the user knew (user-oriented measures)

    def resolved(self) -> dict[str, Any]:
        if self.missing_topics not in MISSING_POLICIES:
            raise InvalidParameterError(
                f"--missing must be one of {', '.join(MISSING_POLICIES)}; got '{self.missing_topics}'."
            )
        measures = [str(m) for m in resolve_measures(self.measures)]
        resolved: dict[str, Any] = {
            "measures": measures,
            "relevance_level": self.relevance_level, "max_docs": self.max_docs, "judged_only": self.judged_only,
            "missing_topics": self.missing_topics, "tie_rule": "score desc, docno desc",
        }
        user_oriented = [m for m in measures if m in USER_ORIENTED_MEASURES]
        if self.known_qrels is None and user_oriented:
            raise InvalidParameterError(f"{user_oriented[0]} compares a ranking with what the user already knew: "
                                        "name those relevant documents with --known QRELS.")
        if self.known_qrels is not None:  # only then, so every other evaluation keeps its options hash
            if self.judged_only:
                raise InvalidParameterError("-J closes up the ranking by the qrels' judgments; the user-oriented "
                                            "measures (--known) need the ranking whole.")
            resolved["measures"] = [*measures, *(m for m in USER_ORIENTED_MEASURES if m not in measures)]
            resolved["known_qrels"] = self.known_qrels
        return resolved


USER_ORIENTED_MEASURES = ("Coverage", "Novelty", "RelativeRecall", "RecallEffort")


def describe_inputs(kind: str, inputs: str, judgments: str) -> str:
    """"run 'bm25' on 'dl19'", "predictions 'p' on 'fruit'": a job's inputs as messages name them."""
    noun = {"ranking": "run", "classifier": "predictions"}.get(kind, kind)
    return f"{noun} '{inputs}' on '{judgments}'"


@dataclass(frozen=True)
class JobRef:
    """What asking for an evaluation led to. ``inputs`` is the run or prediction set evaluated,
    ``judgments`` the qrels or gold labels it is evaluated against."""

    evaluation_id: int
    inputs: str
    judgments: str
    state: str
    outcome: str  # queued | requeued | already queued | reused
    kind: str = "ranking"

    def describe(self) -> str:
        return describe_inputs(self.kind, self.inputs, self.judgments)


@dataclass(frozen=True)
class ClaimedJob:
    evaluation_id: int
    run_id: int | None  # a ranking job: run and qrels
    qrels_id: int | None
    options: dict[str, Any]
    attempt: int
    worker_id: str
    prediction_set_id: int | None = None  # a classification or clustering job
    kind: str = "ranking"  # ranking | classifier | clustering: which kind runs it (services.kinds)
    backend: Backend = LOCAL  # where its heavy part runs (evaluations.backend)


class JobLost(Exception):
    """The worker no longer holds the job (cancelled, or claimed again after its lease ran out)."""


def options_hash(options: dict[str, Any], run_hash: str, qrels_hash: str) -> str:
    payload = json.dumps({**options, "run_hash": run_hash, "qrels_hash": qrels_hash}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def new_worker_id(prefix: str = "worker") -> str:
    return f"{prefix}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def db_now(session: Session) -> datetime:
    """The database's clock on PostgreSQL (workers on several hosts agree on it); SQLite is
    one host, and SQLite's own clock has no sub-second precision."""
    if session.get_bind().dialect.name == "postgresql":
        value = session.scalar(select(func.statement_timestamp()))
        assert value is not None
        return value
    return datetime.now(UTC)


# --- asking ------------------------------------------------------------------------------------


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
        resolved = _for_judgments(options, qrels)
        if not backend.local and qrels.kind != "relevance":
            raise InvalidParameterError(f"--backend {backend.name} joins runs with relevance judgments; qrels "
                                        f"'{qrels.name}' hold {JUDGMENTS_NAMED[qrels.kind]} judgments, which the "
                                        "local engine evaluates: leave --backend out.")
        if options.known_qrels is not None:  # its content decides the numbers: a new version is a new job
            known = repo.get_qrels(session, options.known_qrels)
            if known.kind != "relevance" or qrels.kind != "relevance":
                raise InvalidParameterError("--known names relevance qrels, for runs evaluated on relevance qrels.")
            resolved["known_qrels_hash"] = known.content_hash
        names = run_names if run_names is not None else [r.name for r in repo.list_runs(session)]
        if not names:
            raise NotFoundError("No runs to evaluate. Register one with 'evalstore runs register PATH --name NAME'.")
        refs = []
        for name in dict.fromkeys(names):
            run = repo.get_run(session, name)
            refs.append(_enqueue_one(session, run, qrels, resolved, force, max_attempts, backend))
        return refs


def enqueue_run(session: Session, run: Run, qrels: QrelsSet, options: EvaluationOptions) -> JobRef:
    """:func:`enqueue` for one run, inside the caller's transaction (a task's submission queues its
    evaluation in the transaction that stores the run)."""
    return _enqueue_one(session, run, qrels, _for_judgments(options, qrels), False, 3)


def as_utc(value: datetime) -> datetime:
    """A stored timestamp with its zone: SQLite hands them back without one (written in UTC)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


# what an evaluation computes when no measures are named, by the kind of judgments
DEFAULT_MEASURES_BY_KIND = {
    "subtopics": tuple(f"{name}@{k}" for name in ("alpha_nDCG", "ERR_IA", "nERR_IA", "P_IA", "StRecall")
                       for k in (5, 10, 20)) + ("NRBP", "nNRBP", "AP_IA"),
    "preferences": PREFS_MEASURES,
}


def default_measures(kind: str) -> tuple[str, ...]:
    """What an evaluation against judgments of this kind computes when no measures are named."""
    return DEFAULT_MEASURES_BY_KIND.get(kind, DEFAULT_MEASURE_SET)


def _for_judgments(options: EvaluationOptions, qrels: QrelsSet) -> dict[str, Any]:
    """The options resolved for these judgments: a kind's own default measures, and a clear
    refusal of a measure or option the kind cannot give a meaning to."""
    if options.measures == DEFAULT_MEASURE_SET:
        options = replace(options, measures=default_measures(qrels.kind))
    resolved = options.resolved()
    wrong = [name for name in resolved["measures"] if parse_measure(name).spec.judgments != qrels.kind]
    if wrong:
        needs = parse_measure(wrong[0]).spec.judgments
        raise InvalidParameterError(
            f"{wrong[0]} is computed from {JUDGMENTS_NAMED[needs]} judgments, and qrels '{qrels.name}' hold "
            f"{JUDGMENTS_NAMED[qrels.kind]} judgments. "
            "'evalstore measures' lists the judgments each measure needs.")
    if qrels.kind != "relevance" and (options.judged_only or options.relevance_level != 1):
        reason = ("ndeval counts every judgment above 0" if qrels.kind == "subtopics"
                  else "their levels order documents, and above 0 is relevant")
        raise InvalidParameterError(f"-l and -J apply to relevance judgments; qrels '{qrels.name}' hold "
                                    f"{JUDGMENTS_NAMED[qrels.kind]} judgments ({reason}).")
    return resolved


def _enqueue_one(session: Session, run: Run, qrels: QrelsSet, options: dict[str, Any], force: bool,
                 max_attempts: int, backend: Backend = LOCAL) -> JobRef:
    return enqueue_job(session, (run.name, qrels.name), {"run_id": run.id, "qrels_id": qrels.id},
                       options_hash(options, run.content_hash, qrels.content_hash), options, force=force,
                       max_attempts=max_attempts, backend=backend, measures=json.dumps(options["measures"]),
                       run_hash=run.content_hash, qrels_hash=qrels.content_hash)


def enqueue_job(session: Session, names: tuple[str, str], inputs: dict[str, int], digest: str,
                options: dict[str, Any], *, force: bool, max_attempts: int, kind: str = "ranking",
                backend: Backend = LOCAL, **columns: Any) -> JobRef:
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
                job = Evaluation(**inputs, options_hash=digest, options=options, state="queued", attempts=0,
                                 max_attempts=max_attempts, mlflow_state="none", created_at=db_now(session),
                                 backend=backend.stored(), **columns)
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
    _requeue(job, max_attempts)
    job.backend = backend.stored()
    return JobRef(job.id, *names, "queued", "requeued", kind)


def _requeue(job: Evaluation, max_attempts: int | None = None) -> None:
    job.state, job.attempts, job.error, job.worker_id = "queued", 0, None, None
    job.lease_expires_at = job.heartbeat_at = None
    if max_attempts is not None:
        job.max_attempts = max_attempts


# --- working -----------------------------------------------------------------------------------


def claim(engine: Engine, worker_id: str, *, lease: timedelta = DEFAULT_LEASE,
          only: list[int] | None = None) -> ClaimedJob | None:
    """Take the oldest claimable job (queued, or running with an expired lease), or None."""
    with unit_of_work(engine) as session:
        now = db_now(session)
        while True:
            job = first_claimable(session, or_(
                Evaluation.state == "queued",
                and_(Evaluation.state == "running", Evaluation.lease_expires_at < now)), only)
            if job is None:
                return None
            if job.state == "running" and job.attempts >= job.max_attempts:
                job.state, job.finished_at = "failed", now
                job.error = (f"gave up after {job.attempts} attempts: worker {job.worker_id} stopped renewing "
                             f"its lease (killed or lost its connection). "
                             f"Run 'evalstore jobs retry {job.id}' to try again.")
                job.lease_expires_at = None
                continue
            job.state, job.worker_id = "running", worker_id
            job.attempts += 1
            job.started_at, job.heartbeat_at, job.lease_expires_at = now, now, now + lease
            return ClaimedJob(job.id, job.run_id, job.qrels_id, dict(job.options), job.attempts, worker_id,
                              job.prediction_set_id, kind_of(session, job.id), Backend.from_stored(job.backend))


def kind_of(session: Session, evaluation_id: int) -> str:
    """The kind of an evaluation: ``ranking`` (a run on qrels), else its prediction set's kind."""
    kind = session.scalar(select(func.coalesce(PredictionSet.kind, "ranking")).select_from(Evaluation)
                          .outerjoin(PredictionSet, PredictionSet.id == Evaluation.prediction_set_id)
                          .where(Evaluation.id == evaluation_id))
    if kind is None:
        raise NotFoundError(f"No job {evaluation_id}. See 'evalstore jobs list'.")
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


def heartbeat(engine: Engine, job: ClaimedJob, *, lease: timedelta = DEFAULT_LEASE) -> bool:
    """Extend the lease; False when the job is no longer this worker's (cancelled or reclaimed)."""
    with unit_of_work(engine) as session:
        now = db_now(session)
        result = session.execute(  # an UPDATE's result is a cursor result: it has a rowcount
            update(Evaluation)
            .where(Evaluation.id == job.evaluation_id, Evaluation.worker_id == job.worker_id,
                   Evaluation.state == "running")
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


def results_header(session: Session, job: ClaimedJob) -> dict[str, Any]:
    """A step: the header the job's results will be stored under (hashes, the next results
    version), as :func:`evaluations.results` gives it; JobLost if the job is no longer held. Call
    it, then :func:`store_results`, in one unit of work."""
    row = _held(session, job)
    return {"run_hash": row.run_hash, "qrels_hash": row.qrels_hash, "options_hash": row.options_hash,
            "evalstore_version": __version__, "results_version": row.results_version + 1}


def store_results(session: Session, job: ClaimedJob, header: dict[str, Any], per_query: repo.PerQueryValues,
                  aggregates: list[dict[str, Any]], settings: dict[str, Any] | None = None) -> None:
    """A step: store the results (and a classification's settings) under ``header``
    (:func:`results_header`, in the same unit of work) and mark the job done, with MLflow pending.
    Never commits."""
    row = session.get(Evaluation, job.evaluation_id)  # held and loaded by results_header: no round trip
    assert row is not None and row.worker_id == job.worker_id, "results_header first, in this unit of work"
    repo.replace_results(session, row.id, per_query, aggregates)
    if settings is not None:
        row.settings = settings
    row.state, row.error, row.lease_expires_at = "done", None, None
    row.finished_at = db_now(session)
    row.evalstore_version = __version__
    row.results_version = header["results_version"]
    row.mlflow_state, row.mlflow_error, row.mlflow_attempts, row.mlflow_run_id = "pending", None, 0, None


def complete(engine: Engine, job: ClaimedJob, per_query: repo.PerQueryValues, aggregates: list[dict[str, Any]],
             settings: dict[str, Any] | None = None) -> dict[str, Any]:
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


def release(engine: Engine, job: ClaimedJob) -> None:
    """Give a job back untouched (the worker is stopping); the attempt does not count."""
    with unit_of_work(engine) as session:
        try:
            row = _held(session, job)
        except JobLost:
            return
        row.state, row.worker_id, row.lease_expires_at = "queued", None, None
        row.attempts = max(0, row.attempts - 1)


# --- managing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobView:
    """A job as `jobs list` shows it: ``inputs`` is the run or prediction set, ``judgments`` the
    qrels or gold labels. (Listed under the keys ``run`` and ``qrels`` in `jobs list`, whose JSON
    and CSV columns scripts already read.)"""

    id: int
    kind: str  # ranking | classifier | clustering
    inputs: str
    judgments: str
    state: str
    attempts: int
    max_attempts: int
    worker_id: str | None
    error: str | None
    measures: int
    options: dict[str, Any]
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    mlflow_state: str
    mlflow_run_id: str | None
    mlflow_error: str | None
    backend: str = "local"

    def describe(self) -> str:
        return describe_inputs(self.kind, self.inputs, self.judgments)

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out = {("run" if key == "inputs" else "qrels" if key == "judgments" else key): value
               for key, value in out.items()}
        for key in ("created_at", "started_at", "finished_at"):
            value = out[key]
            out[key] = value.isoformat(sep=" ", timespec="seconds") if value else None
        return out

    def as_record(self) -> dict[str, Any]:
        """One job as `jobs show` prints it: its inputs under their own names (a prediction job has
        predictions and gold labels, not a run and qrels) and, for a ranking job, its measures (a
        prediction job computes its kind's whole suite)."""
        out = self.as_dict()
        if self.kind != "ranking":
            inputs = {"predictions" if self.kind == "classifier" else "clustering": out.pop("run"),
                      "labels": out.pop("qrels")}
            out.pop("measures")
            out = {key: out[key] for key in ("id", "kind")} | inputs | {
                key: value for key, value in out.items() if key not in ("id", "kind")}
        return out


def _view(job: Evaluation, inputs: tuple[str, str, str]) -> JobView:
    return JobView(job.id, *inputs, job.state, job.attempts, job.max_attempts, job.worker_id,
                   job.error, len(job.options.get("measures", [])), dict(job.options), job.created_at,
                   job.started_at, job.finished_at, job.mlflow_state, job.mlflow_run_id, job.mlflow_error,
                   Backend.from_stored(job.backend).name)


def _jobs_with_inputs() -> Any:
    """Jobs with (kind, run or prediction set name, qrels or gold labels name)."""
    return (select(Evaluation, func.coalesce(PredictionSet.kind, "ranking"),
                   func.coalesce(Run.name, PredictionSet.name), func.coalesce(QrelsSet.name, LabelSet.name))
            .outerjoin(Run, Run.id == Evaluation.run_id).outerjoin(QrelsSet, QrelsSet.id == Evaluation.qrels_id)
            .outerjoin(PredictionSet, PredictionSet.id == Evaluation.prediction_set_id)
            .outerjoin(LabelSet, LabelSet.id == PredictionSet.label_set_id))


def list_jobs(engine: Engine, *, states: list[str] | None = None, qrels_name: str | None = None,
              limit: int = 100) -> list[JobView]:
    """The newest ``limit`` jobs, oldest first (``qrels_name``: ranking jobs on those qrels, or
    prediction jobs on gold labels of that name)."""
    for state in states or []:
        if state not in STATES:
            raise InvalidParameterError(f"Unknown job state '{state}'; use one of {', '.join(STATES)}.")
    with read_only(engine) as session:
        statement = _jobs_with_inputs().order_by(Evaluation.id.desc()).limit(limit)
        if states:
            statement = statement.where(Evaluation.state.in_(states))
        if qrels_name:
            statement = statement.where(or_(QrelsSet.name == qrels_name, LabelSet.name == qrels_name))
        return [_view(job, (kind, run, qrels)) for job, kind, run, qrels in session.execute(statement)][::-1]


def show_job(engine: Engine, job_id: int) -> JobView:
    with read_only(engine) as session:
        return _view(*_get(session, job_id))


def outcome(session: Session, evaluation_id: int) -> tuple[str, str | None, int]:
    """(state, error, topics or groups evaluated) of a job."""
    job = session.get(Evaluation, evaluation_id)
    if job is None:
        raise NotFoundError(f"No job {evaluation_id}. See 'evalstore jobs list'.")
    count = session.scalar(select(AggregateResult.query_count).where(
        AggregateResult.evaluation_id == evaluation_id).limit(1))
    return job.state, job.error, int(count or 0)


def job_states(engine: Engine, job_ids: list[int]) -> dict[int, str]:
    with read_only(engine) as session:
        rows = session.execute(select(Evaluation.id, Evaluation.state).where(Evaluation.id.in_(job_ids)))
        return {job_id: state for job_id, state in rows}


def _get(session: Session, job_id: int) -> tuple[Evaluation, tuple[str, str, str]]:
    row = session.execute(_jobs_with_inputs().where(Evaluation.id == job_id)).first()
    if row is None:
        raise NotFoundError(f"No job {job_id}. See 'evalstore jobs list'.")
    return row[0], (row[1], row[2], row[3])


def retry(engine: Engine, job_id: int) -> JobView:
    """Queue a failed or cancelled job again, with its attempts reset."""
    with unit_of_work(engine) as session:
        job, inputs = _get(session, job_id)
        if job.state not in ("failed", "cancelled"):
            raise ConflictError(f"Job {job_id} is {job.state}; only failed or cancelled jobs can be retried "
                                f"(to recompute a done one: 'evalstore evaluate ... --force').")
        _requeue(job)
        return _view(job, inputs)


def cancel(engine: Engine, job_id: int) -> JobView:
    """Cancel a queued or running job; a running job's worker drops its result when it notices."""
    with unit_of_work(engine) as session:
        job, inputs = _get(session, job_id)
        if job.state not in ("queued", "running"):
            raise ConflictError(f"Job {job_id} is already {job.state}; only queued or running jobs can be cancelled.")
        job.state, job.lease_expires_at, job.finished_at = "cancelled", None, db_now(session)
        return _view(job, inputs)


# --- workers -----------------------------------------------------------------------------------


def register_worker(engine: Engine, worker_id: str) -> None:
    with unit_of_work(engine) as session:
        now = db_now(session)
        session.add(Worker(id=worker_id, hostname=socket.gethostname(), pid=os.getpid(), state="running",
                           started_at=now, heartbeat_at=now, jobs_done=0))


def worker_alive(engine: Engine, worker_id: str, *, jobs_done: int) -> None:
    with unit_of_work(engine) as session:
        session.execute(update(Worker).where(Worker.id == worker_id)
                        .values(heartbeat_at=db_now(session), jobs_done=jobs_done))


def worker_stopped(engine: Engine, worker_id: str) -> None:
    with unit_of_work(engine) as session:
        session.execute(update(Worker).where(Worker.id == worker_id).values(state="stopped"))


def live_workers(engine: Engine, *, within: timedelta) -> list[Worker]:
    """Workers that said they were alive within ``within`` (a killed one just stops saying so)."""
    with read_only(engine) as session:
        since = db_now(session) - within
        return list(session.scalars(select(Worker).where(Worker.state == "running", Worker.heartbeat_at >= since)))
