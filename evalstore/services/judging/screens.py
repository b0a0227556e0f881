"""What an assessor sees: their pools' documents in judging order, their progress per topic, the
judging screen (the next document to judge) and their own judgments of a topic (never another
assessor's: judging is blind)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore.db.keys import same_id
from evalstore.db.models import AuditEntry, Pool, PoolEntry, PoolJudgment
from evalstore.db.session import read_only
from evalstore.errors import NotFoundError
from evalstore.io.texts import DocumentText, TopicStatement
from evalstore.services import collections, jobs
from evalstore.services.access import Principal
from evalstore.services.judging.assignments import POOL_GRADES, PoolSettings, judged_pool, judging_settings
from evalstore.services.judging.roles import first_assessors, my_share, role_of

# how many of an assessor's newest undos are searched for the note of the document shown again
UNDOS_SEARCHED = 50


class EntryToJudge(TypedDict):
    """A pooled document and this assessor's judgment of it so far (None: not judged)."""

    topic: str
    doc: str
    relevance: int | None


def pool_entries(
    engine: Engine, principal: Principal, pool_name: str, *, topic: str | None = None
) -> list[EntryToJudge]:
    """The documents to judge, in judging order, with this assessor's judgments so far."""
    with read_only(engine) as session:
        pool = judged_pool(session, principal, pool_name)
        statement = _entries_with_mine(pool, principal)
        if topic is not None:
            statement = statement.where(same_id(PoolEntry.topic, topic))
        return [EntryToJudge(topic=t, doc=d, relevance=r) for t, d, r, _ in session.execute(statement)]


def _entries_with_mine(pool: Pool, principal: Principal) -> Any:
    return (
        select(PoolEntry.topic, PoolEntry.doc, PoolJudgment.relevance, PoolJudgment.created_at)
        .outerjoin(
            PoolJudgment,
            (PoolJudgment.pool_id == PoolEntry.pool_id)
            & same_id(PoolJudgment.topic, PoolEntry.topic)
            & same_id(PoolJudgment.doc, PoolEntry.doc)
            & (PoolJudgment.assessor == principal.name),
        )
        .where(PoolEntry.pool_id == pool.id)
        .order_by(PoolEntry.topic, PoolEntry.judge_order, PoolEntry.doc)
    )


@dataclass(frozen=True)
class TopicProgress:
    topic: str
    title: str | None
    documents: int  # that this assessor judges
    judged: int  # by this assessor, skips included
    role: str  # one of the ROLE_ constants


def topic_progress(engine: Engine, principal: Principal, pool_name: str) -> tuple[PoolSettings, list[TopicProgress]]:
    """The pool's settings, and per topic the documents this assessor judges (all, or the
    double-judged share of another assessor's topic) and how many they have judged."""
    with read_only(engine) as session:
        pool = judged_pool(session, principal, pool_name)
        by_topic: dict[str, list[tuple[str, int | None]]] = {}
        for topic, doc, relevance, _ in session.execute(_entries_with_mine(pool, principal)):
            by_topic.setdefault(topic, []).append((doc, relevance))
        firsts = first_assessors(session, pool)
        progress = []
        for topic, rows in by_topic.items():
            mine = my_share(pool, principal, topic, rows, firsts.get(topic))
            statement = collections.topic_statement(session, pool.topic_set, topic)
            progress.append(
                TopicProgress(
                    topic,
                    statement.title if statement else None,
                    len(mine),
                    sum(r is not None for _, r in mine),
                    role_of(pool, principal, firsts.get(topic)),
                )
            )
        return judging_settings(pool), progress


@dataclass(frozen=True)
class JudgingScreen:
    """What an assessor sees: the topic's statement, the next document they have not judged (None
    when the topic is done), their progress, and the judgment an undo would take back."""

    pool: str
    grades: dict[str, str]
    topic: str
    statement: TopicStatement | None
    doc: str | None
    document: DocumentText | None  # None: the collection lacks the document (shown as such)
    position: int  # 1-based, in judging order
    judged: int
    documents: int
    last_judged: tuple[str, int] | None  # (doc, relevance) of this assessor's newest judgment here
    role: str  # one of the ROLE_ constants
    note: str | None = None  # the note of the shown document's judgment this assessor took back (undo)


