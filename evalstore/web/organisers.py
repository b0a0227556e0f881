"""The organiser's console: create a task (/new-task); on their own task (admins: every task) edit
its settings (confirmed first when accepted runs would have been refused), release it now or at a
set time (cancellable), export its qrels, follow every team's submissions (failed and cancelled
ones with the reason; retry, cancel), build a pool from its runs, attach what its assessors read,
assign assessors to it, and read its collection-health report; participants download its topics
file. Forms post with the session's CSRF token (an upload form's in its action too); a refused form
comes back with the message inline and the fields as they were typed."""

from __future__ import annotations

import io
import json
import re
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta, timezone
from typing import Annotated, Any, cast
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi import UploadFile as FastAPIUpload
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile

from evalstore.errors import ConflictError, EvalstoreError, InvalidParameterError, NotFoundError
from evalstore.io.writers import write_qrels
from evalstore.metrics.answers import ANSWER_MEASURES
from evalstore.services import organising, pools, tasks
from evalstore.services.access import Principal
from evalstore.times import utc_text
from evalstore.web.api import RowId, check_name, uploaded
from evalstore.web.auth import server
from evalstore.web.confirming import Confirmation, confirmation_page, confirmed
from evalstore.web.errors import status_for
from evalstore.web.headers import content_disposition
from evalstore.web.pages import form_principal, page_principal, render, see_other, worker_alive
from evalstore.web.wording import for_reader

router = APIRouter(include_in_schema=False)
SEED_MAX = 2**63 - 1  # a seed is a non-negative whole number (numpy's generators refuse a negative one)
_SETTINGS = (
    "opens",
    "opens_offset",
    "closes",
    "closes_offset",
    "max_runs_per_team",
    "daily_cap",
    "measures",
    "official_measure",
    "description",
)
_POOL = ("pool", "depth", "topics")


def _console_url(task: str) -> str:
    return f"/tasks/{quote(task, safe='')}/manage"


def _local(iso: str | None) -> str:
    """A stored UTC time as a datetime-local field's value (minutes; the page's script shows it in
    the reader's time zone)."""
    return iso[:16] if iso else ""


def _settings_form(task: dict[str, Any]) -> dict[str, str]:
    quota, cap = task["max_runs_per_team"], task["daily_cap"]
    return {
        "opens": _local(task["opens_at"]),
        "opens_offset": "",
        "closes": _local(task["closes_at"]),
        "closes_offset": "",
        "max_runs_per_team": "" if quota is None else str(quota),
        "daily_cap": "" if cap is None else str(cap),
        "measures": ", ".join(task["measures"]),
        "official_measure": task["official_measure"] or "",
        "description": task["description"] or "",
    }


async def _console_refused(
    request: Request,
    principal: Principal,
    task: str,
    error: EvalstoreError,
    at: str,
    said: str | None = None,
    **context: Any,
) -> HTMLResponse:
    """The console again, with ``error`` (or what the page ``said`` of it) in its reader's words
    above its ``at`` section."""
    return await run_in_threadpool(
        _console,
        request,
        principal,
        task,
        status_code=status_for(error),
        error=said or for_reader(error, principal),
        error_at=at,
        **context,
    )


def _console(
    request: Request,
    principal: Principal,
    task: str,
    *,
    status_code: int = 200,
    error: str | None = None,
    error_at: str | None = None,
    settings: dict[str, str] | None = None,
    pool_form: dict[str, str] | None = None,
    message: str | None = None,
) -> HTMLResponse:
    """The console page; ``error_at`` names the form whose error is shown (settings, pool, jobs,
    assign), so the message stands above the form it is about."""
    engine = server(request).engine
    shown = organising.managed(engine, principal, task).as_dict()
    runs = organising.submissions(engine, principal, task)
    waiting = any(r["state"] in ("queued", "running") for r in runs)
    return render(
        request,
        "manage.html",
        principal,
        status_code=status_code,
        task=shown,
        runs=runs,
        error=error,
        error_at=error_at,
        message=message,
        settings=settings or _settings_form(shown),
        pool_form=pool_form or {"pool": "pool", "depth": "100", "topics": ""},
        pools=organising.task_pools(engine, principal, task),
        pool_texts=organising.pool_texts(engine, principal, task),
        text_sets=organising.text_sets(engine, principal),
        assigned=organising.assigned_assessors(engine, principal, task),
        assessors=organising.assessors(engine, principal, task),
        computed=tasks.computed_measures(engine, task),
        server_daily_cap=server(request).settings.runs_per_day,
        no_worker=waiting and not worker_alive(request),
        no_worker_for_release=bool(shown["release_at"]) and not worker_alive(request),
    )


