"""The upload size limit and the write rate limit."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from evalstore.errors import LimitExceeded
from evalstore.web.errors import error_response

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class UploadLimit:
    """Refuse request bodies over ``max_bytes`` with 413: at once when Content-Length says so, else
    as soon as the bytes read pass it (a chunked upload), before the rest is spooled to disk."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _refusal(self) -> LimitExceeded:
        return LimitExceeded("size", f"The upload is larger than this server's limit of "
                                     f"{self.max_bytes / 2**20:g} MiB; compress it (.gz) or split it.")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await error_response(self._refusal())(scope, receive, send)
            return
        received = 0
        started = refused = False

        async def counting() -> Message:
            nonlocal received, refused
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes and not refused:
                refused = True
                if not started:
                    await error_response(self._refusal())(scope, receive, send)
                # the application sees the client gone (it stops parsing); what it answers is dropped
                return {"type": "http.disconnect"}
            return message

        async def watching(message: Message) -> None:
            nonlocal started
            if refused:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, counting, watching)


class WriteRate:
    """At most ``per_minute`` writes per key (a token, or an address signing in): a token bucket
    that refills continuously. Kept in this process: N server processes allow N times as many."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> None:
        now = time.monotonic()
        rate = self.per_minute / 60.0
        with self._lock:
            tokens, last = self._buckets.get(key, (float(self.per_minute), now))
            tokens = min(float(self.per_minute), tokens + (now - last) * rate)
            if tokens < 1.0:
                self._buckets[key] = (tokens, now)
                wait = math.ceil((1.0 - tokens) / rate)
                raise LimitExceeded("rate", f"Too many writes: at most {self.per_minute} a minute; try again in "
                                            f"{wait} s.", retry_after=wait)
            self._buckets[key] = (tokens - 1.0, now)
