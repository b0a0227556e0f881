"""Generated answers with citations (TREC RAG): one JSON object a line, ``.gz`` too.

Two layouts are read, told apart line by line:

- TREC 2024 RAG: ``{"run_id", "topic_id", "topic", "references": [segment ids],
  "response_length", "answer": [{"text", "citations": [indexes into references]}]}``;
- TREC 2025 RAG: ``{"metadata": {"team_id", "run_id", "topic_id", ...}, "references",
  "answer" (or "responses"): [{"text", "citations"}]}``, where ``citations`` may also be an object
  ``{segment id: score}`` (its keys in the order given; the first is the sentence's first citation).

A file may hold several runs (one per ``run_id``). The file is read through
:func:`evalstore.io.limits.copy_bounded` (bytes inflated and per line), then every answer is
bounded (sentences, references, characters per sentence) and checked; the first problem is
refused with ``path:line``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalstore.errors import InputFormatError
from evalstore.io.limits import NUL_PROBLEM, Bounds, copy_bounded, holds_nul, refuse_nul

# the longest ids the store keeps (runs.name, run_rows.topic, run_rows.doc): an answer run's
# references are also registered as a ranking run
MAX_RUN_ID_CHARS = 200
MAX_TOPIC_CHARS = 200
MAX_SEGMENT_CHARS = 400


@dataclass(frozen=True)
class AnswerLimits:
    """What one answer file may hold. TREC RAG 2024's answers are at most 400 words with at most
    20 references; the real baselines' longest line is ~4.5 KB and longest sentence ~1,000
    characters, so these leave a wide margin while bounding a hostile file."""

    max_bytes: int = 512 * 2**20  # the file, inflated
    max_line_bytes: int = 2 * 2**20  # one answer
    max_sentences: int = 1000
    max_references: int = 100
    max_sentence_chars: int = 20_000
    max_topic_chars: int = 20_000  # the topic's text, when given

    def bounds(self) -> Bounds:
        # a sentence is one long field: the line bound is the only byte bound that applies
        return Bounds(self.max_bytes, self.max_line_bytes, self.max_line_bytes)


@dataclass(frozen=True)
class Sentence:
    text: str
    citations: tuple[int, ...]  # positions in the answer's references, first citation first
    scores: tuple[float, ...] | None = None  # the 2025 layout's {segment: score}, when given


@dataclass(frozen=True)
class Answer:
    topic: str
    topic_text: str | None
    references: tuple[str, ...]
    sentences: tuple[Sentence, ...]
    response_length: int | None
    line: int

    @property
    def text(self) -> str:
        """The sentences joined with one space, as NIST's assessment files give an answer."""
        return " ".join(sentence.text for sentence in self.sentences)


@dataclass(frozen=True)
class AnswerRun:
    name: str
    team: str | None
    layout: str  # rag24 | rag25
    answers: tuple[Answer, ...]


def read_answers(
    path: Path,
    *,
    topics: Collection[str] | None = None,
    limits: AnswerLimits | None = None,
    shown: str | None = None,
) -> list[AnswerRun]:
    """The answer runs of a TREC RAG answer file, in the order their first line comes; with
    ``topics``, an answer to a topic outside them is refused."""
    limits = limits or AnswerLimits()
    shown = shown or str(path)
    runs: dict[str, tuple[str | None, str, dict[str, Answer]]] = {}
    for number, record in _records(path, limits, shown):
        name, team, layout, answer = _answer(shown, number, record, limits)
        if topics is not None and answer.topic not in topics:
            raise InputFormatError(
                shown, number, f"topic {answer.topic} is not in the topic set; answer only its topics"
            )
        known = runs.setdefault(name, (team, layout, {}))
        earlier = known[2].get(answer.topic)
        if earlier is not None:
            raise InputFormatError(
                shown,
                number,
                f"run {name} answers topic {answer.topic} twice (also at line {earlier.line}); keep one answer",
            )
        known[2][answer.topic] = answer
    if not runs:
        raise InputFormatError(shown, None, "the file holds no answers")
    return [AnswerRun(name, team, layout, tuple(answers.values())) for name, (team, layout, answers) in runs.items()]