@router.get("/tasks/{task}/manage")
def console(request: Request, task: str) -> HTMLResponse:
    principal = page_principal(request, "tasks:manage")
    return _console(request, principal, task)


def _when(text: str, offset: str, field: str) -> datetime | None:
    """A datetime-local field's value: with its own offset if it has one ("...T12:00+01:00"),
    else at ``offset`` (minutes east of UTC, which the page's script sends: the reader's time
    zone at that moment), else UTC (a browser without the script shows and sends UTC)."""
    if not text.strip():
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidParameterError(
            f"{field}: give a date and time as YYYY-MM-DDTHH:MM (your time zone; UTC without the page's "
            f"script), or with its offset (2026-12-01T12:00+01:00); got '{text}'."
        ) from None
    if value.tzinfo:
        return value
    if offset.strip().isascii() and offset.strip().lstrip("-").isdigit() and abs(int(offset)) <= 18 * 60:
        return value.replace(tzinfo=timezone(timedelta(minutes=int(offset))))
    return value.replace(tzinfo=UTC)


def _runs(text: str, what: str, empty: str) -> int | None:
    if not text.strip():
        return None
    if not (text.strip().isascii() and text.strip().isdigit()):
        raise InvalidParameterError(f"{what} is a whole number of runs (empty: {empty}); got '{text}'.")
    return int(text)


@router.post("/tasks/{task}/settings")
async def edit_settings(request: Request, task: str) -> Response:
    principal, form = await form_principal(request, "tasks:manage")
    kept = {k: str(form.get(k, "")) for k in _SETTINGS}
    try:
        await run_in_threadpool(organising.managed, server(request).engine, principal, task)
        measures = [m.strip() for m in re.split(r"[,\s]+", kept["measures"]) if m.strip()]
        window: dict[str, Any] = {
            "opens": _when(kept["opens"], kept["opens_offset"], "Opens"),
            "closes": _when(kept["closes"], kept["closes_offset"], "Closes"),
            "max_runs_per_team": _runs(kept["max_runs_per_team"], "The quota per team", "no limit"),
            "daily_cap": _runs(kept["daily_cap"], "The runs per team per day", "the server's limit"),
        }
        settings = tasks.TaskSettings(
            **window,
            measures=measures,
            description=kept["description"].strip() or None,
            official_measure=kept["official_measure"].strip() or None,
        )
        if not confirmed(form):  # runs already accepted that these settings would refuse: asked first
            conflicts = await run_in_threadpool(tasks.settings_conflicts, server(request).engine, task, **window)
            if conflicts:
                # checked before asking: a refused value never reaches the question
                await run_in_threadpool(tasks.check_settings, server(request).engine, task, settings)
                return confirmation_page(request, principal, _settings_question(task, conflicts, kept))
        await run_in_threadpool(tasks.update_task, server(request).engine, task, settings, by=principal)
    except EvalstoreError as error:  # the form comes back as typed, with the message above it
        if status_for(error) not in (400, 422):
            raise
        return await _console_refused(request, principal, task, error, "settings", settings=kept)
    return see_other(_console_url(task) + "?saved=settings#settings")


def _settings_question(task: str, conflicts: list[tasks.SettingsConflict], kept: dict[str, str]) -> Confirmation:
    return Confirmation(
        heading=f"Save these settings of {task}?",
        consequences=[c.message for c in conflicts]
        + ["Runs already accepted are never refused afterwards; the new settings apply to new submissions."],
        button="Save the settings",
        back=_console_url(task) + "#settings",
        fields=kept,
    )


@router.post("/tasks/{task}/release")
async def release(request: Request, task: str) -> Response:
    principal, form = await form_principal(request, "tasks:manage")
    if not confirmed(form):
        shown = await run_in_threadpool(organising.managed, server(request).engine, principal, task)
        return confirmation_page(request, principal, _release_question(shown.as_dict()))
    await run_in_threadpool(tasks.release_task, server(request).engine, task, by=principal)
    return see_other(_console_url(task))


