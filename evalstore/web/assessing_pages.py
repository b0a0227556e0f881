"""Generated answers assessed in the browser: an assessor's nugget page (which of a topic's nuggets
an answer holds, keys S, P, N) and support page (whether each cited sentence's first citation
supports it, keys 2, 1, 0), and the bank's page, where its organiser edits the nuggets and
reviews a judge's draft. Forms post with the session's CSRF token, as every page form does; the
keyboard script (``assess.js``) only presses what the page's own controls do."""

from __future__ import annotations

import time
from urllib.parse import quote, urlencode

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from evalstore.errors import InvalidParameterError
from evalstore.services import assessing
from evalstore.web.auth import server
from evalstore.web.pages import form_principal, page_principal, render, see_other

router = APIRouter(include_in_schema=False)


def _seconds(form: FormData, prefix: str, keys: list[int]) -> dict[int, float]:
    """Each label's time as the keyboard script measured it (from the page's showing, or the label
    before); without the script, the answer's time shared among its labels."""
    out: dict[int, float] = {}
    for key in keys:
        try:
            out[key] = max(0.0, float(str(form.get(f"{prefix}{key}", ""))))
        except ValueError:
            continue
    if len(out) == len(keys):
        return out
    try:
        spent = max(0.0, time.time() - float(str(form.get("shown_at", ""))))
    except ValueError:
        return out
    return {key: out.get(key, spent / max(1, len(keys))) for key in keys}


def _numbered(form: FormData, prefix: str) -> dict[int, str]:
    """The form's fields ``PREFIX<number>`` that hold a value, by number."""
    out: dict[int, str] = {}
    for key, value in form.multi_items():
        number = key.removeprefix(prefix)
        if key.startswith(prefix) and number.isascii() and number.isdigit() and len(number) < 12 and str(value):
            out[int(number)] = str(value)
    return out


# --- the assessor's pages -------------------------------------------------------------------------


@router.get("/assess")
def assess_home(request: Request) -> HTMLResponse:
    principal = page_principal(request, "nuggets:assess")
    banks = assessing.assessor_banks(server(request).engine, principal)
    return render(request, "assess_banks.html", principal, banks=banks)


@router.get("/assess/{bank}")
def assess_bank(request: Request, bank: str) -> HTMLResponse:
    principal = page_principal(request, "nuggets:assess")
    topics = assessing.bank_topics(server(request).engine, principal, bank)
    return render(request, "assess_bank.html", principal, bank=bank, topics=topics)


@router.get("/assess/{bank}/{topic}")
def nugget_page(
    request: Request, bank: str, topic: str, answer: str | None = None, saved: str | None = None
) -> HTMLResponse:
    principal = page_principal(request, "nuggets:assess")
    screen = assessing.nugget_screen(server(request).engine, principal, bank, topic, answer=answer)
    return render(
        request,
        "assess_nuggets.html",
        principal,
        screen=screen,
        shown_at=f"{time.time():.3f}",
        saved=saved,
        labels=[
            ("support", "s", "Support"),
            ("partial_support", "p", "Partial support"),
            ("not_support", "n", "No support"),
        ],
    )


@router.post("/assess/{bank}/{topic}")
async def nugget_submit(request: Request, bank: str, topic: str) -> Response:
    principal, form = await form_principal(request, "nuggets:assess")
    labels = _numbered(form, "label_")
    if not labels:
        raise InvalidParameterError("Label the answer's nuggets: support, partial support or no support each.")
    answer = str(form.get("answer", ""))
    done = await run_in_threadpool(
        assessing.assess_answer,
        server(request).engine,
        principal,
        bank,
        topic,
        answer,
        labels,
        seconds=_seconds(form, "seconds_", list(labels)),
    )
    return see_other(f"/assess/{quote(bank)}/{quote(topic)}?{urlencode({'saved': done.answer})}")


@router.get("/assess/{bank}/{topic}/support")
def support_page(
    request: Request, bank: str, topic: str, answer: str | None = None, saved: str | None = None
) -> HTMLResponse:
    principal = page_principal(request, "nuggets:assess")
    screen = assessing.support_screen(server(request).engine, principal, bank, topic, answer=answer)
    return render(
        request,
        "assess_support.html",
        principal,
        screen=screen,
        shown_at=f"{time.time():.3f}",
        saved=saved,
        grades=[(2, "Full support"), (1, "Partial support"), (0, "No support")],
    )


