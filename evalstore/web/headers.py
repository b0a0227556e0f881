"""Response headers that keep what a user sees to that user: ``Cache-Control: private, no-store``
on every response but static files (a shared proxy or the browser's disk cache would otherwise
keep an organiser's hidden scores), a ``Content-Disposition`` that any name survives, and the
security headers on every response (a Content-Security-Policy, no framing, no sniffing, no
referrer beyond this site)."""

from __future__ import annotations

import html
import re
from urllib.parse import quote

from fastapi.responses import HTMLResponse

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


# The pages' policy: scripts and styles from this site's own files only (the templates hold no
# inline script, style or event handler: the charts are SVG drawn with classes), no plugins, no
# framing by any site (clickjacking), forms posting back here only, and <base> never moved.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = (
    (b"x-frame-options", b"DENY"),  # frame-ancestors' older spelling, for the browsers without CSP 2
    (b"x-content-type-options", b"nosniff"),  # a download or an upload's echo is never run as a page
    (b"referrer-policy", b"same-origin"),  # a link out never carries a run's or a task's name
)


class SecurityHeaders:
    """Every response (pages, API, static files, errors, even a 500) says the security headers,
    and ``Content-Security-Policy`` unless the route set its own (the API's documentation page)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def adding(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (name, value)
                    for name, value in message.get("headers") or []
                    if name.lower() not in {n for n, _ in SECURITY_HEADERS}
                ]
                headers += SECURITY_HEADERS
                if not any(name.lower() == b"content-security-policy" for name, _ in headers):
                    headers.append((b"content-security-policy", CONTENT_SECURITY_POLICY.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, adding)


SWAGGER_UI_ASSETS = "/static/swagger-ui"  # Swagger UI's own files (the swagger-ui-bundle-v2 package)


def api_docs(openapi_url: str, title: str) -> HTMLResponse:
    """The API's documentation: Swagger UI from this site's own files (it works offline, and no
    CDN is trusted), started by a static script of ours (no inline script). Its policy differs
    from the pages' in one point: Swagger UI sets styles inline. Still never framed."""
    page = HTMLResponse(
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        f'<link rel="stylesheet" href="{SWAGGER_UI_ASSETS}/swagger-ui.css">'
        f'<link rel="icon" type="image/png" href="{SWAGGER_UI_ASSETS}/favicon-32x32.png">'
        "</head><body>"
        f'<div id="swagger-ui" data-openapi="{html.escape(openapi_url)}"></div>'
        f'<script src="{SWAGGER_UI_ASSETS}/swagger-ui-bundle.js"></script>'
        '<script src="/static/swagger-init.js"></script>'
        "</body></html>\n"
    )
    page.headers["Content-Security-Policy"] = (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    )
    return page


REDOC_ASSETS = "/static/redoc"  # ReDoc's standalone bundle, kept in this package (its LICENSE beside it)


def api_reference(openapi_url: str, title: str) -> HTMLResponse:
    """The API's reference as one readable page: ReDoc from this site's own files (it works
    offline, and no CDN is trusted), started by a static script of ours. ReDoc sets styles inline
    and runs its search in a worker it makes from a blob, which its policy allows; nothing else."""
    page = HTMLResponse(
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title>"
        "</head><body>"
        f'<div id="redoc" data-openapi="{html.escape(openapi_url)}"></div>'
        f'<script src="{REDOC_ASSETS}/redoc.standalone.js"></script>'
        '<script src="/static/redoc-init.js"></script>'
        "</body></html>\n"
    )
    page.headers["Content-Security-Policy"] = (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "font-src 'self'; connect-src 'self'; worker-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'; "
        "form-action 'none'"
    )
    return page
