"""Nugget banks and nugget assignments (TREC RAG), one JSON object a line, ``.gz`` too.

- A bank: ``{"qid", "query", "nuggets": [{"text", "importance": "vital" | "okay"}]}``, one line a topic.
- NIST's assignment files: the same, once per (run, topic), with ``run_id``, ``answer_text``
  (the answer assessed), ``response_length`` and each nugget's ``assignment`` (``support``,
  ``partial_support`` or ``not_support``). The lines of one topic must carry the same nuggets;
  they make the bank, and the assignments come with it.

Bounded in bytes as the answer files are, and each topic's nuggets too; the first problem is refused with ``path:line``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalstore.errors import InputFormatError
from evalstore.io.answers import (
    MAX_RUN_ID_CHARS,
    MAX_TOPIC_CHARS,
    bounded_lines,
    identifier,
    json_object,
)
from evalstore.io.limits import Bounds

IMPORTANCE = ("vital", "okay")
ASSIGNMENTS = ("support", "partial_support", "not_support")


@dataclass(frozen=True)
class NuggetLimits:
    """The track's nuggetizer keeps at most 30 nuggets a topic, each of 1-12 words; these bound a
    hostile file with a wide margin."""

    max_bytes: int = 512 * 2**20
    max_line_bytes: int = 4 * 2**20
    max_nuggets: int = 1000
    max_nugget_chars: int = 5000
    max_answer_chars: int = 2_000_000

    def bounds(self) -> Bounds:
        return Bounds(self.max_bytes, self.max_line_bytes, self.max_line_bytes)


@dataclass(frozen=True)
class Nugget:
    text: str
    importance: str  # vital | okay


@dataclass(frozen=True)
class TopicNuggets:
    topic: str
    query: str | None
    nuggets: tuple[Nugget, ...]
    line: int


@dataclass(frozen=True)
class Assessment:
    """One (run, topic)'s assignments, in the order of the topic's nuggets."""

    run: str
    topic: str
    labels: tuple[str, ...]
    answer_text: str | None
    response_length: int | None
    line: int


@dataclass(frozen=True)
class NuggetFile:
    topics: tuple[TopicNuggets, ...]
    assessments: tuple[Assessment, ...]  # empty for a bank


def read_nuggets(path: Path, *, limits: NuggetLimits | None = None, shown: str | None = None) -> NuggetFile:
    """A nugget bank, or an assignment file's bank and its assignments."""
    limits = limits or NuggetLimits()
    shown = shown or str(path)
    topics: dict[str, TopicNuggets] = {}
    assessments: dict[tuple[str, str], Assessment] = {}
    for number, line in bounded_lines(path, limits.bounds(), shown):
        record = json_object(shown, number, line)
        topic, query, nuggets, labels = _line(shown, number, record, limits)
        known = topics.get(topic)
        run_value = record.get("run_id")
        if known is None:
            topics[topic] = TopicNuggets(topic, query, nuggets, number)
        elif run_value is None:
            raise InputFormatError(
                shown, number, f"topic {topic} is given twice (also at line {known.line}); give each topic once"
            )
        elif known.nuggets != nuggets:
            raise InputFormatError(
                shown,
                number,
                f"the nuggets of topic {topic} differ from those at line {known.line}; "
                "an assignment file gives the same nuggets for every run",
            )
        if run_value is None:
            if any(label is not None for label in labels):
                raise InputFormatError(shown, number, "nuggets carry assignments but the line has no 'run_id'")
            continue
        run = identifier(shown, number, run_value, "run_id", MAX_RUN_ID_CHARS, spaces_refused=False)
        missing = [i for i, label in enumerate(labels) if label is None]
        if missing:
            raise InputFormatError(
                shown, number, f"nugget {missing[0] + 1} of run {run} has no 'assignment' ({' | '.join(ASSIGNMENTS)})"
            )
        if (run, topic) in assessments:
            raise InputFormatError(
                shown,
                number,
                f"run {run} is assessed twice on topic {topic} (also at line {assessments[run, topic].line})",
            )
        answer_text = record.get("answer_text")
        if answer_text is not None and (not isinstance(answer_text, str) or len(answer_text) > limits.max_answer_chars):
            raise InputFormatError(
                shown, number, f"'answer_text' must be text of at most {limits.max_answer_chars} characters"
            )
        length = record.get("response_length")
        if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 0):
            raise InputFormatError(shown, number, "'response_length' must be a whole number of words")
        assessments[run, topic] = Assessment(
            run, topic, tuple(str(label) for label in labels), answer_text, length, number
        )
    if not topics:
        raise InputFormatError(shown, None, "the file holds no nuggets")
    return NuggetFile(tuple(topics.values()), tuple(assessments.values()))


def _line(
    shown: str, number: int, record: dict[str, Any], limits: NuggetLimits
) -> tuple[str, str | None, tuple[Nugget, ...], list[str | None]]:
    topic_value = record.get("qid", record.get("topic_id"))
    if topic_value is None:
        raise InputFormatError(shown, number, "no 'qid': name the topic the nuggets are for")
    topic = identifier(shown, number, topic_value, "qid", MAX_TOPIC_CHARS)
    query = record.get("query")
    if query is not None and not isinstance(query, str):
        raise InputFormatError(shown, number, "'query' must be the topic's text")
    items = record.get("nuggets")
    if not isinstance(items, list) or not items:
        raise InputFormatError(shown, number, "'nuggets' must be a non-empty list of {text, importance}")
    if len(items) > limits.max_nuggets:
        raise InputFormatError(shown, number, f"{len(items)} nuggets; a topic may have at most {limits.max_nuggets}")
    nuggets: list[Nugget] = []
    labels: list[str | None] = []
    for index, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise InputFormatError(shown, number, f"nugget {index} must be an object {{text, importance}}")
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InputFormatError(shown, number, f"nugget {index} has no 'text'")
        if len(text) > limits.max_nugget_chars:
            raise InputFormatError(
                shown, number, f"nugget {index} is {len(text)} characters; the limit is {limits.max_nugget_chars}"
            )
        importance = item.get("importance")
        if importance not in IMPORTANCE:
            raise InputFormatError(
                shown, number, f"nugget {index}: importance must be vital or okay, not {str(importance)[:40]!r}"
            )
        label = item.get("assignment")
        if label is not None and label not in ASSIGNMENTS:
            raise InputFormatError(
                shown,
                number,
                f"nugget {index}: assignment must be {', '.join(ASSIGNMENTS)}, not {str(label)[:40]!r}",
            )
        nuggets.append(Nugget(text, str(importance)))
        labels.append(label)
    return topic, query, tuple(nuggets), labels
