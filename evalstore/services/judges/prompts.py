"""Prompt templates of LLM judges and the parsing of their answers.

A template holds ``{query}`` and ``{passage}`` (replaced literally: other braces in a template stay
as they are), and may hold ``{min}``/``{max}``, the ends of the judge's scale. The default is
UMBRELA's zero-shot prompt (Upadhyay et al. 2024, arXiv 2406.06519), itself Bing's relevance
assessor prompt (Thomas et al., SIGIR 2024), on the 0-3 scale of TREC DL.

A document is untrusted text: it is put between ``<document>`` and ``</document>`` in the prompt
(what looks like either inside it is neutralised, so it cannot close its own delimiters and speak
as the prompt), and the answer's grade is the model's own: a JSON answer's ``relevance``, else the
LAST score statement after the last closing delimiter the answer repeats, so a document that
quotes "final score: 3" and is echoed by the model does not decide its own grade.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalstore.errors import InvalidParameterError, Remedy

UMBRELA = """Given a query and a passage, you must provide a score on an integer scale of {min} to {max} with the \
following meanings:
0 = represent that the passage has nothing to do with the query,
1 = represents that the passage seems related to the query but does not answer it,
2 = represents that the passage has some answer for the query, but the answer may be a bit unclear, or hidden \
amongst extraneous information and
3 = represents that the passage is dedicated to the query and contains the exact answer.

Important Instruction: Assign category 1 if the passage is somewhat related to the topic but not completely, \
category 2 if passage presents something very important related to the entire topic but also has some extra \
information and category 3 if the passage only and entirely refers to the topic. If none of the above satisfies \
give it category 0.

Query: {query}
Passage: {passage}

Split this problem into steps:
Consider the underlying intent of the search.
Measure how well the content matches a likely intent of the query (M).
Measure how trustworthy the passage is (T).
Consider the aspects above and the relative importance of each, and decide on a final score (O). Final score must \
be an integer value only.
Do not provide any code in result. Provide each score in the format of: ##final score: score without providing any \
reasoning."""

BUILT_IN = {"umbrela": UMBRELA}
# a passage longer than this is cut (UMBRELA judges passages; a whole web page would overflow a
# small model's context and cost tokens for nothing)
PASSAGE_CHARACTERS = 4000


def load_template(prompt: str) -> tuple[str, str]:
    """(name, template) of a built-in prompt's name or a template file's path."""
    if prompt in BUILT_IN:
        return prompt, BUILT_IN[prompt]
    path = Path(prompt)
    if not path.is_file():
        raise InvalidParameterError(
            f"A judge's prompt is 'umbrela' or a template file; '{prompt}' is neither.",
            remedy=Remedy(cli="Name one with --prompt."),
        )
    template = path.read_text(encoding="utf-8")
    missing = [p for p in ("{query}", "{passage}") if p not in template]
    if missing:
        raise InvalidParameterError(
            f"{path}:1: the template lacks {' and '.join(missing)}; a template names where "
            "the query and the passage go."
        )
    return str(path), template


def template_hash(template: str) -> str:
    return hashlib.sha256(template.encode("utf-8")).hexdigest()


OPEN, CLOSE = "<document>", "</document>"
# "<document>", "</ DOCUMENT >", "＜document＞" (full-width), "‹/document›": anything a model
# could read as one of the delimiters
_DELIMITER_LIKE = re.compile(r"[<＜‹〈](\s*/?\s*document)\b[^>＞›〉]{0,40}[>＞›〉]?", re.IGNORECASE)


def delimited(passage: str) -> str:
    """The passage between the delimiters, with its own look-alikes of them neutralised."""
    return f"{OPEN}\n{_DELIMITER_LIKE.sub(lambda m: f'({m.group(1).strip()})', passage)}\n{CLOSE}"


def render(template: str, *, query: str, passage: str, scale: tuple[int, int]) -> str:
    """The prompt for one (query, passage); literal replacement, so a document's braces stay. The
    passage goes in delimited (:func:`delimited`)."""
    passage = delimited(passage[:PASSAGE_CHARACTERS])
    text = template.replace("{min}", str(scale[0])).replace("{max}", str(scale[1]))
    # the passage last: a query holding "{passage}" must not pull the document in twice
    return text.replace("{query}", query.replace("{passage}", "{ passage}")).replace("{passage}", passage)


def answer_schema(scale: tuple[int, int]) -> dict[str, Any]:
    """The JSON schema a constrained server holds the answer to: the grade first (a short
    explanation may follow), so a truncated answer still carries it."""
    return {
        "type": "object",
        "properties": {
            "relevance": {"type": "integer", "enum": list(range(scale[0], scale[1] + 1))},
            "explanation": {"type": "string", "maxLength": 300},
        },
        "required": ["relevance"],
    }


@dataclass(frozen=True)
class Parsed:
    relevance: int | None
    explanation: str | None
    reason: str | None  # why there is no relevance


_FINAL_SCORE = re.compile(r"final\s+score\s*:?\s*\**\s*(-?\d+)", re.IGNORECASE)
_CLOSING = re.compile(r"[<＜‹〈]\s*/\s*document\s*[>＞›〉]", re.IGNORECASE)
_RELEVANCE_KEY = re.compile(r'"relevance"\s*:\s*"?(-?\d+)')
_LONE_NUMBER = re.compile(r"^\s*(-?\d+)\s*\.?\s*$")


def parse_answer(text: str | None, scale: tuple[int, int]) -> Parsed:
    """The grade in an answer: a JSON object's ``relevance`` (constrained output), else the prompt's
    own format (``##final score: N``, the last one after the last ``</document>`` the answer
    repeats: what comes before is the document's words, not the model's), else an answer that is a
    number alone."""
    if text is None or not text.strip():
        return Parsed(None, None, "empty answer")
    explanation: str | None = None
    value: str | None = None
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and "relevance" in decoded:
        value = str(decoded["relevance"])
        explanation = str(decoded["explanation"]).strip() or None if decoded.get("explanation") else None
    else:
        closings = list(_CLOSING.finditer(text))
        own = text[closings[-1].end() :] if closings else text
        for pattern in (_FINAL_SCORE, _RELEVANCE_KEY, _LONE_NUMBER):
            matches = list(pattern.finditer(own))
            if matches:
                found = matches[-1]
                value = found.group(1)
                explanation = own[: found.start()].strip(" \t\r\n#*") or None if pattern is _FINAL_SCORE else None
                break
    if value is None or not re.fullmatch(r"-?\d+", value.strip()):
        return Parsed(None, None, f"unparseable answer: {text.strip()[:200]!r}")
    grade = int(value)
    if not scale[0] <= grade <= scale[1]:
        return Parsed(None, explanation, f"answer {grade} is outside the scale {scale[0]}-{scale[1]}")
    return Parsed(grade, explanation, None)
