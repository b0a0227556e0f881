"""The deliverer: the one path by which stored results reach MLflow (an outbox).

A worker commits its results with their delivery ``pending`` and is done; it never waits on
MLflow, so MLflow being slow, hung or down costs the job queue nothing. A deliverer claims
pending deliveries under a short lease (:mod:`.states`), renews the lease while it talks to MLflow
(a dead deliverer's claim runs out in seconds), builds each one's payload from its kind (read
back from the store), logs it through MLflow's public client (:mod:`.client`), and marks it
``logged``. It runs as a thread beside ``evalstore worker`` and ``evalstore serve``
(:class:`BackgroundDeliverer`), as ``evalstore mlflow sync``, and once from ``evaluate
--wait-mlflow`` (:func:`deliver`).

Exactly once per result: every MLflow run carries the tags ``evalstore.evaluation_id`` and
``evalstore.results_version``. A claim that is not the first on these results looks for the runs
an earlier one left: a FINISHED one is adopted (its deliverer died before our database recorded
it), an unfinished one (its deliverer died midway) is deleted and the results logged afresh. The
run is finished only after the claim is confirmed still this deliverer's and the results not
embargoed; a deliverer that lost its claim deletes the run it was making.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, select

from evalstore.config import DEFAULT_MLFLOW_BACKOFF
from evalstore.db.models import LabelSet, QrelsSet
from evalstore.db.session import read_only
from evalstore.errors import TrackingError
from evalstore.services import jobs, kinds
from evalstore.services.context import AppContext, context_for
from evalstore.services.kinds.base import MlflowRun, StoredEvaluation
from evalstore.services.tracking import client as mlflow_client
from evalstore.services.tracking import states

if TYPE_CHECKING:
    from mlflow import MlflowClient

log = logging.getLogger("evalstore.mlflow")


@dataclass
class SyncReport:
    """What one :func:`deliver` did: results logged, the failure it stopped at, what is left."""

    logged: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)
    left_pending: int = 0


def deliver(
    engine: Engine,
    *,
    only: list[int] | None = None,
    limit: int | None = None,
    context: AppContext | None = None,
    stop: threading.Event | None = None,
) -> SyncReport:
    """Deliver every finished result MLflow has not received (or only ``only``), each exactly
    once, until none is left, ``limit`` are logged or ``stop`` is set. Stops at the first failure,
    since the next ones would most likely fail the same way; that one goes back to pending with
    the reason. Nothing when MLflow is off (``EVALSTORE_MLFLOW=off``): the results stay pending."""
    context = context_for(engine, context)
    report = SyncReport()
    if not context.settings.mlflow_enabled:
        return report
    try:
        lease = timedelta(seconds=context.settings.mlflow_lease_seconds)
    except ValueError as error:  # the setting's own message says what to do
        raise TrackingError(str(error)) from None
    while (limit is None or len(report.logged) < limit) and not (stop is not None and stop.is_set()):
        most = CLAIMED_AT_ONCE if limit is None else min(CLAIMED_AT_ONCE, limit - len(report.logged))
        claims = states.claim_many(engine, only, lease, most)
        if not claims:
            break
        recorder = _Recorder(engine, report)
        with _LeaseKeeper(engine, claims, lease):
            failed = _deliver_claims(engine, claims, lease, context, recorder, report, stop)
            recorder.flush()
        if failed:
            break
    report.left_pending = states.undelivered(engine) if only is None else 0
    return report


# Deliveries claimed in one transaction: each claim, renewal and record is a write transaction,
# which on SQLite queues behind the workers' commits; a few at once leave the other lane work.
CLAIMED_AT_ONCE = 4


def _deliver_claims(
    engine: Engine,
    claims: list[states.Claim],
    lease: timedelta,
    context: AppContext,
    recorder: _Recorder,
    report: SyncReport,
    stop: threading.Event | None,
) -> bool:
    """Deliver claimed results one after the other; whether one failed (it and the ones after it
    are given back: the next would most likely fail the same way)."""
    for index, held in enumerate(claims):
        if stop is not None and stop.is_set():
            _give_back(engine, claims[index:], None)
            return False
        try:
            _deliver_one(engine, held, lease, context, recorder)
        except Exception as error:  # MLflow's own and transport errors, or the database blinked
            context.mlflow_experiments.clear()
            message = failure(error)
            _give_back(engine, [held], message)
            _give_back(engine, claims[index + 1 :], None)
            report.failed[held.evaluation_id] = message
            log.warning("evaluation %d: MLflow delivery failed (left pending): %s", held.evaluation_id, message)
            return True
    return False


def _give_back(engine: Engine, claims: list[states.Claim], message: str | None) -> None:
    for held in claims:
        try:
            states.give_back(engine, held, message)
        except Exception as database:  # the claim runs out by its lease instead
            log.warning("evaluation %d: could not give the delivery back: %s", held.evaluation_id, database)


class _Recorder:
    """Confirms each delivery of a batch before its MLflow run is finished, and records the
    finished runs as ``logged`` together when the batch is done (:meth:`flush`): a claim still
    held with half its lease left is confirmed by a read (:func:`states.still_held`), so a batch
    of four deliveries takes SQLite's write lock twice (its claim and its records), not six
    times. A run finished and not yet recorded is safe: its claim is renewed by the lease keeper
    until then, and a later claim adopts it by its tags if this deliverer dies first."""

    def __init__(self, engine: Engine, report: SyncReport) -> None:
        self.engine, self.report = engine, report
        self.waiting: list[tuple[states.Claim, str, float]] = []

    def confirm(self, held: states.Claim, lease: timedelta) -> str:
        if states.still_held(self.engine, held, lease):
            return "held"
        return states.confirm(self.engine, held, lease)

    def finished(self, held: states.Claim, run_id: str, started: float) -> None:
        """``run_id`` is FINISHED in MLflow for ``held`` (logged now, or adopted)."""
        self.waiting.append((held, run_id, started))

    def flush(self) -> None:
        waiting, self.waiting = self.waiting, []
        if not waiting:
            return
        recorded = states.mark_all_logged(self.engine, [(held, run_id) for held, run_id, _ in waiting])
        for one, was_recorded in zip(waiting, recorded, strict=True):
            self._said(one, was_recorded)

    def _said(self, waiting: tuple[states.Claim, str, float], recorded: bool) -> None:
        held, run_id, started = waiting
        if not recorded:
            # taken over after our lease ran out: the next claim adopts this finished run by its tags
            log.warning("evaluation %d: another deliverer took over MLflow run %s", held.evaluation_id, run_id)
            return
        self.report.logged.append(held.evaluation_id)
        log.info(
            "evaluation %d: logged to MLflow run %s (%.2fs)",
            held.evaluation_id,
            run_id,
            time.perf_counter() - started,
        )


def _deliver_one(
    engine: Engine, held: states.Claim, lease: timedelta, context: AppContext, recorder: _Recorder
) -> None:
    """Deliver the claimed results: the finished MLflow run goes to ``recorder``; nothing when
    the claim came to nothing (the results were replaced or embargoed meanwhile, or another
    deliverer took them over)."""
    started = time.perf_counter()
    settings = context.settings
    uri = settings.mlflow_tracking_uri
    stored = results_for(engine, held.evaluation_id)
    if int(stored.header["results_version"]) != held.results_version:
        return  # replaced since the claim: the newer results are pending, for their own claim
    payload = kinds.get(stored.kind).mlflow_run(stored)
    client = mlflow_client.open_client(uri, context.mlflow_clients)
    name = settings.mlflow_experiment_name(payload.experiment)
    # looked up once per process (a query of MLflow's and a file lock a delivery); forgotten on
    # any failure, in case it was deleted in MLflow meanwhile
    experiment = context.mlflow_experiments.get((uri, name))
    if experiment is None:
        experiment = context.mlflow_experiments.put((uri, name), mlflow_client.experiment_id(client, uri, name))
    if not held.first:  # an earlier claim may have reached MLflow; the first cannot have
        for run_id, status in mlflow_client.runs_of(client, experiment, held.evaluation_id, held.results_version):
            if status == "FINISHED":  # its deliverer died before recording it: adopt it
                recorder.finished(held, run_id, started)
                return
            client.delete_run(run_id)  # its deliverer died midway: replaced by the run below
    run_id = mlflow_client.start_run(client, experiment, payload)
    verdict = recorder.confirm(held, lease)
    if verdict != "held":
        log.info("evaluation %d: MLflow run %s deleted, the results were %s", held.evaluation_id, run_id, verdict)
        client.delete_run(run_id)
        return
    mlflow_client.finish_run(client, run_id)
    recorder.finished(held, run_id, started)


class _LeaseKeeper:
    """Renews the leases of a batch of claims from a side thread every third of the lease while
    its deliverer talks to MLflow, however long MLflow takes; a deliverer that dies stops
    renewing them."""

    def __init__(self, engine: Engine, held: list[states.Claim], lease: timedelta) -> None:
        self.engine, self.held, self.lease = engine, list(held), lease
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"mlflow-lease-{held[0].evaluation_id}", daemon=True)

    def __enter__(self) -> _LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self.lease.total_seconds() / 3):
            try:
                kept = states.renew_all(self.engine, self.held, self.lease)
            except Exception as error:  # the database blinked: try again at the next beat
                log.warning("renewing MLflow deliveries failed: %s", error)
                continue
            # no longer ours (delivered, given back, taken over): its deliverer knows
            self.held = [held for held in self.held if held.evaluation_id in kept]
            if not self.held:
                return


class BackgroundDeliverer:
    """:func:`deliver` on threads of its own (``lanes``), beside ``evalstore worker`` or
    ``evalstore serve``: each looks for pending deliveries every ``poll_interval`` seconds and
    delivers them, and while MLflow fails they wait 1, 2, 4 ... seconds between attempts, up to the
    settings' back-off (``EVALSTORE_MLFLOW_BACKOFF``), then catch up once MLflow answers. A
    delivery spends most of its time waiting (MLflow's store, our database's write lock), so two
    lanes deliver about twice as many as one while jobs keep coming.

    MLflow is imported and its store opened as soon as the deliverer starts (:func:`warm_up`),
    while its process starts up or waits for its first jobs: otherwise the first delivery pays
    for MLflow's import when results are already coming in, and the import competes with the jobs
    and uploads for the same cores. The lanes wait for that opening rather than open MLflow a
    second time beside it."""

    def __init__(
        self, engine: Engine, *, context: AppContext | None = None, poll_interval: float = 0.5, lanes: int = 2
    ) -> None:
        self.engine = engine
        self.context = context_for(engine, context)
        self.poll_interval = poll_interval
        self.failures = 0  # in a row, in any lane; the back-off grows with them
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, name=f"mlflow-deliverer-{lane}", daemon=True) for lane in range(lanes)
        ]
        self._opening: threading.Thread | None = None

    def start(self) -> BackgroundDeliverer:
        if self.context.settings.mlflow_enabled:
            self._opening = warm_up(self.context)
        for thread in self._threads:
            thread.start()
        return self

    def next_wait(self) -> float:
        """Seconds until the next look: the poll interval, or the back-off after failures."""
        if not self.failures:
            return self.poll_interval
        try:
            longest = self.context.settings.mlflow_backoff_seconds
        except ValueError as error:
            log.warning("%s", error)
            longest = DEFAULT_MLFLOW_BACKOFF
        return float(min(longest, 2.0 ** (self.failures - 1)))

    def _counted(self, failed: bool) -> None:
        with self._lock:
            self.failures = self.failures + 1 if failed else 0

    def _run(self) -> None:
        opening = self._opening
        while opening is not None and opening.is_alive() and not self._stop.is_set():
            opening.join(0.2)  # a hung MLflow: still stoppable
        while not self._stop.is_set():
            try:
                if self.context.settings.mlflow_enabled and states.any_claimable(self.engine):
                    self._counted(bool(deliver(self.engine, context=self.context, stop=self._stop).failed))
            except Exception as error:  # the database is not answering, or a bad setting: go on
                self._counted(True)
                log.warning("MLflow delivery stopped (trying again in %.0fs): %s", self.next_wait(), error)
            self._stop.wait(self.next_wait())

    def stop(self, timeout: float | None = 10.0) -> bool:
        """Stop after the deliveries in hand, waiting at most ``timeout`` seconds for each lane
        (None: as long as it takes; a hung MLflow is otherwise left to its thread, whose claim runs
        out by its lease); whether all have stopped."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)
        return not any(thread.is_alive() for thread in self._threads)


