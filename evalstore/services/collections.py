"""Topic statements and documents' text: what an assessor reads when judging in the browser
(``evalstore topics import``, ``evalstore documents import``), and what the compare page shows of
the runs' top documents."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.keys import id_in, same_id
from evalstore.db.models import Collection, Document, Topic, TopicSet
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import ConflictError, InputFormatError, Remedy
from evalstore.io.texts import DocumentText, TopicStatement, read_documents, read_topics

_BATCH = 5_000


@dataclass(frozen=True)
class TextSetSummary:
    name: str
    kind: str  # topics | documents
    count: int
    source: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "count": self.count, "source": self.source}


def import_topics(engine: Engine, path: Path, *, name: str, replace: bool = False) -> TextSetSummary:
    """Store a topic file's statements under ``name``, whole or not at all."""
    statements = read_topics(path)
    with unit_of_work(engine) as session:
        existing = session.scalar(select(TopicSet).where(TopicSet.name == name))
        if existing is not None:
            if not replace:
                raise ConflictError(
                    f"Topics named '{name}' exist.",
                    remedy=Remedy(cli="Pass --replace to overwrite them.", web="Choose another name."),
                )
            session.delete(existing)
            session.flush()
        add_topic_set(session, name, statements, str(path))
    return TextSetSummary(name, "topics", len(statements), str(path))


def read_topic_file(path: Path, shown: str) -> list[TopicStatement]:
    """A topics file's statements, its errors naming the file ``shown`` (an upload's own name)."""
    try:
        return read_topics(path)
    except InputFormatError as error:
        raise InputFormatError(shown, error.line, error.problem) from None


def add_topic_set(session: Session, name: str, statements: Sequence[TopicStatement], source: str | None) -> TopicSet:
    """The step that stores a new topic set's statements (the caller's unit of work commits)."""
    topic_set = TopicSet(name=name, source=source)
    session.add(topic_set)
    session.flush()
    session.add_all(
        Topic(topic_set_id=topic_set.id, topic=t.topic, title=t.title, description=t.description, narrative=t.narrative)
        for t in statements
    )
    return topic_set


def free_topic_set_name(session: Session, wanted: str) -> str:
    """``wanted``, or ``wanted-2``, ``wanted-3``... the first no topic set holds."""
    return _free_name(
        set(session.scalars(select(TopicSet.name).where(TopicSet.name.startswith(wanted, autoescape=True)))), wanted
    )


def free_collection_name(session: Session, wanted: str) -> str:
    """``wanted``, or ``wanted-2``, ``wanted-3``... the first no collection holds."""
    return _free_name(
        set(session.scalars(select(Collection.name).where(Collection.name.startswith(wanted, autoescape=True)))), wanted
    )


def _free_name(taken: set[str], wanted: str) -> str:
    return next(
        candidate
        for candidate in itertools.chain([wanted], (f"{wanted}-{n}" for n in itertools.count(2)))
        if candidate not in taken
    )


def topic_statements(session: Session, topic_set_id: int) -> list[TopicStatement]:
    """A topic set's statements, in topic order (numbers as numbers)."""
    rows = session.scalars(select(Topic).where(Topic.topic_set_id == topic_set_id)).all()
    ordered = sorted(rows, key=lambda t: (0, int(t.topic), "") if t.topic.isdigit() else (1, 0, t.topic))
    return [TopicStatement(t.topic, t.title, t.description, t.narrative) for t in ordered]


def import_documents(engine: Engine, path: Path, *, collection: str, append: bool = False) -> TextSetSummary:
    """Store a file's documents in ``collection`` (created if new), whole or not at all. With
    ``append`` an existing collection gains the file's documents (a document it holds is refused)."""
    with unit_of_work(engine) as session:
        return add_documents(session, path, collection=collection, append=append)


def add_documents(
    session: Session, path: Path, *, collection: str, append: bool = False, shown: str | None = None
) -> TextSetSummary:
    """The step of :func:`import_documents` (the caller's unit of work commits); errors name the
    file ``shown`` (an upload's own name), else its path."""
    named = shown or str(path)
    found = session.scalar(select(Collection).where(Collection.name == collection))
    if found is not None and not append:
        raise ConflictError(
            f"A collection named '{collection}' exists.", remedy=Remedy(cli="Pass --append to add documents to it.")
        )
    if found is None:
        found = Collection(name=collection, source=named)
        session.add(found)
        session.flush()
    collection_id = found.id
    seen: dict[str, int] = {}

    def batches() -> Iterable[pa.RecordBatch]:
        try:
            documents = read_documents(path)
            while chunk := list(itertools.islice(documents, _BATCH)):
                for line, document in chunk:
                    if document.doc in seen:
                        raise InputFormatError(
                            named,
                            line,
                            f"document {document.doc} is given twice (also at line {seen[document.doc]}); keep one",
                        )
                    seen[document.doc] = line
                if append:
                    held = session.scalars(
                        select(Document.doc).where(
                            Document.collection_id == collection_id, id_in(Document.doc, [d.doc for _, d in chunk])
                        )
                    ).first()
                    if held is not None:
                        raise InputFormatError(
                            named,
                            seen[held],
                            f"document {held} is in collection '{collection}' already; nothing was added",
                        )
                yield pa.record_batch(
                    {
                        "collection_id": pa.array([collection_id] * len(chunk), pa.int32()),
                        "doc": pa.array([d.doc for _, d in chunk], pa.string()),
                        "title": pa.array([d.title for _, d in chunk], pa.string()),
                        "text": pa.array([d.text for _, d in chunk], pa.string()),
                    }
                )
        except InputFormatError as error:
            if error.path == named:
                raise
            raise InputFormatError(named, error.line, error.problem) from None

    repo.copy_batches(session, Document.__tablename__, batches())
    if not seen:
        raise InputFormatError(named, None, "the file holds no documents")
    return TextSetSummary(collection, "documents", len(seen), named)


