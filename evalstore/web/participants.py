"""The participant's pages: submit a run to a task in the browser and follow the team's runs
(state, queue position, the quota used, withdraw); and everyone's profile page (their own API
tokens, their password). Forms post with the session's CSRF token, as every page form does."""

from __future__ import annotations

import math
from typing import Annotated, Any, cast
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi import UploadFile as FastAPIUpload
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from evalstore.errors import AuthenticationError, EvalstoreError, InvalidParameterError, NotFoundError
from evalstore.services import access, people, tasks
from evalstore.services.access import Principal
from evalstore.web import shown_once
from evalstore.web.api import DESCRIPTION_MAX, NAME_MAX, RowId, answer_limits, check_run_name
from evalstore.web.api import uploaded as uploaded_file
from evalstore.web.auth import check_password, server
from evalstore.web.confirming import Confirmation, confirmation_page, confirmed
from evalstore.web.errors import status_for
from evalstore.web.pages import form_principal, page_principal, render, see_other, worker_alive
from evalstore.web.wording import for_reader

router = APIRouter(include_in_schema=False)


def _your_runs(request: Request, principal: Principal, task: str) -> dict[str, Any]:
    """The caller's runs on the task (the organiser: every team's), each with its job's queue
    position, and the quota the caller's team has used."""
    engine = server(request).engine
    shown = tasks.show_task(engine, task)
    runs = [tasks.submission_state(engine, principal, run) for run in tasks.task_runs(engine, principal, task)]
    used = tasks.quota_used(engine, principal, task)  # withdrawn runs whose scores were seen too: they keep their slot
    daily_cap, used_today = tasks.day_used(engine, principal, task, server(request).settings.runs_per_day)
    waiting = any(r["state"] in ("queued", "running") for r in runs)
    return {
        "task": shown.as_dict(),
        "runs": runs,
        "used": used,
        "quota": shown.max_runs_per_team,
        "daily_cap": daily_cap,
        "used_today": used_today,
        "team": principal.team,
        "no_worker": waiting and not worker_alive(request),
    }


def _submit_page(
    request: Request,
    principal: Principal,
    task: str,
    *,
    status_code: int = 200,
    error: str | None = None,
    form: dict[str, str] | None = None,
    warning: str | None = None,
    submitted: str | None = None,
) -> HTMLResponse:
    return render(
        request,
        "submit.html",
        principal,
        status_code=status_code,
        error=error,
        warning=warning,
        submitted=submitted,
        form=form or {"name": "", "run_type": "automatic", "description": ""},
        run_types=tasks.RUN_TYPES,
        **_your_runs(request, principal, task),
    )


@router.get("/tasks/{task}/submit")
def submit_form(
    request: Request, task: str, submitted: Annotated[str | None, Query(max_length=NAME_MAX)] = None
) -> HTMLResponse:
    principal = page_principal(request, "runs:read")
    warning = None
    if submitted:  # a run of the caller's just stored: its warning, read again (never from the URL)
        try:
            shared = server(request)
            warning = tasks.submission_warning(shared.engine, principal, submitted, context=shared.context)
        except EvalstoreError:  # not theirs, or withdrawn since: no warning to say
            warning = None
    return _submit_page(request, principal, task, warning=warning, submitted=submitted if warning else None)


@router.post("/tasks/{task}/submit")
async def submit(request: Request, task: str) -> Response:
    principal, form = await form_principal(request, "runs:submit")
    kept = {
        "name": str(form.get("name", "")).strip(),
        "run_type": str(form.get("run_type", "automatic")),
        "description": str(form.get("description", "")).strip(),
    }
    upload = form.get("file")
    try:
        if not isinstance(upload, UploadFile) or not upload.filename:
            raise InvalidParameterError("Choose a run file to upload.")
        await run_in_threadpool(_store_submission, request, principal, task, upload, kept)
    except EvalstoreError as error:  # the form comes back as it was, with the message above it
        return await run_in_threadpool(
            _submit_page,
            request,
            principal,
            task,
            status_code=status_for(error),
            error=for_reader(error, principal),
            form=kept,
        )
    finally:
        await form.close()
    # the page after the upload names the run, and says its topic-coverage warning if it has one
    return see_other(f"/tasks/{quote(task, safe='')}/submit?submitted={quote(kept['name'], safe='')}")


def _store_submission(
    request: Request, principal: Principal, task: str, upload: UploadFile, kept: dict[str, str]
) -> None:
    """The form's run, under the same bounds as the API's submission (name, description, the day's
    cap, the upload's inflated size, lines and fields), stored as the API stores it."""
    if not kept["name"]:
        raise InvalidParameterError("Give the run a name.")
    check_run_name(kept["name"])
    if len(kept["description"]) > DESCRIPTION_MAX:
        raise InvalidParameterError(
            f"A description is at most {DESCRIPTION_MAX} characters; this one has {len(kept['description'])}."
        )
    shared = server(request)
    if tasks.show_task(shared.engine, task).takes_answers:
        limits = answer_limits(shared.settings.max_inflated_bytes)
        with uploaded_file(cast(FastAPIUpload, upload), request, limits.bounds()) as (path, shown):
            tasks.submit_answers(
                shared.engine,
                principal,
                task,
                path,
                name=kept["name"],
                shown_path=shown,
                run_type=kept["run_type"],
                description=kept["description"] or None,
                server_daily_cap=shared.settings.runs_per_day,
                limits=limits,
            )
        return
    # it reads .filename and .file only, which Starlette's upload has as FastAPI's does
    with uploaded_file(cast(FastAPIUpload, upload), request) as (path, shown):
        tasks.submit_run(
            shared.engine,
            principal,
            task,
            path,
            name=kept["name"],
            shown_path=shown,
            run_type=kept["run_type"],
            description=kept["description"] or None,
            server_daily_cap=shared.settings.runs_per_day,
            context=shared.context,
        )


