"""The service's pages: leaderboards, runs, comparisons, the queue, and judging pools in the
browser. Server-rendered HTML (Jinja2, autoescaped); the only script is judging's keyboard
shortcuts, and every page works without it.

Pages use the API's roles and services: a page names the action it needs, and the services decide
which objects the caller may see. A browser signs in with a name and password and holds a session
cookie; every form that changes something carries the session's CSRF token.
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import asdict
from datetime import timedelta
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeoutError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from evalstore.errors import AccessDenied, AuthenticationError, EvalstoreError, InvalidParameterError
from evalstore.services import access, claims, judging, pools, reports, repro, store, tasks
from evalstore.services import jobs as job_queue
from evalstore.services.access import ANONYMOUS, Principal
from evalstore.services.judges import ppi_board, suggestions
from evalstore.web import auth
from evalstore.web.auth import SESSION_COOKIE, caller, csrf_token, server
from evalstore.web.headers import content_disposition
from evalstore.web.templating import bar_chart, query_terms, templates
from evalstore.web.wording import for_reader

router = APIRouter(include_in_schema=False)
LOGIN_COOKIE = "evalstore_login"  # the sign-in form's CSRF token (double submit): there is no session yet


class SignInNeeded(Exception):
    """A page needs a signed-in user; the browser is sent to the sign-in form, then back."""

    def __init__(self, back_to: str) -> None:
        super().__init__(back_to)
        self.back_to = back_to


def _principal(request: Request) -> Principal:
    """Who asks: a bearer token (scripts) as the API reads it, else the session cookie."""
    if request.headers.get("authorization") is not None:
        return caller(request)
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        return ANONYMOUS
    principal = access.authenticate(server(request).engine, cookie, purpose="session", context=server(request).context)
    request.state.csrf = csrf_token(cookie)
    return principal


def page_principal(request: Request, action: str, *, public: bool = False) -> Principal:
    principal = _principal(request)
    if public and principal.role is None and server(request).settings.public_leaderboards:
        return principal
    if principal.role is None:
        raise SignInNeeded(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
    principal.require(action)
    return principal


async def form_principal(request: Request, action: str) -> tuple[Principal, FormData]:
    """The principal of a form post, its CSRF token checked (a cookie-borne post without it is
    refused: another site's page could make the browser send the cookie, not read the token)."""
    form = await request.form()
    principal = await run_in_threadpool(page_principal, request, action)
    if principal.via == "session" and not hmac.compare_digest(
        str(form.get("csrf", "")), getattr(request.state, "csrf", "")
    ):
        raise AccessDenied("This form's CSRF token is missing or wrong; reload the page and try again.")
    server(request).writes.take(f"user:{principal.user_id}")
    return principal, form


def render(
    request: Request, template: str, principal: Principal, status_code: int = 200, **context: Any
) -> HTMLResponse:
    return templates.TemplateResponse(request, template, {"me": principal, **context}, status_code=status_code)


def see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def _safe_next(target: str | None) -> str:
    """Only a path of this site: an open redirect would let a link sign someone in and send them
    to another site."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


# --- signing in -----------------------------------------------------------------------------------


@router.get("/login")
def login_form(request: Request, next: str | None = None) -> HTMLResponse:  # noqa: A002 (the query's name)
    token = secrets.token_urlsafe(32)
    response = render(
        request,
        "login.html",
        ANONYMOUS,
        login_token=token,
        next=_safe_next(next),
        error=None,
        sign_up=server(request).settings.open_sign_up,
    )
    response.set_cookie(
        LOGIN_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        path="/login",
        secure=server(request).settings.secure_cookies,
        max_age=3600,
    )
    return response


@router.post("/login")
async def login(request: Request) -> Response:
    form = await request.form()
    shared = server(request)
    back_to = _safe_next(str(form.get("next", "/")))
    expected = request.cookies.get(LOGIN_COOKIE, "")
    if not expected or not hmac.compare_digest(str(form.get("login_token", "")), expected):
        raise AccessDenied("This sign-in form has expired or was not sent by this site; reload it and try again.")
    name = str(form.get("name", ""))
    try:
        issued = await run_in_threadpool(auth.sign_in, shared, request, name, str(form.get("password", "")))
    except AuthenticationError as error:
        token = secrets.token_urlsafe(32)
        response: Response = render(
            request,
            "login.html",
            ANONYMOUS,
            401,
            login_token=token,
            next=back_to,
            error=for_reader(error, ANONYMOUS),
            sign_up=shared.settings.open_sign_up,
        )
        response.set_cookie(
            LOGIN_COOKIE,
            token,
            httponly=True,
            samesite="strict",
            path="/login",
            secure=shared.settings.secure_cookies,
            max_age=3600,
        )
        return response
    response = see_other(back_to)
    response.set_cookie(
        SESSION_COOKIE,
        issued.token,
        httponly=True,
        samesite="strict",
        secure=shared.settings.secure_cookies,
        max_age=access.SESSION_HOURS * 3600,
        path="/",
    )
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    principal, _ = await form_principal(request, "tasks:read")
    if principal.via == "session" and principal.token_id is not None:
        await run_in_threadpool(access.revoke_token, server(request).engine, principal.token_id, by=principal)
    response = see_other("/")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


# --- tasks and leaderboards -------------------------------------------------------------------


@router.get("/")
def home(request: Request) -> HTMLResponse:
    principal = page_principal(request, "tasks:read", public=True)
    listed = [t.as_dict() for t in tasks.list_tasks(server(request).engine)]
    return render(request, "home.html", principal, tasks=listed)


@router.get("/tasks/{task}")
def leaderboard_page(
    request: Request, task: str, measure: list[str] = Query([]), sort: str | None = None, ppi: bool = False
) -> HTMLResponse:
    principal = page_principal(request, "leaderboard:read", public=True)
    page = reports.leaderboard(server(request).engine, principal, task, measure, sort, context=server(request).context)
    shown = tasks.show_task(server(request).engine, task).as_dict()
    # the caller's own runs (their team's; the organiser's: every team's) not on the board yet
    pending = (
        [r for r in tasks.task_runs(server(request).engine, principal, task) if r["state"] in tasks.PENDING]
        if principal.may("runs:read")
        else []
    )
    return render(
        request,
        "leaderboard.html",
        principal,
        task=shown,
        pending=pending,
        **board_context(
            f"/tasks/{quote(task, safe='')}",
            page,
            measure,
            tasks.computed_measures(server(request).engine, task) if page.visible else [],
        ),
        run_base="/runs/",
        ppi=ppi_context(request, principal, page, measure, ppi),
    )


def ppi_context(
    request: Request, principal: Principal, page: reports.BoardPage, measure: list[str], asked: bool
) -> dict[str, Any] | None:
    """The board's prediction-powered intervals (as `leaderboard --ppi` gives them), offered only
    on a hybrid version's board (a judge's labels corrected by people's) whose every topic the
    reader may see: the intervals are over all the version's topics, and a split task's private
    ones must not move a public board. None: not offered; computed when ``asked``."""
    judge = page.judge
    if (
        not page.visible
        or not page.rows
        or page.tier_measure is None
        or judge is None
        or not str(judge.get("from") or "").startswith("hybrid")
        or (page.split is not None and not page.split.get("private_shown"))
    ):
        return None
    keep = [("measure", m) for m in measure] + ([("sort", page.sort)] if page.sort else [])
    offered: dict[str, Any] = {
        "measure": page.tier_measure,
        "show": "?" + urlencode([*keep, ("ppi", "1")]) + "#ppi",
        "hide": "?" + urlencode(keep),
        "board": None,
        "error": None,
    }
    if not asked:
        return offered
    try:
        offered["board"] = ppi_board.ppi_board(
            server(request).engine, str(judge["version"]), measure=page.tier_measure, runs=[r.run for r in page.rows]
        )
    except EvalstoreError as error:
        offered["error"] = for_reader(error, principal)
    return offered


def board_context(base: str, page: reports.BoardPage, measure: list[str], computed: list[str]) -> dict[str, Any]:
    """What leaderboard.html needs beside the board's own data, for the board at ``base`` (a
    task's, a collection's): its measure picker (only the ``computed`` measures: another would be
    a dead end), sort links, downloads and compare form."""
    sorts = [
        *page.measures,
        "run",
        "team",
        *([reports.FINAL] if page.split and page.split.get("private_shown") else []),
    ]
    links = {m: "?" + urlencode([*(("measure", x) for x in measure), ("sort", m)]) for m in sorts}
    downloads = {
        fmt: f"{base}/leaderboard.{fmt}?" + urlencode([*(("measure", x) for x in measure), ("sort", page.sort)])
        for fmt in reports.DOWNLOADS
    }
    return {
        "page": page,
        "picker": reports.measure_groups(computed, page.measures),
        "sort_links": links,
        "downloads": downloads,
        "warning": reports.JUDGED_WARNING,
        "openable": [r.run for r in page.rows if r.may_open],
        "compare_url": f"{base}/compare",
    }


_DOWNLOAD_TYPES = {"csv": "text/csv", "json": "application/json", "md": "text/markdown", "tex": "application/x-tex"}


@router.get("/tasks/{task}/leaderboard.{fmt}")
def leaderboard_download(
    request: Request, task: str, fmt: str, measure: list[str] = Query([]), sort: str | None = None
) -> Response:
    principal = page_principal(request, "leaderboard:read", public=True)
    download_format(fmt)
    page = reports.leaderboard(server(request).engine, principal, task, measure, sort, context=server(request).context)
    if not page.visible:
        raise AccessDenied(f"The scores of task '{task}' are {tasks.HIDDEN}.")
    return board_file(page, fmt)


def download_format(fmt: str) -> None:
    """Refuse a board download's format before the board is computed (a task's, a collection's)."""
    if fmt not in _DOWNLOAD_TYPES:
        raise InvalidParameterError(f"Download as one of {', '.join(reports.DOWNLOADS)}, not '{fmt}'.")


