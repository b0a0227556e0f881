"""The upload size limit, the write rate limit and the sign-in back-off."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.responses import JSONResponse

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
        return LimitExceeded(
            "size",
            f"The upload is larger than this server's limit of "
            f"{self.max_bytes / 2**20:g} MiB; compress it (.gz) or split it.",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await error_response(self._refusal())(scope, receive, send)
            return
        if b"transfer-encoding" not in headers:
            # no body (a GET), or one of the length it declared, within the limit: the HTTP server
            # reads no more than Content-Length says, so there is nothing left to count
            await self.app(scope, receive, send)
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
    """At most ``per_minute`` writes per key (a user, or an address signing in): a token bucket
    that refills continuously. Kept in this process: N server processes allow N times as many.
    ``what`` names the limit in its refusal; ``burst`` is how many may come at once
    (``per_minute``, unless given: an hourly limit gives the hour's number)."""

    def __init__(self, per_minute: float, what: str = "writes", burst: float | None = None) -> None:
        self.per_minute = per_minute
        self.what = what
        self.burst = float(per_minute if burst is None else burst)  # the bucket's size
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> None:
        now = time.monotonic()
        rate = self.per_minute / 60.0
        with self._lock:
            tokens, last = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * rate)
            if tokens < 1.0:
                self._buckets[key] = (tokens, now)
                wait = math.ceil((1.0 - tokens) / rate)
                every = f"{self.per_minute:g} a minute" if self.per_minute >= 1 else f"{self.per_minute * 60:g} an hour"
                raise LimitExceeded(
                    "rate", f"Too many {self.what}: at most {every}; try again in {wait} s.", retry_after=wait
                )
            self._buckets[key] = (tokens - 1.0, now)


class SignInBackoff:
    """Failed sign-ins back off per account, whatever address they come from: after ``free``
    failures in a row, the account's next attempt waits 2, 4, 8, ... seconds (at most
    ``longest``); a success clears it. The address limit (:class:`WriteRate`) stops one client
    trying many accounts; this stops many clients trying one. At most ``size`` accounts are
    remembered (the oldest forgotten), so names an attacker makes up cannot fill the memory."""

    def __init__(self, free: int = 5, longest: float = 900.0, size: int = 10_000) -> None:
        self.free, self.longest, self.size = free, longest, size
        self._failures: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, account: str) -> None:
        with self._lock:
            failures, until = self._failures.get(account, (0, 0.0))
        wait = math.ceil(until - time.monotonic())
        if wait > 0:
            raise LimitExceeded(
                "rate", f"Too many failed sign-ins for this account; try again in {wait} s.", retry_after=wait
            )

    def failed(self, account: str) -> None:
        with self._lock:
            failures, _ = self._failures.pop(account, (0, 0.0))
            failures += 1
            delay = 0.0 if failures < self.free else min(self.longest, 2.0 ** (failures - self.free + 1))
            self._failures[account] = (failures, time.monotonic() + delay)
            while len(self._failures) > self.size:
                self._failures.popitem(last=False)

    def succeeded(self, account: str) -> None:
        with self._lock:
            self._failures.pop(account, None)


class RequestBudget:
    """A request's time budget: past ``seconds`` without a response started, the client gets 503
    with the limit named, at once. Work running in a thread is not killed (Python cannot): it
    ends on its own, its transaction with it, and what it answers then is dropped.

    A timer on the event loop, not a task group around each request: the refusal is a task only
    for a request that runs out of time (a task group, its cancel scope and an event a request
    cost ~0.1 ms of the ~0.5 ms a cached leaderboard takes)."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.seconds <= 0:
            await self.app(scope, receive, send)
            return
        started = False
        refusal: asyncio.Task[None] | None = None

        async def watching(message: Message) -> None:
            nonlocal started
            if refusal is not None:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        def expire() -> None:
            nonlocal refusal
            if not started:
                refusal = loop.create_task(self._refuse(scope, receive, send))

        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.seconds, expire)
        try:
            await self.app(scope, receive, watching)
        except Exception:
            if refusal is None:
                raise
            # the client has its 503; what the late work raised is dropped with its answer
        finally:
            timer.cancel()
            if refusal is not None:
                await refusal

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        await JSONResponse(
            {
                "error": f"The request took longer than this server's limit of {self.seconds:g} "
                "s (EVALSTORE_REQUEST_SECONDS); ask for less, or ask an admin."
            },
            status_code=503,
            headers={"Retry-After": "60"},
        )(scope, receive, send)
