"""The JSON API, ``/api/v1``. Each route names what it does (its dependency) and calls one
service; the services decide which objects the caller may see. Handlers are plain ``def``: FastAPI
runs them in its thread pool, as the database calls they make block."""

from __future__ import annotations

import dataclasses
import io
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, File, Form, Query, Request, Response, UploadFile
from fastapi import Path as PathParameter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from evalstore import scratch
from evalstore._version import __version__
from evalstore.errors import AccessDenied, InvalidParameterError, Remedy
from evalstore.io.answers import AnswerLimits
from evalstore.io.limits import MAX_FIELD_BYTES, Bounds, check_parquet, copy_bounded
from evalstore.io.writers import write_qrels
from evalstore.services import access, claims, judging, tasks
from evalstore.services.access import Principal
from evalstore.services.plain import plain
from evalstore.services.readiness import ReadinessCheck
from evalstore.web import auth, errors
from evalstore.web.auth import SESSION_COOKIE, Requires, anyone, csrf_token, server, signed_in
from evalstore.web.headers import content_disposition

router = APIRouter(prefix="/api/v1")
NAME_MAX = access.NAME_MAX  # names: users, teams, tasks, runs, systems (the columns' width)
DESCRIPTION_MAX = 4000

# the id columns are 32-bit on PostgreSQL: a larger id in a URL is refused (422) before any query
# (it was a 500 from both databases' drivers)
ROW_ID_MAX = 2**31 - 1
RowId = Annotated[int, PathParameter(ge=1, le=ROW_ID_MAX, description="A row's id.")]

Anyone = Annotated[Principal, Depends(anyone)]
SignedIn = Annotated[Principal, Depends(signed_in)]


def needs(action: str, *, write: bool = False, public: bool = False) -> Any:
    return Depends(Requires(action, write=write, public=public))


# --- the service and who you are ----------------------------------------------------------------


@router.get("/health")
def health(_: Anyone) -> dict[str, str]:
    """Liveness: the process answers (the database is not asked; see /health/ready)."""
    return {"status": "ok", "version": __version__}


@router.get("/health/live")
def health_live(_: Anyone) -> dict[str, str]:
    """Liveness, as /health."""
    return {"status": "ok", "version": __version__}


@router.get("/health/ready")
def health_ready(request: Request, _: Anyone) -> Any:
    """Readiness: a quick database query under a short deadline; 503 with Retry-After when the
    database does not answer (what failed is in the server's log, not in the answer)."""
    readiness = request.app.state.readiness
    assert isinstance(readiness, ReadinessCheck)
    checked = readiness.check()
    if checked.ready:
        return {"status": "ready", "version": __version__, "database_seconds": round(checked.seconds, 4)}
    return JSONResponse(
        {"status": "not ready", "error": errors.OUTAGE_MESSAGES["unreachable"]},
        status_code=503,
        headers={"Retry-After": str(errors.DATABASE_RETRY_AFTER)},
    )


class SignIn(BaseModel):
    name: str = Field(max_length=access.NAME_MAX)
    password: str = Field(max_length=access.PASSWORD_MAX)


@router.post("/sessions", status_code=201)
def sign_in(body: SignIn, request: Request, response: Response, _: Anyone) -> dict[str, Any]:
    """A browser session: sets an HttpOnly, SameSite=Strict cookie; send the returned CSRF token
    in X-CSRF-Token with every change made through the cookie."""
    shared = server(request)
    issued = auth.sign_in(shared, request, body.name, body.password)
    response.set_cookie(
        SESSION_COOKIE,
        issued.token,
        httponly=True,
        samesite="strict",
        secure=shared.settings.secure_cookies,
        max_age=access.SESSION_HOURS * 3600,
        path="/",
    )
    return {
        "user": issued.user,
        "csrf_token": csrf_token(issued.token),
        "expires_at": issued.expires_at.isoformat(timespec="seconds") if issued.expires_at else None,
    }


@router.delete("/sessions/current", status_code=204)
def sign_out(request: Request, response: Response, principal: SignedIn) -> None:
    if principal.via != "session" or principal.token_id is None:
        raise AccessDenied("Only a browser session signs out; revoke a token with DELETE /api/v1/tokens/ID.")
    access.revoke_token(server(request).engine, principal.token_id, by=principal)
    response.delete_cookie(SESSION_COOKIE, path="/")


@router.get("/me")
def me(principal: SignedIn) -> dict[str, Any]:
    return {"name": principal.name, "role": principal.role, "team": principal.team, "via": principal.via}


