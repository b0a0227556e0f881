"""Who asks, decided before the body is read: Starlette parses a form (and spools its files to
disk, up to the upload limit) before a route's dependencies run, so without this anyone could
make the server read and store 256 MiB per request without signing in.

A request that may carry more than ``before_sign_in`` bytes (its Content-Length says so, or it is
chunked) is let through only with valid credentials: a bearer token, or the session cookie with
the session's CSRF token in ``X-CSRF-Token`` or as the body's first field (a page's form has its
``csrf`` field first, and browsers send fields in the form's order). Only that first field is
read ahead, at most :data:`PEEK_LIMIT` bytes, and given back to the route with the rest of the
body. Never in the address: a token there would be written to access logs and sent on in
Referer headers. Any other such request reaches its route with an empty body, never read: the
route then refuses it exactly as it refuses an unauthenticated one (401, 403 or the sign-in page,
with today's message), and what the client was sending is dropped with the connection."""

from __future__ import annotations

import asyncio
import hmac
import re

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from evalstore.errors import EvalstoreError
from evalstore.services import access
from evalstore.web.auth import CSRF_HEADER, SAFE_METHODS, SESSION_COOKIE, csrf_token, server
from evalstore.web.limits import ASGIApp, Message, Receive, Scope, Send

_BODY_HEADERS = frozenset({b"content-length", b"content-type", b"transfer-encoding"})
# what may be read of a body before its sender is known: the first field's headers and a token
PEEK_LIMIT = 512
_TOKEN = re.compile(rb"[0-9a-f]{64}")


class SignInFirst:
    """Credentials checked before a body larger than ``before_sign_in`` bytes is read."""

    def __init__(self, app: ASGIApp, before_sign_in: int) -> None:
        self.app = app
        self.before_sign_in = before_sign_in

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS or self._small(scope):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if await run_in_threadpool(_signed_in, request):
            await self.app(scope, receive, send)
            return
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie and request.headers.get("authorization") is None and request.headers.get(CSRF_HEADER) is None:
            token, read, more = await _first_field_token(request.headers.get("content-type", ""), receive)
            if token is not None and await run_in_threadpool(_session_with, request, token):
                await self.app(scope, _replayed(read, more, receive), send)
                return
        await self.app(_without_body(scope), _empty_body(), send)

    def _small(self, scope: Scope) -> bool:
        headers = dict(scope.get("headers") or [])
        if b"transfer-encoding" in headers:
            return False  # chunked: no length said, so as large as the client likes
        length = headers.get(b"content-length")
        return length is None or (length.isdigit() and int(length) <= self.before_sign_in)


def _signed_in(request: Request) -> bool:
    """Whether the request's credentials are valid (a bearer token; a cookie's with its CSRF token
    in its header), read from its headers alone."""
    shared = server(request)
    header = request.headers.get("authorization")
    try:
        if header is not None:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                return False
            access.authenticate(shared.engine, token.strip(), context=shared.context)
            return True
    except EvalstoreError:
        return False  # the route says why, as it does for any refused credentials
    sent = request.headers.get(CSRF_HEADER)
    return sent is not None and _session_with(request, sent)


def _session_with(request: Request, sent: str) -> bool:
    """Whether the request's session cookie is valid and ``sent`` is its CSRF token."""
    shared = server(request)
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        return False
    try:
        access.authenticate(shared.engine, cookie, purpose="session", context=shared.context)
    except EvalstoreError:
        return False
    return hmac.compare_digest(sent, csrf_token(cookie))


def _expected_start(content_type: str) -> bytes | None:
    """How a body whose first field is ``csrf`` starts, up to the token: multipart as browsers and
    httpx write it, or urlencoded. None: a body of another type."""
    kind, _, params = content_type.partition(";")
    kind = kind.strip().lower()
    if kind == "application/x-www-form-urlencoded":
        return b"csrf="
    if kind != "multipart/form-data":
        return None
    boundary = next(
        (
            value.strip().strip('"')
            for key, _, value in (p.partition("=") for p in params.split(";"))
            if key.strip().lower() == "boundary"
        ),
        "",
    )
    if not boundary:
        return None
    # compared without case: a header's name may come in any case, and so is the boundary here
    return (b"--" + boundary.encode("latin-1") + b'\r\ncontent-disposition: form-data; name="csrf"\r\n\r\n').lower()


async def _first_field_token(content_type: str, receive: Receive) -> tuple[str | None, bytes, bool]:
    """The CSRF token the body's first field holds (None: it holds none), what was read of the
    body, and whether more is to come. Reads no further than the first byte that differs from a
    ``csrf`` field's start, nor past :data:`PEEK_LIMIT` bytes."""
    start = _expected_start(content_type)
    read, more = b"", True
    if start is None:
        return None, read, more
    while more and len(read) < PEEK_LIMIT:
        message = await receive()
        if message["type"] != "http.request":
            return None, read, False
        read += message.get("body", b"")
        more = bool(message.get("more_body", False))
        if not start.startswith(read[: len(start)].lower()):
            return None, read, more  # another first field: no need to wait for more of it
        after = read[len(start) :]
        found = _TOKEN.match(after)
        if found is not None and len(after) > len(found.group(0)):
            end = after[len(found.group(0)) : len(found.group(0)) + 1]
            return (found.group(0).decode() if end in (b"\r", b"&") else None), read, more
        if len(after) > 64:
            return None, read, more
    token = _TOKEN.fullmatch(read[len(start) :]) if not more else None  # a body of the token alone
    return (token.group(0).decode() if token else None), read, more


def _replayed(read: bytes, more: bool, receive: Receive) -> Receive:
    """``receive`` with what was read ahead given back first."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": read, "more_body": more}
        return await receive()

    return replay


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
