"""Topic statements and documents' text, for assessors: TREC topic files (``<top>``), JSONL and
TSV topics; JSONL and TREC SGML (``<DOC>``) documents, ``.gz`` too. Refused with ``path:line`` on
the first bad record.

Hand-written rather than ir_datasets' parsers: those come with its dataset registry and download
machinery, and read a topic file's fields by dataset-specific rules; the TREC layout is a dozen
lines of tags.
"""

from __future__ import annotations

import gzip
import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from evalstore.errors import InputFormatError
from evalstore.io.limits import NUL_PROBLEM, holds_nul

TOPIC_ID_KEYS = ("topic", "query_id", "qid", "id", "num")
TOPIC_TITLE_KEYS = ("title", "query", "text")
DOC_ID_KEYS = ("doc_id", "docno", "id", "doc")


@dataclass(frozen=True)
class TopicStatement:
    topic: str
    title: str
    description: str | None = None
    narrative: str | None = None


@dataclass(frozen=True)
class DocumentText:
    doc: str
    title: str | None
    text: str


def _open_text(path: Path) -> IO[str]:
    try:
        if path.suffix == ".gz":
            return gzip.open(path, "rt", encoding="utf-8", errors="strict")
        return path.open(encoding="utf-8")
    except FileNotFoundError:
        raise InputFormatError(str(path), None, "no such file") from None


def _first_line(path: Path) -> str:
    with _open_text(path) as handle:
        try:
            for line in handle:
                if line.strip():
                    return line.strip()
        except (UnicodeDecodeError, gzip.BadGzipFile, OSError) as exc:
            raise InputFormatError(str(path), None, f"not UTF-8 text ({exc})") from None
    raise InputFormatError(str(path), None, "the file is empty")


def _numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    with _open_text(path) as handle:
        number = 0
        try:
            for number, line in enumerate(handle, start=1):
                if "\x00" in line:
                    raise InputFormatError(str(path), number, f"the line {NUL_PROBLEM}")
                yield number, line
        except UnicodeDecodeError as exc:
            raise InputFormatError(str(path), number + 1, f"not UTF-8 text ({exc.reason})") from None


def _json_record(path: Path, number: int, line: str) -> dict[str, object]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputFormatError(str(path), number, f"not a JSON object ({exc.msg})") from None
    except RecursionError:
        raise InputFormatError(str(path), number, "not a JSON object (nested too deeply)") from None
    if not isinstance(record, dict):
        raise InputFormatError(str(path), number, "not a JSON object: write one {...} per line")
    if "\\u0000" in line and holds_nul(record):
        raise InputFormatError(str(path), number, f"the line {NUL_PROBLEM}")
    return record