def warm_up(context: AppContext) -> threading.Thread:
    """Import MLflow and open its store on a thread, while the caller does something else (a
    command that delivers once its jobs are done: ~2 s of MLflow's import and its store's checks
    overlap the jobs instead of following them). A failure is left for the delivery to meet."""

    def open_now() -> None:
        try:
            mlflow_client.open_client(context.settings.mlflow_tracking_uri, context.mlflow_clients)
        except Exception as error:  # the delivery tries again, and says why if it fails
            log.debug("opening MLflow ahead failed: %s", error)

    thread = threading.Thread(target=open_now, name="mlflow-warm-up", daemon=True)
    thread.start()
    return thread


def results_for(engine: Engine, evaluation_id: int) -> StoredEvaluation:
    """A finished evaluation read back as MLflow gets it, by its kind."""
    with read_only(engine) as session:
        kind = jobs.kind_of(session, evaluation_id)
    return kinds.get(kind).read_back(engine, evaluation_id)


def prepare(engine: Engine, *, context: AppContext | None = None) -> list[str]:
    """Make MLflow's store (a new local SQLite store creates its schema on first use, which took
    most of the first delivery's time) and an experiment for every qrels and label set stored, so
    the first delivery is quick; the experiments' names. ``evalstore db upgrade`` calls it."""
    context = context_for(engine, context)
    settings = context.settings
    uri = settings.mlflow_tracking_uri
    with read_only(engine) as session:
        judgments = sorted({*session.scalars(select(QrelsSet.name)), *session.scalars(select(LabelSet.name))})
    try:
        client = mlflow_client.open_client(uri, context.mlflow_clients)
        names = [settings.mlflow_experiment_name(name) for name in judgments]
        for name in names:
            mlflow_client.experiment_id(client, uri, name)
    except Exception as exc:  # MLflow raises its own and transport errors; the caller needs one
        raise TrackingError(f"Could not prepare MLflow at {uri}: {failure(exc)}") from exc
    return names


