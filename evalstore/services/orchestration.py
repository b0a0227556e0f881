"""Getting evaluations done: queue the jobs, run them in this process when no worker is alive,
wait for the ones a worker holds. The one place this is written; the CLI (and the HTTP API) call
:func:`evaluate`, and the services that need results first (comparisons) :func:`evaluate_runs`.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Protocol

from sqlalchemy import Engine

from evalstore import _logging, config
from evalstore.backends import LOCAL, Backend
from evalstore.db import repositories as repo
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError, InvalidParameterError
from evalstore.services import jobs, tracking
from evalstore.services.context import AppContext, context_for
from evalstore.services.jobs import DEFAULT_MEASURE_SET, EvaluationOptions, JobRef, JobView
from evalstore.services.kinds import predictions, ranking
from evalstore.services.kinds.answers.request import AnswerRequest  # noqa: F401  (evaluate takes it)
from evalstore.services.kinds.base import EvaluationSummary, Report
from evalstore.services.kinds.predictions import Evaluated
from evalstore.services.worker import Worker, WorkerSettings


class Request(Protocol):
    """What to evaluate, against what, with which options: queued as one job per input."""

    def enqueue(self, engine: Engine) -> list[JobRef]: ...

    def report(self, engine: Engine, views: list[JobView], waited: bool) -> Report: ...


@dataclass(frozen=True)
class RankingRequest:
    """Runs (every registered run when ``runs`` is None) against stored qrels."""

    qrels: str
    runs: list[str] | None
    options: EvaluationOptions = EvaluationOptions()
    force: bool = False
    max_attempts: int = 3
    backend: Backend = LOCAL

    def enqueue(self, engine: Engine) -> list[JobRef]:
        return jobs.enqueue(
            engine,
            qrels_name=self.qrels,
            run_names=self.runs,
            options=self.options,
            force=self.force,
            max_attempts=self.max_attempts,
            backend=self.backend,
        )

    def report(self, engine: Engine, views: list[JobView], waited: bool) -> Report:
        """The jobs; once waited for, each finished evaluation's main measures as well."""
        rows = [v.as_dict() for v in views]
        shown: list[str] = []
        if waited:
            scores = ranking.main_scores(engine, [v.id for v in views if v.state == "done"])
            shown = [m for m in ranking.MAIN_MEASURES if any(m in s for s in scores.values())]
            for row in rows:
                row.update(scores.get(row["id"], {}))
        return Report("evaluations", ["id", "run", "qrels", "state", *shown, "attempts", "mlflow_state", "error"], rows)


@dataclass(frozen=True)
class PredictionRequest:
    """Prediction sets or clusterings (all of the labels' when ``predictions`` is None) against
    their gold labels; the options are the classification suite's."""

    labels: str
    predictions: list[str] | None
    cost_matrix: Path | None = None
    threshold: float | str | None = None
    positive: str | None = None
    prior: float | None = None
    beta: float = 1.0
    baseline: str | None = None
    force: bool = False
    max_attempts: int = 3
    backend: Backend = LOCAL

    def enqueue(self, engine: Engine) -> list[JobRef]:
        return predictions.enqueue(
            engine,
            labels_name=self.labels,
            prediction_names=self.predictions,
            cost_matrix=self.cost_matrix,
            threshold=self.threshold,
            positive=self.positive,
            prior=self.prior,
            beta=self.beta,
            baseline=self.baseline,
            force=self.force,
            max_attempts=self.max_attempts,
            backend=self.backend,
        )

    def report(self, engine: Engine, views: list[JobView], waited: bool) -> Report:
        """The jobs; once waited for, each finished evaluation's main measures."""
        if not waited:
            return Report(
                "evaluations",
                ["id", "kind", "run", "qrels", "state", "attempts", "mlflow_state"],
                [v.as_dict() for v in views],
            )
        rows = []
        for view in views:
            if view.state != "done":
                continue
            result = predictions.stored_evaluation(engine, view.id, with_groups=False)
            rows.append(
                {
                    "evaluation": result.evaluation_id,
                    "predictions": result.predictions,
                    "kind": result.kind,
                    **{m: result.aggregates.get(m) for m in predictions.SHOWN_MEASURES},
                    "threshold": result.settings.get("threshold"),
                    "mlflow_state": view.mlflow_state,
                }
            )
        shown = [m for m in [*predictions.SHOWN_MEASURES, "threshold"] if any(r[m] is not None for r in rows)]
        return Report(
            f"evaluations on '{self.labels}'", ["evaluation", "predictions", "kind", *shown, "mlflow_state"], rows
        )


@dataclass(frozen=True)
class Evaluations:
    """The jobs one request led to, as they stand after it (done, when waited for)."""

    refs: list[JobRef]
    views: list[JobView]
    done_here: dict[int, EvaluationSummary]
    report: Report
    skipped: tuple[str, ...] = ()  # runs left out of "every run": they share no topic with the qrels

    @property
    def unfinished(self) -> list[JobView]:
        return [v for v in self.views if v.state in ("failed", "cancelled")]

    def failure(self) -> EvaluationError:
        failed = self.unfinished
        return EvaluationError(
            f"{len(failed)} of {len(self.views)} evaluations did not finish: "
            + "; ".join(f"job {v.id} ({v.inputs}) {v.state}: {v.error}" for v in failed)
        )


