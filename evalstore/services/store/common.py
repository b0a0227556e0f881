"""What registering runs and qrels share: their summaries, names taken from file names, refusing bad
input with every file's errors, and retrying when two processes register one name at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import QrelsSet, Run
from evalstore.errors import InputFormatError, InvalidParameterError, Remedy
from evalstore.services.context import Lru

log = logging.getLogger("evalstore")


Progress = Callable[[int], None]


T = TypeVar("T")


@dataclass(frozen=True)
class Summary:
    """What `list` and `show` report for a run or a qrels set."""

    kind: str
    name: str
    rows: int
    topics: int
    content_hash: str
    created_at: datetime
    details: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rows": self.rows,
            "topics": self.topics,
            "created_at": self.created_at.isoformat(),
            "content_hash": self.content_hash,
            **self.details,
        }


@dataclass(frozen=True)
class Registered:
    summary: Summary
    created: bool  # False when the same content was already stored
    warnings: tuple[str, ...] = ()


def run_summary(run: Run) -> Summary:
    return Summary(
        "run",
        run.name,
        run.row_count,
        run.topic_count,
        run.content_hash,
        run.created_at,
        {
            "system": run.system,
            "tag": run.tag,
            "description": run.description,
            "metadata": dict(run.metadata_ or {}),
            "source": run.source,
        },
    )


def qrels_summary(qrels: QrelsSet) -> Summary:
    return Summary(
        "qrels",
        qrels.name,
        qrels.row_count,
        qrels.topic_count,
        qrels.content_hash,
        qrels.created_at,
        {"kind": qrels.kind, "description": qrels.description, "source": qrels.source},
    )


NAME_SOURCES = ("file", "tag")


_COMPRESSED = (".gz", ".bz2", ".xz")


_TABLE_SUFFIXES = (".txt", ".run", ".trec", ".tsv", ".csv", ".parquet", ".res", ".qrels")


def name_from_file(path: str | Path) -> str:
    """A run's name from its file name: ``input.bm25.gz`` -> ``bm25`` (compression and table
    suffixes dropped, and TREC's ``input.`` prefix of submitted runs)."""
    name = Path(path).name
    for suffixes in (_COMPRESSED, _TABLE_SUFFIXES):
        name = next((name[: -len(s)] for s in suffixes if name.lower().endswith(s) and len(name) > len(s)), name)
    return name.removeprefix("input.") or name


def refuse(errors: list[InputFormatError], files: int) -> None:
    """Refuse a batch with a bad file: every bad file's ``path:line: problem``, one per line."""
    if len(errors) == 1 and files == 1:
        raise errors[0]
    if errors:
        first, *rest = errors
        summary = f"nothing stored: {len(errors)} of {files} files refused"
        remedy = next((e.remedy for e in errors if e.remedy is not None), None)
        problems = "\n".join([first.problem, *(str(e) for e in rest), summary])
        raise InputFormatError(first.path, first.line, problems, remedy=remedy)


def refuse_repeated(names: list[str], message: str, remedy: Remedy) -> None:
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InvalidParameterError(message.format(name=repeated[0]), remedy=remedy)


def dropped_message(what: str, name: str, count: int) -> str:
    return (
        f"replacing {what} '{name}' deleted the {count} stored evaluation{'s' if count != 1 else ''} made with "
        f"the old content; evaluate again to have them back"
    )


def retry_on_name_race(store: Callable[[], T]) -> T:
    """Two processes registering one name at once: the loser sees the winner's row and decides
    again (same content: report it; other content: conflict). Nothing partial is ever visible."""
    try:
        return store()
    except IntegrityError:
        return store()


def qrels_table_kept(session: Session, qrels: QrelsSet, cache: Lru[tuple[int, str], Any]) -> pa.Table:
    """The qrels' judgments (:func:`repositories.qrels_table`), from ``cache`` (an
    :class:`AppContext`'s ``qrels``) where they were read before: a worker evaluates run after run
    against the same qrels, a server stores submission after submission to one task. Keyed by id
    and content hash, so replaced qrels are read afresh."""
    key = (qrels.id, qrels.content_hash)
    table = cache.get(key)
    return table if table is not None else cache.put(key, repo.qrels_table(session, qrels))
