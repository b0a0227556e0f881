"""The evaluation worker: claim a job, compute it under a heartbeat, store it. The job is done
when its results commit, with their MLflow delivery ``pending``: the worker knows nothing of
MLflow (the deliverer, :mod:`evalstore.services.tracking.deliverer`, delivers them). Queued ranking
jobs with one qrels and one set of options are claimed as a batch, computed in one pass and then
stored one by one, each exactly as a job alone (docs/guide/many-runs.md).

Stopping: the first SIGTERM/SIGINT lets the current job (or batch) finish and then exits; a second
one gives the jobs not yet stored back to the queue (not counted as an attempt) and exits at once.
A worker killed outright (SIGKILL, power loss) stops renewing its leases, and other workers take
its jobs over when the leases run out.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import timedelta
from types import FrameType
from typing import Any

from sqlalchemy import Engine

from evalstore import _logging, scratch, statistics
from evalstore.db.engine import make_engine
from evalstore.db.outages import outage, worker_backoff
from evalstore.db.session import unit_of_work
from evalstore.errors import EvalstoreError
from evalstore.services import embargo, jobs, kinds, store
from evalstore.services.context import AppContext, context_for
from evalstore.services.kinds import ranking
from evalstore.services.kinds.base import ComputedJob, EvaluationSummary, topic_list

log = logging.getLogger("evalstore.worker")
# how often an idle worker's chores look for a queued job (a query each time), so a job waits at
# most about this long plus the step in hand (a measure's letters, an evaluation's summaries)
_LOOK_FOR_JOBS = 0.5


# a report a page reads, refreshed by an idle worker on the qrels it stored results on (None: on
# every qrels, once at start): given by the layer above the worker (the collection-health report,
# services.health.refresh_reports), which the worker may not import; how many were stored
Refresher = Callable[[Engine, Collection[int] | None], int]


class StopNow(BaseException):  # noqa: N818  (a control-flow signal, like KeyboardInterrupt)
    """Raised in the main thread by a second stop signal: release the job and leave."""


@dataclass
class WorkerSettings:
    lease: timedelta = jobs.DEFAULT_LEASE
    poll_interval: float = 2.0
    until_empty: bool = False
    # an idle worker gives large runs their docno-hash index (store.index_next_run): every
    # evaluation of the run then reads its judged rows through it (7M rows: ~0.1 s, not ~0.7 s)
    index_runs: bool = True
    index_interval: float = 5.0  # how often an idle worker looks for a run to index
    # how often an idle worker releases the tasks whose scheduled release time has come
    release_interval: float = 10.0
    # queued ranking jobs on one qrels with one set of options are claimed and computed together
    batch: jobs.BatchBound = jobs.BatchBound()
    settle: float = 0.0  # seconds of quiet in the queue before claiming (jobs.arrivals_settle_in)
    settle_longest: float = 10.0  # ... unless the oldest queued job has waited this long
    reports: tuple[Refresher, ...] = ()  # refreshed after the boards (refresh_boards)
    # how often an idle worker looks at every qrels' reports (a task's measures changed, runs
    # evaluated by `evaluate --wait` with no worker running); the first time the queue is empty too
    reports_interval: float = 60.0
    # how far a busy worker lets its boards' letters fall behind the evaluations it stores: past
    # this many seconds it refreshes them between jobs (the board measures' letters only; every
    # measure's, and the reports, once the queue is empty)
    boards_behind: float = 30.0
    # an idle worker's chores (every measure's summaries and letters, the paired tests, the
    # reports) wait until it has claimed no job for this many seconds. In a burst of submissions the
    # queue empties between arrivals again and again: each empty moment started the chores anew,
    # on boards the next evaluation changed again, and they took the cores the uploads and the
    # evaluations needed. Meanwhile a busy worker keeps the board measures' letters within
    # ``boards_behind``; with ``until_empty`` the chores run as soon as the queue is empty.
    chores_after: float = 2.0


class _Heartbeat:
    """Renews the leases of the jobs a worker holds from a side thread while the main thread
    computes and stores them; a job leaves it once stored (:meth:`let_go`)."""

    def __init__(self, engine: Engine, held: list[jobs.ClaimedJob], lease: timedelta) -> None:
        self.engine, self.lease = engine, lease
        self._held = {job.evaluation_id: job for job in held}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{held[0].evaluation_id}", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def let_go(self, job: jobs.ClaimedJob) -> None:
        with self._lock:
            self._held.pop(job.evaluation_id, None)

    def _beat(self) -> None:
        interval = max(self.lease.total_seconds() / 3, 0.2)
        while not self._stop.wait(interval):
            with self._lock:
                held = list(self._held.values())
            for job in held:
                try:
                    kept = jobs.heartbeat(self.engine, job, lease=self.lease)
                except Exception as error:  # the database blinked: try again at the next beat (said once)
                    if not self._failing:
                        log.warning("heartbeat for job %d failed: %s", job.evaluation_id, str(error).splitlines()[0])
                    self._failing = True
                    continue
                self._failing = False
                with self._lock:
                    if not kept and self._held.pop(job.evaluation_id, None) is not None:
                        log.warning("job %d was cancelled or taken over; its result will be dropped", job.evaluation_id)


class Worker:
    def __init__(
        self,
        engine: Engine,
        settings: WorkerSettings | None = None,
        *,
        worker_id: str | None = None,
        only: list[int] | None = None,
        context: AppContext | None = None,
    ) -> None:
        self.engine = engine
        # the qrels and gold labels last read, kept from job to job
        self.context = context_for(engine, context)
        self.settings = settings or WorkerSettings()
        self.worker_id = worker_id or jobs.new_worker_id()
        self.only = only
        self.done: dict[int, EvaluationSummary] = {}
        # qrels this worker stored ranking results on since it last refreshed their boards' tiers
        self.touched_qrels: set[int] = set()
        # when the first evaluation its boards have not caught up with was stored (None: none)
        self._behind_since: float | None = None
        # when the reports of every qrels were last looked at (None: not yet)
        self._reports_swept: float | None = None
        # an answer run's results were stored since: its task's board letters are due (the reports'
        # sweep looks at every answer task; they have no qrels to be touched by)
        self._answers_stored = False
        self.stopping = False
        self._last_index_check = 0.0
        self._last_release_check = 0.0
        self._looked_for_jobs = 0.0  # when an idle chore last looked for queued jobs
        self._worked_at = -math.inf  # when it last claimed a job (its idle chores wait for quiet)
        # an outage of the database or its disk is waited out, never exited over
        self.backoff = worker_backoff(log, str(engine.url), lambda: self.stopping)

    # one job, or a batch -----------------------------------------------------------------

    def process_one(self) -> bool:
        """Claim a job, or a batch of ranking jobs with one qrels and one set of options
        (:func:`jobs.claim_batch`, up to ``settings.batch``), and run them; False when there was
        nothing to claim. A batch is computed in one pass (:func:`kinds.compute_many`), then each
        job is finished as a job alone is (:meth:`_finish`)."""
        while self.settings.settle > 0 and not self.stopping:
            wait = jobs.arrivals_settle_in(self.engine, self.settings.settle, self.settings.settle_longest)
            if wait <= 0:
                break
            time.sleep(wait)
        claimed = jobs.claim_batch(
            self.engine, self.worker_id, lease=self.settings.lease, only=self.only, bound=self.settings.batch
        )
        if not claimed:
            return False
        batch = f" in a batch of {len(claimed)}" if len(claimed) > 1 else ""
        for job in claimed:
            log.info("job %d: claimed (attempt %d)%s", job.evaluation_id, job.attempt, batch)
        held = list(claimed)
        try:
            with _Heartbeat(self.engine, held, self.settings.lease) as heartbeat:
                # one job alone is computed in _finish, as it always was
                outcomes: list[ComputedJob | Exception | None] = (
                    [None]
                    if len(claimed) == 1
                    else list(kinds.compute_many(self.engine, claimed, context=self.context))
                )
                stored: list[jobs.ClaimedJob] = []
                for job, outcome in zip(claimed, outcomes, strict=True):
                    if self._finish(job, outcome, heartbeat):
                        stored.append(job)
                    held.remove(job)
                    heartbeat.let_go(job)
        except StopNow:
            for job in held:
                jobs.release(self.engine, job)
                log.info("job %d: released to the queue (worker stopping)", job.evaluation_id)
            raise
        self._prepare_pairs(stored)
        return True

    def _finish(self, job: jobs.ClaimedJob, outcome: ComputedJob | Exception | None, heartbeat: _Heartbeat) -> bool:
        """The use case of one job, from its computed ``outcome`` (computed here when None): in one
        unit of work read the header its results get and store them, their MLflow delivery
        ``pending`` (the deliverer's from then on); whether they were stored. An error fails this
        job alone."""
        try:
            if isinstance(outcome, Exception):
                raise outcome
            computed = outcome or kinds.get(job.kind).compute(self.engine, job, context=self.context)
            started = time.perf_counter()
            # every measure's summary, made before the write lock is taken
            summarised = (
                jobs.summaries_for(self.engine, job.qrels_id, computed.per_query, self.context.bootstrap_counts)
                if job.kind == "ranking" and job.qrels_id is not None
                else None
            )
            with unit_of_work(self.engine) as session:
                header = jobs.results_header(session, job)
                jobs.store_results(
                    session,
                    job,
                    header,
                    computed.per_query,
                    computed.aggregates,
                    computed.settings,
                    summarised=summarised,
                )
            heartbeat.let_go(job)  # stored: the job is done
            computed.timings.store = time.perf_counter() - started
            summary = computed.summary()
        except jobs.JobLost:
            log.warning("job %d: result dropped, the job was cancelled or taken over", job.evaluation_id)
            return False
        except EvalstoreError as error:  # bad input: trying again gives the same answer
            state = jobs.fail(self.engine, job, error.on_the_command_line(), retryable=False)
            log.error("job %d: %s (%s)", job.evaluation_id, error, state)
            return False
        except Exception as error:  # the database or the machine: worth another attempt
            found = outage(error, str(self.engine.url))
            if found is not None:  # not the job's doing: back in the queue, why shown, attempt uncounted
                jobs.release(self.engine, job, reason=f"waiting: {found.describe()}")
                raise  # the loop waits the outage out
            state = jobs.fail(self.engine, job, f"{type(error).__name__}: {error}", retryable=True)
            log.error("job %d: failed (%s)", job.evaluation_id, state, exc_info=error)
            return False
        self.done[job.evaluation_id] = summary
        if job.kind == "answers":
            self._answers_stored = True
        if job.kind == "ranking" and job.qrels_id is not None:
            self.touched_qrels.add(job.qrels_id)
            if self._behind_since is None:
                self._behind_since = time.monotonic()
        t = summary.timings
        log.info(
            "job %d: done, '%s' on '%s', %d topics or groups (load %.2fs, compute %.2fs, store %.2fs)",
            job.evaluation_id,
            summary.inputs,
            summary.judgments,
            summary.topics,
            t.load,
            t.compute,
            t.store,
        )
        if summary.missing_topics:  # one line per job: DL19's 43 topics x 6 runs made 180 lines before
            log.warning(
                "job %d: run '%s' has no results for %s; scored as missing_topics=%s",
                job.evaluation_id,
                summary.inputs,
                topic_list(summary.missing_topics),
                job.options["missing_topics"],
            )
        return True

    def _prepare_pairs(self, stored: list[jobs.ClaimedJob]) -> None:
        """The paired tests of the ranking runs whose results a batch ``stored`` with their tasks'
        other runs (:func:`ranking.prepare_pairs`, the batch's runs together: a batch has one
        qrels), and the tasks' medians, stored right after the results, so a compare page and a
        run page read them even while the queue is busy. A failure is logged: the idle refresh
        stores what is missing."""
        by_qrels: dict[int, list[int]] = {}
        for job in stored:
            if job.kind == "ranking" and job.qrels_id is not None and job.run_id is not None:
                by_qrels.setdefault(job.qrels_id, []).append(job.run_id)
        for qrels_id, run_ids in by_qrels.items():
            started = time.perf_counter()
            try:
                made = ranking.prepare_pairs(self.engine, qrels_id, run_ids)
            except Exception as error:  # never fail a stored job over a chore; the idle refresh tries again
                log.warning(
                    "storing the paired tests of %d run(s) failed: %s", len(run_ids), str(error).splitlines()[0]
                )
                continue
            log.info(
                "paired tests of %d run(s) with their tasks' other runs: %d stored (%.2fs)",
                len(run_ids),
                made,
                time.perf_counter() - started,
            )

    def quiet(self) -> bool:
        """Whether this worker has claimed no job for ``settings.chores_after`` seconds (its idle
        chores wait for that)."""
        return time.monotonic() - self._worked_at >= self.settings.chores_after

    def boards_behind(self) -> bool:
        """Whether the boards' letters are more than ``settings.boards_behind`` seconds
        behind the evaluations this worker stored (a busy worker then refreshes them)."""
        since = self._behind_since
        return since is not None and time.monotonic() - since >= self.settings.boards_behind

    def refresh_boards(self, *, busy: bool = False, interruptible: bool = False) -> int:
        """The boards on the qrels this worker has stored results on, once the queue is empty (or,
        ``busy``, between jobs once they are :meth:`boards_behind`): the summaries their
        evaluations lack (:func:`jobs.summarise_stored`: a job stores those of the boards'
        measures with its results, the others wait for the empty queue; busy, the boards' measures
        alone) and their significance tiers (:func:`ranking.refresh_tiers`: on every measure, or
        busy on the tasks' board measures alone), so a page reads them and never computes them
        (100 runs: ~2 s a measure); idle only, the tasks' paired tests a job left missing
        (:meth:`_refresh_pairs`), then the settings' reports on them (on every qrels the first
        time: :meth:`_refresh_reports`). What was stored (summarised evaluations, tiers, pairs
        and reports). A failure is logged: a page shows what was stored last and says it is
        behind. ``interruptible`` (the idle loop's): the chores stop as soon as a job is queued
        or the worker is stopping (:meth:`_jobs_waiting`), what they stored kept and the rest
        left for the next idle moment, so a submission never waits for them."""
        interrupted = self._jobs_waiting if interruptible and not busy else jobs.never
        if busy:  # every measure's letters still wait for the empty queue
            touched = set(self.touched_qrels)
        else:
            touched, self.touched_qrels = self.touched_qrels, set()
        self._behind_since = None
        started = time.perf_counter()
        try:
            stored = self._refresh_tiers(touched, busy, interrupted)
            if busy:  # a health report of 100 runs takes minutes: its page says it is behind meanwhile
                return stored
            return stored + self._refresh_pairs(touched, interrupted) + self._refresh_reports(touched, interrupted)
        except jobs.ChoreInterrupted:
            self.touched_qrels |= touched  # what is not stored yet: at the next idle moment
            log.info("boards: put off after %.2fs, jobs are waiting", time.perf_counter() - started)
            return 0

    def _refresh_tiers(self, touched: set[int], busy: bool, interrupted: jobs.Interrupted) -> int:
        """The summaries and letters of :meth:`refresh_boards`; how many were stored."""
        if not touched:
            return 0
        made = summarised = 0
        started = time.perf_counter()
        try:
            summarised = jobs.summarise_stored(
                self.engine, touched, self.context.bootstrap_counts, shown_only=busy, interrupted=interrupted
            )
            made = ranking.refresh_tiers(
                self.engine,
                touched,
                counts=self.context.bootstrap_counts,
                critical=self.context.studentized_quantile,
                every_measure=not busy,
                interrupted=interrupted,
            )
        except jobs.ChoreInterrupted:
            raise
        except Exception as error:  # never lose the worker over a chore; pages work without
            log.warning("refreshing the boards' tiers failed: %s", str(error).splitlines()[0])
        if made or summarised:
            log.info(
                "boards%s: %d evaluation(s) summarised, %d tier(s) stored (%.2fs)",
                " (queue busy)" if busy else "",
                summarised,
                made,
                time.perf_counter() - started,
            )
        return made + summarised

    def _jobs_waiting(self) -> bool:
        """Whether an idle chore should stop now: the worker is stopping, a job is queued (looked
        up at most every ``_LOOK_FOR_JOBS`` seconds: a query each time), or that query failed (the
        run loop meets the outage next, and waits it out; raised here, it ended the worker)."""
        if self.stopping:
            return True
        now = time.monotonic()
        if now - self._looked_for_jobs < _LOOK_FOR_JOBS:
            return False
        self._looked_for_jobs = now
        try:
            return jobs.jobs_waiting(self.engine, self.only)
        except Exception:  # the database is failing: the chore stops, the loop waits the outage out
            return True

    def _refresh_pairs(self, touched: set[int], interrupted: jobs.Interrupted = jobs.never) -> int:
        """The paired tests of the tasks on the ``touched`` qrels that the jobs left missing, the
        pairs of evaluations no longer shown let go (:func:`ranking.refresh_pairs`); how many
        pairs were stored."""
        if not touched:
            return 0
        started = time.perf_counter()
        try:
            made = ranking.refresh_pairs(self.engine, touched, interrupted=interrupted)
        except jobs.ChoreInterrupted:
            raise
        except Exception as error:  # never lose the worker over a chore; the page computes without
            log.warning("refreshing the tasks' paired tests failed: %s", str(error).splitlines()[0])
            return 0
        if made:
            log.info("pairs: %d pair(s) of paired tests stored (%.2fs)", made, time.perf_counter() - started)
        return made

    def _refresh_reports(self, touched: set[int], interrupted: jobs.Interrupted = jobs.never) -> int:
        """The settings' reports on the ``touched`` qrels, or on every qrels the first time the
        queue is empty and every ``reports_interval`` after (runs evaluated while no worker ran,
        a task's measures changed); how many were stored. Looking costs a few queries a task: a
        report is computed only where none is stored for its inputs as they are. Raises
        :class:`jobs.ChoreInterrupted` between reports once ``interrupted()`` (the sweep is then
        due again)."""
        if not self.settings.reports:
            return 0
        now = time.monotonic()
        every = (
            self._reports_swept is None
            or now - self._reports_swept >= self.settings.reports_interval
            or self._answers_stored
        )
        if not every and not touched:
            return 0
        on: set[int] | None = None if every else touched
        swept_before, answers_before = self._reports_swept, self._answers_stored
        if every:
            self._reports_swept, self._answers_stored = now, False
        stored = 0
        for refresh in self.settings.reports:
            if interrupted():
                self._reports_swept, self._answers_stored = swept_before, answers_before
                raise jobs.ChoreInterrupted
            started = time.perf_counter()
            try:
                made = refresh(self.engine, on)
            except Exception as error:  # never lose the worker over a chore; the page says it is behind
                log.warning("refreshing a stored report failed: %s", str(error).splitlines()[0])
                continue
            if made:
                log.info("reports: %d stored (%.2fs)", made, time.perf_counter() - started)
            stored += made
        return stored

    def _index_a_run(self) -> bool:
        """Index one large run (an idle worker's chore); whether one was indexed."""
        started = time.perf_counter()
        try:
            run_id = store.index_next_run(self.engine)
        except Exception as error:  # never lose the worker over a chore; evaluations work without
            log.warning("indexing a run's docnos failed: %s", str(error).splitlines()[0])
            return False
        if run_id is None:
            return False
        self._last_index_check = 0.0  # another run may be waiting
        log.info("run %d: docno-hash index built (%.2fs)", run_id, time.perf_counter() - started)
        return True

    def _release_due(self) -> None:
        """Release the tasks whose scheduled time has come (an idle worker's chore)."""
        try:
            released = embargo.release_due(self.engine)
        except Exception as error:  # never lose the worker over a chore; the next check tries again
            log.warning("releasing scheduled tasks failed: %s", str(error).splitlines()[0])
            return
        for name in released:
            log.info("task '%s' released at its scheduled time", name)

    # the loop -----------------------------------------------------------------------------

    def _import_ahead(self) -> None:
        """A worker that stays, on a store holding a task, tests pairs of the task's runs after its
        batches (the compare pages' stored t-tests): scipy's statistics are imported now (~1 s of
        CPU), not in its first batch's time. On a store without tasks it is left to the batch that
        needs it (a task made later), as a one-off worker (``until_empty``) leaves it."""
        try:
            wanted = ranking.holds_a_task(self.engine)
        except Exception:  # the database's trouble is the loop's to meet
            return
        if wanted:
            statistics.import_ahead()

    def run(self) -> int:
        """Work until stopped (or until the queue is empty with ``until_empty``); jobs done."""
        scratch.clean_stale()  # what killed processes of this user left in the temporary directory
        try:  # stopped (once, or twice: StopNow) before the database came back: nothing to undo
            if not self.backoff.call(lambda: jobs.register_worker(self.engine, self.worker_id)):
                return 0
        except StopNow:
            return 0
        log.info("worker %s started", self.worker_id)
        if not self.settings.until_empty:
            self._import_ahead()
        beat_every = max(self.settings.lease.total_seconds() / 3, 0.2)
        last_beat = time.monotonic()
        try:
            while not self.stopping:
                try:
                    worked = self.process_one()
                    if time.monotonic() - last_beat >= beat_every:
                        jobs.worker_alive(self.engine, self.worker_id, jobs_done=len(self.done))
                        last_beat = time.monotonic()
                except Exception as error:  # the database, locked, gone or full: wait, go on
                    if not self.backoff.failed(error):
                        raise
                    continue
                self.backoff.answered()
                if worked:
                    self._worked_at = time.monotonic()
                    if self.boards_behind():  # a long burst: the boards no further behind than this
                        self.refresh_boards(busy=True)
                    continue
                if self.settings.until_empty or self.quiet():  # the boards its jobs changed
                    self.refresh_boards(interruptible=True)
                if self.settings.until_empty:
                    break
                if time.monotonic() - self._last_release_check >= self.settings.release_interval:
                    self._last_release_check = time.monotonic()
                    self._release_due()
                if (
                    self.settings.index_runs
                    and time.monotonic() - self._last_index_check >= self.settings.index_interval
                ):
                    self._last_index_check = time.monotonic()
                    if self._index_a_run():
                        continue  # the queue first, then the next run
                time.sleep(self.settings.poll_interval)
        except StopNow:
            pass
        finally:
            # the register says "stopped"; in an outage it shows the worker's heartbeat ageing instead
            self.backoff.stopping = lambda: False
            self.backoff.call(lambda: jobs.worker_stopped(self.engine, self.worker_id), give_up_after=10.0)
            log.info("worker %s stopped after %d jobs", self.worker_id, len(self.done))
        return len(self.done)

    def install_signal_handlers(self, signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
        def on_signal(signum: int, _frame: FrameType | None) -> None:
            if self.stopping:
                raise StopNow
            self.stopping = True
            log.info(
                "%s: finishing the current job, then stopping (send again to stop now)", signal.Signals(signum).name
            )

        for signum in signals:
            signal.signal(signum, on_signal)


# --- beside the HTTP service ------------------------------------------------------------------


class InProcessWorker:
    """A worker on a thread of `evalstore serve` (the embedded default's one process): it works
    like `evalstore worker` but takes no signals (only the main thread can); ``stop`` lets the
    current job finish."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._thread = threading.Thread(target=self._run, name="evalstore-worker", daemon=True)

    @classmethod
    def start(
        cls, database_url: str, settings: WorkerSettings | None = None, *, reports: tuple[Refresher, ...] = ()
    ) -> InProcessWorker:
        settings = settings or WorkerSettings(
            poll_interval=1.0, batch=jobs.batch_bound_from_env(), settle=jobs.SERVE_SETTLE, reports=reports
        )
        background = cls(Worker(make_engine(database_url), settings))
        background._thread.start()
        return background

    def _run(self) -> None:
        try:
            self.worker.run()
        except Exception:  # the server goes on; pages say that no worker is alive
            log.exception("the in-process worker stopped")

    def stop(self, timeout: float = 300.0) -> None:
        self.worker.stopping = True
        self._thread.join(timeout)
        self.worker.engine.dispose()


# --- several processes -------------------------------------------------------------------------


def run_pool(
    database_url: str, settings: WorkerSettings, concurrency: int, stop_requested: Callable[[], bool] = lambda: False
) -> int:
    """Run ``concurrency`` worker processes and forward stop signals to them; jobs done in all.
    ``stop_requested``: whether a stop signal came before this installed its handlers."""
    if concurrency <= 1:
        worker = Worker(make_engine(database_url), settings)
        worker.install_signal_handlers()
        worker.stopping = worker.stopping or stop_requested()
        return worker.run()
    if stop_requested():
        return 0
    import multiprocessing  # only a pool of worker processes needs it (in-process work does not)

    context = multiprocessing.get_context("spawn")  # no forked database connections or threads
    results = context.Queue()
    children = [
        context.Process(target=_child, args=(database_url, settings, results), daemon=False) for _ in range(concurrency)
    ]
    for child in children:
        child.start()

    def forward(signum: int, _frame: FrameType | None) -> None:
        for child in children:
            if child.pid is not None and child.is_alive():
                os.kill(child.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for child in children:
        child.join()
    total = 0
    while not results.empty():
        total += results.get()
    return total


def _child(database_url: str, settings: WorkerSettings, results: Any) -> None:
    _logging.configure_logging()
    # Ctrl-C reaches every process of the terminal's group; the parent forwards one SIGTERM per
    # signal it gets, so the children listen to that alone and count each stop request once.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker = Worker(make_engine(database_url), settings)
    worker.install_signal_handlers((signal.SIGTERM,))
    results.put(worker.run())
