"""Response headers that keep what a user sees to that user: ``Cache-Control: private, no-store``
on every response but static files (a shared proxy or the browser's disk cache would otherwise
keep an organiser's hidden scores), and a ``Content-Disposition`` that any name survives."""

from __future__ import annotations

import re
from urllib.parse import quote

from evalstore.web.limits import ASGIApp, Message, Receive, Scope, Send

NO_STORE = b"private, no-store"
_UNSAFE_FALLBACK = re.compile(r"[^A-Za-z0-9._ -]+")


def content_disposition(filename: str) -> str:
    """``attachment`` with the name as RFC 6266 and RFC 8187 give it: ``filename*=UTF-8''...``
    percent-encoded (any character survives, ``"`` and ``✓`` included), and a plain ASCII
    ``filename="..."`` for the clients that read only that."""
    fallback = _UNSAFE_FALLBACK.sub("_", filename).strip() or "download"
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


class NoStore:
    """Every response but the static files' says ``Cache-Control: private, no-store`` (unless the
    route set its own)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or str(scope.get("path", "")).startswith("/static/"):
            await self.app(scope, receive, send)
            return

        async def adding(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                if not any(name.lower() == b"cache-control" for name, _ in headers):
                    headers.append((b"cache-control", NO_STORE))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, adding)
