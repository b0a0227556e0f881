"""A client of the HTTP service, for the CLI (`runs register --server URL --token TOKEN`): the
server holds the database's credentials, the client only a token."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx

from evalstore.errors import HTTP_STATUS, LIMIT_HTTP_STATUS, EvalstoreError, InputFormatError, LimitExceeded, Remedy

SERVER_ENV = "EVALSTORE_SERVER"
_WHERE = re.compile(r"(?P<path>.+?):(?P<line>\d+): (?P<problem>.*)", re.DOTALL)


class Client:
    def __init__(self, server: str, token: str, *, timeout: float = 600.0) -> None:
        self.base = server.rstrip("/")
        self._http = httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {token}"}, timeout=timeout)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self._http.close()

    def submit_run(
        self,
        task: str,
        path: Path,
        *,
        name: str,
        run_type: str = "automatic",
        description: str | None = None,
        judging_precedence: int | None = None,
        team: str | None = None,
    ) -> dict[str, Any]:
        fields = {
            "name": name,
            "run_type": run_type,
            "description": description,
            "judging_precedence": judging_precedence,
            "team": team,
        }
        with path.open("rb") as handle:
            return self._call(
                "POST",
                f"/api/v1/tasks/{task}/runs",
                files={"file": (path.name, handle, "application/octet-stream")},
                data={key: str(value) for key, value in fields.items() if value is not None},
            )

    def register_run(self, path: Path, *, name: str, description: str | None = None) -> dict[str, Any]:
        fields = {"name": name, "description": description}
        with path.open("rb") as handle:
            return self._call(
                "POST",
                "/api/v1/runs",
                files={"file": (path.name, handle, "application/octet-stream")},
                data={key: value for key, value in fields.items() if value is not None},
            )

    def job(self, job_id: int) -> dict[str, Any]:
        return self._call("GET", f"/api/v1/jobs/{job_id}")

    def _call(self, method: str, url: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, url, **kwargs)
        except httpx.TransportError as error:
            raise EvalstoreError(
                f"Could not reach the server at {self.base}: {error}. Is 'evalstore serve' running there?"
            ) from None
        if response.is_success:
            return response.json()
        raise error_from(response)


def error_from(response: httpx.Response) -> EvalstoreError:
    """The server's refusal as the exception the same refusal raises locally."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    message = body.get("error") or f"The server answered {response.status_code} {response.reason_phrase}."
    errors = body.get("errors") or []
    status = response.status_code
    said = body.get("remedy")  # already in the words of this caller's role
    remedy = Remedy(cli=said, web=said) if isinstance(said, str) else None
    if status == 422 and errors:
        where = _WHERE.match("\n".join(errors))
        if where:
            return InputFormatError(where["path"], int(where["line"]), where["problem"], remedy=remedy)
    limit = next((name for name, code in LIMIT_HTTP_STATUS.items() if code == status and code != 409), None)
    if limit is not None:  # 409 is a taken name or a full quota: a conflict either way
        return LimitExceeded(limit, message, remedy=remedy)
    kind = next((kind for kind, code in HTTP_STATUS if code == status and kind is not InputFormatError), EvalstoreError)
    return kind(message, remedy=remedy)
