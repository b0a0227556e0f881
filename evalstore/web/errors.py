"""Exceptions to HTTP responses, with the status table of evalstore.errors (the CLI's exit codes:
evalstore.cli._errors).

Every error body is ``{"error": message}``; a refused upload adds ``"errors"``, one
``file:line: what is wrong`` per problem found.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from evalstore.errors import HTTP_STATUS, LIMIT_HTTP_STATUS, EvalstoreError, InputFormatError, LimitExceeded


def status_for(error: EvalstoreError) -> int:
    if isinstance(error, LimitExceeded):
        return LIMIT_HTTP_STATUS[error.limit]
    return next((status for kind, status in HTTP_STATUS if isinstance(error, kind)), 400)


def error_response(error: EvalstoreError) -> JSONResponse:
    status = status_for(error)
    body: dict[str, object] = {"error": str(error)}
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
        return error_response(error)

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
            return page_error(request, error.status_code, str(error.detail))
        return await http_exception_handler(request, error)

    app.add_exception_handler(EvalstoreError, evalstore_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(HTTPException, not_found)
