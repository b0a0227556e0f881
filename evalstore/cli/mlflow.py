"""`evalstore mlflow`: what MLflow has not received yet, and sending it."""

from typing import Annotated

import typer

from evalstore.cli._context import state
from evalstore.cli._output import info
from evalstore.errors import TrackingError

app = typer.Typer(
    help="Log stored results to MLflow ($MLFLOW_TRACKING_URI, default a local SQLite store).", no_args_is_help=True
)


@app.command("sync")
def sync(
    ctx: typer.Context,
    evaluation: Annotated[
        list[int], typer.Option("--evaluation", help="Only these evaluations (repeatable; default: all pending).")
    ] = [],
) -> None:
    """Log every finished evaluation that MLflow has not received yet (each exactly once)."""
    from evalstore._logging import configure_logging
    from evalstore.config import mlflow_enabled, mlflow_tracking_uri
    from evalstore.services.tracking import deliver

    configure_logging()
    if not mlflow_enabled():
        raise TrackingError("MLflow logging is off (EVALSTORE_MLFLOW=off); unset it to sync.")
    report = deliver(state(ctx).engine(), only=evaluation or None, context=state(ctx).context())
    info(f"logged {len(report.logged)} evaluations to {mlflow_tracking_uri()}; {report.left_pending} pending")
    if report.failed:
        evaluation_id, error = next(iter(report.failed.items()))
        raise TrackingError(
            f"MLflow logging failed for evaluation {evaluation_id}: {error}. "
            f"Check MLFLOW_TRACKING_URI and run 'evalstore mlflow sync' again."
        )


@app.command("status")
def status(ctx: typer.Context) -> None:
    """Where results are logged, and how many are still pending."""
    from evalstore.config import mlflow_tracking_uri
    from evalstore.services.tracking import pending_count

    typer.echo(f"tracking uri: {mlflow_tracking_uri()}")
    typer.echo(f"pending: {pending_count(state(ctx).engine())}")
