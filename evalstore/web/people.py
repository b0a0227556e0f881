"""People in the browser: the admin's page of users, teams, invites and reset links; the invite's
page (choose a name and password, and be signed in); the reset link's page (choose a new password).

The admin's forms post with the session's CSRF token, as every page form does; the invite's and
reset's forms have no session yet and carry a form token of their own (double submit, as the
sign-in form). A link's secret shows once, on the page the admin's post redirects to
(:mod:`evalstore.web.shown_once`). A wrong or unknown link counts against the client address as a
failed sign-in does, and a post is counted against the address's rate."""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, FastAPI, Path, Query, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from evalstore.db.models import ROLES
from evalstore.errors import AccessDenied, EvalstoreError, NotFoundError
from evalstore.services import access, people
from evalstore.services.access import ANONYMOUS, Principal
from evalstore.web import shown_once
from evalstore.web.api import RowId
from evalstore.web.auth import SESSION_COOKIE, Server, client_address, server
from evalstore.web.confirming import Confirmation, confirmation_page, confirmed
from evalstore.web.errors import status_for
from evalstore.web.limits import WriteRate
from evalstore.web.pages import form_principal, page_principal, render, see_other
from evalstore.web.settings import ServerSettings
from evalstore.web.wording import for_reader

router = APIRouter(include_in_schema=False)
PAGE = "/people"
FORM_COOKIE = "evalstore_link_form"  # the invite's and reset's form token (double submit): no session yet
# the back-off's account for wrong links: no user name holds a NUL, so it is no user's
LINK_ACCOUNT = "\x00links"
Code = Annotated[str, Path(max_length=people.CODE_MAX)]
UserName = Annotated[str, Path(max_length=access.NAME_MAX)]


# --- the admin's page -------------------------------------------------------------------------------


def _people_page(
    request: Request,
    principal: Principal,
    *,
    status_code: int = 200,
    error: str | None = None,
    shown: str | None = None,
    form: dict[str, str] | None = None,
) -> HTMLResponse:
    engine = server(request).engine
    settings = server(request).context.settings
    return render(
        request,
        "people.html",
        principal,
        status_code=status_code,
        error=error,
        shown=shown,
        link=str(request.base_url).rstrip("/") + shown if shown else None,
        users=access.list_users(engine),
        teams=people.list_teams(engine),
        links=people.list_links(engine),
        requests=people.list_requests(engine),
        open_sign_up=server(request).settings.open_sign_up,
        roles=ROLES,
        form=form or {"role": "participant", "team": ""},
        invite_days=settings.invite_days,
        reset_hours=settings.reset_hours,
    )


@router.get(PAGE)
def people_page(request: Request) -> HTMLResponse:
    principal = page_principal(request, "users:manage")
    response = _people_page(request, principal, shown=shown_once.read(request))
    shown_once.take(request, response, PAGE)
    return response


async def _show_link(request: Request, principal: Principal, issued: people.IssuedLink) -> Response:
    """To the people page, which shows the link once (a reload makes no second link)."""
    response: Response = see_other(PAGE)
    if not shown_once.keep(request, response, issued.path, PAGE):  # a script's bearer token
        response = await run_in_threadpool(_people_page, request, principal, shown=issued.path)
    return response


@router.post(f"{PAGE}/invites")
async def create_invite(request: Request) -> Response:
    principal, form = await form_principal(request, "users:manage")
    kept = {"role": str(form.get("role", "")), "team": str(form.get("team", ""))[:200]}
    shared = server(request)
    # counted against the admin's write rate (form_principal), not the token mints: a class is invited at once
    try:
        issued = await run_in_threadpool(
            people.create_invite,
            shared.engine,
            role=kept["role"],
            team=kept["team"],
            by=principal.name,
            days=shared.context.settings.invite_days,
        )
    except EvalstoreError as error:
        return await run_in_threadpool(
            _people_page,
            request,
            principal,
            status_code=status_for(error),
            error=for_reader(error, principal),
            form=kept,
        )
    return await _show_link(request, principal, issued)


@router.post(PAGE + "/users/{name}/reset-link")
async def create_reset_link(request: Request, name: UserName) -> Response:
    principal, _ = await form_principal(request, "users:manage")
    shared = server(request)
    issued = await run_in_threadpool(
        people.create_reset_link, shared.engine, name, by=principal.name, hours=shared.context.settings.reset_hours
    )
    return await _show_link(request, principal, issued)


@router.post(PAGE + "/users/{name}/team")
async def set_team(request: Request, name: UserName) -> Response:
    principal, form = await form_principal(request, "users:manage")
    try:
        await run_in_threadpool(
            people.set_team, server(request).engine, name, str(form.get("team", ""))[:200], by=principal.name
        )
    except EvalstoreError as error:
        return await run_in_threadpool(
            _people_page, request, principal, status_code=status_for(error), error=for_reader(error, principal)
        )
    return see_other(PAGE)


