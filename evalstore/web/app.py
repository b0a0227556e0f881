"""The ASGI application: ``create_served_app()`` for uvicorn (``evalstore serve``), ``create_app()``
for tests and other hosts."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

from evalstore import scratch, statistics
from evalstore._version import __version__
from evalstore.db.engine import configure_models, make_engine, verify_schema
from evalstore.services.context import AppContext
from evalstore.services.readiness import ReadinessCheck
from evalstore.web import (
    agreement_pages,
    api,
    assessing_pages,
    errors,
    headers,
    judge_console,
    judging_pages,
    labs,
    organisers,
    pages,
    participants,
)
from evalstore.web import people as people_pages
from evalstore.web.auth import Server
from evalstore.web.headers import NoStore, SecurityHeaders
from evalstore.web.limits import ASGIApp, RequestBudget, UploadLimit, WriteRate, no_nul
from evalstore.web.settings import ServerSettings
from evalstore.web.sign_in_first import SignInFirst
from evalstore.web.templating import compile_templates


class _App(FastAPI):
    def build_middleware_stack(self) -> ASGIApp:
        # outside Starlette's own error middleware, so that a 500 says the security headers too
        return SecurityHeaders(super().build_middleware_stack())


def create_app(settings: ServerSettings | None = None) -> FastAPI:
    """The service on ``settings`` (default: from the environment). The database must be at this
    version's schema: the server refuses to start otherwise, with the command that fixes it."""
    settings = settings or ServerSettings.from_env()
    scratch.clean_stale()  # uploads and staged rows of server processes that were killed
    engine = make_engine(settings.database_url, pool_size=settings.db_pool_size)
    verify_schema(engine)
    context = AppContext(engine)  # the caches every request shares, for the server's life
    # what the first request of each page would otherwise prepare, done before the server listens
    configure_models()
    compile_templates()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        context.close()  # close the pooled connections when the server stops

    app = _App(
        dependencies=[Depends(no_nul)],
        title="evalstore",
        version=__version__,
        openapi_url="/api/v1/openapi.json",
        lifespan=lifespan,
        docs_url=None,  # served below, with its own Content-Security-Policy
        redoc_url=None,
        description="Runs, qrels, shared tasks and their leaderboards. Authenticate with "
        "'Authorization: Bearer TOKEN' ('evalstore tokens create --user NAME').",
    )
    app.state.server = Server(
        settings,
        context,
        WriteRate(settings.writes_per_minute),
        WriteRate(settings.tokens_per_hour / 60, "new tokens", burst=settings.tokens_per_hour),
    )
    app.state.readiness = ReadinessCheck(engine)  # /api/v1/health/ready: one database query at a time

    @app.get("/api/v1/docs", include_in_schema=False)
    def api_docs() -> HTMLResponse:
        return headers.api_docs("/api/v1/openapi.json", "evalstore - Swagger UI")

    @app.get("/api/v1/redoc", include_in_schema=False)
    def api_reference() -> HTMLResponse:
        return headers.api_reference("/api/v1/openapi.json", "evalstore - API reference")

    # before the pages' /static mount, which would otherwise answer for these paths
    app.mount(headers.SWAGGER_UI_ASSETS, StaticFiles(directory=swagger_ui_path), name="swagger-ui")
    errors.install(app, pages.error_page)
    app.include_router(api.router)
    participants.install(app)  # before the pages' catch-alls
    people_pages.install(app, settings)
    judging_pages.install(app)
    assessing_pages.install(app)
    organisers.install(app)
    judge_console.install(app)
    labs.install(app)
    agreement_pages.install(app)
    pages.install(app)
    app.add_middleware(SignInFirst, before_sign_in=settings.max_body_before_sign_in)
    app.add_middleware(UploadLimit, max_bytes=settings.max_upload_bytes)
    app.add_middleware(RequestBudget, seconds=settings.request_seconds)
    app.add_middleware(NoStore)
    return app


def create_served_app() -> FastAPI:
    """The app ``evalstore serve`` runs in each server process: :func:`create_app` with every
    route prepared before the process listens. FastAPI builds an included router's routes (their
    dependencies, parameters and response models) on the first request that reaches it, ~30 ms
    of each page group's first request after a restart; making the API description walks every
    route, so they are all built here (and the description is kept for its first download).
    Tests' apps skip it: most make a request or two, and would pay for every route.

    What the process has made by then (modules, mappers, templates, routes: ~1M objects) lives as
    long as it does: it is collected once here and frozen out of the collector's sight, so a full
    collection while serving walks what the requests made (~100 ms of CPU less each, a pause a
    request would otherwise wait through)."""
    app = create_app()
    app.openapi()
    # a compare page that tests on the request (a test other than the stored t-test, a measure off
    # the board, two runs of different tasks) would import scipy.stats, ~0.7 s of the first such
    # page after a restart; imported on a thread beside the first requests instead, it slowed every
    # page's first request (a leaderboard's from ~50 to ~400 ms)
    statistics.import_ahead()
    gc.collect()
    gc.freeze()
    return app
