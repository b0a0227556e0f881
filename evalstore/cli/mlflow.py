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


# MLflow's server otherwise starts a job runner and a Huey consumer beside it, for its GenAI jobs
# (scorers, issue detection, trace roll-ups): two more processes that each import MLflow while the
# UI starts, for nothing evalstore logs. A user who sets the variable keeps theirs.
UI_DEFAULTS = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


@app.command("ui")
def ui(
    host: Annotated[str, typer.Option("--host", help="Address to listen on (this machine only by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = 5000,
    workers: Annotated[
        int, typer.Option("--workers", min=1, max=64, help="Server processes (one serves one person well).")
    ] = 1,
    print_only: Annotated[bool, typer.Option("--print", help="Print the command instead of running it.")] = False,
) -> None:
    """Open MLflow's own UI on the store evalstore logs to: an experiment per qrels set, a run per
    evaluation. Uses the full mlflow package when it is installed, else runs the same MLflow
    release through uv in an environment of its own (evalstore itself logs with mlflow-skinny,
    which has no UI)."""
    import shlex
    import subprocess
    import sys

    from evalstore.config import child_environment, mlflow_artifact_root, mlflow_tracking_uri
    from evalstore.errors import InvalidParameterError

    uri = mlflow_tracking_uri()
    if not uri.startswith("sqlite:///"):
        raise InvalidParameterError(
            f"MLflow's tracking URI is {uri}: open that address in a browser; its server serves the UI."
        )
    command = _ui_command(sys.executable, uri, host, port) + ["--workers", str(workers)]
    artifacts = mlflow_artifact_root(uri)
    if artifacts is not None:
        command += ["--default-artifact-root", str(artifacts)]
    env = child_environment(UI_DEFAULTS, MLFLOW_TRACKING_URI=uri)
    if print_only:  # as a shell runs it: the variables it is given, then the command
        typer.echo(shlex.join([*(f"{name}={env[name]}" for name in UI_DEFAULTS), *command]))
        return
    info(f"MLflow's UI on {uri}: http://{host}:{port} (Ctrl-C stops it)")
    try:
        raise typer.Exit(subprocess.call(command, env=env))
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


def _ui_command(python: str, uri: str, host: str, port: int) -> list[str]:
    """`mlflow ui` from the full package when this environment has it (Flask is what the skinny
    package leaves out), else the same release through `uv tool run` (uv comes with evalstore's
    environment), else an error naming the package to install."""
    import importlib.util
    import shutil
    from importlib.metadata import version
    from pathlib import Path

    from evalstore.errors import InvalidParameterError

    args = ["ui", "--backend-store-uri", uri, "--host", host, "--port", str(port)]
    if importlib.util.find_spec("flask") is not None and importlib.util.find_spec("mlflow.server") is not None:
        return [python, "-m", "mlflow", *args]
    release = version("mlflow-skinny")
    beside = Path(python).parent / "uv"
    uv = str(beside) if beside.is_file() else shutil.which("uv")
    if uv is None:
        raise InvalidParameterError(
            f"MLflow's UI needs the full mlflow package: pip install 'mlflow=={release}', then run this again."
        )
    return [uv, "tool", "run", "--from", f"mlflow=={release}", "mlflow", *args]
