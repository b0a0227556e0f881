"""The upload size limit, the write rate limit and the sign-in back-off."""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from evalstore.errors import InvalidParameterError, LimitExceeded, NotFoundError
from evalstore.io.limits import holds_nul
from evalstore.web.errors import error_response

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


# the methods whose requests no route reads a body of (SignInFirst lets them through unchecked)
_BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})


async def no_nul(request: Request) -> None:
    """Every route's dependency: a NUL character in the path, the query, a JSON body or a form's
    field (``/tasks/%00``, ``{"description": "a\\u0000b"}``) is refused before any handler runs.
    PostgreSQL's text cannot hold one (its driver raised, a 500), and no name, id, option or text
    holds one, so a path with it names nothing (404) and the rest is not valid (422). A multipart
    body's text fields are checked too (its files are the readers', which refuse a NUL naming the
    line): the form is parsed once, here or by the route, and :class:`SignInFirst` has let only a
    small body or a signed-in sender's reach this point."""
    if "\x00" in request.url.path:
        raise NotFoundError("Nothing is named with a NUL character (%00); check the address.")
    if any("\x00" in key or "\x00" in value for key, value in request.query_params.multi_items()):
        raise InvalidParameterError("The query holds a NUL character (%00): no parameter's value has one.")
    if request.method in _BODILESS:
        return  # no route reads one: a body sent anyway is never read, nor spooled before sign-in
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        body = await request.body()  # read once: the route's parsing reads the same bytes
        if b"\\u0000" in body or b"\x00" in body:
            try:
                holds = holds_nul(json.loads(body))
            except (ValueError, RecursionError):
                holds = False  # not JSON, or nested past what Python parses: the route says so
            if holds:
                raise InvalidParameterError("The body holds a NUL character (\\u0000): no field's value has one.")
    elif kind in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.form()  # kept by the request: the route reads the same form
        if any("\x00" in key or (isinstance(value, str) and "\x00" in value) for key, value in form.multi_items()):
            await form.close()  # its spooled files: the route that would close them does not run
            raise InvalidParameterError("The form holds a NUL character: no field's value has one.")


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
    """Failed password checks back off per account **and client address**: after ``free``
    failures in a row from one address, that address's next attempt on the account waits 2, 4, 8,
    ... seconds (at most ``longest``); its success clears them. Keyed by the account alone, as it
    was, anyone anywhere could lock an organiser out for 15 minutes by failing five times: the
    right password from the organiser's own address was refused too.

    Many addresses against one account (a botnet) meet the account's ceiling: once it has had
    ``ceiling`` failures from all addresses together (forgotten after ``longest`` without one), an
    address that has failed on it even once waits as above from its first failure, so each further
    address gets one guess; an address that has not failed on it (the owner's) still gets in with
    the right password. The address limit (:class:`WriteRate`) stops one client trying many
    accounts. At most ``size`` accounts and pairs are remembered (the oldest forgotten), so names
    an attacker makes up cannot fill the memory."""

    def __init__(self, free: int = 5, longest: float = 900.0, size: int = 10_000, ceiling: int = 50) -> None:
        self.free, self.longest, self.size, self.ceiling = free, longest, size, ceiling
        self._pairs: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()  # failures, last
        self._accounts: OrderedDict[str, tuple[int, float]] = OrderedDict()  # failures, last
        self._lock = threading.Lock()

    def _delay(self, failures: int, free: int) -> float:
        return 0.0 if failures < free else min(self.longest, 2.0 ** (failures - free + 1))

    def _account_failures(self, account: str, now: float) -> int:
        failures, last = self._accounts.get(account, (0, 0.0))
        return failures if now - last < self.longest else 0

    def check(self, account: str, address: str) -> None:
        """Refuse (429, with Retry-After) an attempt on ``account`` from ``address`` that must
        wait; an attempt that may go on is let through (its outcome is told with :meth:`failed`
        or :meth:`succeeded`)."""
        now = time.monotonic()
        with self._lock:
            failures, last = self._pairs.get((account, address), (0, 0.0))
            free = 1 if self._account_failures(account, now) >= self.ceiling else self.free
        wait = math.ceil(last + self._delay(failures, free) - now) if failures else 0
        if wait > 0:
            raise LimitExceeded(
                "rate",
                f"Too many failed sign-ins for this account from your address; try again in {wait} s.",
                retry_after=wait,
            )

    def failed(self, account: str, address: str) -> None:
        now = time.monotonic()
        with self._lock:
            failures, _ = self._pairs.pop((account, address), (0, 0.0))
            self._pairs[(account, address)] = (failures + 1, now)
            total = self._account_failures(account, now)
            self._accounts.pop(account, None)
            self._accounts[account] = (total + 1, now)
            for kept in (self._pairs, self._accounts):
                while len(kept) > self.size:
                    kept.popitem(last=False)

    def succeeded(self, account: str, address: str) -> None:
        """The address's failures on the account are cleared; the account's count stays (the
        owner signing in does not give an attacker elsewhere their guesses back)."""
        with self._lock:
            self._pairs.pop((account, address), None)


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