def log_now(payload: MlflowRun, what: str, *, context: AppContext | None = None) -> str:
    """Log ``payload`` as its own MLflow run now, outside the evaluations' deliveries (a
    comparison: nothing stored to retry from). ``what`` names it in the error. Returns the run id."""
    from evalstore import config
    from evalstore.services.context import MLFLOW_CLIENTS_KEPT, Lru

    settings = context.settings if context is not None else config.Settings()
    uri = settings.mlflow_tracking_uri
    try:
        client: MlflowClient = mlflow_client.open_client(
            uri, context.mlflow_clients if context is not None else Lru[str, Any](MLFLOW_CLIENTS_KEPT)
        )
        experiment = mlflow_client.experiment_id(client, uri, settings.mlflow_experiment_name(payload.experiment))
        return mlflow_client.log_run(client, experiment, payload)
    except Exception as exc:  # MLflow raises its own and transport errors; the user needs one message
        raise TrackingError(
            f"Could not log {what} to MLflow at {uri}: {exc}. The comparison itself is "
            "printed; run the command again once MLflow is reachable."
        ) from exc


def failure(error: Exception) -> str:
    """An MLflow failure as it is stored in ``mlflow_error`` and logged."""
    return f"{type(error).__name__}: {error}".strip()[:2000]
