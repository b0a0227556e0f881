"""The organiser's judges page: add an LLM judge (an OpenAI-compatible endpoint), probe it, run it
on a pool of their tasks and read its report with its cost so far. A probe or a run goes on a
background job of the server (a thread; never the request's), one at a time per judge; the page
shows its progress and reloads itself while it works, and lists the run's failed and skipped
documents when it is done. A judge's key stays in the server's environment: the page names the
variable it is read from, never its value."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from evalstore.errors import ConflictError, EvalstoreError, InvalidParameterError, told
from evalstore.services import organising
from evalstore.services.access import Principal
from evalstore.services.judges.redaction import url_credentials
from evalstore.web.api import check_name
from evalstore.web.auth import server
from evalstore.web.errors import status_for
from evalstore.web.pages import form_principal, page_principal, render, see_other
from evalstore.web.wording import for_reader

log = logging.getLogger("evalstore.web")
router = APIRouter(include_in_schema=False)
_ADD = ("name", "endpoint", "model", "api_key_env", "scale", "temperature", "max_concurrency", "price_in", "price_out")
# what a run's report lists of its failed and skipped documents (the counts are whole)
LISTED = 50


@dataclass
class JudgeJob:
    """A probe or a run on the server's background: its progress, then its result or error."""

    kind: str  # probe | run
    judge: str
    pool: str
    by: str
    started_at: datetime
    done: int = 0
    total: int = 0
    finished_at: datetime | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    stop_asked_by: str | None = None  # who asked a probe to stop; it stops after its current document
    stopped: bool = False  # stopped as asked: nothing of it was stored

    @property
    def running(self) -> bool:
        return self.finished_at is None

    def progress(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        if self.stop_asked_by is not None:
            raise _Stopped


class _Stopped(Exception):
    """A probe asked to stop, raised from its progress between two documents: the probe stores
    its result only once all its documents are asked, so nothing of it is stored."""


@dataclass
class JudgeJobs:
    """The server's judge jobs, the latest per judge; one runs at a time per judge."""

    jobs: dict[str, JudgeJob] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def latest(self, judge: str) -> JudgeJob | None:
        """A copy of the judge's latest job as it is now (the page reads the store after it, so a
        copy that says finished goes with everything the job stored)."""
        with self.lock:
            found = self.jobs.get(judge)
            return dataclasses.replace(found) if found is not None else None

    def stop_probe(self, judge: str, by: str) -> JudgeJob:
        """Ask the judge's running probe to stop (a run is not stopped: its labels are stored as it
        goes, and its budget is what bounds it)."""
        with self.lock:
            current = self.jobs.get(judge)
            if current is None or not current.running or current.kind != "probe":
                raise ConflictError(f"Judge '{judge}' has no probe running; there is nothing to cancel.")
            current.stop_asked_by = current.stop_asked_by or by
            return dataclasses.replace(current)

    def start(self, job: JudgeJob, work: Callable[[Callable[[int, int], None]], dict[str, Any]]) -> JudgeJob:
        with self.lock:
            current = self.jobs.get(job.judge)
            if current is not None and current.running:
                raise ConflictError(
                    f"Judge '{job.judge}' is already busy with a {current.kind} on pool '{current.pool}'; "
                    "its progress is on this page. Start another when it is done."
                )
            self.jobs[job.judge] = job
        threading.Thread(target=self._work, args=(job, work), name=f"judge-{job.kind}", daemon=True).start()
        return job

    @staticmethod
    def _work(job: JudgeJob, work: Callable[[Callable[[int, int], None]], dict[str, Any]]) -> None:
        try:
            job.result = work(job.progress)
        except _Stopped:
            job.stopped = True
        except EvalstoreError as error:
            # an organisers-only page: the pages' remedy ("check the judge's endpoint"), else the
            # command, which is theirs to run
            remedy = error.remedy
            job.error = told(str(error), (remedy.web or remedy.cli) if remedy is not None else None)
        except Exception:  # the page says it stopped; the log has the why (never shown to the user)
            log.exception("judge %s: the %s on pool %s stopped", job.judge, job.kind, job.pool)
            job.error = f"The {job.kind} stopped on an unexpected error; the labels stored so far are kept."
        finally:
            job.finished_at = datetime.now(UTC)


def _jobs(request: Request) -> JudgeJobs:
    found = request.app.state.judge_jobs
    assert isinstance(found, JudgeJobs)
    return found


def _judge_url(judge: str) -> str:
    return f"/judges/{quote(judge, safe='')}"


def _list_page(
    request: Request,
    principal: Principal,
    *,
    status_code: int = 200,
    error: str | None = None,
    form: dict[str, str] | None = None,
) -> HTMLResponse:
    engine = server(request).engine
    return render(
        request,
        "judges.html",
        principal,
        status_code=status_code,
        error=error,
        form=form or {"scale": "0-3", "temperature": "0", "max_concurrency": "4"},
        judges=organising.console_judges(engine, principal),
        key_prefix=organising.JUDGE_KEY_PREFIX,
    )


@router.get("/judges")
def judges_page(request: Request) -> HTMLResponse:
    principal = page_principal(request, "tasks:manage")
    return _list_page(request, principal)


def _number(text: str, what: str, *, whole: bool = False) -> float | None:
    if not text.strip():
        return None
    try:
        return int(text) if whole else float(text)
    except ValueError:
        kind = "a whole number" if whole else "a number"
        raise InvalidParameterError(f"{what} is {kind}; got '{text}'.") from None


@router.post("/judges")
async def add_judge(request: Request) -> Response:
    principal, form = await form_principal(request, "tasks:manage")
    kept = {k: str(form.get(k, "")).strip() for k in _ADD}
    try:
        check_name(kept["name"], "judge")
        temperature = _number(kept["temperature"], "The temperature")
        concurrency = _number(kept["max_concurrency"], "Requests at once", whole=True)
        await run_in_threadpool(
            organising.add_console_judge,
            server(request).engine,
            principal,
            kept["name"],
            endpoint=kept["endpoint"],
            model=kept["model"],
            api_key_env=kept["api_key_env"] or None,
            scale=kept["scale"] or "0-3",
            temperature=0.0 if temperature is None else temperature,
            max_concurrency=4 if concurrency is None else int(concurrency),
            price_in=_number(kept["price_in"], "The price per million input tokens"),
            price_out=_number(kept["price_out"], "The price per million output tokens"),
        )
    except EvalstoreError as error:
        if status_for(error) not in (400, 409, 422):
            raise
        if url_credentials(kept["endpoint"]):  # a key typed into the URL is not written back into the page
            kept["endpoint"] = ""
        return await run_in_threadpool(
            _list_page, request, principal, status_code=status_for(error), error=for_reader(error, principal), form=kept
        )
    return see_other(_judge_url(kept["name"]) + "?added=1")


# a running job's page reloads itself: each second for its first few looks (a probe of a few
# documents is often done within them), then every three seconds; ``?working=N`` counts the looks
_QUICK_LOOKS = 5
_LOOKS = {str(n): n for n in range(1, _QUICK_LOOKS + 1)}


def _reload(request: Request) -> tuple[int, int]:
    """The seconds until a running job's page reloads itself, and its next look's count."""
    looked = _LOOKS.get(request.query_params.get("working", ""), 0)
    return (1, looked + 1) if looked < _QUICK_LOOKS else (3, _QUICK_LOOKS)


def _judge_page(
    request: Request, principal: Principal, judge: str, *, status_code: int = 200, error: str | None = None
) -> HTMLResponse:
    engine = server(request).engine
    organising.console_judge(engine, principal, judge)  # the caller's judge, before its job is shown
    # the job first, then what is stored: a job read as finished has stored all it will
    job = _jobs(request).latest(judge)
    shown = organising.console_judge(engine, principal, judge)
    return render(
        request,
        "judge_report.html",
        principal,
        status_code=status_code,
        error=error,
        judge=shown,
        job=job,
        listed=LISTED,
        pools=organising.judgeable_pools(engine, principal),
        key_prefix=organising.JUDGE_KEY_PREFIX,
        reload=_reload(request),
    )


@router.get("/judges/{judge}")
def judge_page(request: Request, judge: str) -> HTMLResponse:
    principal = page_principal(request, "tasks:manage")
    return _judge_page(request, principal, judge)


async def _refused(request: Request, principal: Principal, judge: str, error: EvalstoreError) -> Response:
    """The judge's page again, showing why a run or a probe was refused (a bad field, a pool not the
    organiser's, a job already running); an error that is not a refusal is raised."""
    if status_for(error) not in (400, 409, 422):
        raise error
    return await run_in_threadpool(
        _judge_page, request, principal, judge, status_code=status_for(error), error=for_reader(error, principal)
    )


@router.post("/judges/{judge}/run")
async def run_judge(request: Request, judge: str) -> Response:
    principal, form = await form_principal(request, "tasks:manage")
    pool = str(form.get("pool", "")).strip()
    engine = server(request).engine
    try:
        budget = _number(str(form.get("max_cost", "")), "The budget")
        if budget is not None and not 0 < budget < 1e6:
            raise InvalidParameterError(f"The budget is above 0 dollars (below a million); not {budget:g}.")
        await run_in_threadpool(organising.judge_pool, engine, principal, judge, pool)

        def work(progress: Callable[[int, int], None]) -> dict[str, Any]:
            return organising.run_console_judge(
                engine, principal, judge, pool, max_cost=budget, progress=progress
            ).as_dict()

        _jobs(request).start(JudgeJob("run", judge, pool, principal.name or "", datetime.now(UTC)), work)
    except EvalstoreError as error:
        return await _refused(request, principal, judge, error)
    return see_other(_judge_url(judge) + "#progress")


@router.post("/judges/{judge}/probe")
async def probe_judge(request: Request, judge: str) -> Response:
    principal, form = await form_principal(request, "tasks:manage")
    pool = str(form.get("pool", "")).strip()
    engine = server(request).engine
    try:
        limit = _number(str(form.get("limit", "")), "The documents to probe", whole=True)
        await run_in_threadpool(organising.judge_pool, engine, principal, judge, pool)

        def work(progress: Callable[[int, int], None]) -> dict[str, Any]:
            return organising.probe_console_judge(
                engine, principal, judge, pool, limit=10 if limit is None else int(limit), progress=progress
            ).as_dict()

        if limit is not None and not 1 <= limit <= organising.MAX_PROBE_DOCUMENTS:
            raise InvalidParameterError(
                f"A probe asks about 1 to {organising.MAX_PROBE_DOCUMENTS} documents; not {int(limit)}."
            )
        _jobs(request).start(JudgeJob("probe", judge, pool, principal.name or "", datetime.now(UTC)), work)
    except EvalstoreError as error:
        return await _refused(request, principal, judge, error)
    return see_other(_judge_url(judge) + "#progress")


@router.post("/judges/{judge}/probe/cancel")
async def cancel_probe(request: Request, judge: str) -> Response:
    principal, _ = await form_principal(request, "tasks:manage")
    try:
        # the caller's judge (an admin: any), as for starting the probe
        await run_in_threadpool(organising.console_judge, server(request).engine, principal, judge)
        _jobs(request).stop_probe(judge, principal.name or "")
    except EvalstoreError as error:
        if status_for(error) != 409:
            raise
        return await run_in_threadpool(
            _judge_page, request, principal, judge, status_code=status_for(error), error=str(error)
        )
    return see_other(_judge_url(judge) + "#progress")


def install(app: FastAPI) -> None:
    app.state.judge_jobs = JudgeJobs()
    app.include_router(router)
