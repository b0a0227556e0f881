"""Who is asking, and may they: the route dependencies.

A request carries a bearer token (``Authorization: Bearer TOKEN``) or a browser session cookie.
A cookie-borne request that changes anything must also send the session's CSRF token in
``X-CSRF-Token``: a page of another site can make the browser send the cookie, but it cannot read
the CSRF token. Every route names what it does (an action of ``access.ACTIONS``) through
:class:`Requires`, :func:`signed_in` or :func:`anyone`; tests walk every route with every role.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field

from fastapi import Request
from sqlalchemy import Engine

from evalstore.errors import AccessDenied, AuthenticationError
from evalstore.services import access
from evalstore.services.access import ANONYMOUS, Principal
from evalstore.services.context import AppContext
from evalstore.web.limits import SignInBackoff, WriteRate
from evalstore.web.settings import ServerSettings

SESSION_COOKIE = "evalstore_session"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def csrf_token(session_token: str) -> str:
    """The CSRF token of a browser session: forms and scripts send it back in ``X-CSRF-Token``; a
    page of another site cannot read it, so it cannot forge a request (double submit, bound to the
    session)."""
    return hashlib.sha256(f"csrf\0{session_token}".encode()).hexdigest()


@dataclass(frozen=True)
class Server:
    """What the routes share: the settings, the application context (the database and the
    caches), the limiters."""

    settings: ServerSettings
    context: AppContext
    writes: WriteRate
    mints: WriteRate = field(default_factory=lambda: WriteRate(20 / 60, "new tokens", burst=20))
    sign_ins: SignInBackoff = field(default_factory=SignInBackoff)

    @property
    def engine(self) -> Engine:
        return self.context.engine


def server(request: Request) -> Server:
    found = request.app.state.server
    assert isinstance(found, Server)
    return found


def client_address(request: Request) -> str:
    """The client's address: the socket's peer, or what a proxy of ``--forwarded-allow-ips`` says
    (uvicorn puts it there); a client cannot choose it."""
    return request.client.host if request.client else "?"


def check_password(shared: Server, request: Request, name: str, password: str) -> None:
    """``access.check_password`` behind the back-off of the account and client address (failures
    in a row make that address wait), in one of the server's password slots."""
    address = client_address(request)
    shared.sign_ins.check(name, address)
    try:
        access.check_password(shared.engine, name, password, context=shared.context)
    except AuthenticationError:
        shared.sign_ins.failed(name, address)
        raise
    shared.sign_ins.succeeded(name, address)


def sign_in(shared: Server, request: Request, name: str, password: str) -> access.IssuedToken:
    """A session for the name and password, behind the sign-in limits: the address's rate (one
    client trying many accounts), the account's and address's back-off, the password slots."""
    shared.writes.take(f"address:{client_address(request)}")
    check_password(shared, request, name, password)
    return access.create_token(shared.engine, name, expires_days=access.SESSION_HOURS / 24, purpose="session")


def caller(request: Request) -> Principal:
    """The principal a request speaks for (nobody, without credentials)."""
    shared = server(request)
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationError("Send the token as 'Authorization: Bearer TOKEN'.")
        principal = access.authenticate(shared.engine, token.strip(), context=shared.context)
        request.state.principal = principal  # an error's remedy is worded for its reader
        return principal
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        principal = access.authenticate(shared.engine, cookie, purpose="session", context=shared.context)
        request.state.principal = principal
        if request.method not in SAFE_METHODS and not hmac.compare_digest(
            request.headers.get(CSRF_HEADER, ""), csrf_token(cookie)
        ):
            raise AccessDenied(f"This form's CSRF token is missing or wrong; reload the page (send {CSRF_HEADER}).")
        return principal
    return ANONYMOUS


class Requires:
    """A route's dependency: the caller's role must allow ``action``. ``write``: the request also
    counts against the user's write rate (all their tokens together: tokens are free).
    ``public``: without credentials it is let through when the deployment keeps leaderboards
    public."""

    def __init__(self, action: str, *, write: bool = False, public: bool = False) -> None:
        if action not in access.ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        self.action, self.write, self.public = action, write, public

    def __call__(self, request: Request) -> Principal:
        principal = caller(request)
        if self.public and principal.role is None and server(request).settings.public_leaderboards:
            return principal
        principal.require(self.action)
        if self.write:
            server(request).writes.take(f"user:{principal.user_id}")
        return principal


def anyone() -> Principal:
    """Routes open to everybody, whoever they are (health, signing in): no credentials are read."""
    return ANONYMOUS


def signed_in(request: Request) -> Principal:
    """Any user with valid credentials, whatever the role."""
    principal = caller(request)
    if principal.role is None:
        principal.require("tasks:read")  # raises the 401 with its message
    return principal
