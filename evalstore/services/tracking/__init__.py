"""Logging stored evaluations to MLflow, each stored result exactly once.

MLflow logging is a small job of its own on every evaluation (``mlflow_state``), and
:func:`drain` is the one way it is done:
``pending`` -> ``logging`` (held under a lease) -> ``logged``; on any failure it goes back to
``pending`` with the error, and the worker or ``evalstore mlflow sync`` tries again later. The
evaluation never waits on MLflow, so MLflow being down loses nothing. A worker begins logging
while the results are being stored (:func:`log_ahead`); that MLflow run is finished only once
they are committed (:func:`finish_ahead`) and deleted if they are not (:func:`abandon_ahead`).

Never twice: every MLflow run carries the tags ``evalstore.evaluation_id`` and
``evalstore.results_version``. Before logging, a finished run with both is looked for, so a
process that died after MLflow finished but before our database recorded it does not log again;
an unfinished one (died midway) is deleted and logged afresh.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore import config
from evalstore.db.models import Evaluation
from evalstore.db.session import read_only
from evalstore.errors import TrackingError
from evalstore.services import jobs, kinds
from evalstore.services.context import MLFLOW_CLIENTS_KEPT, AppContext, Lru, context_for
from evalstore.services.kinds.base import MlflowRun, StoredEvaluation
from evalstore.services.tracking.client import _client, _experiment_id, _log_run
from evalstore.services.tracking.states import claim as _claim
from evalstore.services.tracking.states import confirm_held, take
from evalstore.services.tracking.states import give_back as _give_back
from evalstore.services.tracking.states import mark_logged as _mark_logged

if TYPE_CHECKING:
    from mlflow import MlflowClient

log = logging.getLogger("evalstore.mlflow")


@dataclass
class SyncReport:
    logged: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)
    left_pending: int = 0


def pending_count(engine: Engine) -> int:
    with read_only(engine) as session:
        return len(
            session.scalars(
                select(Evaluation.id).where(
                    Evaluation.state == "done", Evaluation.mlflow_state.in_(("pending", "logging"))
                )
            ).all()
        )


def log_pending(
    engine: Engine,
    *,
    only: list[int] | None = None,
    limit: int | None = None,
    tracking_uri: str | None = None,
    known: dict[int, StoredEvaluation] | None = None,
    context: AppContext | None = None,
) -> SyncReport:
    """Log every finished evaluation MLflow has not received (or only ``only``).

    ``known`` holds results the caller has in memory (a worker that just stored them): used
    when they are the stored version, which saves reading ~700k values back for a large run.
    Stops at the first failure, since the next ones would most likely fail the same way; the
    rest stay pending. Returns what was logged and what failed. ``context`` keeps the MLflow
    client open for the next call (a worker's).
    """
    context = context_for(engine, context)
    report = SyncReport()
    if not context.settings.mlflow_enabled:
        return report
    uri = tracking_uri or context.settings.mlflow_tracking_uri
    while limit is None or len(report.logged) < limit:
        claimed = _claim(engine, only)
        if claimed is None:
            break
        evaluation_id, version, first_attempt, attempt = claimed
        try:
            client = _client(uri, context.mlflow_clients)
            stored = (known or {}).get(evaluation_id)
            if stored is None or stored.header["results_version"] != version:
                stored = results_for(engine, evaluation_id)
            run_id = _log_one(client, uri, stored, first_attempt, context.parquet_schemas)
        except Exception as error:
            message = _failure(error)
            _give_back(engine, evaluation_id, version, message, attempt)
            report.failed[evaluation_id] = message
            log.warning("evaluation %d: MLflow logging failed (left pending): %s", evaluation_id, message)
            break
        _mark_logged(engine, evaluation_id, version, run_id, attempt)
        report.logged.append(evaluation_id)
        log.info("evaluation %d: logged to MLflow run %s", evaluation_id, run_id)
    report.left_pending = pending_count(engine) if only is None else 0
    return report


def drain(
    engine: Engine,
    *,
    only: list[int] | None = None,
    limit: int | None = None,
    tracking_uri: str | None = None,
    known: dict[int, StoredEvaluation] | None = None,
    ahead: AheadLog | None = None,
    context: AppContext | None = None,
) -> SyncReport:
    """The one way stored results reach MLflow: deliver the pending ones (or only ``only``), each
    exactly once. The worker calls it after every job it stores, ``evalstore mlflow sync`` (and so
    ``evaluate --wait``'s background logger) and ``evaluate --wait-mlflow`` through the worker.

    ``ahead`` is the worker's head start (:func:`log_ahead`, begun as the results were being
    stored): it is finished first; whatever it could not deliver stays pending, and results that
    were replaced meanwhile are logged by :func:`log_pending` like any other. ``known`` are results
    the caller holds in memory (:func:`log_pending`)."""
    if ahead is not None:
        try:
            delivered = finish_ahead(engine, ahead)
        except Exception as error:  # never lose the caller over MLflow; the evaluation is stored
            log.warning("MLflow logging failed, left pending for 'evalstore mlflow sync': %s", _failure(error))
            abandon_ahead(ahead)  # the next attempt logs afresh, leaving no run unfinished
            delivered = True
        if delivered and only == [ahead.evaluation_id]:
            return SyncReport()
    return log_pending(engine, only=only, limit=limit, tracking_uri=tracking_uri, known=known, context=context)


@dataclass
class AheadLog:
    """Results being logged to MLflow while they are stored (:func:`log_ahead`)."""

    evaluation_id: int
    results_version: int
    thread: threading.Thread | None = None
    run_id: str | None = None  # the MLflow run, left running until the results are committed
    error: str | None = None
    seconds: float = 0.0
    clients: Lru[str, Any] = field(default_factory=lambda: Lru(MLFLOW_CLIENTS_KEPT))  # the context's
    schemas: Lru[tuple[Any, ...], Any] | None = None  # the context's Parquet schemas (tracking.client)
    # the claim's mlflow_attempts, made in the results' own unit of work (:func:`hold_ahead`):
    # whoever claims after it counts one more
    attempt: int | None = None


def log_ahead(stored: StoredEvaluation, *, retried: bool = False, context: AppContext | None = None) -> AheadLog | None:
    """Start logging ``stored`` (results about to be committed, with the version they will have)
    to MLflow on a thread of its own, and return at once; None when MLflow is off.

    The worker calls this as the store begins, so logging (~0.6 s for a 7M-row run's all_trec
    results: trec_eval's text, the tables, two figures) starts while the values are written and
    committed (~0.15 s) instead of after. The MLflow run stays RUNNING until
    :func:`finish_ahead` sees the results committed and marks it FINISHED; :func:`abandon_ahead`
    deletes it when they are not. When the job is being ``retried``, a run an earlier attempt left
    (its worker died before the results were committed) is deleted first. ``context`` keeps the
    MLflow client open (a worker's)."""
    if not config.mlflow_enabled():
        return None
    uri = config.mlflow_tracking_uri()
    ahead = AheadLog(stored.evaluation_id, int(stored.header["results_version"]))
    if context is not None:
        ahead.clients, ahead.schemas = context.mlflow_clients, context.parquet_schemas

    def log_now() -> None:
        started = time.perf_counter()
        try:
            client = _client(uri, ahead.clients)
            payload = kinds.get(stored.kind).mlflow_run(stored)
            experiment_id = _experiment_id(client, uri, config.mlflow_experiment_name(payload.experiment))
            for earlier in (
                client.search_runs(
                    [experiment_id], filter_string=_run_filter(stored.evaluation_id, ahead.results_version)
                )
                if retried
                else ()
            ):
                client.delete_run(earlier.info.run_id)
            ahead.run_id = _log_run(client, experiment_id, payload, finished=False, schemas=ahead.schemas)
        except Exception as error:  # MLflow's own and transport errors: finish_ahead leaves them pending
            ahead.error = _failure(error)
        ahead.seconds = time.perf_counter() - started

    ahead.thread = threading.Thread(target=log_now, name=f"mlflow-{stored.evaluation_id}", daemon=True)
    ahead.thread.start()
    return ahead


def hold_ahead(session: Session, ahead: AheadLog | None) -> None:
    """A step, in the unit of work that stores the results :func:`log_ahead` is logging (if any),
    after :func:`evalstore.services.jobs.store_results`: the results are stored already claimed for
    logging (``logging``, under a lease, first attempt), as :func:`_claim` would claim them after
    the commit, so :func:`finish_ahead` need not claim them: it confirms this claim with one
    conditional update instead of the claim's select and update. The caller has checked in this
    unit of work that the results are not embargoed (:func:`_claim` checks it too).

    If the worker dies before the run is finished, the lease runs out and the next logger's attempt
    is not the first, so it looks for the run this one left unfinished and deletes it before logging
    afresh. The claim is confirmed before the run is finished (:func:`.states.confirm_held`): the
    lease may have run out while MLflow was slow, and the results may have become embargoed meanwhile."""
    if ahead is None:
        return
    row = session.get(Evaluation, ahead.evaluation_id)  # loaded by results_header: no round trip
    assert row is not None and row.results_version == ahead.results_version, "store_results first"
    ahead.attempt = take(row, jobs.db_now(session))


def finish_ahead(engine: Engine, ahead: AheadLog) -> bool:
    """After the results were committed: finish the run :func:`log_ahead` made and record it,
    under the same state machine as :func:`log_pending`: a run that could not be made leaves the
    results pending with the error, as log_pending does. False when the results were replaced
    meanwhile: the newer ones are pending, for :func:`log_pending`."""
    assert ahead.thread is not None and ahead.attempt is not None, "hold_ahead in the results' unit of work"
    ahead.thread.join()
    uri = config.mlflow_tracking_uri()
    evaluation_id, version, attempt = ahead.evaluation_id, ahead.results_version, ahead.attempt
    held = "held" if ahead.run_id is None else confirm_held(engine, evaluation_id, version, attempt)
    if held != "held":
        assert ahead.run_id is not None
        _delete_run(uri, ahead.run_id, ahead.clients)
        return held != "replaced"  # newer results are logged the ordinary way (drain)
    if ahead.run_id is None:  # as log_pending leaves a failure: pending, with the error
        _give_back(engine, evaluation_id, version, ahead.error, attempt)
        log.warning("evaluation %d: MLflow logging failed (left pending): %s", evaluation_id, ahead.error)
        return True
    try:
        _client(uri, ahead.clients).set_terminated(ahead.run_id, "FINISHED")
    except Exception as error:  # left unfinished: the next attempt deletes it and logs afresh
        message = _failure(error)
        _give_back(engine, evaluation_id, version, message, attempt)
        log.warning("evaluation %d: MLflow logging failed (left pending): %s", evaluation_id, message)
        return True
    if not _mark_logged(engine, evaluation_id, version, ahead.run_id, attempt):
        # claimed by another logger after our lease ran out: it adopts this finished run, or it
        # deleted it as unfinished and logged its own (then finishing it above failed)
        log.warning("evaluation %d: another logger took over MLflow run %s", evaluation_id, ahead.run_id)
        return True
    log.info("evaluation %d: logged to MLflow run %s", evaluation_id, ahead.run_id)
    return True


def abandon_ahead(ahead: AheadLog) -> None:
    """The results :func:`log_ahead` was logging were not stored: delete its MLflow run."""
    assert ahead.thread is not None
    ahead.thread.join()
    if ahead.run_id is not None:
        _delete_run(config.mlflow_tracking_uri(), ahead.run_id, ahead.clients)


def _delete_run(uri: str, run_id: str, clients: Lru[str, Any]) -> None:
    try:
        _client(uri, clients).delete_run(run_id)
    except Exception as error:  # an unfinished run is deleted by the next attempt at the same results
        log.warning("could not delete MLflow run %s of results that were not stored: %s", run_id, error)


def _failure(error: Exception) -> str:
    """An MLflow failure as it is stored in ``mlflow_error`` and logged."""
    return f"{type(error).__name__}: {error}".strip()[:2000]


def _run_filter(evaluation_id: int, results_version: int) -> str:
    return (
        f"tags.`evalstore.evaluation_id` = '{evaluation_id}' and tags.`evalstore.results_version` = '{results_version}'"
    )


def results_for(engine: Engine, evaluation_id: int) -> StoredEvaluation:
    """A finished evaluation read back as MLflow gets it, by its kind."""
    with read_only(engine) as session:
        kind = jobs.kind_of(session, evaluation_id)
    return kinds.get(kind).read_back(engine, evaluation_id)


def _log_one(
    client: MlflowClient,
    uri: str,
    stored: StoredEvaluation,
    first_attempt: bool,
    schemas: Lru[tuple[Any, ...], Any] | None = None,
) -> str:
    payload = kinds.get(stored.kind).mlflow_run(stored)
    experiment_id = _experiment_id(client, uri, config.mlflow_experiment_name(payload.experiment))
    # an earlier attempt at these results may have reached MLflow; the first attempt cannot have
    found = (
        []
        if first_attempt
        else client.search_runs(
            [experiment_id], filter_string=_run_filter(stored.evaluation_id, stored.header["results_version"])
        )
    )
    for previous in found:
        if previous.info.status == "FINISHED":
            return str(previous.info.run_id)
        client.delete_run(previous.info.run_id)  # a logger died midway: start over
    return _log_run(client, experiment_id, payload, schemas=schemas)


def log_now(payload: MlflowRun, what: str, *, context: AppContext | None = None) -> str:
    """Log ``payload`` as its own MLflow run now, outside the evaluations' pending state (a
    comparison: nothing stored to retry from). ``what`` names it in the error. Returns the run id."""
    settings = context.settings if context is not None else config.Settings()
    uri = settings.mlflow_tracking_uri
    try:
        client = _client(uri, context.mlflow_clients if context is not None else Lru(MLFLOW_CLIENTS_KEPT))
        experiment_id = _experiment_id(client, uri, settings.mlflow_experiment_name(payload.experiment))
        return _log_run(client, experiment_id, payload, schemas=context.parquet_schemas if context else None)
    except Exception as exc:  # MLflow raises its own and transport errors; the user needs one message
        raise TrackingError(
            f"Could not log {what} to MLflow at {uri}: {exc}. The comparison itself is "
            "printed; run the command again once MLflow is reachable."
        ) from exc


__all__ = [
    "AheadLog",
    "SyncReport",
    "abandon_ahead",
    "drain",
    "finish_ahead",
    "hold_ahead",
    "log_ahead",
    "log_now",
    "log_pending",
    "pending_count",
    "results_for",
]
