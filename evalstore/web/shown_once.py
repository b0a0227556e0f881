"""A secret shown once after a redirect (a new API token, an invite or reset link): the form posts,
the server answers 303 to the page, and the page shows the secret from a short-lived cookie that
it deletes at once. Reloading the page then shows nothing new and makes nothing new, where
re-posting the form (a reload of the post's own answer) made a second token.

The cookie holds the secret encrypted with a key drawn from the browser's session token (the
server keeps only the session's hash, so a copy of the cookie alone, or a log, yields nothing),
is HttpOnly and SameSite=Strict, lives a minute and is sent to its page's path only. Never in a
URL: no history, log or Referer keeps it."""

from __future__ import annotations

import base64
import hashlib
import hmac

from fastapi import Request
from fastapi.responses import Response

from evalstore.web.auth import SESSION_COOKIE, server

COOKIE = "evalstore_shown"
SECONDS = 60
_MAX = 400  # bytes of secret: a token or a link's path


def _stream(session: str, size: int) -> bytes:
    blocks = (hashlib.sha256(f"shown-once\0{session}\0{i}".encode()).digest() for i in range((size + 31) // 32))
    return b"".join(blocks)[:size]


def _tag(session: str, sealed: bytes) -> bytes:
    return hmac.new(hashlib.sha256(f"shown-once-tag\0{session}".encode()).digest(), sealed, "sha256").digest()[:16]


def keep(request: Request, response: Response, secret: str, path: str) -> bool:
    """Put ``secret`` on ``response`` for the next GET of ``path`` (False: there is no browser
    session to bind it to, a script's bearer token: the caller shows it at once instead)."""
    session = request.cookies.get(SESSION_COOKIE)
    data = secret.encode()
    if not session or len(data) > _MAX:
        return False
    sealed = bytes(a ^ b for a, b in zip(data, _stream(session, len(data)), strict=True))
    value = base64.urlsafe_b64encode(_tag(session, sealed) + sealed).decode()
    response.set_cookie(
        COOKIE,
        value,
        max_age=SECONDS,
        path=path,
        httponly=True,
        samesite="strict",
        secure=server(request).settings.secure_cookies,
    )
    return True


def take(request: Request, response: Response, path: str) -> None:
    """Delete the cookie on ``response`` (the page has shown what it held)."""
    if COOKIE in request.cookies:
        response.delete_cookie(COOKIE, path=path)


def read(request: Request) -> str | None:
    """The secret the cookie holds, if it is this session's; None otherwise."""
    value, session = request.cookies.get(COOKIE), request.cookies.get(SESSION_COOKIE)
    if not value or not session or len(value) > 2 * _MAX:
        return None
    try:
        raw = base64.urlsafe_b64decode(value.encode())
    except ValueError:
        return None
    tag, sealed = raw[:16], raw[16:]
    if not sealed or not hmac.compare_digest(tag, _tag(session, sealed)):
        return None
    data = bytes(a ^ b for a, b in zip(sealed, _stream(session, len(sealed)), strict=True))
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None