def board_file(page: reports.BoardPage, fmt: str) -> Response:
    """A board (a task's, a collection's) as a download."""
    return PlainTextResponse(
        reports.board_download(page, fmt),
        media_type=f"{_DOWNLOAD_TYPES[fmt]}; charset=utf-8",
        headers={"Content-Disposition": content_disposition(f"{page.task}-leaderboard.{fmt}")},
    )


@router.get("/runs/{run}")
def run_page(request: Request, run: str, measure: str | None = None) -> HTMLResponse:
    principal = page_principal(request, "runs:read")
    page = reports.run_page(server(request).engine, principal, run, measure, context=server(request).context)
    return render(
        request,
        "run.html",
        principal,
        **run_context(request, page, "task", f"/tasks/{quote(page.run['task'], safe='')}/compare"),
        no_worker=page.run.get("state") in ("queued", "running") and not worker_alive(request),
    )


def run_context(request: Request, page: reports.RunPage, of: str, compare_url: str) -> dict[str, Any]:
    """What run.html needs for a run's page (of a task's, a collection's runs): its per-topic
    chart, the run file's ir_metadata and what the run reproduces (evalstore repro)."""
    chart = None
    run = page.run["run"]
    if page.measure is not None and page.topics:
        differences = [v - m for v, m in zip(page.values, page.medians, strict=True)]
        hints = [
            f"topic {t}: {page.measure} {v:.4f}, median {m:.4f}"
            for t, v, m in zip(page.topics, page.values, page.medians, strict=True)
        ]
        chart = bar_chart(
            page.topics,
            differences,
            y_label=f"{page.measure} − median",
            hints=hints,
            title=f"{run}: per-topic {page.measure} minus the median of the {of}'s {page.task_runs} runs",
        )
    engine = server(request).engine
    return {
        "page": page,
        "chart": chart,
        "provenance": store.ir_metadata_of(engine, run),
        # a reproduction's figures are over every topic: none while a split task's private topics are not shown
        "reproduces": repro.reproductions_of(engine, run) if page.visible and not page.public_only else [],
        "compare_url": compare_url,
    }


