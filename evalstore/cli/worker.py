"""`evalstore worker`: evaluate queued jobs until stopped."""

import logging
import os
import signal
from datetime import timedelta
from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import info

_STOPS = (signal.SIGTERM, signal.SIGINT)


def worker(
    ctx: typer.Context,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Worker processes on this host.")] = 1,
    until_empty: Annotated[
        bool,
        typer.Option(
            "--until-empty",
            help="Exit when no job is left to claim, once what was stored is delivered to MLflow "
            "(left pending if MLflow fails).",
        ),
    ] = False,
    poll_interval: Annotated[
        float, typer.Option("--poll-interval", min=0.05, help="Seconds between looks at an empty queue.")
    ] = 2.0,
    lease_seconds: Annotated[
        float,
        typer.Option(
            "--lease-seconds",
            min=0.5,
            help="A job whose worker has not renewed its lease for this long is taken over by another.",
        ),
    ] = 60.0,
    mlflow: Annotated[
        bool,
        typer.Option(
            "--mlflow/--no-mlflow",
            help="Deliver results to MLflow from a thread beside the workers (else they stay pending for "
            "'evalstore mlflow sync'); the jobs never wait on MLflow either way.",
        ),
    ] = True,
    index_runs: Annotated[
        bool,
        typer.Option(
            "--index-runs/--no-index-runs",
            help="When idle, give stored runs "
            "of 500,000 rows or more an index on their docnos (PostgreSQL), so their "
            "evaluations read the judged rows through it.",
        ),
    ] = True,
    # jobs.BATCH_JOBS and jobs.BATCH_ROWS (written out: the services are not imported to parse options)
    batch_jobs: Annotated[
        int,
        typer.Option(
            "--batch-jobs",
            min=1,
            envvar="EVALSTORE_BATCH_JOBS",
            help="Claim up to this many queued ranking jobs with the same qrels and options at once and compute "
            "them in one pass, each stored as its own evaluation (1: one job at a time).",
        ),
    ] = 16,
    batch_rows: Annotated[
        int,
        typer.Option(
            "--batch-rows",
            min=1,
            envvar="EVALSTORE_BATCH_ROWS",
            help="At most this many stored run rows in one batch (a larger run is evaluated alone).",
        ),
    ] = 500_000,
    nice: Annotated[
        int,
        typer.Option(
            "--nice",
            min=0,
            max=19,
            envvar="EVALSTORE_WORKER_NICE",
            help="Lower the worker processes' CPU priority by this much (as nice(1)): on a host shared with "
            "'evalstore serve', uploads and pages get the cores first, evaluations what is left (0: as the shell's).",
        ),
    ] = 10,
) -> None:
    """Evaluate queued jobs until stopped. SIGTERM or Ctrl-C: finish the current job (or batch),
    then exit; a second one: put the jobs not yet stored back in the queue and exit now."""
    from evalstore._logging import configure_logging
    from evalstore.config import mlflow_enabled
    from evalstore.db.engine import verify_schema
    from evalstore.db.outages import worker_backoff
    from evalstore.services.health import refresh_reports
    from evalstore.services.jobs import BatchBound
    from evalstore.services.reports.boards import refresh_answer_tiers
    from evalstore.services.tracking import BackgroundDeliverer, deliver
    from evalstore.services.worker import WorkerSettings, run_pool

    configure_logging()
    cli = state(ctx)
    engine = cli.engine(check_schema=False)
    # refuse to start on an out-of-date schema; wait for a database that is not answering yet. A
    # stop signal meanwhile ends the wait and the worker (no job was taken); the worker's own
    # handlers replace this one once it runs
    stop_requests: list[int] = []
    previous = {signum: signal.signal(signum, lambda got, _frame: stop_requests.append(got)) for signum in _STOPS}
    waiting = worker_backoff(logging.getLogger("evalstore.worker"), cli.database_url, lambda: bool(stop_requests))
    started = waiting.call(lambda: verify_schema(engine))
    if not started or stop_requests:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        info("worker stopped before it took a job: 0 jobs done")
        return
    # An upload's client is waiting for its answer; an evaluation can wait seconds. On a host shared
    # with `evalstore serve` the two compete for the same cores, and that competition is the largest
    # part of a burst of uploads' time (scripts/bench_server.py --only burst). The pool's processes
    # inherit the priority.
    os.nice(nice)
    settings = WorkerSettings(
        lease=timedelta(seconds=lease_seconds),
        poll_interval=poll_interval,
        until_empty=until_empty,
        index_runs=index_runs,
        batch=BatchBound(jobs=batch_jobs, rows=batch_rows),
        # each task's collection-health report and each answer task's board letters, once the queue is empty
        reports=(refresh_reports, refresh_answer_tiers),
    )
    # the deliverer runs on a thread of this process (with --concurrency above 1, the pool's
    # parent, which otherwise only waits), never on a job's path: a slow or hung MLflow holds up
    # deliveries, not jobs
    deliverer = (
        BackgroundDeliverer(cli.engine(), context=cli.context(), poll_interval=min(poll_interval, 1.0)).start()
        if mlflow and mlflow_enabled()
        else None
    )
    try:
        # a stop that comes before the worker's own handlers are in place is passed on to them
        done = run_pool(cli.database_url, settings, concurrency, stop_requested=lambda: bool(stop_requests))
    except BaseException:
        if deliverer is not None and not deliverer.stop(timeout=5.0):
            info("an MLflow delivery was still in hand at exit: its claim runs out in seconds, for the next deliverer")
        raise
    if deliverer is not None:
        # stopped by a signal: at most a few seconds for the delivery in hand (a hung MLflow is
        # left to the claim's lease); --until-empty: the deliveries of what was stored, then leave
        if not deliverer.stop(timeout=None if until_empty else 5.0):
            info("an MLflow delivery was still in hand at exit: its claim runs out in seconds, for the next deliverer")
        elif until_empty:
            deliver(cli.engine(), context=cli.context())
    info(f"worker stopped: {done} jobs done")
