"""An error in the words of the person reading the page or calling the API. The services' errors
carry a fact (``str(error)``) and a :class:`~evalstore.errors.Remedy`: what to do, as the command
line says it and as the pages say it. A participant, an assessor or a viewer has no terminal on
the server: they are told the pages' remedy, or, when only someone who runs the service can act,
to ask their organiser. Admins and organisers, who run the service, are also told the command.

Some modules' messages still carry their command in their text (listed, with how many, in
``tests/unit/test_remedies.py``); on the pages, :func:`_line_for_reader` takes that advice out of
the text until they give it as a remedy. The API gives those messages as they are."""

from __future__ import annotations

import re

from evalstore.errors import EvalstoreError, told
from evalstore.services.access import Principal

ASK = "If this needs changing, ask your organiser."
# a command quoted in a message: 'evalstore ...' or `evalstore ...`
_COMMAND = re.compile(r"['`]evalstore [^'`]*['`]")
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]*")
# a parenthesis that only carries a command: "(an admin makes one with 'evalstore tokens create')"
_ASIDE = re.compile(r"\s*\([^()]*['`]evalstore [^()]*\)")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z'`(])")


def runs_the_service(principal: Principal) -> bool:
    """Who is told commands: the people who run the service and its tasks."""
    return principal.is_admin or principal.role == "organiser"


def is_command_advice(text: str) -> bool:
    return bool(_COMMAND.search(text) or _OPTION.search(text))


def remedy_for(error: EvalstoreError, principal: Principal) -> str | None:
    """What ``principal`` is told to do about ``error``: the pages' remedy; else the command for
    those who run the service and :data:`ASK` for everyone else; None when there is nothing to do."""
    remedy = error.remedy
    if remedy is None:
        return None
    if remedy.web is not None:
        return remedy.web
    return remedy.cli if runs_the_service(principal) else ASK


def for_reader(message: EvalstoreError | str, principal: Principal) -> str:
    """``message`` as ``principal`` should read it: an error's fact and its remedy in the words of
    the pages (:func:`remedy_for`). A message with command-line advice in its text is unchanged
    for admins and organisers; for everyone else the advice is taken out, with :data:`ASK` in its
    place. A clause after ';' or ':' that carries the command goes with it; a sentence that is
    nothing but the command goes whole; a line (an upload's ``file:line`` errors) is kept line by
    line."""
    if isinstance(message, EvalstoreError):
        remedy = remedy_for(message, principal)
        fact = for_reader(str(message), principal)
        return fact if remedy is not None and remedy in fact else told(fact, remedy)  # an ASK put there already
    if runs_the_service(principal) or not is_command_advice(message):
        return message
    lines = [_line_for_reader(line) for line in message.splitlines()]
    kept = "\n".join(line for line in lines if line)
    return f"{kept} {ASK}".strip() if kept else ASK


def _line_for_reader(line: str) -> str:
    if not is_command_advice(line):
        return line
    line = _ASIDE.sub("", line)
    sentences = []
    for sentence in _SENTENCE.split(line):
        if not is_command_advice(sentence):
            sentences.append(sentence)
            continue
        # keep what comes before the clause that names the command ("No run 'x'; see 'evalstore ...'")
        head = re.split(r"\s*[;:]\s*(?=[^;:]*(?:['`]evalstore |--[a-z]))", sentence, maxsplit=1)[0]
        if head != sentence and not is_command_advice(head):
            sentences.append(head.rstrip(" ,") + ".")
    return " ".join(sentences).strip()