def judging_screen(engine: Engine, principal: Principal, pool_name: str, topic: str) -> JudgingScreen:
    with read_only(engine) as session:
        pool = judged_pool(session, principal, pool_name)
        everything = session.execute(_entries_with_mine(pool, principal).where(same_id(PoolEntry.topic, topic))).all()
        if not everything:
            raise NotFoundError(f"Pool '{pool_name}' holds no documents for topic '{topic}'.")
        first = first_assessors(session, pool).get(topic)
        share = {d for d, _ in my_share(pool, principal, topic, [(d, r) for _, d, r, _ in everything], first)}
        rows = [row for row in everything if row[1] in share]
        pending = [(i, doc) for i, (_, doc, relevance, _) in enumerate(rows, start=1) if relevance is None]
        judged = [(at, doc, relevance) for _, doc, relevance, at in rows if relevance is not None]
        newest = max(judged, key=lambda j: (jobs.as_utc(j[0]), j[1])) if judged else None
        position, doc = pending[0] if pending else (len(rows), None)
        texts = collections.document_texts(session, pool.collection, [doc] if doc else [])
        return JudgingScreen(
            pool.name,
            pool.grades or POOL_GRADES,
            topic,
            collections.topic_statement(session, pool.topic_set, topic),
            doc,
            texts.get(doc) if doc else None,
            position,
            len(judged),
            len(rows),
            (newest[1], newest[2]) if newest else None,
            role_of(pool, principal, first),
            _undone_note(session, principal, pool, topic, doc) if doc else None,
        )


def _undone_note(session: Session, principal: Principal, pool: Pool, topic: str, doc: str) -> str | None:
    """The note of this assessor's judgment of the document that an undo took back (kept in the
    audit log), so that judging the document again does not lose it."""
    undos = session.scalars(
        select(AuditEntry.detail)
        .where(
            AuditEntry.action == "pools.undo", AuditEntry.user_name == principal.name, AuditEntry.target == pool.name
        )
        .order_by(AuditEntry.id.desc())
        .limit(UNDOS_SEARCHED)
    )
    for detail in undos:
        if detail.get("topic") == topic and detail.get("doc") == doc:
            note = detail.get("note")
            return note if isinstance(note, str) else None
    return None


@dataclass(frozen=True)
class MyJudgment:
    doc: str
    title: str | None
    relevance: int  # SKIPPED: seen, not rateable
    note: str | None
    position: int  # 1-based, in judging order


def my_judgments(
    engine: Engine, principal: Principal, pool_name: str, topic: str
) -> tuple[dict[str, str], str, list[MyJudgment]]:
    """The pool's grades, the assessor's role on the topic, and their own judgments of the topic in
    judging order, each with its note (judging is blind: never another assessor's)."""
    with read_only(engine) as session:
        pool = judged_pool(session, principal, pool_name)
        rows = session.execute(
            _entries_with_mine(pool, principal).add_columns(PoolJudgment.note).where(same_id(PoolEntry.topic, topic))
        ).all()
        if not rows:
            raise NotFoundError(f"Pool '{pool_name}' holds no documents for topic '{topic}'.")
        mine = [
            (i, doc, relevance, note)
            for i, (_, doc, relevance, _, note) in enumerate(rows, start=1)
            if relevance is not None
        ]
        texts = collections.document_texts(session, pool.collection, [doc for _, doc, _, _ in mine])
        judgments = [
            MyJudgment(doc, texts[doc].title if doc in texts else None, relevance, note, i)
            for i, doc, relevance, note in mine
        ]
        return (
            pool.grades or POOL_GRADES,
            role_of(pool, principal, first_assessors(session, pool).get(topic)),
            judgments,
        )
