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

The package's modules, by job: options (what a job is asked with, its identity and the types the
other layers share), queue (asking for jobs and working on them: enqueue, claim, heartbeat, the
steps that store results, fail, release), batches (claiming the jobs that share qrels and options
together, for a worker that evaluates them in one pass), views (listing, showing, retrying and
cancelling jobs) and workers (which workers are alive).
"""

from __future__ import annotations

from evalstore.services.jobs.batches import (
    BATCH_JOBS,
    BATCH_ROWS,
    SERVE_SETTLE,
    BatchBound,
    arrivals_settle_in,
    batch_bound_from_env,
    claim_batch,
    jobs_waiting,
)
from evalstore.services.jobs.options import (
    DEFAULT_LEASE,
    DEFAULT_MEASURE_SET,
    DEFAULT_MEASURES_BY_KIND,
    MISSING_POLICIES,
    STATES,
    TERMINAL,
    USER_ORIENTED_MEASURES,
    ChoreInterrupted,
    ClaimedJob,
    EvaluationOptions,
    Interrupted,
    JobLost,
    JobRef,
    as_utc,
    db_now,
    default_measures,
    describe_inputs,
    for_judgments,
    never,
    new_worker_id,
    options_hash,
    resolved_for,
)
from evalstore.services.jobs.queue import (
    ResultsHeader,
    claim,
    claim_in,
    claimable,
    complete,
    enqueue,
    enqueue_job,
    enqueue_run,
    fail,
    first_claimable,
    heartbeat,
    kind_of,
    release,
    results_header,
    store_results,
)
from evalstore.services.jobs.summaries import opening_measure, summaries_for, summarise_stored
from evalstore.services.jobs.views import (
    JobView,
    cancel,
    job_states,
    list_jobs,
    outcome,
    retry,
    show_job,
)
from evalstore.services.jobs.workers import (
    live_workers,
    register_worker,
    worker_alive,
    worker_stopped,
)

__all__ = [
    "never",
    "ChoreInterrupted",
    "Interrupted",
    "jobs_waiting",
    "summarise_stored",
    "opening_measure",
    "summaries_for",
    "claimable",
    "BATCH_JOBS",
    "BATCH_ROWS",
    "BatchBound",
    "batch_bound_from_env",
    "SERVE_SETTLE",
    "ClaimedJob",
    "DEFAULT_LEASE",
    "arrivals_settle_in",
    "DEFAULT_MEASURES_BY_KIND",
    "DEFAULT_MEASURE_SET",
    "EvaluationOptions",
    "JobLost",
    "JobRef",
    "JobView",
    "MISSING_POLICIES",
    "STATES",
    "TERMINAL",
    "USER_ORIENTED_MEASURES",
    "as_utc",
    "cancel",
    "claim",
    "claim_batch",
    "claim_in",
    "complete",
    "db_now",
    "default_measures",
    "describe_inputs",
    "enqueue",
    "enqueue_job",
    "enqueue_run",
    "for_judgments",
    "resolved_for",
    "fail",
    "first_claimable",
    "heartbeat",
    "job_states",
    "kind_of",
    "list_jobs",
    "live_workers",
    "new_worker_id",
    "options_hash",
    "outcome",
    "register_worker",
    "release",
    "ResultsHeader",
    "results_header",
    "retry",
    "show_job",
    "store_results",
    "worker_alive",
    "worker_stopped",
]