@router.post(PAGE + "/links/{link_id}/revoke")
async def revoke_link(request: Request, link_id: RowId) -> Response:
    principal, form = await form_principal(request, "users:manage")
    engine = server(request).engine
    if not confirmed(form):
        links = await run_in_threadpool(people.list_links, engine, link_id=link_id)
        link = links[0] if links else None
        if link is None:
            raise NotFoundError(f"No link {link_id}; the people page lists the links.")
        what = (
            f"invite {link_id} ({link.role}{', team ' + link.team if link.team else ''})"
            if link.kind == "invite"
            else f"password-reset link {link_id} of {link.user}"
        )
        return confirmation_page(
            request,
            principal,
            Confirmation(
                heading=f"Revoke {what}?",
                consequences=[
                    "The link stops working at once: whoever opens it is told it was revoked. "
                    "This cannot be undone; you can make a new link afterwards."
                ],
                button=f"Revoke link {link_id}",
                back=PAGE,
            ),
        )
    await run_in_threadpool(people.revoke_link, engine, link_id, by=principal.name)
    return see_other(PAGE)


@router.post(PAGE + "/requests/{name}/approve")
async def approve_request(request: Request, name: UserName) -> Response:
    principal, form = await form_principal(request, "users:manage")
    try:
        await run_in_threadpool(
            people.approve_request,
            server(request).engine,
            name,
            role=str(form.get("role", "")),
            team=str(form.get("team", ""))[:200],
            by=principal.name,
        )
    except EvalstoreError as error:
        return await run_in_threadpool(
            _people_page, request, principal, status_code=status_for(error), error=for_reader(error, principal)
        )
    return see_other(PAGE)


@router.post(PAGE + "/requests/{name}/reject")
async def reject_request(request: Request, name: UserName) -> Response:
    principal, form = await form_principal(request, "users:manage")
    engine = server(request).engine
    if not confirmed(form):
        asking = await run_in_threadpool(people.list_requests, engine)
        if not any(r.name == name for r in asking):
            raise NotFoundError(f"Nobody named '{name}' is asking for an account; the people page lists who is.")
        return confirmation_page(
            request,
            principal,
            Confirmation(
                heading=f"Turn down {name}'s request?",
                consequences=[
                    f"The account {name} asked for is deleted; the name is free again. They are not told: "
                    "signing in as it is refused, as any wrong password is."
                ],
                button=f"Turn down {name}",
                back=PAGE,
            ),
        )
    await run_in_threadpool(people.reject_request, engine, name, by=principal.name)
    return see_other(PAGE)


# --- the invite's and reset's pages -----------------------------------------------------------------


def _guarded(shared: Server, request: Request, code: str, kind: str) -> people.OpenedLink:
    """The link, behind the address's back-off: a wrong code counts as a failed sign-in does."""
    address = client_address(request)
    shared.sign_ins.check(LINK_ACCOUNT, address)
    try:
        opened = people.open_link(shared.engine, code, kind)
    except people.LinkGone:
        raise
    except NotFoundError:
        shared.sign_ins.failed(LINK_ACCOUNT, address)
        raise
    return opened


def _with_form_token(request: Request, response: HTMLResponse, token: str, path: str) -> HTMLResponse:
    response.set_cookie(
        FORM_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        path=path,
        secure=server(request).settings.secure_cookies,
        max_age=3600,
    )
    return response


def _link_page(
    request: Request, kind: str, code: str, opened: people.OpenedLink, *, status_code: int = 200, **context: object
) -> HTMLResponse:
    token = secrets.token_urlsafe(32)
    response = render(
        request,
        "join.html" if kind == "invite" else "reset.html",
        ANONYMOUS,
        status_code=status_code,
        link=opened,
        action=people.PATHS[kind] + code,
        form_token=token,
        **{"error": None, "name": "", **context},
    )
    return _with_form_token(request, response, token, people.PATHS[kind].rstrip("/"))


def _signed_in_as(request: Request, name: str, back_to: str) -> Response:
    shared = server(request)
    issued = access.create_token(shared.engine, name, expires_days=access.SESSION_HOURS / 24, purpose="session")
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
    return response


async def _checked_form(request: Request) -> dict[str, str]:
    """A form posted before sign-in: its form token checked, the address's rate taken."""
    form = await request.form()
    expected = request.cookies.get(FORM_COOKIE, "")
    if not expected or not hmac.compare_digest(str(form.get("form_token", "")), expected):
        raise AccessDenied("This form has expired or was not sent by this site; open the page again and retry.")
    server(request).writes.take(f"address:{client_address(request)}")
    return {key: str(form.get(key, "")) for key in ("name", "password", "again", "team")}


