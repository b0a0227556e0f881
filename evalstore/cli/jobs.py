"""`evalstore jobs ...`: look after the queued evaluations."""

from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import OutputFormat, info, render, render_record

app = typer.Typer(help="Look after queued evaluations: list, show, retry, cancel.", no_args_is_help=True)

LIST_COLUMNS = ["id", "kind", "run", "qrels", "state", "attempts", "worker_id", "mlflow_state", "finished_at", "error"]


@app.command("list")
def list_jobs(
    ctx: typer.Context,
    job_state: Annotated[
        list[str],
        typer.Option("--state", help="Only jobs in this state (repeatable): queued, running, done, failed, cancelled."),
    ] = [],
    qrels: Annotated[str | None, typer.Option("--qrels", help="Only jobs on these qrels (or gold labels).")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="The newest N jobs.")] = 100,
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """Jobs, oldest first, with their state, attempts and error. For predictions (kind
    classifier or clustering), run is the prediction set and qrels its gold labels."""
    from evalstore.services import jobs

    views = jobs.list_jobs(state(ctx).engine(), states=job_state or None, qrels_name=qrels, limit=limit)
    render([v.as_dict() for v in views], LIST_COLUMNS, fmt, title="jobs")


@app.command("show")
def show(
    ctx: typer.Context,
    job_id: Annotated[int, typer.Argument(help="Job id (see 'evalstore jobs list').")],
    fmt: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """One job: state, attempts, worker, timestamps, options and errors."""
    from evalstore.services import jobs

    render_record(jobs.show_job(state(ctx).engine(), job_id).as_record(), fmt, title=f"job {job_id}")


@app.command("retry")
def retry(ctx: typer.Context, job_id: Annotated[int, typer.Argument(help="A failed or cancelled job.")]) -> None:
    """Queue a failed or cancelled job again, with its attempts reset."""
    from evalstore.services import jobs

    view = jobs.retry(state(ctx).engine(), job_id)
    info(f"job {view.id} queued again ({view.describe()})")


@app.command("cancel")
def cancel(ctx: typer.Context, job_id: Annotated[int, typer.Argument(help="A queued or running job.")]) -> None:
    """Cancel a queued or running job (a running job's result is dropped when its worker notices)."""
    from evalstore.services import jobs

    view = jobs.cancel(state(ctx).engine(), job_id)
    info(f"job {view.id} cancelled ({view.describe()})")