def _release_question(task: dict[str, Any]) -> Confirmation:
    name = task["name"]
    if task["released_at"]:
        said = [f"Task {name} is already released; releasing it again changes nothing."]
    else:
        said = [f"Everyone who may see task {name} sees its scores from then on."]
        if task["private_topics"]:
            said.append(
                f"The final ranking on its {task['private_topics']} private topics is shown to every participant."
            )
        said.append("This cannot be undone: a released task cannot be hidden again.")
    return Confirmation(
        heading=f"Release the scores of {name}?",
        consequences=said,
        button="Release the scores",
        back=_console_url(name),
    )


@router.get("/tasks/{task}/qrels")
def export_qrels(request: Request, task: str) -> Response:
    """The task's qrels as a TREC qrels file (a download)."""
    principal = page_principal(request, "tasks:manage")
    engine = server(request).engine
    shown = organising.managed(engine, principal, task)
    if shown.qrels is None:
        raise NotFoundError(f"Task '{task}' takes generated answers: it has no qrels to download.")
    _, table = tasks.export_qrels(engine, principal, shown.qrels)
    out = io.BytesIO()
    write_qrels(table, out, "trec")
    return Response(
        out.getvalue(),
        media_type="text/plain; charset=utf-8",
        headers={"Content-Disposition": content_disposition(f"{task}.qrels")},
    )


@router.post("/tasks/{task}/jobs/{job}/retry")
async def retry(request: Request, task: str, job: RowId) -> Response:
    principal, _ = await form_principal(request, "tasks:manage")
    try:
        await run_in_threadpool(organising.retry_job, server(request).engine, principal, task, job)
    except EvalstoreError as error:
        if status_for(error) != 409:
            raise
        return await _console_refused(request, principal, task, error, "jobs")
    return see_other(_console_url(task) + "#submissions")


@router.post("/tasks/{task}/jobs/{job}/cancel")
async def cancel(request: Request, task: str, job: RowId) -> Response:
    principal, form = await form_principal(request, "tasks:manage")
    try:
        if not confirmed(form):
            asked = await run_in_threadpool(_cancel_question, request, principal, task, job)
            return confirmation_page(request, principal, asked)
        await run_in_threadpool(organising.cancel_job, server(request).engine, principal, task, job)
    except EvalstoreError as error:
        if status_for(error) != 409:
            raise
        return await _console_refused(request, principal, task, error, "jobs")
    return see_other(_console_url(task) + "#submissions")


def _cancel_question(request: Request, principal: Principal, task: str, job: int) -> Confirmation:
    """What cancelling the job does; refused as the cancel itself would be (not the task's job,
    or no longer queued or running) before anything is asked."""
    runs = organising.submissions(server(request).engine, principal, task)
    run = next((r for r in runs if r["job"] == job), None)
    if run is None:
        raise NotFoundError(f"No job {job} among the submissions of task '{task}'.")
    if run["state"] not in ("queued", "running"):
        raise ConflictError(f"Job {job} is already {run['state']}; only queued or running jobs can be cancelled.")
    return Confirmation(
        heading=f"Cancel the evaluation of {run['run']}?",
        consequences=[
            f"The {run['state']} evaluation of run {run['run']} (team {run['team']}) stops and is not scored.",
            f"Team {run['team']}'s place in the quota is free again; you can retry the evaluation later.",
        ],
        button=f"Cancel the evaluation of {run['run']}",
        back=_console_url(task) + "#submissions",
    )