def evaluate(
    engine: Engine,
    request: Request,
    *,
    wait: bool,
    wait_for_mlflow: bool = False,
    announce: Callable[[JobRef], None] | None = None,
    context: AppContext | None = None,
) -> Evaluations:
    """Queue one job per input and, with ``wait``, get them done.

    Parameters
    ----------
    engine
        The store (:func:`evalstore.db.engine.make_engine`).
    request
        What to evaluate: a :class:`RankingRequest` (runs against qrels), a
        :class:`PredictionRequest` (prediction sets against gold labels) or an
        :class:`AnswerRequest` (answer runs against a nugget bank). The same inputs and
        options are one job: a finished one is reused unless the request says ``force``.
    wait
        Get the jobs done before returning: run them in this process when no worker is alive, wait
        for those a worker holds. Without it the jobs wait in the queue for ``evalstore worker``.
        MLflow logging of the jobs run here is handed to a detached ``evalstore mlflow sync``
        process (a person at the terminal does not wait 2-4 s for MLflow; its state shows in
        ``jobs list`` and ``mlflow status``), unless ``EVALSTORE_MLFLOW=off``.
    wait_for_mlflow
        Log to MLflow in this process before returning instead (scripts that read MLflow next).
    announce
        Called with each job as it is queued (the CLI prints a line per job).
    context
        The caller's application context: the jobs run here use its caches, and the background
        MLflow logger is kept in it (:meth:`AppContext.wait_for_background`).

    Returns
    -------
    Evaluations
        The jobs (``refs``, ``views``: state, attempts, MLflow state, error), the summaries of those
        run in this process, and the ``report`` the request gives of them. ``unfinished`` lists
        the failed or cancelled ones; ``failure()`` is the error to raise for them.

    Raises
    ------
    NotFoundError, InvalidParameterError, ConflictError
        Unknown qrels, runs or prediction sets; measures or options the judgments cannot take.
    """
    context = context_for(engine, context)
    skipped: tuple[str, ...] = ()
    if isinstance(request, RankingRequest) and request.runs is None and context.settings.refuse_no_shared_topic:
        request, skipped = _without_unshared_runs(engine, request)
    refs = request.enqueue(engine)
    for ref in refs:
        if announce is not None:
            announce(ref)
    done: dict[int, EvaluationSummary] = {}
    if wait:
        _logging.configure_logging()
        mlflow = context.settings.mlflow_enabled
        done = work_on(
            engine,
            [r.evaluation_id for r in refs if r.outcome != "reused"],
            mlflow=mlflow and wait_for_mlflow,
            context=context,
        )
        if mlflow and not wait_for_mlflow and done:
            log_in_background(engine, sorted(done), context=context)
    views = [jobs.show_job(engine, r.evaluation_id) for r in refs]
    return Evaluations(refs, views, done, request.report(engine, views, wait), skipped)


def _without_unshared_runs(engine: Engine, request: RankingRequest) -> tuple[RankingRequest, tuple[str, ...]]:
    """Every run but those sharing no topic with the qrels (they would score 0 on every topic and
    be logged to MLflow as if they were poor systems), and the names of those left out."""
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, request.qrels)
        unshared = repo.runs_sharing_no_topic(session, qrels)
        names = [r.name for r in repo.list_runs(session)]
    if not unshared:
        return request, ()
    kept = [n for n in names if n not in set(unshared)]
    if not kept and names:
        raise InvalidParameterError(
            f"None of the {len(names)} runs shares a topic with the qrels '{request.qrels}': "
            "each would score 0 on every topic, so none was evaluated."
        )
    return dataclasses.replace(request, runs=kept), tuple(unshared)


def log_in_background(engine: Engine, evaluation_ids: list[int], *, context: AppContext) -> None:
    """Start ``evalstore mlflow sync --evaluation ID ...`` detached from this process (its own
    session: it outlives the command and a Ctrl-C at the terminal). The evaluations are stored and
    marked pending; if the process fails, they stay pending for a worker or a later sync, as when
    MLflow is down. Its output goes to ``$EVALSTORE_HOME/logs/mlflow-sync.log``."""
    logs = context.settings.data_home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    # the database URL goes by the environment, not the command line (`ps` shows arguments)
    env = config.child_environment(**{config.DATABASE_URL_ENV: engine.url.render_as_string(hide_password=False)})
    command = [
        sys.executable,
        "-m",
        "evalstore",
        "mlflow",
        "sync",
        *(argument for evaluation_id in evaluation_ids for argument in ("--evaluation", str(evaluation_id))),
    ]
    with open(logs / "mlflow-sync.log", "ab") as log:
        # kept in the context: a CLI leaves without waiting (os._exit), a longer-lived caller (a
        # test) reaps them with context.wait_for_background()
        context.started(
            subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
        )