class NewToken(BaseModel):
    user: str | None = Field(None, max_length=NAME_MAX)  # an admin's choice; everyone else gets their own
    # finite and bounded (the server's max_token_days); never-expiring ones only from the admin CLI
    expires_days: float = Field(90, gt=0, allow_inf_nan=False)


@router.post("/tokens", status_code=201)
def create_token(
    body: NewToken, request: Request, principal: Principal = needs("tokens:manage", write=True)
) -> dict[str, Any]:
    """A new token (shown once). Users make their own; admins anyone's."""
    user = body.user or principal.name
    if user != principal.name and not principal.is_admin:
        raise AccessDenied("You make tokens for yourself only; an admin makes them for others.")
    assert user is not None
    shared = server(request)
    if body.expires_days > shared.settings.max_token_days:
        raise InvalidParameterError(
            f"expires_days is at most {shared.settings.max_token_days:g} on this server; got {body.expires_days:g}.",
            remedy=Remedy(
                cli="A token that never expires is made by an admin on the command line "
                "('evalstore tokens create --user NAME --never-expires').",
                web="A token that never expires is made by an admin.",
            ),
        )
    shared.mints.take(f"user:{principal.user_id}")
    issued = access.create_token(shared.engine, user, expires_days=body.expires_days, by=principal.name)
    return {
        "id": issued.id,
        "user": issued.user,
        "token": issued.token,
        "expires_at": issued.expires_at.isoformat(timespec="seconds") if issued.expires_at else None,
    }


@router.get("/tokens")
def list_tokens(request: Request, principal: Principal = needs("tokens:manage")) -> list[dict[str, Any]]:
    return plain(access.list_tokens(server(request).engine, None if principal.is_admin else principal.name))


@router.delete("/tokens/{token_id}", status_code=204)
def revoke_token(token_id: RowId, request: Request, principal: Principal = needs("tokens:manage", write=True)) -> None:
    access.revoke_token(server(request).engine, token_id, by=principal)


# --- users (admins) -----------------------------------------------------------------------------


class NewUser(BaseModel):
    name: str = Field(min_length=1, max_length=NAME_MAX)
    role: Literal["admin", "organiser", "participant", "assessor", "viewer"]
    team: str | None = Field(None, max_length=NAME_MAX)
    password: str | None = Field(None, max_length=access.PASSWORD_MAX)


@router.get("/users")
def list_users(request: Request, _: Principal = needs("users:manage")) -> list[dict[str, Any]]:
    return plain(access.list_users(server(request).engine))


@router.post("/users", status_code=201)
def add_user(
    body: NewUser, request: Request, principal: Principal = needs("users:manage", write=True)
) -> dict[str, Any]:
    return plain(
        access.add_user(
            server(request).engine, body.name, role=body.role, team=body.team, password=body.password, by=principal.name
        )
    )


@router.post("/users/{name}/disable")
def disable_user(
    name: str, request: Request, principal: Principal = needs("users:manage", write=True)
) -> dict[str, Any]:
    return plain(access.disable_user(server(request).engine, name, by=principal.name))


@router.get("/audit")
def audit_log(
    request: Request, limit: int = Query(200, ge=1, le=10_000), _: Principal = needs("audit:read")
) -> list[dict[str, Any]]:
    return plain(access.audit_log(server(request).engine, limit=limit))


# --- tasks --------------------------------------------------------------------------------------


class NewTask(BaseModel):
    name: str = Field(min_length=1, max_length=NAME_MAX)
    qrels: str | None = Field(None, max_length=NAME_MAX)  # runs evaluated against these qrels, or
    nuggets: str | None = Field(None, max_length=NAME_MAX)  # answers scored on this nugget bank
    hidden: bool = False
    opens: datetime | None = None
    closes: datetime | None = None
    max_runs_per_team: int | None = Field(None, ge=1)
    daily_cap: int | None = Field(None, ge=1)  # each team's runs per UTC day (none: the server's setting)
    measures: list[Annotated[str, Field(max_length=NAME_MAX)]] = Field([], max_length=200)
    owner: str | None = Field(None, max_length=NAME_MAX)
    official_measure: str | None = Field(None, max_length=NAME_MAX)
    private_topics: float | None = Field(None, gt=0, lt=1)  # the share of topics kept private until release
    split_seed: int | None = Field(None, ge=0, lt=2**63)


@router.get("/tasks")
def list_tasks(request: Request, _: Principal = needs("tasks:read", public=True)) -> list[dict[str, Any]]:
    return plain(tasks.list_tasks(server(request).engine))


