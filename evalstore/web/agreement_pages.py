"""`judgments compare` in the browser, for a task's organiser (and admins): pick two qrels of the
task's lineage (a judge-made version and the human qrels, or two versions) and read how far they
agree on labels, on the order of the task's runs and on significance decisions, with the judges
behind them, their probes and the circular runs. GET computes the report and writes nothing; the
runs with no stored evaluation on either qrels are listed, with a form that queues them."""

from __future__ import annotations

import re
from urllib.parse import quote, urlencode

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from evalstore.errors import EvalstoreError
from evalstore.services import organising
from evalstore.services.judges import task_agreement
from evalstore.services.tasks.judge_made import ATTACK_NAMES
from evalstore.web.auth import server
from evalstore.web.errors import status_for
from evalstore.web.pages import form_principal, page_principal, render, see_other
from evalstore.web.wording import for_reader

router = APIRouter(include_in_schema=False)


@router.get("/tasks/{task}/judgments")
def agreement_page(
    request: Request,
    task: str,
    first: str | None = None,
    second: str | None = None,
    measure: list[str] = Query([]),
    top_k: int = 5,
    test: str = "t",
    alpha: float = 0.05,
    queued: int | None = None,
) -> HTMLResponse:
    principal = page_principal(request, "tasks:manage")
    engine = server(request).engine
    shown = organising.managed(engine, principal, task).as_dict()
    choices = task_agreement.qrels_choices(engine, task)
    report: task_agreement.TaskAgreementReport | None = None
    error = None
    measures = [m for text in measure for m in re.split(r"[,\s]+", text) if m]
    if first and second:
        try:
            report = task_agreement.task_report(
                engine, task, first, second, measures=measures or None, top_k=top_k, test=test, alpha=alpha
            )
        except EvalstoreError as failed:  # a wrong choice, or nothing in common: said on the page
            if status_for(failed) not in (400, 404, 422):
                raise
            error = for_reader(failed, principal)
    return render(
        request,
        "agreement.html",
        principal,
        task=shown,
        choices=choices,
        first=first or (choices[1] if len(choices) > 1 else choices[0]),
        second=second or choices[0],
        measures=", ".join(measures),
        top_k=top_k,
        test=test,
        alpha=alpha,
        report=report,
        error=error,
        queued=queued,
        attacks=ATTACK_NAMES,
    )


@router.post("/tasks/{task}/judgments/evaluate")
async def queue_evaluations(request: Request, task: str) -> Response:
    principal, form = await form_principal(request, "tasks:manage")
    engine = server(request).engine
    await run_in_threadpool(organising.managed, engine, principal, task)
    qrels = [str(q) for q in form.getlist("qrels")]
    queued = await run_in_threadpool(task_agreement.queue_missing, engine, task, qrels)
    back = [("first", str(form.get("first", ""))), ("second", str(form.get("second", "")))]
    back += [("measure", str(m)) for m in form.getlist("measure")]
    return see_other(f"/tasks/{quote(task, safe='')}/judgments?" + urlencode([*back, ("queued", str(len(queued)))]))


def install(app: FastAPI) -> None:
    app.include_router(router)