@router.post("/assess/{bank}/{topic}/support")
async def support_submit(request: Request, bank: str, topic: str) -> Response:
    principal, form = await form_principal(request, "nuggets:assess")
    given = _numbered(form, "support_")
    if any(value not in ("0", "1", "2") for value in given.values()):
        raise InvalidParameterError("A citation's support is 2 (full), 1 (partial) or 0 (none).")
    labels = {sentence: int(value) for sentence, value in given.items()}
    answer = str(form.get("answer", ""))
    done = await run_in_threadpool(
        assessing.assess_support,
        server(request).engine,
        principal,
        bank,
        topic,
        answer,
        labels,
        seconds=_seconds(form, "seconds_", list(labels)),
    )
    return see_other(f"/assess/{quote(bank)}/{quote(topic)}/support?{urlencode({'saved': done.answer})}")


# --- the organiser's bank page --------------------------------------------------------------------


@router.get("/banks")
def banks_home(request: Request) -> HTMLResponse:
    principal = page_principal(request, "nuggets:manage")
    return render(request, "banks.html", principal, banks=assessing.organised_banks(server(request).engine, principal))


@router.get("/banks/{bank}")
def bank_page(request: Request, bank: str, done: str | None = None) -> HTMLResponse:
    principal = page_principal(request, "nuggets:manage")
    page = assessing.bank_page(server(request).engine, principal, bank)
    return render(request, "bank.html", principal, page=page, done=done)


def _back(bank: str, edit: assessing.BankEdit, what: str) -> Response:
    message = what + (f"; {edit.labels_removed} labels of the old text were removed" if edit.labels_removed else "")
    anchor = f"#n-{edit.nuggets[0]}" if edit.nuggets else f"#t-{quote(edit.topic)}"
    return see_other(f"/banks/{quote(bank)}?{urlencode({'done': message})}{anchor}")


@router.post("/banks/{bank}/nuggets")
async def bank_add(request: Request, bank: str) -> Response:
    principal, form = await form_principal(request, "nuggets:manage")
    edit = await run_in_threadpool(
        assessing.add_nugget,
        server(request).engine,
        principal,
        bank,
        str(form.get("topic", "")),
        str(form.get("text", "")),
        str(form.get("importance", "")),
    )
    return _back(bank, edit, "Nugget added")


def _nugget_id(text: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) < 12):
        raise InvalidParameterError("Pick a nugget of the bank.")
    return int(text)


@router.post("/banks/{bank}/nuggets/{nugget}")
async def bank_nugget(request: Request, bank: str, nugget: str) -> Response:
    principal, form = await form_principal(request, "nuggets:manage")
    engine, number = server(request).engine, _nugget_id(nugget)
    action = str(form.get("action", ""))
    text, importance = str(form.get("text", "")), str(form.get("importance", ""))
    if action == "save":
        edit = await run_in_threadpool(assessing.edit_nugget, engine, principal, bank, number, text, importance)
        return _back(bank, edit, "Nugget saved")
    if action == "accept":
        edit = await run_in_threadpool(assessing.accept_nugget, engine, principal, bank, number)
        return _back(bank, edit, "Nugget accepted")
    if action == "reject":
        edit = await run_in_threadpool(assessing.reject_nugget, engine, principal, bank, number)
        return _back(bank, edit, "Nugget rejected")
    if action == "split":
        parts = str(form.get("parts", "")).splitlines()
        edit = await run_in_threadpool(assessing.split_nugget, engine, principal, bank, number, parts, importance)
        return _back(bank, edit, f"Nugget split into {len(edit.nuggets)}")
    raise InvalidParameterError("Pick what to do with the nugget: save, accept, reject or split.")


@router.post("/banks/{bank}/merge")
async def bank_merge(request: Request, bank: str) -> Response:
    principal, form = await form_principal(request, "nuggets:manage")
    ids = [_nugget_id(str(value)) for value in form.getlist("nugget")]
    edit = await run_in_threadpool(
        assessing.merge_nuggets,
        server(request).engine,
        principal,
        bank,
        ids,
        str(form.get("text", "")),
        str(form.get("importance", "")),
    )
    return _back(bank, edit, f"{len(set(ids))} nuggets merged")


@router.post("/banks/{bank}/accept")
async def bank_accept(request: Request, bank: str) -> Response:
    principal, _ = await form_principal(request, "nuggets:manage")
    await run_in_threadpool(assessing.accept_draft, server(request).engine, principal, bank)
    return see_other(f"/banks/{quote(bank)}?{urlencode({'done': 'Bank accepted: it is scored on from now on'})}")


def install(app: FastAPI) -> None:
    app.include_router(router)
