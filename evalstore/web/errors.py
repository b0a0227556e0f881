"""Exceptions to HTTP responses, with the status table of evalstore.errors (the CLI's exit codes:
evalstore.cli._errors).

Every error body is ``{"error": message}``; a refused upload adds ``"errors"``, one
``file:line: what is wrong`` per problem found.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

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


def install(app: FastAPI) -> None:
    async def evalstore_error(_request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, EvalstoreError)
        return error_response(error)

    async def invalid_request(_request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()]
        return JSONResponse({"error": "The request is not valid: " + "; ".join(problems), "errors": problems},
                            status_code=422)

    app.add_exception_handler(EvalstoreError, evalstore_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