@router.get("/tasks/{task}/compare")
def compare_page(
    request: Request,
    task: str,
    run: list[str] = Query([]),
    measure: str | None = None,
    test: str = "t",
    collection: str | None = None,
) -> HTMLResponse:
    principal = page_principal(request, "runs:read")
    engine = server(request).engine
    choices = [r["run"] for r in tasks.task_runs(engine, principal, task)]
    page = (
        reports.compare_page(
            engine, principal, task, run, measure or None, test, collection or None, context=server(request).context
        )
        if len(run) >= 2
        else None
    )
    shown = tasks.show_task(engine, task)
    answers = shown.takes_answers
    # the measure the comparison is on; before one: the task's official measure (an answer task's
    # board names its first measure once runs are compared)
    measure = page.measure if page is not None else measure or ("" if answers else shown.opening_measure)
    return render(
        request,
        "compare.html",
        principal,
        task=task,
        page=page,
        chart=compare_chart(page),
        choices=choices,
        chosen=run,
        measure=measure,
        test=test,
        collection=collection or "",
        answers=answers,
        prepares=True,  # a task's tests are stored by a worker (a collection's are not)
    )


def compare_chart(page: reports.ComparePage | None) -> Any:
    """The per-topic differences of a comparison's first two runs, as a bar chart."""
    if page is None or not page.differences:  # a split task before its release names no topic
        return None
    return bar_chart(
        [t for t, _ in page.differences],
        [d for _, d in page.differences],
        y_label=f"{page.measure}: {page.runs[0]} − {page.runs[1]}",
        title=f"Per-topic {page.measure} of {page.runs[0]} minus {page.runs[1]}",
    )