@router.post("/tasks", status_code=201)
def create_task(
    body: NewTask, request: Request, principal: Principal = needs("tasks:manage", write=True)
) -> dict[str, Any]:
    check_name(body.name, "task")
    created = tasks.create_task(
        server(request).engine,
        body.name,
        qrels_name=body.qrels,
        nuggets_name=body.nuggets,
        hidden=body.hidden,
        opens=body.opens,
        closes=body.closes,
        max_runs_per_team=body.max_runs_per_team,
        measures=body.measures,
        owner=body.owner,
        daily_cap=body.daily_cap,
        official_measure=body.official_measure,
        private_fraction=body.private_topics,
        split_seed=body.split_seed,
        by=principal,
    )
    return plain(created)


@router.get("/tasks/{task}")
def show_task(task: str, request: Request, _: Principal = needs("tasks:read", public=True)) -> dict[str, Any]:
    return plain(tasks.show_task(server(request).engine, task))


class TaskSettings(BaseModel):
    """The settings a PATCH changes: those the body names (null clears one), the others stay."""

    opens: datetime | None = None
    closes: datetime | None = None
    max_runs_per_team: int | None = Field(None, ge=1)
    daily_cap: int | None = Field(None, ge=1)
    measures: list[Annotated[str, Field(max_length=NAME_MAX)]] | None = Field(None, max_length=200)
    description: str | None = Field(None, max_length=tasks.DESCRIPTION_CHARACTERS)
    official_measure: str | None = Field(None, max_length=NAME_MAX)


@router.patch("/tasks/{task}")
def change_task(
    task: str, body: TaskSettings, request: Request, principal: Principal = needs("tasks:manage", write=True)
) -> dict[str, Any]:
    """Change a task's settings (its organiser, admins): the window, the quota, the daily cap per
    team (each team's runs per UTC day; null: the server's setting), the measures, the description,
    the official measure (one the task evaluates; it ranks the board)."""
    changes = {field: getattr(body, field) for field in body.model_fields_set}
    return plain(tasks.patch_task(server(request).engine, task, changes, by=principal))


@router.post("/tasks/{task}/release")
def release_task(
    task: str, request: Request, principal: Principal = needs("tasks:manage", write=True)
) -> dict[str, Any]:
    return plain(tasks.release_task(server(request).engine, task, by=principal))


@router.get("/tasks/{task}/leaderboard")
def leaderboard(
    task: str,
    request: Request,
    measure: list[str] = Query([]),
    principal: Principal = needs("leaderboard:read", public=True),
) -> Response:
    """Each run's mean and 95% bootstrap interval per measure, best first (hidden tasks: only that
    the scores are hidden, until released)."""
    board = tasks.task_leaderboard(server(request).engine, principal, task, measure, context=server(request).context)
    return Response(board.json, media_type="application/json")


@router.get("/tasks/{task}/runs")
def task_runs(task: str, request: Request, principal: Principal = needs("runs:read")) -> list[dict[str, Any]]:
    return plain(tasks.task_runs(server(request).engine, principal, task))


_UPLOAD_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def check_name(name: str, kind: str = "run") -> None:
    """A run's, task's or pool's name is opened by URL path and shown in downloads: printable, no
    '/' (a name with one could be neither opened nor withdrawn), at most NAME_MAX characters."""
    if not name.strip() or "/" in name or not name.isprintable() or len(name) > NAME_MAX:
        raise InvalidParameterError(
            f"A {kind}'s name is 1-{NAME_MAX} printable characters without '/'; "
            f"got {name[:80]!r}{'...' if len(name) > 80 else ''}."
        )


def check_run_name(name: str) -> None:
    check_name(name, "run")