@router.post("/runs/{run}/withdraw")
async def withdraw(request: Request, run: str) -> Response:
    principal, form = await form_principal(request, "runs:submit")
    task = str(form.get("task", ""))
    back = f"/tasks/{quote(task, safe='')}/submit" if task else "/"
    if not confirmed(form):  # the run must be the caller's to withdraw before it is asked about
        shown = await run_in_threadpool(tasks.show_submission, server(request).engine, principal, run)
        kept = await run_in_threadpool(tasks.withdrawal_keeps_slot, server(request).engine, principal, run)
        return confirmation_page(
            request,
            principal,
            Confirmation(
                heading=f"Withdraw run {run}?",
                consequences=[
                    f"Run {run} of team {shown['team']} is deleted from task {shown['task']}, "
                    "with its evaluation and scores. This cannot be undone.",
                    f"It keeps its place in team {shown['team']}'s quota: it was evaluated and its scores "
                    "could be read."
                    if kept
                    else f"Its place in team {shown['team']}'s quota is free again.",
                ],
                button=f"Withdraw {run}",
                back=back,
                fields={"task": task},
            ),
        )
    await run_in_threadpool(tasks.withdraw_run, server(request).engine, principal, run)
    return see_other(back)


# --- the profile ------------------------------------------------------------------------------------


def _profile(
    request: Request,
    principal: Principal,
    *,
    status_code: int = 200,
    error: str | None = None,
    new_token: str | None = None,
    message: str | None = None,
) -> HTMLResponse:
    tokens = access.list_tokens(server(request).engine, principal.name)
    return render(
        request,
        "profile.html",
        principal,
        status_code=status_code,
        tokens=tokens,
        team_tokens=people.team_tokens(server(request).engine, principal),
        error=error,
        new_token=new_token,
        message=message,
    )


@router.get("/profile")
def profile(request: Request) -> HTMLResponse:
    principal = page_principal(request, "tasks:read")
    response = _profile(request, principal, new_token=shown_once.read(request))
    shown_once.take(request, response, "/profile")
    return response


@router.post("/profile/tokens")
async def create_token(request: Request) -> Response:
    principal, form = await form_principal(request, "tokens:manage")
    try:
        days = float(str(form.get("expires_days", "30")))
        longest = server(request).settings.max_token_days  # never-expiring ones only from the admin CLI
        if not (math.isfinite(days) and 0 < days <= longest):
            raise InvalidParameterError(f"A token lives from 1 to {longest:g} days; got {form.get('expires_days')}.")
        server(request).mints.take(f"user:{principal.user_id}")
        issued = await run_in_threadpool(
            access.create_token, server(request).engine, str(principal.name), expires_days=days, by=principal.name
        )
    except (ValueError, EvalstoreError) as error:
        message = (
            for_reader(error, principal) if isinstance(error, EvalstoreError) else "Give the days as a number, e.g. 30."
        )
        return await run_in_threadpool(_profile, request, principal, status_code=400, error=message)
    # shown once, by the page this redirects to (a reload there makes no second token)
    response: Response = see_other("/profile")
    if not shown_once.keep(request, response, issued.token, "/profile"):  # a script's bearer token
        response = await run_in_threadpool(_profile, request, principal, new_token=issued.token)
    return response


@router.post("/profile/tokens/{token_id}/revoke")
async def revoke_token(request: Request, token_id: RowId) -> Response:
    principal, form = await form_principal(request, "tokens:manage")
    if not confirmed(form):
        engine = server(request).engine
        owned = await run_in_threadpool(access.list_tokens, engine, principal.name)
        teams = await run_in_threadpool(people.team_tokens, engine, principal)
        token = next((t for t in [*owned, *teams] if t.id == token_id), None)
        if token is None:
            raise NotFoundError(f"No token {token_id} of yours; your profile lists your tokens.")
        whose = "" if token.user == principal.name else f" (of {token.user}, team {principal.team})"
        return confirmation_page(
            request,
            principal,
            Confirmation(
                heading=f"Revoke token {token_id}{whose}?",
                consequences=[
                    f"Token {token_id} stops working at once: every script that uses it is refused from then on. "
                    "This cannot be undone; you can create a new token afterwards."
                ],
                button=f"Revoke token {token_id}",
                back="/profile",
            ),
        )
    await run_in_threadpool(access.revoke_token, server(request).engine, token_id, by=principal)
    return see_other("/profile")


@router.post("/profile/password")
async def change_password(request: Request) -> Response:
    principal, form = await form_principal(request, "tasks:read")
    shared = server(request)
    engine = shared.engine
    current, new = str(form.get("current", "")), str(form.get("new", ""))
    try:  # proves who asks, behind the sign-in's back-off (a stolen session must not guess it freely)
        await run_in_threadpool(check_password, shared, request, str(principal.name), current)
    except AuthenticationError:
        return await run_in_threadpool(
            _profile, request, principal, status_code=400, error="The current password is wrong; nothing was changed."
        )
    if new != str(form.get("again", "")):
        return await run_in_threadpool(
            _profile, request, principal, status_code=400, error="The two new passwords differ; nothing was changed."
        )
    try:
        await run_in_threadpool(
            access.set_password, engine, str(principal.name), new, by=principal.name, context=shared.context
        )
    except EvalstoreError as error:
        return await run_in_threadpool(
            _profile, request, principal, status_code=400, error=for_reader(error, principal)
        )
    # every session ended with the change, this one too: sign in again with the new password
    return see_other("/login?next=/profile")


def install(app: FastAPI) -> None:
    app.include_router(router)