@router.post("/tasks/{task}/pools")
async def build_pool(request: Request, task: str) -> Response:
    principal, form = await form_principal(request, "tasks:manage")
    kept = {k: str(form.get(k, "")).strip() for k in _POOL}
    try:
        await run_in_threadpool(organising.managed, server(request).engine, principal, task)
        check_name(kept["pool"], "pool")
        if not (kept["depth"].isascii() and kept["depth"].isdigit()):
            raise InvalidParameterError(f"The depth is a whole number of documents per run; got '{kept['depth']}'.")
        topics = [t for t in re.split(r"[,\s]+", kept["topics"]) if t]
        await run_in_threadpool(
            organising.build_task_pool,
            server(request).engine,
            principal,
            task,
            name=kept["pool"],
            depth=int(kept["depth"]),
            topics=topics or None,
        )
    except EvalstoreError as error:
        if status_for(error) not in (400, 409, 422):
            raise
        said = None
        if isinstance(error, pools.PoolNameTaken):
            said = f"This task has a pool named '{error.name}' already; choose another name."
        return await _console_refused(request, principal, task, error, "pool", said, pool_form=kept)
    return see_other(_console_url(task) + "#pools")


@router.post("/tasks/{task}/pools/{pool}/assessors")
async def assign(request: Request, task: str, pool: str) -> Response:
    principal, form = await form_principal(request, "tasks:manage")
    try:
        await run_in_threadpool(
            organising.assign_assessor, server(request).engine, principal, task, pool, str(form.get("user", ""))
        )
    except InvalidParameterError as error:
        return await _console_refused(request, principal, task, error, "assign")
    return see_other(_console_url(task) + "#pools")


@router.get("/tasks/{task}/health")
def health_page(
    request: Request, task: str, seed: Annotated[int | None, Query(ge=0, le=SEED_MAX)] = None
) -> HTMLResponse:
    """The collection-health report of the task's qrels (`evalstore health`), as a worker stored it
    after the task's evaluations finished: never computed here (a GET writes nothing)."""
    principal = page_principal(request, "tasks:manage")
    engine = server(request).engine
    shown = organising.managed(engine, principal, task).as_dict()
    try:
        stored, error = organising.task_health(engine, principal, task), None
    except EvalstoreError as failed:  # e.g. fewer than two runs evaluated yet: said on the page
        if status_for(failed) not in (400, 422):
            raise
        stored, error = None, for_reader(failed, principal)
    if stored is not None and stored.error is not None and stored.current:
        error = stored.error  # the runs as they are give no report: why, as the worker found it
    return render(
        request,
        "health.html",
        principal,
        task=shown,
        stored=stored,
        report=stored.report if stored is not None else None,
        error=error,
        seed=seed,
    )


# --- a new task ----------------------------------------------------------------------------------

_NEW_TASK = (
    "name",
    "owner",
    "qrels",
    "nuggets",
    "visibility",
    "private_fraction",
    "split_seed",
    "opens",
    "opens_offset",
    "closes",
    "closes_offset",
    "max_runs_per_team",
    "daily_cap",
    "more_measures",
    "official_measure",
    "description",
)


def _new_task_page(
    request: Request,
    principal: Principal,
    *,
    status_code: int = 200,
    error: str | None = None,
    form: dict[str, str] | None = None,
    picked: list[str] | None = None,
) -> HTMLResponse:
    engine = server(request).engine
    return render(
        request,
        "new_task.html",
        principal,
        status_code=status_code,
        error=error,
        form=form or {"visibility": "hidden", "official_measure": ""},
        picked=picked if picked is not None else list(tasks.LEADERBOARD_MEASURES[:2]),
        choices=tasks.measure_choices("relevance"),
        answer_choices=list(ANSWER_MEASURES),
        qrels=organising.qrels_choices(engine, principal),
        banks=organising.bank_choices(engine, principal),
        owners=organising.owner_choices(engine, principal),
        server_daily_cap=server(request).settings.runs_per_day,
    )


@router.get("/new-task")
def new_task_form(request: Request) -> HTMLResponse:
    """The form that creates a task (`evalstore tasks create`)."""
    principal = page_principal(request, "tasks:manage")
    return _new_task_page(request, principal)


def _fraction(text: str) -> float | None:
    if not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        raise InvalidParameterError(
            f"The private share is a fraction of the topics, e.g. 0.5 (empty: no private topics); got '{text}'."
        ) from None


def _seed(text: str) -> int | None:
    if not text.strip():
        return None
    if not (text.strip().isascii() and text.strip().isdigit()) or int(text) > SEED_MAX:
        raise InvalidParameterError(f"The seed is a whole number from 0 to {SEED_MAX} (empty: drawn); got '{text}'.")
    return int(text)