@router.get("/queue")
def queue_page(request: Request, state: list[str] = Query(["queued", "running"])) -> HTMLResponse:
    principal = page_principal(request, "queue:read")
    jobs = tasks.queue(server(request).engine, principal, states=state)
    waiting = any(j["state"] in ("queued", "running") for j in jobs)
    return render(
        request, "queue.html", principal, jobs=jobs, states=state, no_worker=waiting and not worker_alive(request)
    )


@router.get("/jobs/live")
def live_jobs(request: Request, job: list[int] = Query([])) -> JSONResponse:
    """The state of the jobs a page shows as queued or running (live.js asks, backing off while
    nothing changes, and stops once none is pending): one query, whatever their number."""
    principal = page_principal(request, "runs:read")
    found = tasks.live_jobs(server(request).engine, principal, job)
    return JSONResponse(
        {
            "jobs": [asdict(j) for j in found],
            "pending": sum(j.state in tasks.PENDING for j in found),
        }
    )


# a worker says it is alive at least every lease / 3 (20 s by default) while it runs
WORKER_SILENCE = timedelta(seconds=90)


def worker_alive(request: Request) -> bool:
    """Whether any evaluation worker said lately that it is alive: queued work waits without one."""
    return bool(job_queue.live_workers(server(request).engine, within=WORKER_SILENCE))


# --- judging ------------------------------------------------------------------------------------


@router.get("/judge")
def judge_home(request: Request) -> HTMLResponse:
    principal = page_principal(request, "pools:judge")
    return render(request, "pools.html", principal, pools=judging.assessor_pools(server(request).engine, principal))


@router.get("/judge/{pool}")
def judge_pool(request: Request, pool: str) -> HTMLResponse:
    principal = page_principal(request, "pools:judge")
    settings, topics = judging.topic_progress(server(request).engine, principal, pool)
    return render(request, "pool.html", principal, pool=pool, settings=settings, topics=topics)


@router.get("/judge/{pool}/{topic}")
def judge_topic(request: Request, pool: str, topic: str, was: str | None = None) -> HTMLResponse:
    principal = page_principal(request, "pools:judge")
    screen, suggestion = suggestions.judging_screen(server(request).engine, principal, pool, topic)
    statement = screen.statement
    terms = query_terms(statement.title) if statement else []
    role_was = {code: role for role, code in judging.ROLE_CODES.items()}.get(was or "")
    return render(
        request,
        "judge.html",
        principal,
        screen=screen,
        suggestion=suggestion,
        terms=terms,
        shown_at=f"{time.time():.3f}",
        role_was=role_was if role_was and judging.role_changed(role_was, screen.role) else None,
        role_code=judging.ROLE_CODES[screen.role],
    )