def bounded_lines(path: Path, bounds: Bounds, shown: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of a JSONL file read within ``bounds``, blank lines skipped."""
    buffer = io.BytesIO()
    try:
        with path.open("rb") as source:
            copy_bounded(source, buffer, bounds, shown)
    except FileNotFoundError:
        raise InputFormatError(shown, None, "no such file") from None
    except IsADirectoryError:
        raise InputFormatError(shown, None, "is a directory, not a file") from None
    for number, raw in enumerate(buffer.getvalue().split(b"\n"), start=1):
        if not raw.strip():
            continue
        refuse_nul(raw, shown, number)
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InputFormatError(shown, number, f"not UTF-8 text ({error.reason})") from None


def json_object(shown: str, number: int, line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise InputFormatError(shown, number, f"not valid JSON ({error.msg} at column {error.colno})") from None
    except RecursionError:
        raise InputFormatError(shown, number, "not valid JSON (nested too deeply)") from None
    if not isinstance(record, dict):
        raise InputFormatError(shown, number, "not a JSON object: write one {...} per line")
    if "\\u0000" in line and holds_nul(record):
        raise InputFormatError(shown, number, f"the line {NUL_PROBLEM}")
    return record


def _records(path: Path, limits: AnswerLimits, shown: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in bounded_lines(path, limits.bounds(), shown):
        yield number, json_object(shown, number, line)


def identifier(shown: str, number: int, value: Any, what: str, longest: int, *, spaces_refused: bool = True) -> str:
    """A run, topic or segment id: a non-empty string (or a number) of at most ``longest`` characters."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputFormatError(shown, number, f"{what} must be a string, not {json.dumps(value)[:60]}")
    text = str(value).strip()
    if not text:
        raise InputFormatError(shown, number, f"{what} is empty")
    if len(text) > longest:
        raise InputFormatError(shown, number, f"{what} is {len(text)} characters long; the limit is {longest}")
    if spaces_refused and len(text.split()) > 1:
        # a topic or segment id is a field of the references' TREC run, which white space splits
        raise InputFormatError(shown, number, f"{what} holds white space ({text[:60]!r}); ids are one word")
    return text


def _answer(
    shown: str, number: int, record: dict[str, Any], limits: AnswerLimits
) -> tuple[str, str | None, str, Answer]:
    metadata = record.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise InputFormatError(shown, number, "'metadata' must be an object {team_id, run_id, topic_id}")
        layout, fields = "rag25", metadata
        team_value = metadata.get("team_id")
        team = (
            None
            if team_value is None
            else identifier(shown, number, team_value, "team_id", MAX_RUN_ID_CHARS, spaces_refused=False)
        )
    else:
        layout, fields, team = "rag24", record, None
    for key in ("run_id", "topic_id"):
        if key not in fields:
            where = "'metadata'" if layout == "rag25" else "the line"
            raise InputFormatError(shown, number, f"{where} has no '{key}'")
    name = identifier(shown, number, fields["run_id"], "run_id", MAX_RUN_ID_CHARS, spaces_refused=False)
    topic = identifier(shown, number, fields["topic_id"], "topic_id", MAX_TOPIC_CHARS)
    topic_text = fields.get("topic", record.get("topic", fields.get("narrative")))
    if topic_text is not None:
        if not isinstance(topic_text, str):
            raise InputFormatError(shown, number, "'topic' must be the topic's text")
        if len(topic_text) > limits.max_topic_chars:
            raise InputFormatError(
                shown,
                number,
                f"the topic's text is {len(topic_text)} characters; the limit is {limits.max_topic_chars}",
            )
    references = _references(shown, number, record, limits)
    sentences = _sentences(shown, number, record, references, limits)
    length = record.get("response_length")
    if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 0):
        raise InputFormatError(shown, number, "'response_length' must be a whole number of words")
    return name, team, layout, Answer(topic, topic_text, references, sentences, length, number)


