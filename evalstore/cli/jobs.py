"""`evalstore worker` and `evalstore jobs`: run the queue and look after its jobs."""

from __future__ import annotations

from datetime import timedelta

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, info, render, render_record

app = typer.Typer(help="Look after queued evaluations: list, show, retry, cancel.", no_args_is_help=True)

LIST_COLUMNS = ["id", "kind", "run", "qrels", "state", "attempts", "worker_id", "mlflow_state", "finished_at", "error"]


def worker(
    ctx: typer.Context,
    concurrency: int = typer.Option(1, "--concurrency", min=1, help="Worker processes on this host."),
    until_empty: bool = typer.Option(False, "--until-empty", help="Exit when no job is left to claim."),
    poll_interval: float = typer.Option(2.0, "--poll-interval", min=0.05, help="Seconds between looks at an "
                                        "empty queue."),
    lease_seconds: float = typer.Option(60.0, "--lease-seconds", min=0.5, help="A job whose worker has not "
                                        "renewed its lease for this long is taken over by another."),
    mlflow: bool = typer.Option(True, "--mlflow/--no-mlflow", help="Log results to MLflow (else they stay "
                                "pending for 'evalstore mlflow sync')."),
) -> None:
    """Evaluate queued jobs until stopped. SIGTERM or Ctrl-C: finish the current job, then exit;
    a second one: put the job back in the queue and exit now."""
    from evalstore._logging import configure_logging
    from evalstore.config import mlflow_enabled
    from evalstore.services.worker import WorkerSettings, run_pool

    configure_logging()
    cli = state(ctx)
    cli.engine()  # refuse to start on an out-of-date schema
    settings = WorkerSettings(lease=timedelta(seconds=lease_seconds), poll_interval=poll_interval,
                              until_empty=until_empty, mlflow=mlflow and mlflow_enabled())
    done = run_pool(cli.database_url, settings, concurrency)
    info(f"worker stopped: {done} jobs done")


@app.command("list")
def list_jobs(
    ctx: typer.Context,
    job_state: list[str] = typer.Option([], "--state", help="Only jobs in this state (repeatable): queued, "
                                        "running, done, failed, cancelled."),
    qrels: str | None = typer.Option(None, "--qrels", help="Only jobs on these qrels (or gold labels)."),
    limit: int = typer.Option(100, "--limit", min=1, help="The newest N jobs."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format"),
) -> None:
    """Jobs, oldest first, with their state, attempts and error. For predictions (kind
    classifier or clustering), run is the prediction set and qrels its gold labels."""
    from evalstore.services import jobs

    views = jobs.list_jobs(state(ctx).engine(), states=job_state or None, qrels_name=qrels, limit=limit)
    render([v.as_dict() for v in views], LIST_COLUMNS, fmt, title="jobs")


@app.command("show")
def show(ctx: typer.Context, job_id: int = typer.Argument(..., help="Job id (see 'evalstore jobs list')."),
         fmt: OutputFormat = typer.Option(OutputFormat.table, "--format")) -> None:
    """One job: state, attempts, worker, timestamps, options and errors."""
    from evalstore.services import jobs

    render_record(jobs.show_job(state(ctx).engine(), job_id).as_record(), fmt, title=f"job {job_id}")


@app.command("retry")
def retry(ctx: typer.Context, job_id: int = typer.Argument(..., help="A failed or cancelled job.")) -> None:
    """Queue a failed or cancelled job again, with its attempts reset."""
    from evalstore.services import jobs

    view = jobs.retry(state(ctx).engine(), job_id)
    info(f"job {view.id} queued again ({view.inputs()})")


@app.command("cancel")
def cancel(ctx: typer.Context, job_id: int = typer.Argument(..., help="A queued or running job.")) -> None:
    """Cancel a queued or running job (a running job's result is dropped when its worker notices)."""
    from evalstore.services import jobs

    view = jobs.cancel(state(ctx).engine(), job_id)
    info(f"job {view.id} cancelled ({view.inputs()})")
