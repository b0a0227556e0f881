"""`evalstore serve`: the HTTP service."""

import signal
from types import FrameType
from typing import Annotated, Any

import typer

from evalstore.cli._context import state
from evalstore.cli._output import info
from evalstore.config import DATABASE_URL_ENV, pass_on, value

FORWARDED_ALLOW_IPS_ENV = "EVALSTORE_FORWARDED_ALLOW_IPS"


def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (0.0.0.0: every interface).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535)] = 8000,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Server processes (each answers requests).")] = 1,
    worker: Annotated[
        bool | None,
        typer.Option(
            "--worker/--no-worker",
            help="Evaluate submitted runs in this "
            "process as well. Default: on for SQLite (the embedded default, where one "
            "command is the whole service), off for PostgreSQL, where 'evalstore worker' "
            "processes on any host share the queue.",
        ),
    ] = None,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            "--forwarded-allow-ips",
            help="Comma-separated addresses of the proxies whose X-Forwarded-For/-Proto are believed (default: "
            f"${FORWARDED_ALLOW_IPS_ENV}, else none: a client cannot choose the address it is limited by).",
        ),
    ] = None,
) -> None:
    """Serve the JSON API (/api/v1; its description at /api/v1/openapi.json). Settings come from
    the environment: EVALSTORE_DATABASE_URL, EVALSTORE_MAX_UPLOAD_MB (256), EVALSTORE_WRITES_PER_MINUTE
    (60 per user), EVALSTORE_PUBLIC_LEADERBOARDS (on), EVALSTORE_SECURE_COOKIES (on; off only for
    plain-HTTP development), EVALSTORE_DB_POOL_SIZE (20 PostgreSQL connections per process), and the
    limits of the security page (EVALSTORE_MAX_TOKEN_DAYS, EVALSTORE_TOKENS_PER_HOUR,
    EVALSTORE_MAX_INFLATED_MB, EVALSTORE_REQUEST_SECONDS, EVALSTORE_FORWARDED_ALLOW_IPS).
    Submitted runs are evaluated by the in-process worker (--worker) or by 'evalstore worker'
    processes; this process delivers finished results to MLflow (unless EVALSTORE_MLFLOW=off)."""
    import uvicorn

    from evalstore.config import mlflow_enabled
    from evalstore.services.health import refresh_reports
    from evalstore.services.reports.boards import refresh_answer_tiers
    from evalstore.services.tracking import BackgroundDeliverer
    from evalstore.services.worker import InProcessWorker

    cli = state(ctx)
    cli.engine()  # refuse to start on an out-of-date schema, with the command that fixes it
    pass_on(DATABASE_URL_ENV, cli.database_url)  # the server processes read their settings from the environment
    in_process = worker if worker is not None else cli.database_url.startswith("sqlite")
    # the worker stores each task's collection-health report once its queue is empty
    background = (
        InProcessWorker.start(cli.database_url, reports=(refresh_reports, refresh_answer_tiers)) if in_process else None
    )
    # MLflow delivery on a thread of this process (not of the server processes answering requests)
    deliverer = BackgroundDeliverer(cli.engine(), context=cli.context()).start() if mlflow_enabled() else None
    info(
        f"serving on http://{host}:{port}/api/v1 (API description: /api/v1/openapi.json)"
        + ("; evaluating submitted runs in this process" if background else "")
    )
    # uvicorn shuts down on SIGTERM and then raises the signal again with the handler it found:
    # with ours that is an exception here, so the worker below finishes its job before we exit
    # (the default handler would end the process at once, leaving the job to its lease).
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        uvicorn.run(
            "evalstore.web.app:create_served_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level="warning",
            access_log=False,
            **proxy_options(
                (value(FORWARDED_ALLOW_IPS_ENV) or "") if forwarded_allow_ips is None else forwarded_allow_ips
            ),
        )
    finally:
        if background is not None:
            background.stop()
        if deliverer is not None:
            deliverer.stop()


def _exit_on_sigterm(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


def proxy_options(forwarded_allow_ips: str) -> dict[str, Any]:
    """uvicorn's proxy settings: X-Forwarded-* read only from ``forwarded_allow_ips`` (uvicorn's
    own default believes 127.0.0.1, so any local client could pick its address); without any,
    uvicorn's proxy-header middleware is not installed at all."""
    trusted = forwarded_allow_ips.strip()
    return {"proxy_headers": bool(trusted), "forwarded_allow_ips": trusted or None}
