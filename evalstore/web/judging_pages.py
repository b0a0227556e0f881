"""An assessor's own judgments of a topic, listed, each of which they may change (its grade and
its note): the judging screen shows one document at a time; this page is where an earlier
judgment is revised. Forms post with the session's CSRF token, as every page form does."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from evalstore.errors import InvalidParameterError
from evalstore.services import judging
from evalstore.web.auth import server
from evalstore.web.pages import form_principal, page_principal, render, see_other

router = APIRouter(include_in_schema=False)


@router.get("/judge/{pool}/{topic}/judgments")
def judgments_page(request: Request, pool: str, topic: str, saved: str | None = None) -> HTMLResponse:
    principal = page_principal(request, "pools:judge")
    grades, role, judgments = judging.my_judgments(server(request).engine, principal, pool, topic)
    return render(
        request,
        "judgments.html",
        principal,
        pool=pool,
        topic=topic,
        grades=grades,
        role=role,
        judgments=judgments,
        saved=saved,
        skipped=judging.SKIPPED,
    )


@router.post("/judge/{pool}/{topic}/judgments")
async def revise(request: Request, pool: str, topic: str) -> Response:
    principal, form = await form_principal(request, "pools:judge")
    doc, grade_text = str(form.get("doc", "")), str(form.get("grade", ""))
    if grade_text != "skip" and not (grade_text.isascii() and grade_text.isdigit()):
        raise InvalidParameterError("Pick a grade (a number of the pool's scale) or skip.")
    await run_in_threadpool(
        judging.revise_judgment,
        server(request).engine,
        principal,
        pool,
        topic,
        doc,
        None if grade_text == "skip" else int(grade_text),
        note=str(form.get("note", "")),
    )
    return see_other(f"/judge/{quote(pool)}/{quote(topic)}/judgments?saved={quote(doc)}#j-{quote(doc)}")


def install(app: FastAPI) -> None:
    app.include_router(router)
