"""Who asks, decided before the body is read: Starlette parses a form (and spools its files to
disk, up to the upload limit) before a route's dependencies run, so without this anyone could
make the server read and store 256 MiB per request without signing in.

A request that may carry more than ``before_sign_in`` bytes (its Content-Length says so, or it is
chunked) is let through only with valid credentials: a bearer token, or the session cookie with
the session's CSRF token in ``X-CSRF-Token`` or the ``csrf`` query parameter (a page's upload
form carries it in its action, as the form's own field is in the body). Any other such request
reaches its route with an empty body, never read: the route then refuses it exactly as it
refuses an unauthenticated one (401, 403 or the sign-in page, with today's message), and what the
client was sending is dropped with the connection."""

from __future__ import annotations

import asyncio
import hmac

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from evalstore.errors import EvalstoreError
from evalstore.services import access
from evalstore.web.auth import CSRF_HEADER, SAFE_METHODS, SESSION_COOKIE, csrf_token, server
from evalstore.web.limits import ASGIApp, Message, Receive, Scope, Send

_BODY_HEADERS = frozenset({b"content-length", b"content-type", b"transfer-encoding"})


class SignInFirst:
    """Credentials checked before a body larger than ``before_sign_in`` bytes is read."""

    def __init__(self, app: ASGIApp, before_sign_in: int) -> None:
        self.app = app
        self.before_sign_in = before_sign_in

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS or self._small(scope):
            await self.app(scope, receive, send)
            return
        if await run_in_threadpool(_signed_in, Request(scope)):
            await self.app(scope, receive, send)
            return
        await self.app(_without_body(scope), _empty_body(), send)

    def _small(self, scope: Scope) -> bool:
        headers = dict(scope.get("headers") or [])
        if b"transfer-encoding" in headers:
            return False  # chunked: no length said, so as large as the client likes
        length = headers.get(b"content-length")
        return length is None or (length.isdigit() and int(length) <= self.before_sign_in)


def _signed_in(request: Request) -> bool:
    """Whether the request's credentials are valid (a cookie's with its CSRF token), read from its
    headers and query alone."""
    shared = server(request)
    header = request.headers.get("authorization")
    try:
        if header is not None:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                return False
            access.authenticate(shared.engine, token.strip(), context=shared.context)
            return True
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie:
            return False
        access.authenticate(shared.engine, cookie, purpose="session", context=shared.context)
    except EvalstoreError:
        return False  # the route says why, as it does for any refused credentials
    sent = request.headers.get(CSRF_HEADER) or request.query_params.get("csrf", "")
    return hmac.compare_digest(sent, csrf_token(cookie))


def _without_body(scope: Scope) -> Scope:
    headers = [(name, value) for name, value in scope.get("headers") or [] if name.lower() not in _BODY_HEADERS]
    return {**scope, "headers": [*headers, (b"content-length", b"0")]}


def _empty_body() -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # nothing more ever comes: the body is not read
        return {"type": "http.disconnect"}

    return receive