def work_on(
    engine: Engine,
    job_ids: list[int],
    *,
    mlflow: bool = True,
    poll_interval: float = 0.5,
    lease: timedelta = jobs.DEFAULT_LEASE,
    context: AppContext | None = None,
) -> dict[int, EvaluationSummary]:
    """Get these jobs done from this process: run them here unless a live worker is on them,
    and wait for the ones a worker has; with ``mlflow`` (and MLflow on), then deliver the ones run
    here to MLflow once (:func:`tracking.deliver`; a failure leaves them pending, as the deliverer
    does). Returns the summaries of the jobs run here."""
    worker = Worker(
        engine, WorkerSettings(lease=lease), worker_id=jobs.new_worker_id("cli"), only=job_ids, context=context
    )
    context = worker.context
    # MLflow opened while the jobs run, for their delivery after them
    opening = tracking.warm_up(context) if mlflow and job_ids and context.settings.mlflow_enabled else None
    pending = set(job_ids)
    while pending:
        if not jobs.live_workers(engine, within=3 * lease) and worker.process_one():
            pending -= set(worker.done)
            continue
        states = jobs.job_states(engine, list(pending))
        pending = {job_id for job_id, state in states.items() if state not in jobs.TERMINAL}
        if pending:
            time.sleep(poll_interval)
    if opening is not None:
        opening.join()
        if worker.done:
            tracking.deliver(engine, only=sorted(worker.done), context=context)
    return worker.done


def evaluate_runs(
    engine: Engine,
    *,
    qrels_name: str,
    run_names: list[str] | None,
    measures: list[str] | None = None,
    relevance_level: int = 1,
    max_docs: int | None = None,
    judged_only: bool = False,
    missing_topics: str = "zero",
    force: bool = False,
    backend: Backend = LOCAL,
) -> list[EvaluationSummary]:
    """Evaluate runs against stored qrels in this process and store the results.

    The jobs go through the queue like any other, so a stored result is reused, and a job a worker
    is already running is waited for rather than computed twice. MLflow is left to the worker or
    ``evalstore mlflow sync``.

    Parameters
    ----------
    qrels_name, run_names
        The stored qrels, and the runs (every registered run when ``run_names`` is None).
    measures
        Any spelling of measures or trec_eval groups; default: the judgments' kind's set
        (:data:`evalstore.services.jobs.DEFAULT_MEASURE_SET` for relevance qrels).
    relevance_level, max_docs, judged_only, missing_topics
        trec_eval's ``-l``, ``-M``, ``-J``, and ``-c`` (``"zero"``) or not (``"skip"``).
    force
        Compute again even when a finished evaluation with these options exists.
    backend
        Where the join of each run with the qrels runs: the database (local), DuckDB or Spark;
        the numbers are the same.

    Returns
    -------
    list[EvaluationSummary]
        One per run, in order: the evaluation id, topics evaluated, whether it was reused, and the
        topics the run lacks.

    Raises
    ------
    EvaluationError
        A job failed (its error says why) or the run and qrels share no topic.
    """
    options = EvaluationOptions(
        tuple(measures or DEFAULT_MEASURE_SET), relevance_level, max_docs, judged_only, missing_topics
    )
    refs = jobs.enqueue(
        engine, qrels_name=qrels_name, run_names=run_names, options=options, force=force, backend=backend
    )
    done = work_on(engine, [r.evaluation_id for r in refs if r.outcome != "reused"], mlflow=False)
    summaries = []
    with read_only(engine) as session:
        for ref in refs:
            if ref.evaluation_id in done:
                summaries.append(done[ref.evaluation_id])
                continue
            state, error, topics = jobs.outcome(session, ref.evaluation_id)
            if state != "done":
                raise EvaluationError(f"Evaluation {ref.evaluation_id} of run '{ref.inputs}' {state}: {error}")
            summaries.append(EvaluationSummary(ref.evaluation_id, ref.inputs, ref.judgments, True, topics))
    return summaries


def evaluate_predictions(
    engine: Engine,
    *,
    labels_name: str,
    prediction_names: list[str] | None,
    mlflow: bool = False,
    cost_matrix: Path | None = None,
    threshold: float | str | None = None,
    positive: str | None = None,
    prior: float | None = None,
    beta: float = 1.0,
    baseline: str | None = None,
    force: bool = False,
    backend: Backend = LOCAL,
) -> list[Evaluated]:
    """Queue the evaluations of prediction sets and get them done from this process, as
    :func:`evaluate_runs` does for runs; the results in order."""
    refs = PredictionRequest(
        labels_name, prediction_names, cost_matrix, threshold, positive, prior, beta, baseline, force, backend=backend
    ).enqueue(engine)
    done = work_on(engine, [r.evaluation_id for r in refs if r.outcome != "reused"], mlflow=mlflow)
    return [
        dataclasses.replace(predictions.stored_evaluation(engine, ref.evaluation_id), created=ref.evaluation_id in done)
        for ref in refs
    ]