@router.post("/new-task")
async def create_task(request: Request) -> Response:
    principal, form = await form_principal(request, "tasks:manage")
    kept = {k: str(form.get(k, "")) for k in _NEW_TASK}
    # the ranked runs' measures or the answers', as the task is over qrels or a nugget bank
    answers = bool(kept["nuggets"].strip())
    picked = [str(m) for m in form.getlist("answer_measure" if answers else "measure")]
    upload = form.get("topics_file")
    try:
        name = kept["name"].strip()
        check_name(name, "task")
        measures = picked + [m.strip() for m in re.split(r"[,\s]+", kept["more_measures"]) if m.strip()]
        settings = {
            "owner": kept["owner"].strip() or None,
            "qrels": kept["qrels"].strip() or None,
            "nuggets": kept["nuggets"].strip() or None,
            "hidden": kept["visibility"] != "public",
            "private_fraction": _fraction(kept["private_fraction"]),
            "split_seed": _seed(kept["split_seed"]),
            "opens": _when(kept["opens"], kept["opens_offset"], "Opens"),
            "closes": _when(kept["closes"], kept["closes_offset"], "Closes"),
            "max_runs_per_team": _runs(kept["max_runs_per_team"], "The quota per team", "no limit"),
            "daily_cap": _runs(kept["daily_cap"], "The runs per team per day", "the server's limit"),
            "measures": list(dict.fromkeys(measures)),
            "official_measure": kept["official_measure"].strip() or None,
            "description": kept["description"].strip() or None,
        }
        file = upload if isinstance(upload, UploadFile) and upload.filename else None
        await run_in_threadpool(_create_task, request, principal, name, settings, file)
    except EvalstoreError as error:  # the form comes back as typed, with the message above it
        if status_for(error) not in (400, 409, 413, 422):
            raise
        return await run_in_threadpool(
            _new_task_page,
            request,
            principal,
            status_code=status_for(error),
            error=for_reader(error, principal),
            form=kept,
            picked=picked,
        )
    finally:
        await form.close()
    return see_other(_console_url(name) + "?created=1")


def _create_task(
    request: Request, principal: Principal, name: str, settings: dict[str, Any], upload: UploadFile | None
) -> None:
    engine = server(request).engine
    if upload is None:
        organising.create_console_task(engine, principal, name, **settings)
        return
    with uploaded(cast(FastAPIUpload, upload), request) as (path, shown):
        organising.create_console_task(engine, principal, name, **settings, topics_file=path, topics_shown=shown)