@router.post("/tasks/{task}/runs", status_code=201)
def submit_run(
    task: str,
    request: Request,
    response: Response,
    file: Annotated[
        UploadFile,
        File(
            description="The run: TREC text (.gz too), CSV, TSV or Parquet; on a task over a nugget bank, "
            "the answers: TREC RAG 2024 or 2025 JSONL (.gz too)."
        ),
    ],
    name: Annotated[str, Form(min_length=1, max_length=200)],
    run_type: Annotated[Literal["automatic", "manual"], Form()] = "automatic",
    description: Annotated[str | None, Form(max_length=DESCRIPTION_MAX)] = None,
    judging_precedence: Annotated[int | None, Form(ge=1)] = None,
    team: Annotated[
        str | None, Form(max_length=NAME_MAX, description="Organisers and admins: the team submitting.")
    ] = None,
    principal: Principal = needs("runs:submit", write=True),
) -> dict[str, Any]:
    """Validate and store a run as the caller's team's submission, and queue its evaluation: 201,
    or 4xx with ``file:line: what is wrong`` and nothing stored. A task over a nugget bank takes
    answers: stored with their references, evaluated once its organisers have assessed them
    (``job`` null until then)."""
    check_run_name(name)
    shared = server(request)
    if tasks.show_task(shared.engine, task).takes_answers:
        limits = answer_limits(shared.settings.max_inflated_bytes)
        with uploaded(file, request, limits.bounds()) as (path, shown):
            answered = tasks.submit_answers(
                shared.engine,
                principal,
                task,
                path,
                name=name,
                shown_path=shown,
                team=team,
                run_type=run_type,
                description=description,
                server_daily_cap=shared.settings.runs_per_day,
                limits=limits,
            )
        assert answered.answers is not None
        return {
            "run": answered.run.name,
            "task": answered.task,
            "team": answered.team,
            "topics": answered.answers.topics,
            "sentences": answered.answers.sentences,
            "references": answered.run.rows,
            "warnings": [],
            "job": None,
            "state": "awaiting assessment",
        }
    started = time.perf_counter()
    with uploaded(file, request) as (path, shown):
        received = time.perf_counter() - started
        submitted = tasks.submit_run(
            shared.engine,
            principal,
            task,
            path,
            name=name,
            shown_path=shown,
            team=team,
            run_type=run_type,
            description=description,
            judging_precedence=judging_precedence,
            server_daily_cap=shared.settings.runs_per_day,
            context=shared.context,
        )
    assert submitted.job is not None  # a ranking run's evaluation is queued with it
    response.headers["Location"] = f"/api/v1/jobs/{submitted.job.evaluation_id}"
    response.headers["Server-Timing"] = server_timing(
        {"receive": received, **submitted.seconds, "total": time.perf_counter() - started}
    )
    return {
        "run": submitted.run.name,
        "task": submitted.task,
        "team": submitted.team,
        "rows": submitted.run.rows,
        "topics": submitted.run.topics,
        "warnings": list(submitted.warnings),
        "job": {
            "id": submitted.job.evaluation_id,
            "state": submitted.job.state,
            "url": f"/api/v1/jobs/{submitted.job.evaluation_id}",
        },
    }


def server_timing(seconds: dict[str, float]) -> str:
    """A Server-Timing header (W3C Server Timing) of where an upload's time went, in
    milliseconds: fixed part names and durations only, nothing of the run or the caller."""
    return ", ".join(f"{part};dur={spent * 1000:.1f}" for part, spent in seconds.items())


def answer_limits(max_inflated_bytes: int) -> AnswerLimits:
    """An uploaded answer file's bounds: the reader's, within the server's inflated-size limit."""
    defaults = AnswerLimits()
    return dataclasses.replace(defaults, max_bytes=min(defaults.max_bytes, max_inflated_bytes))


@router.post("/tasks/{task}/evaluate")
def evaluate_answers(
    task: str,
    request: Request,
    assessor: Annotated[str, Query(max_length=NAME_MAX)] = "human",
    principal: Principal = needs("tasks:manage", write=True),
) -> dict[str, Any]:
    """A task over a nugget bank (its organiser, admins): queue the evaluation of every answer run
    submitted to it on the bank's assignments by ``assessor`` (people's, or ``judge:NAME``); the
    runs no one has assessed yet are listed as waiting."""
    queued = tasks.evaluate_answers(server(request).engine, task, assessor=assessor, by=principal)
    return {
        "task": queued.task,
        "assessor": queued.assessor,
        "jobs": [
            {"run": run, "id": ref.evaluation_id, "state": ref.state, "url": f"/api/v1/jobs/{ref.evaluation_id}"}
            for run, ref in queued.jobs
        ],
        "waiting": [{"run": run, "reason": reason} for run, reason in queued.waiting],
    }


@contextmanager
def uploaded(file: UploadFile, request: Request, bounds: Bounds | None = None) -> Iterator[tuple[Path, str]]:
    """The upload in a private folder under its own name (its suffix, .parquet, decides how it is
    read), and the name errors call it by. A gzip upload is inflated here, as a stream, up to the
    server's limit (413 past it); text lines and fields are bounded (422 naming the line):
    ``bounds``, else a run's (an answer file's lines are longer)."""
    shown = Path(file.filename or "run").name
    bounds = bounds or Bounds(server(request).settings.max_inflated_bytes)
    with scratch.folder("upload") as folder:
        path = folder / (_UPLOAD_NAME.sub("_", shown) or "run")
        with path.open("wb") as out:
            inflated = copy_bounded(file.file, out, bounds, shown)
        check_parquet(path, bounds, shown)  # Parquet's encodings inflate past what the copy sees
        if inflated and path.suffix == ".gz":
            path = path.rename(path.with_suffix(""))
        yield path, shown


