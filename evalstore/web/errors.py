"""Exceptions to HTTP responses, with the status table of evalstore.errors (the CLI's exit codes:
evalstore.cli._errors).

Every error body is ``{"error": message}``, the fact; an error that says what to do adds
``"remedy"``, in the pages' words for the caller (a command only for admins and organisers:
evalstore.web.wording); a refused upload adds ``"errors"``, one ``file:line: what is wrong`` per
problem found.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy import exc
from starlette.exceptions import HTTPException

from evalstore.db.outages import outage
from evalstore.errors import HTTP_STATUS, LIMIT_HTTP_STATUS, EvalstoreError, InputFormatError, LimitExceeded
from evalstore.services.access import ANONYMOUS, Principal
from evalstore.web.wording import remedy_for

log = logging.getLogger("evalstore.web")

# The database failing a request, told to whoever sent it: 503 and when to ask again. What failed,
# and where, goes to the server's log only (a participant has no business with the store's path).
DATABASE_RETRY_AFTER = 5
LOG_EVERY = 10.0  # seconds between the log's lines about one kind of outage
OUTAGE_MESSAGES = {
    "unreachable": "The database is not answering; try again in a few seconds.",
    "locked": "The database is busy with another writer; try again in a few seconds.",
    "disk_full": "The service cannot store anything now: its disk is full. Try again later.",
    "read_only": "The service's store cannot be written now; reading works. Try again later.",
}


def status_for(error: EvalstoreError) -> int:
    if isinstance(error, LimitExceeded):
        return LIMIT_HTTP_STATUS[error.limit]
    return next((status for kind, status in HTTP_STATUS if isinstance(error, kind)), 400)


def error_response(error: EvalstoreError, reader: Principal = ANONYMOUS) -> JSONResponse:
    """``error`` as the API answers ``reader`` (anonymous: who is asking is not known, or is the error)."""
    status = status_for(error)
    body: dict[str, object] = {"error": str(error)}
    remedy = remedy_for(error, reader)
    if remedy is not None:
        body["remedy"] = remedy
    headers: dict[str, str] = {}
    if isinstance(error, InputFormatError):
        body["errors"] = str(error).splitlines()
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(error, LimitExceeded) and error.retry_after is not None:
        headers["Retry-After"] = str(error.retry_after)
    return JSONResponse(body, status_code=status, headers=headers)


def _is_page(request: Request) -> bool:
    return not request.url.path.startswith("/api/")


PageError = Callable[[Request, int, "EvalstoreError | str"], Response]


def install(app: FastAPI, page_error: PageError) -> None:
    """Errors of the API as JSON; of the pages as ``page_error`` renders them."""

    async def evalstore_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, EvalstoreError)
        if _is_page(request):
            response = page_error(request, status_for(error), error)
            if isinstance(error, LimitExceeded) and error.retry_after is not None:
                response.headers["Retry-After"] = str(error.retry_after)
            return response
        return error_response(error, getattr(request.state, "principal", ANONYMOUS))

    async def invalid_request(request: Request, error: Exception) -> Response:
        assert isinstance(error, RequestValidationError)
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()]
        message = "The request is not valid: " + "; ".join(problems)
        if _is_page(request):
            return page_error(request, 422, message)
        return JSONResponse({"error": message, "errors": problems}, status_code=422)

    async def not_found(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        if _is_page(request):
            message = str(error.detail)
            if error.status_code == 405:
                # a form's address opened as a page: a bookmark, a reload after a redirect, a typed link
                allowed = (error.headers or {}).get("Allow", "POST")
                message = (
                    f"This address is where a form is sent ({allowed}), not a page to open. Go back to the page "
                    "with the form and use its button, or start again from the tasks."
                )
            response = page_error(request, error.status_code, message)
            response.headers.update(error.headers or {})
            return response
        if error.status_code < 400:
            return await http_exception_handler(request, error)
        # the API's one error body ({"error": message}), for what Starlette refuses itself too: an
        # address no route has, a method it does not take, a multipart body it cannot parse
        message = {
            404: "Nothing is at this address; the API's routes are listed at /api/v1/docs.",
            405: f"This address does not take {request.method}.",
        }.get(error.status_code, str(error.detail))
        return JSONResponse({"error": message}, status_code=error.status_code, headers=error.headers)

    said: dict[str, float] = {}  # outage kind -> when the log last said it

    async def database_trouble(request: Request, error: Exception) -> Response:
        found = outage(error, str(request.app.state.server.engine.url))
        if found is None:
            raise error  # a bug: the server's own 500
        now = time.monotonic()
        if now - said.get(found.kind, -LOG_EVERY) >= LOG_EVERY:  # not a line per request of an outage
            said[found.kind] = now
            log.warning("%s %s answered 503: %s", request.method, request.url.path, found.describe())
        message = OUTAGE_MESSAGES[found.kind]
        headers = {"Retry-After": str(DATABASE_RETRY_AFTER)}
        if _is_page(request):
            response = page_error(request, 503, message)
            response.headers.update(headers)
            return response
        return JSONResponse({"error": message}, status_code=503, headers=headers)

    app.add_exception_handler(EvalstoreError, evalstore_error)
    app.add_exception_handler(exc.DBAPIError, database_trouble)
    app.add_exception_handler(exc.TimeoutError, database_trouble)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(HTTPException, not_found)