@router.get("/tasks/{task}/topics")
def download_topics(request: Request, task: str) -> Response:
    """The task's topics file (JSON lines: topic, title, description, narrative), a download: JSON
    strings carry no markup a browser would run, and the file is never shown inline."""
    principal = page_principal(request, "tasks:read")
    name, statements = tasks.task_topics(server(request).engine, principal, task)
    lines = (
        json.dumps(
            {"topic": t.topic, "title": t.title, "description": t.description, "narrative": t.narrative},
            ensure_ascii=True,  # every character outside ASCII escaped: nothing a sniffer reads as HTML
        )
        for t in statements
    )
    return Response(
        ("\n".join(lines) + "\n").encode(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": content_disposition(f"{name}-topics.jsonl")},
    )


@router.post("/tasks/{task}/topics")
async def upload_topics(request: Request, task: str) -> Response:
    """A new topics file for the task (the one participants download)."""
    principal, form = await form_principal(request, "tasks:manage")
    upload = form.get("topics_file")
    try:
        await run_in_threadpool(organising.managed, server(request).engine, principal, task)
        if not isinstance(upload, UploadFile) or not upload.filename:
            raise InvalidParameterError("Choose the topics file to upload.")
        await run_in_threadpool(_replace_topics, request, principal, task, upload)
    except EvalstoreError as error:
        if status_for(error) not in (400, 413, 422):
            raise
        return await _console_refused(request, principal, task, error, "topics")
    finally:
        await form.close()
    return see_other(_console_url(task) + "?saved=topics#topics-file")


def _replace_topics(request: Request, principal: Principal, task: str, upload: UploadFile) -> None:
    with uploaded(cast(FastAPIUpload, upload), request) as (path, shown):
        organising.replace_topics(server(request).engine, principal, task, organising.TextFile(path, shown))


# --- a scheduled release ---------------------------------------------------------------------------


@router.post("/tasks/{task}/release/schedule")
async def schedule_release(request: Request, task: str) -> Response:
    principal, form = await form_principal(request, "tasks:manage")
    kept = {"release_at": str(form.get("release_at", "")), "release_at_offset": str(form.get("release_at_offset", ""))}
    try:
        shown = await run_in_threadpool(organising.managed, server(request).engine, principal, task)
        at = _when(kept["release_at"], kept["release_at_offset"], "Release at")
        if at is None:
            raise InvalidParameterError("Give the date and time the scores are released at.")
        if not confirmed(form):
            return confirmation_page(request, principal, _schedule_question(shown.as_dict(), at, kept))
        await run_in_threadpool(tasks.schedule_release, server(request).engine, task, at, by=principal)
    except EvalstoreError as error:
        if status_for(error) not in (400, 409, 422):
            raise
        return await _console_refused(request, principal, task, error, "release")
    return see_other(_console_url(task) + "#release-h")


def _schedule_question(task: dict[str, Any], at: datetime, kept: dict[str, str]) -> Confirmation:
    name = task["name"]
    said = [
        f"At {utc_text(at)} everyone who may see task {name} sees its scores "
        "(an evaluation worker performs the release then)."
    ]
    if task["private_topics"]:
        said.append(
            f"The final ranking on its {task['private_topics']} private topics is then shown to every participant."
        )
    said.append("Until then you can cancel the scheduled release from the console; after it, it cannot be undone.")
    return Confirmation(
        heading=f"Release the scores of {name} at a set time?",
        consequences=said,
        button="Schedule the release",
        back=_console_url(name) + "#release-h",
        fields=kept,
    )


@router.post("/tasks/{task}/release/cancel")
async def cancel_release(request: Request, task: str) -> Response:
    principal, form = await form_principal(request, "tasks:manage")
    try:
        shown = (await run_in_threadpool(organising.managed, server(request).engine, principal, task)).as_dict()
        if shown["release_at"] is None:
            raise ConflictError(f"Task '{task}' has no scheduled release to cancel.")
        at = utc_text(datetime.fromisoformat(shown["release_at"]))
        if not confirmed(form):
            asked = Confirmation(
                heading=f"Cancel the scheduled release of {task}?",
                consequences=[
                    f"The scores stay hidden after {at}, until you release them or schedule another release."
                ],
                button="Cancel the scheduled release",
                back=_console_url(task) + "#release-h",
            )
            return confirmation_page(request, principal, asked)
        await run_in_threadpool(tasks.cancel_scheduled_release, server(request).engine, task, by=principal)
    except EvalstoreError as error:
        if status_for(error) != 409:
            raise
        return await _console_refused(request, principal, task, error, "release")
    return see_other(_console_url(task) + "#release-h")


# --- a pool's texts ---------------------------------------------------------------------------------


@router.post("/tasks/{task}/pools/{pool}/texts")
async def attach_texts(request: Request, task: str, pool: str) -> Response:
    principal, form = await form_principal(request, "tasks:manage")
    try:
        await run_in_threadpool(_attach_texts, request, principal, task, pool, form)
    except EvalstoreError as error:
        if status_for(error) not in (400, 409, 413, 422):
            raise
        return await _console_refused(request, principal, task, error, "texts")
    finally:
        await form.close()
    return see_other(_console_url(task) + "?saved=texts#pools")


def _attach_texts(request: Request, principal: Principal, task: str, pool: str, form: FormData) -> None:
    files = {}
    with ExitStack() as stack:
        for field in ("topics_file", "documents_file"):
            upload = form.get(field)
            if isinstance(upload, UploadFile) and upload.filename:
                path, shown = stack.enter_context(uploaded(cast(FastAPIUpload, upload), request))
                files[field] = organising.TextFile(path, shown)
        organising.attach_pool_texts(
            server(request).engine,
            principal,
            task,
            pool,
            topic_set=str(form.get("topic_set", "")).strip() or None,
            collection=str(form.get("collection", "")).strip() or None,
            topics_file=files.get("topics_file"),
            documents_file=files.get("documents_file"),
        )


def install(app: FastAPI) -> None:
    app.include_router(router)