def _references(shown: str, number: int, record: dict[str, Any], limits: AnswerLimits) -> tuple[str, ...]:
    value = record.get("references")
    if value is None:
        raise InputFormatError(shown, number, "no 'references': list the segments the answer cites (may be [])")
    if not isinstance(value, list):
        raise InputFormatError(shown, number, "'references' must be a list of segment ids")
    if len(value) > limits.max_references:
        raise InputFormatError(
            shown, number, f"{len(value)} references; an answer may list at most {limits.max_references}"
        )
    references = tuple(identifier(shown, number, v, "a reference", MAX_SEGMENT_CHARS) for v in value)
    seen: dict[str, int] = {}
    for position, segment in enumerate(references):
        if segment in seen:
            raise InputFormatError(
                shown,
                number,
                f"segment {segment} is listed twice in 'references' (positions {seen[segment]} and {position}); "
                "list each segment once and cite it by its position",
            )
        seen[segment] = position
    return references


def _sentences(
    shown: str, number: int, record: dict[str, Any], references: tuple[str, ...], limits: AnswerLimits
) -> tuple[Sentence, ...]:
    value = record.get("answer", record.get("responses"))
    if value is None:
        raise InputFormatError(shown, number, "no 'answer': give the answer as a list of {text, citations}")
    if not isinstance(value, list):
        raise InputFormatError(shown, number, "'answer' must be a list of sentences {text, citations}")
    if len(value) > limits.max_sentences:
        raise InputFormatError(
            shown, number, f"the answer has {len(value)} sentences; an answer may have at most {limits.max_sentences}"
        )
    sentences = tuple(_sentence(shown, number, i, item, references, limits) for i, item in enumerate(value))
    if not any(sentence.text.strip() for sentence in sentences):
        raise InputFormatError(shown, number, "the answer is empty: give at least one sentence with text")
    return sentences


def _sentence(
    shown: str, number: int, index: int, item: Any, references: tuple[str, ...], limits: AnswerLimits
) -> Sentence:
    where = f"sentence {index + 1}"
    if not isinstance(item, dict):
        raise InputFormatError(shown, number, f"{where} must be an object {{text, citations}}")
    text = item.get("text")
    if not isinstance(text, str):
        raise InputFormatError(shown, number, f"{where} has no 'text'")
    if len(text) > limits.max_sentence_chars:
        raise InputFormatError(
            shown, number, f"{where} is {len(text)} characters; a sentence may have at most {limits.max_sentence_chars}"
        )
    if "citations" not in item:
        raise InputFormatError(
            shown, number, f"{where} has no 'citations': give the indexes of the references it cites ([] for none)"
        )
    cited = item["citations"]
    if isinstance(cited, dict):
        return _scored_citations(shown, number, where, text, cited, references)
    if not isinstance(cited, list):
        raise InputFormatError(shown, number, f"{where}: 'citations' must be a list of reference indexes")
    positions: list[int] = []
    for citation in cited:
        if isinstance(citation, bool) or not isinstance(citation, int):
            raise InputFormatError(
                shown, number, f"{where}: citation {json.dumps(citation)[:60]} is not an index into 'references'"
            )
        if not 0 <= citation < len(references):
            raise InputFormatError(
                shown,
                number,
                f"{where} cites reference {citation}, but 'references' has {len(references)} "
                f"(indexes 0 to {len(references) - 1})",
            )
        if citation in positions:
            raise InputFormatError(shown, number, f"{where} cites reference {citation} twice")
        positions.append(citation)
    return Sentence(text, tuple(positions))


def _scored_citations(
    shown: str, number: int, where: str, text: str, cited: dict[str, Any], references: tuple[str, ...]
) -> Sentence:
    position_of = {segment: i for i, segment in enumerate(references)}
    positions: list[int] = []
    scores: list[float] = []
    for segment, score in cited.items():
        if segment not in position_of:
            raise InputFormatError(shown, number, f"{where} cites segment {segment[:80]}, which is not in 'references'")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise InputFormatError(shown, number, f"{where}: the score of citation {segment[:80]} is not a number")
        positions.append(position_of[segment])
        scores.append(float(score))
    return Sentence(text, tuple(positions), tuple(scores))