# --- runs, jobs, qrels --------------------------------------------------------------------------


@router.post("/runs", status_code=201)
def register_run(
    request: Request,
    file: Annotated[UploadFile, File(description="The run: TREC text (.gz too), CSV, TSV or Parquet.")],
    name: Annotated[str, Form(min_length=1, max_length=200)],
    description: Annotated[str | None, Form(max_length=DESCRIPTION_MAX)] = None,
    system: Annotated[str | None, Form(max_length=NAME_MAX)] = None,
    principal: Principal = needs("runs:register", write=True),
) -> dict[str, Any]:
    """Store a run outside any task (admins): as `evalstore runs register` does on the database."""
    check_run_name(name)
    with uploaded(file, request) as (path, shown):
        registered = tasks.register_run(
            server(request).engine, principal, path, name=name, shown_path=shown, description=description, system=system
        )
    return {
        "run": registered.summary.name,
        "rows": registered.summary.rows,
        "topics": registered.summary.topics,
        "warnings": list(registered.warnings),
    }


@router.get("/runs/{name}")
def show_run(name: str, request: Request, principal: Principal = needs("runs:read")) -> dict[str, Any]:
    return plain(tasks.show_submission(server(request).engine, principal, name))


@router.get("/runs/{name}/results")
def run_results(
    name: str,
    request: Request,
    per_query: bool = False,
    measure: list[str] = Query([]),
    principal: Principal = needs("runs:read"),
) -> dict[str, Any]:
    return plain(tasks.run_results(server(request).engine, principal, name, per_query=per_query, measures=measure))


@router.delete("/runs/{name}", status_code=204)
def withdraw_run(name: str, request: Request, principal: Principal = needs("runs:submit", write=True)) -> None:
    tasks.withdraw_run(server(request).engine, principal, name)


@router.get("/jobs")
def list_jobs(
    request: Request, state: list[str] = Query(["queued", "running"]), principal: Principal = needs("queue:read")
) -> list[dict[str, Any]]:
    return plain(tasks.queue(server(request).engine, principal, states=state))


@router.get("/jobs/{job_id}")
def show_job(job_id: RowId, request: Request, principal: Principal = needs("jobs:read")) -> dict[str, Any]:
    return plain(tasks.show_job(server(request).engine, principal, job_id))


@router.get("/qrels/{name}/export")
def export_qrels(name: str, request: Request, principal: Principal = needs("tasks:manage")) -> Response:
    _, table = tasks.export_qrels(server(request).engine, principal, name)
    out = io.BytesIO()
    write_qrels(table, out, "trec")
    return Response(
        out.getvalue(),
        media_type="text/plain; charset=utf-8",
        headers={"Content-Disposition": content_disposition(f"{name}.qrels")},
    )


# --- judging ------------------------------------------------------------------------------------


class Judgment(BaseModel):
    topic: str = Field(max_length=MAX_FIELD_BYTES)
    doc: str = Field(max_length=MAX_FIELD_BYTES)
    relevance: int = Field(ge=-1, le=9)


class Assessor(BaseModel):
    user: str


@router.get("/pools")
def list_pools(request: Request, principal: Principal = needs("pools:judge")) -> list[dict[str, Any]]:
    return plain(judging.assessor_pools(server(request).engine, principal))


@router.get("/pools/{name}/entries")
def pool_entries(
    name: str, request: Request, topic: str | None = None, principal: Principal = needs("pools:judge")
) -> list[dict[str, Any]]:
    return plain(judging.pool_entries(server(request).engine, principal, name, topic=topic))


@router.post("/pools/{name}/judgments")
def judge(
    name: str, body: list[Judgment], request: Request, principal: Principal = needs("pools:judge", write=True)
) -> dict[str, int]:
    count = judging.record_judgments(
        server(request).engine, principal, name, [(j.topic, j.doc, j.relevance) for j in body]
    )
    return {"recorded": count}


@router.post("/pools/{name}/assessors", status_code=204)
def assign(
    name: str, body: Assessor, request: Request, principal: Principal = needs("pools:manage", write=True)
) -> None:
    claims.check_pool(server(request).engine, principal, name)  # another organiser's pool: not found
    judging.assign_assessor(server(request).engine, name, body.user, by=principal)
