"""A message in the words of the person reading the page. The services' messages are written for
every edge, and many end with the command that fixes the problem ("Run 'evalstore measures' for
the list."); a participant, an assessor or a viewer has no terminal on the server, so on their
pages that advice is taken out and they are pointed to their organiser instead. Admins and
organisers, who run the service, keep the command."""

from __future__ import annotations

import re

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


def for_reader(message: str, principal: Principal) -> str:
    """``message`` as ``principal`` should read it: unchanged for admins and organisers; for
    everyone else without command-line advice, and with :data:`ASK` where advice was taken out.
    A clause after ';' or ':' that carries the command goes with it; a sentence that is nothing
    but the command goes whole; a line (an upload's ``file:line`` errors) is kept line by line."""
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