def _back_to_topic(request: Request, principal: Principal, pool: str, topic: str, form: FormData) -> Response:
    """The judging screen again, told the role the screen had shown when it changed since (another
    assessor judged the topic first, or an undo gave it back)."""
    shown = {code: role for role, code in judging.ROLE_CODES.items()}.get(str(form.get("role", "")), "")
    now = judging.topic_role(server(request).engine, principal, pool, topic)
    was = f"?was={judging.ROLE_CODES[shown]}" if judging.role_changed(shown, now) else ""
    return see_other(f"/judge/{quote(pool)}/{quote(topic)}{was}")


@router.post("/judge/{pool}/{topic}")
async def judge_submit(request: Request, pool: str, topic: str) -> Response:
    principal, form = await form_principal(request, "pools:judge")
    grade_text = str(form.get("grade", ""))
    if grade_text != "skip" and not (grade_text.isascii() and grade_text.lstrip("-").isdigit()):
        raise InvalidParameterError("Pick a grade (a number of the pool's scale) or skip.")
    try:
        seconds: float | None = max(0.0, time.time() - float(str(form.get("shown_at", ""))))
    except ValueError:
        seconds = None
    suggested = str(form.get("suggested", ""))
    await run_in_threadpool(
        suggestions.judge_document,
        server(request).engine,
        principal,
        pool,
        topic,
        str(form.get("doc", "")),
        None if grade_text == "skip" else int(grade_text),
        seconds=seconds,
        note=str(form.get("note", "")) or None,
        suggested=int(suggested) if suggested.isascii() and suggested.isdigit() else None,
        suggested_by=str(form.get("suggested_by", "")) or None,
    )
    return await run_in_threadpool(_back_to_topic, request, principal, pool, topic, form)


@router.post("/judge/{pool}/{topic}/undo")
async def judge_undo(request: Request, pool: str, topic: str) -> Response:
    principal, form = await form_principal(request, "pools:judge")
    await run_in_threadpool(judging.undo_last, server(request).engine, principal, pool, topic)
    return await run_in_threadpool(_back_to_topic, request, principal, pool, topic, form)


@router.get("/pools/{pool}/review")
def review_page(request: Request, pool: str, measure: str = "AP") -> HTMLResponse:
    """Where assessors disagree, the disagreements that change the ranking of the pool's runs most
    first (organisers and admins)."""
    principal = page_principal(request, "pools:manage")
    claims.check_pool(server(request).engine, principal, pool)  # another organiser's pool: not found
    found, pairs = pools.disagreements(server(request).engine, pool, measure=measure)
    suggested = suggestions.suggestion_agreement(server(request).engine, pool)
    return render(
        request, "review.html", principal, pool=pool, found=found, pairs=pairs, measure=measure, suggested=suggested
    )


def error_page(request: Request, status: int, error: EvalstoreError | str) -> Response:
    """An error as a page (the API answers JSON): what is wrong and what to do, with the status."""
    if isinstance(error, AuthenticationError) and request.cookies.get(SESSION_COOKIE):
        response: Response = see_other("/login?" + urlencode({"next": request.url.path}))
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response
    reader = _signed_in(request)
    message = for_reader(error, reader) if isinstance(error, EvalstoreError) else error
    return render(request, "error.html", reader, status, status=status, message=message)


def _signed_in(request: Request) -> Principal:
    """Who is signed in, for an error page's header (a signed-in user is not offered "Sign in");
    anonymous when that cannot be told (the error may be the session itself, or the database not
    answering)."""
    try:
        return _principal(request)
    except (EvalstoreError, DBAPIError, SQLAlchemyTimeoutError):
        return ANONYMOUS


def install(app: FastAPI) -> None:
    """The pages, their static files, and the sign-in redirect of a page that needs a user."""

    async def sign_in_needed(_request: Request, error: Exception) -> Response:
        assert isinstance(error, SignInNeeded)
        return see_other("/login?" + urlencode({"next": error.back_to}))

    app.include_router(router)
    app.mount("/static", StaticFiles(packages=[("evalstore.web", "static")]), name="static")
    app.add_exception_handler(SignInNeeded, sign_in_needed)
