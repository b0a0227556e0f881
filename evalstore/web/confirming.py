"""Confirmation before an action that cannot be undone (withdraw a run, release a task's scores,
cancel an evaluation, revoke a token). The form's first post shows what will happen and changes
nothing; only a post carrying ``confirm=yes`` acts. A page of its own rather than a script's
dialog: the site's Content-Security-Policy allows no inline script, and every page must work
without script."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request
from fastapi.responses import HTMLResponse
from starlette.datastructures import FormData

from evalstore.services.access import Principal
from evalstore.web.pages import render

CONFIRM_FIELD = "confirm"
CONFIRM_VALUE = "yes"


def confirmed(form: FormData) -> bool:
    """Whether the post carries the explicit confirmation (the confirmation page's button)."""
    return str(form.get(CONFIRM_FIELD, "")) == CONFIRM_VALUE


@dataclass(frozen=True)
class Confirmation:
    """What the confirmation page says: the question, what will happen, the button that acts
    (posting ``fields`` again with the confirmation) and the way back that does nothing."""

    heading: str
    consequences: list[str]
    button: str
    back: str
    fields: dict[str, str] = field(default_factory=dict)


def confirmation_page(request: Request, principal: Principal, asked: Confirmation) -> HTMLResponse:
    """The page that asks; it posts to the same address as the form that led to it."""
    return render(
        request,
        "confirm.html",
        principal,
        asked=asked,
        action=request.url.path,
        confirm_field=CONFIRM_FIELD,
        confirm_value=CONFIRM_VALUE,
    )