def list_text_sets(engine: Engine) -> list[TextSetSummary]:
    with read_only(engine) as session:
        topic_sets = session.execute(
            select(TopicSet.name, TopicSet.source, func.count(Topic.topic))
            .outerjoin(Topic, Topic.topic_set_id == TopicSet.id)
            .group_by(TopicSet.id)
            .order_by(TopicSet.name)
        ).all()
        collections = session.execute(
            select(Collection.name, Collection.source, func.count(Document.doc))
            .outerjoin(Document, Document.collection_id == Collection.id)
            .group_by(Collection.id)
            .order_by(Collection.name)
        ).all()
    return [TextSetSummary(n, "topics", c, s) for n, s, c in topic_sets] + [
        TextSetSummary(n, "documents", c, s) for n, s, c in collections
    ]


def delete_collection(engine: Engine, name: str) -> None:
    with unit_of_work(engine) as session:
        found = repo.get_collection(session, name)
        session.execute(delete(Document).where(Document.collection_id == found.id))
        session.delete(found)


def topic_statement(session: Session, topic_set: str | None, topic: str) -> TopicStatement | None:
    """The topic's statement in the named set (None: no such set, or the set lacks the topic)."""
    if topic_set is None:
        return None
    found = session.scalar(
        select(Topic)
        .join(TopicSet, TopicSet.id == Topic.topic_set_id)
        .where(TopicSet.name == topic_set, same_id(Topic.topic, topic))
    )
    return None if found is None else TopicStatement(found.topic, found.title, found.description, found.narrative)


def document_texts(session: Session, collection: str | None, docs: Sequence[str]) -> dict[str, DocumentText]:
    """The text of those of ``docs`` the named collection holds (a document it lacks is absent)."""
    if collection is None or not docs:
        return {}
    rows = session.execute(
        select(Document.doc, Document.title, Document.text)
        .join(Collection, Collection.id == Document.collection_id)
        .where(Collection.name == collection, id_in(Document.doc, docs))
    ).all()
    return {doc: DocumentText(doc, title, text) for doc, title, text in rows}


# --- the compare page's documents -----------------------------------------------------------------


@dataclass(frozen=True)
class RankedDocument:
    doc: str
    relevance: int | None  # None: not judged
    title: str | None = None  # from the collection named on the page, when it holds the document
    snippet: str | None = None


def top_documents(
    engine: Engine, qrels_name: str | None, runs: list[str], topics: list[str], collection: str | None, depth: int
) -> dict[tuple[str, str], list[RankedDocument]]:
    """Each run's top ``depth`` documents of each topic, with their judgment in the qrels (none
    read without ``qrels_name``: the reader may not see them) and, when ``collection`` holds them,
    their titles and first words (the compare page's disagreements)."""
    if not topics:
        return {}
    with read_only(engine) as session:
        stored = {repo.get_run(session, name).id: name for name in runs}
        table = repo.top_ranked(session, list(stored), depth, topics).to_pandas()
        shown = zip(table["topic"].astype(str), table["doc"].astype(str), strict=True)
        # the grades of the documents shown only, not the whole qrels read for them
        labels = repo.grades_of(session, repo.get_qrels(session, qrels_name), shown) if qrels_name is not None else {}
        if collection is not None:
            repo.get_collection(session, collection)  # a name that is not there: say so
        texts = document_texts(session, collection, sorted(set(table["doc"])))
    out: dict[tuple[str, str], list[RankedDocument]] = {}
    for (run_id, topic), group in table.sort_values("rank").groupby(["run_id", "topic"], sort=False):
        out[(stored[int(run_id)], str(topic))] = [
            RankedDocument(
                d,
                labels.get((str(topic), d)),
                texts[d].title if d in texts else None,
                _snippet(texts[d].text) if d in texts else None,
            )
            for d in group["doc"]
        ]
    return out


def _snippet(text: str, words: int = 30) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")