def _field(record: dict[str, object], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = record.get(key)
        if value is not None and str(value).strip():
            return str(value).strip()
    return None


# --- topics -------------------------------------------------------------------------------------

_TOP_FIELDS = re.compile(r"<(num|title|desc|narr)>", re.IGNORECASE)
_FIELD_LEADS = {
    "num": re.compile(r"^\s*Number:\s*", re.I),
    "desc": re.compile(r"^\s*Description:?\s*", re.I),
    "narr": re.compile(r"^\s*Narrative:?\s*", re.I),
    "title": re.compile(r"^\s*Topic:\s*", re.I),
}
_CLOSING_TAG = re.compile(r"</(num|title|desc|narr)>", re.IGNORECASE)


def read_topics(path: Path) -> list[TopicStatement]:
    """Topics from a TREC topic file (``<top><num> Number: 301 <title> ... <desc> Description:
    ... <narr> Narrative: ... </top>``), JSONL (``{"topic", "title", "description",
    "narrative"}``; ``query_id``/``qid`` and ``query`` are read too) or TSV (``id<TAB>title``, as
    MS MARCO's query files). A topic given twice is refused."""
    first = _first_line(path)
    if first.lower().startswith("<top"):
        topics = list(_trec_topics(path))
    elif first.startswith("{"):
        topics = list(_jsonl_topics(path))
    else:
        topics = list(_tsv_topics(path))
    seen: dict[str, int] = {}
    for line, topic in topics:
        if topic.topic in seen:
            raise InputFormatError(
                str(path), line, f"topic {topic.topic} is given twice (also at line {seen[topic.topic]}); keep one"
            )
        seen[topic.topic] = line
    if not topics:
        raise InputFormatError(str(path), None, "the file holds no topics")
    return [topic for _, topic in topics]


def _trec_topics(path: Path) -> Iterator[tuple[int, TopicStatement]]:
    block: list[str] = []
    start = 0
    for number, line in _numbered_lines(path):
        stripped = line.strip().lower()
        if stripped.startswith("<top"):
            block, start = [], number
        elif stripped.startswith("</top"):
            yield start, _trec_topic(path, start, "".join(block))
            block = []
        else:
            block.append(line)


def _trec_topic(path: Path, line: int, text: str) -> TopicStatement:
    fields: dict[str, str] = {}
    parts = _TOP_FIELDS.split(text)
    for name, value in zip(parts[1::2], parts[2::2], strict=True):
        name = name.lower()
        value = _CLOSING_TAG.sub("", value)
        fields[name] = " ".join(_FIELD_LEADS[name].sub("", value.strip(), count=1).split())
    topic, title = fields.get("num"), fields.get("title")
    if not topic:
        raise InputFormatError(str(path), line, "a <top> without <num>: give each topic its number")
    if not title:
        raise InputFormatError(str(path), line, f"topic {topic} has no <title>")
    return TopicStatement(topic, title, fields.get("desc") or None, fields.get("narr") or None)


def _jsonl_topics(path: Path) -> Iterator[tuple[int, TopicStatement]]:
    for number, line in _numbered_lines(path):
        if not line.strip():
            continue
        record = _json_record(path, number, line)
        topic, title = _field(record, TOPIC_ID_KEYS), _field(record, TOPIC_TITLE_KEYS)
        if topic is None or title is None:
            raise InputFormatError(
                str(path), number, "a topic needs an id ('topic', 'query_id' or 'qid') and a title ('title' or 'query')"
            )
        yield (
            number,
            TopicStatement(
                topic, title, _field(record, ("description", "desc")), _field(record, ("narrative", "narr"))
            ),
        )


def _tsv_topics(path: Path) -> Iterator[tuple[int, TopicStatement]]:
    for number, line in _numbered_lines(path):
        if not line.strip():
            continue
        topic, tab, rest = line.rstrip("\r\n").partition("\t")
        if not tab or not topic.strip() or not rest.strip():
            raise InputFormatError(str(path), number, "expected 'topic<TAB>title' (or a TREC topic file, or JSONL)")
        title, _, description = rest.partition("\t")
        yield number, TopicStatement(topic.strip(), title.strip(), description.strip() or None)


# --- documents ----------------------------------------------------------------------------------

_DOC_TAGS = re.compile(r"<(DOCNO|TITLE|HEADLINE|HEAD|TEXT)>(.*?)</\1>", re.IGNORECASE | re.DOTALL)
_ANY_TAG = re.compile(r"<[^>]+>")


def read_documents(path: Path) -> Iterator[tuple[int, DocumentText]]:
    """(line, document) of a JSONL file (``{"doc_id", "title", "text"}``; ``docno``/``id`` name
    the document too) or a TREC SGML file (``<DOC><DOCNO>...</DOCNO> ... <TEXT>...</TEXT></DOC>``;
    the title is the first of TITLE, HEADLINE, HEAD), streamed: a collection need not fit in memory."""
    first = _first_line(path)
    if first.startswith("{"):
        return _jsonl_documents(path)
    if first.upper().startswith("<DOC"):
        return _sgml_documents(path)
    raise InputFormatError(
        str(path),
        1,
        'expected JSONL ({"doc_id", "title", "text"} per line) or TREC SGML (<DOC><DOCNO>...</DOCNO>...</DOC>)',
    )


def _jsonl_documents(path: Path) -> Iterator[tuple[int, DocumentText]]:
    for number, line in _numbered_lines(path):
        if not line.strip():
            continue
        record = _json_record(path, number, line)
        doc = _field(record, DOC_ID_KEYS)
        if doc is None:
            raise InputFormatError(str(path), number, "a document needs an id ('doc_id', 'docno' or 'id')")
        text = record.get("text", record.get("contents", record.get("body", "")))
        yield number, DocumentText(doc, _field(record, ("title",)), str(text or ""))


def _sgml_documents(path: Path) -> Iterator[tuple[int, DocumentText]]:
    block: list[str] = []
    start = 0
    inside = False
    for number, line in _numbered_lines(path):
        upper = line.lstrip()[:6].upper()
        if upper.startswith("<DOC>"):
            block, start, inside = [], number, True
        elif upper.startswith("</DOC>"):
            inside = False
            yield start, _sgml_document(path, start, "".join(block))
        elif inside:
            block.append(line)
    if inside:
        raise InputFormatError(str(path), start, "a <DOC> is not closed by </DOC>")


def _sgml_document(path: Path, line: int, text: str) -> DocumentText:
    fields: dict[str, list[str]] = {}
    for tag, value in _DOC_TAGS.findall(text):
        fields.setdefault(tag.upper(), []).append(html.unescape(_ANY_TAG.sub(" ", value)).strip())
    docno = (fields.get("DOCNO") or [""])[0]
    if not docno:
        raise InputFormatError(str(path), line, "a <DOC> without <DOCNO>")
    title = next((fields[t][0] for t in ("TITLE", "HEADLINE", "HEAD") if fields.get(t)), None)
    body = "\n\n".join(fields.get("TEXT", [])) or html.unescape(_ANY_TAG.sub(" ", _DOC_TAGS.sub("", text))).strip()
    return DocumentText(docno, " ".join(title.split()) if title else None, body)
