"""Jobs as `jobs list` and `jobs show` give them, and what an operator does to one: retry, cancel."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, case, func, or_, select
from sqlalchemy.orm import Session

from evalstore.backends import Backend
from evalstore.db.models import (
    AggregateResult,
    AnswerRun,
    Evaluation,
    LabelSet,
    NuggetBank,
    PredictionSet,
    QrelsSet,
    Run,
)
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import ConflictError, InvalidParameterError, NotFoundError, Remedy
from evalstore.services.jobs.options import STATES, db_now, describe_inputs
from evalstore.services.jobs.queue import JOBS_LISTED, requeue


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
        out = {
            ("run" if key == "inputs" else "qrels" if key == "judgments" else key): value for key, value in out.items()
        }
        for key in ("created_at", "started_at", "finished_at"):
            value = out[key]
            out[key] = value.isoformat(sep=" ", timespec="seconds") if value else None
        return out

    def as_record(self) -> dict[str, Any]:
        """One job as `jobs show` prints it: its inputs under their own names (a prediction job has
        predictions and gold labels, an answers job answers and nuggets, not a run and qrels) and,
        for a ranking job, its measures (the others compute their kind's whole suite)."""
        out = self.as_dict()
        if self.kind != "ranking":
            named, judged_by = {"classifier": ("predictions", "labels"), "answers": ("answers", "nuggets")}.get(
                self.kind, (self.kind, "labels")
            )
            inputs = {named: out.pop("run"), judged_by: out.pop("qrels")}
            out.pop("measures")
            out = (
                {key: out[key] for key in ("id", "kind")}
                | inputs
                | {key: value for key, value in out.items() if key not in ("id", "kind")}
            )
        return out


def _view(job: Evaluation, inputs: tuple[str, str, str]) -> JobView:
    return JobView(
        job.id,
        *inputs,
        job.state,
        job.attempts,
        job.max_attempts,
        job.worker_id,
        job.error,
        len(job.options.get("measures", [])),
        dict(job.options),
        job.created_at,
        job.started_at,
        job.finished_at,
        job.mlflow_state,
        job.mlflow_run_id,
        job.mlflow_error,
        Backend.from_stored(job.backend).name,
    )


def _jobs_with_inputs() -> Any:
    """Jobs with (kind, run, prediction set or answer run name, qrels, gold labels or nugget bank name)."""
    return (
        select(
            Evaluation,
            func.coalesce(
                PredictionSet.kind, case((Evaluation.answer_run_id.is_not(None), "answers"), else_="ranking")
            ),
            func.coalesce(Run.name, PredictionSet.name, AnswerRun.name),
            func.coalesce(QrelsSet.name, LabelSet.name, NuggetBank.name),
        )
        .outerjoin(Run, Run.id == Evaluation.run_id)
        .outerjoin(QrelsSet, QrelsSet.id == Evaluation.qrels_id)
        .outerjoin(PredictionSet, PredictionSet.id == Evaluation.prediction_set_id)
        .outerjoin(LabelSet, LabelSet.id == PredictionSet.label_set_id)
        .outerjoin(AnswerRun, AnswerRun.id == Evaluation.answer_run_id)
        .outerjoin(NuggetBank, NuggetBank.id == Evaluation.nugget_bank_id)
    )


def list_jobs(
    engine: Engine, *, states: list[str] | None = None, qrels_name: str | None = None, limit: int = 100
) -> list[JobView]:
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
            statement = statement.where(
                or_(QrelsSet.name == qrels_name, LabelSet.name == qrels_name, NuggetBank.name == qrels_name)
            )
        return [_view(job, (kind, run, qrels)) for job, kind, run, qrels in session.execute(statement)][::-1]


def show_job(engine: Engine, job_id: int) -> JobView:
    with read_only(engine) as session:
        return _view(*_get(session, job_id))


def outcome(session: Session, evaluation_id: int) -> tuple[str, str | None, int]:
    """(state, error, topics or groups evaluated) of a job."""
    job = session.get(Evaluation, evaluation_id)
    if job is None:
        raise NotFoundError(f"No job {evaluation_id}.", remedy=JOBS_LISTED)
    count = session.scalar(
        select(AggregateResult.query_count).where(AggregateResult.evaluation_id == evaluation_id).limit(1)
    )
    return job.state, job.error, int(count or 0)


def job_states(engine: Engine, job_ids: list[int]) -> dict[int, str]:
    with read_only(engine) as session:
        rows = session.execute(select(Evaluation.id, Evaluation.state).where(Evaluation.id.in_(job_ids)))
        return {job_id: state for job_id, state in rows}


def _get(session: Session, job_id: int) -> tuple[Evaluation, tuple[str, str, str]]:
    row = session.execute(_jobs_with_inputs().where(Evaluation.id == job_id)).first()
    if row is None:
        raise NotFoundError(f"No job {job_id}.", remedy=JOBS_LISTED)
    return row[0], (row[1], row[2], row[3])


def retry(engine: Engine, job_id: int) -> JobView:
    """Queue a failed or cancelled job again, with its attempts reset."""
    with unit_of_work(engine) as session:
        job, inputs = _get(session, job_id)
        if job.state not in ("failed", "cancelled"):
            raise ConflictError(
                f"Job {job_id} is {job.state}; only failed or cancelled jobs can be retried.",
                remedy=Remedy(cli="To recompute a done one: 'evalstore evaluate ... --force'."),
            )
        requeue(job)
        return _view(job, inputs)


def cancel(engine: Engine, job_id: int) -> JobView:
    """Cancel a queued or running job; a running job's worker drops its result when it notices."""
    with unit_of_work(engine) as session:
        job, inputs = _get(session, job_id)
        if job.state not in ("queued", "running"):
            raise ConflictError(f"Job {job_id} is already {job.state}; only queued or running jobs can be cancelled.")
        job.state, job.lease_expires_at, job.finished_at = "cancelled", None, db_now(session)
        return _view(job, inputs)
