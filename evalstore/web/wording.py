"""An error in the words of the person reading the page or calling the API. The services' errors
carry a fact (``str(error)``) and a :class:`~evalstore.errors.Remedy`: what to do, as the command
line says it and as the pages say it. A participant, an assessor or a viewer has no terminal on
the server: they are told the pages' remedy, or, when only someone who runs the service can act,
to ask their organiser. Admins and organisers, who run the service, are also told the command.

A fact names no command or option (``tests/unit/test_remedies.py`` reads every message the
services, the store and the pages raise), so nothing here takes advice out of a message's text."""

from __future__ import annotations

from evalstore.errors import EvalstoreError, told
from evalstore.services.access import Principal

ASK = "If this needs changing, ask your organiser."


def runs_the_service(principal: Principal) -> bool:
    """Who is told commands: the people who run the service and its tasks."""
    return principal.is_admin or principal.role == "organiser"


def remedy_for(error: EvalstoreError, principal: Principal) -> str | None:
    """What ``principal`` is told to do about ``error``: the pages' remedy; else the command for
    those who run the service and :data:`ASK` for everyone else; None when there is nothing to do."""
    remedy = error.remedy
    if remedy is None:
        return None
    if remedy.web is not None:
        return remedy.web
    return remedy.cli if runs_the_service(principal) else ASK


def for_reader(error: EvalstoreError, principal: Principal) -> str:
    """``error`` as ``principal`` should read it: its fact, then its remedy in the words of the
    pages (:func:`remedy_for`)."""
    return told(str(error), remedy_for(error, principal))
