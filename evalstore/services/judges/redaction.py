"""Secrets kept out of what a judge stores and shows: an endpoint may echo the request's
``Authorization`` header (or the key under another name) in an error body, and that body becomes a
label's reason and raw output, which pages, downloads and provenance show. Every text that comes
back from an endpoint passes through :func:`redact` before it is kept or raised; an endpoint URL
that carries credentials is refused when a judge is defined (:func:`url_credentials`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit

REDACTED = "[REDACTED]"
# a secret shorter than this is not searched for alone (it would blank ordinary words); the
# patterns below still catch it where it is named as a credential
SHORTEST_SECRET = 4
_PATTERNS = (
    # "Authorization: Bearer abc", "authorization": "Basic abc", "x-api-key: abc", api_key=abc, ...
    re.compile(
        r"""(?P<name>(?:proxy-)?authorization|x-api-key|api[-_]?key|access[-_]?token|secret|password)"""
        r"""(?P<sep>["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token)\s+)?(?P<value>[^\s"',;&}\]]+)""",
        re.IGNORECASE,
    ),
    # a token after "Bearer"/"Basic" (8 characters or more, a digit among them: "bearer bonds" stays)
    re.compile(
        r"(?P<name>\b(?:bearer|basic))(?P<sep>\s+)(?P<value>(?=[A-Za-z._~+/=-]*\d)[A-Za-z0-9._~+/=-]{8,})",
        re.IGNORECASE,
    ),
    # the shapes of common providers' keys, wherever they appear
    re.compile(r"(?P<name>)(?P<sep>)(?P<value>\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}|\bAIza[0-9A-Za-z_-]{30,})"),
)
_SECRET_PARAMETER = re.compile(r"key|token|secret|sig|password|auth", re.IGNORECASE)


def redact(text: str | None, secrets: Iterable[str | None] = ()) -> str | None:
    """``text`` with each of ``secrets`` and anything shaped like a credential replaced by
    ``[REDACTED]``."""
    if text is None:
        return None
    for secret in sorted({s for s in secrets if s and len(s) >= SHORTEST_SECRET}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(_masked, text)
    return text


def _masked(found: re.Match[str]) -> str:
    whole = found.group(0)
    value = found.group("value")
    if value == REDACTED or value.startswith("[REDACTED"):
        return whole
    return whole[: found.start("value") - found.start()] + REDACTED


def url_credentials(url: str) -> list[str]:
    """What in ``url`` looks like a credential: a user's name or password, or a query parameter
    named like a key, token, signature or password (empty: none)."""
    parts = urlsplit(url)
    found = ["a user name or password"] if parts.username or parts.password else []
    found += [f"the query parameter '{name}'" for name, _ in parse_qsl(parts.query) if _SECRET_PARAMETER.search(name)]
    return found
