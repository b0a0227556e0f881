"""A lab's pages: a collection (a set of qrels) with every run evaluated against it, in a task or
not: its leaderboard, run pages and comparisons, the same pages a task has. Admins see every
collection, organisers those of their tasks (services.tasks.lab_boards says who sees what); to
anyone else a collection is not there."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, Response

from evalstore.services import lab_reports, tasks
from evalstore.web.auth import server
from evalstore.web.pages import (
    board_context,
    board_file,
    compare_chart,
    download_format,
    page_principal,
    render,
    run_context,
)

router = APIRouter(include_in_schema=False)
ACTION = "collections:read"


def _url(qrels: str) -> str:
    return f"/collections/{quote(qrels, safe='')}"


@router.get("/collections")
def collections_page(request: Request) -> HTMLResponse:
    principal = page_principal(request, ACTION)
    listed = tasks.list_collections(server(request).engine, principal)
    return render(request, "collections.html", principal, collections=listed)


@router.get("/collections/{qrels}")
def collection_page(
    request: Request, qrels: str, measure: list[str] = Query([]), sort: str | None = None
) -> HTMLResponse:
    principal = page_principal(request, ACTION)
    engine = server(request).engine
    page = lab_reports.collection_leaderboard(engine, principal, qrels, measure, sort, context=server(request).context)
    return render(
        request,
        "collection.html",
        principal,
        **board_context(_url(qrels), page, measure, tasks.collection_measures(engine, qrels)),
        run_base=f"{_url(qrels)}/runs/",
        tasks=tasks.collection_access(engine, principal, qrels).tasks,
    )


@router.get("/collections/{qrels}/leaderboard.{fmt}")
def collection_download(
    request: Request, qrels: str, fmt: str, measure: list[str] = Query([]), sort: str | None = None
) -> Response:
    principal = page_principal(request, ACTION)
    download_format(fmt)
    engine = server(request).engine
    return board_file(
        lab_reports.collection_leaderboard(engine, principal, qrels, measure, sort, context=server(request).context),
        fmt,
    )


@router.get("/collections/{qrels}/runs/{run}")
def collection_run_page(request: Request, qrels: str, run: str, measure: str | None = None) -> HTMLResponse:
    principal = page_principal(request, ACTION)
    engine = server(request).engine
    page = lab_reports.collection_run_page(engine, principal, qrels, run, measure, context=server(request).context)
    return render(
        request,
        "collection_run.html",
        principal,
        **run_context(request, page, "collection", f"{_url(qrels)}/compare"),
        qrels=qrels,
        no_worker=False,  # a collection's runs are evaluated: nothing waits
    )


@router.get("/collections/{qrels}/compare")
def collection_compare_page(
    request: Request,
    qrels: str,
    run: list[str] = Query([]),
    measure: str = "AP",
    test: str = "t",
    collection: str | None = None,
) -> HTMLResponse:
    principal = page_principal(request, ACTION)
    engine = server(request).engine
    choices = lab_reports.collection_runs(engine, principal, qrels)
    page = (
        lab_reports.collection_compare_page(engine, principal, qrels, run, measure, test, collection or None)
        if len(run) >= 2
        else None
    )
    return render(
        request,
        "collection_compare.html",
        principal,
        task=qrels,
        page=page,
        chart=compare_chart(page),
        choices=choices,
        chosen=run,
        measure=measure,
        test=test,
        collection=collection or "",
    )


def install(app: FastAPI) -> None:
    app.include_router(router)