async def _link_form(request: Request, kind: str, code: str) -> tuple[Server, people.OpenedLink, dict[str, str]]:
    """The post's form, checked, and the link read."""
    fields = await _checked_form(request)
    shared = server(request)
    opened = await run_in_threadpool(_guarded, shared, request, code, kind)
    return shared, opened, fields


@router.get("/join/{code}")
def join_page(request: Request, code: Code) -> HTMLResponse:
    opened = _guarded(server(request), request, code, "invite")
    return _link_page(request, "invite", code, opened)


@router.post("/join/{code}")
async def join(request: Request, code: Code) -> Response:
    shared, opened, fields = await _link_form(request, "invite", code)
    name = fields["name"].strip()
    try:
        if fields["password"] != fields["again"]:
            raise people.PasswordsDiffer()
        await run_in_threadpool(
            people.accept_invite, shared.engine, code, name=name, password=fields["password"], context=shared.context
        )
    except people.LinkGone:
        raise
    except EvalstoreError as error:  # the form again, the name kept, with what is wrong above it
        return await run_in_threadpool(
            _link_page,
            request,
            "invite",
            code,
            opened,
            status_code=status_for(error),
            error=for_reader(error, ANONYMOUS),
            name=name,
        )
    response = await run_in_threadpool(_signed_in_as, request, name, "/profile")
    response.delete_cookie(FORM_COOKIE, path="/join")
    return response


@router.get("/reset/{code}")
def reset_page(request: Request, code: Code) -> HTMLResponse:
    opened = _guarded(server(request), request, code, "reset")
    return _link_page(request, "reset", code, opened)


@router.post("/reset/{code}")
async def reset(request: Request, code: Code) -> Response:
    shared, opened, fields = await _link_form(request, "reset", code)
    try:
        if fields["password"] != fields["again"]:
            raise people.PasswordsDiffer()
        user = await run_in_threadpool(
            people.reset_password, shared.engine, code, password=fields["password"], context=shared.context
        )
    except people.LinkGone:
        raise
    except EvalstoreError as error:
        return await run_in_threadpool(
            _link_page,
            request,
            "reset",
            code,
            opened,
            status_code=status_for(error),
            error=for_reader(error, ANONYMOUS),
        )
    response = await run_in_threadpool(_signed_in_as, request, user.name, "/profile")
    response.delete_cookie(FORM_COOKIE, path="/reset")
    return response


# --- open sign-up (EVALSTORE_OPEN_SIGN_UP) -------------------------------------------------------------


def _open_sign_up(request: Request) -> None:
    if not server(request).settings.open_sign_up:
        raise NotFoundError("This server has no sign-up: ask the server's admin for an invite link.")


def _sign_up_page(
    request: Request,
    *,
    status_code: int = 200,
    error: str | None = None,
    fields: dict[str, str] | None = None,
    asked: str | None = None,
) -> HTMLResponse:
    token = secrets.token_urlsafe(32)
    response = render(
        request,
        "sign_up.html",
        ANONYMOUS,
        status_code=status_code,
        error=error,
        form_token=token,
        fields=fields or {"name": "", "team": ""},
        asked=asked,
    )
    return _with_form_token(request, response, token, "/sign-up")


@router.get("/sign-up")
def sign_up_page(request: Request, asked: Annotated[str | None, Query(max_length=64)] = None) -> HTMLResponse:
    _open_sign_up(request)
    return _sign_up_page(request, asked=asked)


@router.post("/sign-up")
async def sign_up(request: Request) -> Response:
    _open_sign_up(request)
    fields = await _checked_form(request)
    shared = server(request)
    kept = {"name": fields["name"].strip(), "team": fields["team"][:200]}
    try:
        if fields["password"] != fields["again"]:
            raise people.PasswordsDiffer()
        request.app.state.sign_ups.take(f"address:{client_address(request)}")
        await run_in_threadpool(
            people.request_account,
            shared.engine,
            name=kept["name"],
            password=fields["password"],
            team=kept["team"],
            context=shared.context,
        )
    except EvalstoreError as error:
        return await run_in_threadpool(
            _sign_up_page, request, status_code=status_for(error), error=for_reader(error, ANONYMOUS), fields=kept
        )
    return see_other("/sign-up?" + urlencode({"asked": kept["name"]}))


def install(app: FastAPI, settings: ServerSettings) -> None:
    # accounts asked for per client address, as many an hour as a user may make tokens
    app.state.sign_ups = WriteRate(settings.tokens_per_hour / 60, "accounts asked for", burst=settings.tokens_per_hour)
    app.include_router(router)
