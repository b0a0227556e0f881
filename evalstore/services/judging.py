"""Judging pools through the service: which assessor judges which pool, what each sees next,
and the judgments they make (in the browser, one document at a time, or through the API).

Judgments land in ``pool_judgments``, the table ``evalstore judgments import`` fills, so
``judgments agreement`` and ``pool qrels`` read them unchanged. An assessor sees only the pools
assigned to them, and never another assessor's labels (judging is blind).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session

from evalstore.db.models import Pool, PoolAssignment, PoolEntry, PoolJudgment
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import InvalidParameterError, NotFoundError
from evalstore.io.texts import DocumentText, TopicStatement
from evalstore.services import collections, jobs
from evalstore.services.access import Principal, audit, get_user

# the grades an assessor picks from when a pool names none (TREC DL's four-point scale)
POOL_GRADES = {"0": "Not relevant", "1": "Related", "2": "Highly relevant", "3": "Perfectly relevant"}
SKIPPED = -1  # seen, not rateable: left out of agreement, and -1 (pooled, not judged) in the qrels
NOTE_CHARACTERS = 2000
# a judgment's time is what passed between showing the document and the key press; longer than
# this, the assessor was away, and the time says nothing about the document
LONGEST_JUDGMENT_SECONDS = 3600.0


def assign_assessor(engine: Engine, pool_name: str, user_name: str, *, by: Principal | None = None) -> None:
    """Let an assessor judge a pool."""
    with unit_of_work(engine) as session:
        pool = _get_pool(session, pool_name)
        user = get_user(session, user_name)
        if user.role not in ("assessor", "admin"):
            raise InvalidParameterError(f"User '{user_name}' is a {user.role}; pools are judged by assessors.")
        if session.get(PoolAssignment, (pool.id, user.id)) is None:
            session.add(PoolAssignment(pool_id=pool.id, user_id=user.id))
        audit(session, by.name if by else None, "pools.assign", pool_name, {"assessor": user_name})


def configure_pool(engine: Engine, pool_name: str, *, topic_set: str | None = None, collection: str | None = None,
                   grades: Mapping[int, str] | None = None) -> dict[str, Any]:
    """Name the topic statements and documents a pool's assessors read, and its grades with their
    labels (each grade a relevance value 0-9). Unnamed settings keep their value."""
    with unit_of_work(engine) as session:
        pool = _get_pool(session, pool_name)
        if topic_set is not None:
            collections.get_topic_set(session, topic_set)
            pool.topic_set = topic_set
        if collection is not None:
            collections.get_collection(session, collection)
            pool.collection = collection
        if grades is not None:
            wrong = [g for g in grades if not 0 <= g <= 9]
            if wrong or not grades:
                raise InvalidParameterError("Give grades as VALUE=LABEL with VALUE 0-9, e.g. --grade '0=Not relevant'.")
            pool.grades = {str(g): label for g, label in sorted(grades.items())}
        return _settings(pool)


def _settings(pool: Pool) -> dict[str, Any]:
    return {"pool": pool.name, "topics": pool.topic_set, "collection": pool.collection,
            "grades": pool.grades or POOL_GRADES}


def _get_pool(session: Session, name: str) -> Pool:
    pool = session.scalar(select(Pool).where(Pool.name == name))
    if pool is None:
        raise NotFoundError(f"No pool named '{name}'. See 'evalstore pool list'.")
    return pool


def _judged_pool(session: Session, principal: Principal, name: str) -> Pool:
    """A pool the principal judges: an assessor's assigned pools; any pool for an admin."""
    principal.require("pools:judge")
    pool = session.scalar(select(Pool).where(Pool.name == name))
    assigned = pool is not None and session.get(PoolAssignment, (pool.id, principal.user_id)) is not None
    if pool is None or not (principal.is_admin or assigned):
        raise NotFoundError(f"No pool named '{name}' assigned to you.")
    return pool


def assessor_pools(engine: Engine, principal: Principal) -> list[dict[str, Any]]:
    """The pools the principal judges, with how many documents each holds and they have judged."""
    principal.require("pools:judge")
    with read_only(engine) as session:
        statement = select(Pool).order_by(Pool.name)
        if not principal.is_admin:
            statement = statement.join(PoolAssignment, PoolAssignment.pool_id == Pool.id).where(
                PoolAssignment.user_id == principal.user_id)
        pools = list(session.scalars(statement))
        return [{"name": p.name, "strategy": p.strategy,
                 "entries": session.scalar(select(func.count()).select_from(PoolEntry)
                                           .where(PoolEntry.pool_id == p.id)),
                 "judged_by_you": session.scalar(select(func.count()).select_from(PoolJudgment).where(
                     PoolJudgment.pool_id == p.id, PoolJudgment.assessor == principal.name))}
                for p in pools]


def pool_entries(engine: Engine, principal: Principal, pool_name: str, *, topic: str | None = None
                 ) -> list[dict[str, Any]]:
    """The documents to judge, in judging order, with this assessor's judgments so far."""
    with read_only(engine) as session:
        pool = _judged_pool(session, principal, pool_name)
        statement = _entries_with_mine(pool, principal)
        if topic is not None:
            statement = statement.where(PoolEntry.topic == topic)
        return [{"topic": t, "doc": d, "relevance": r} for t, d, r, _ in session.execute(statement)]


def _entries_with_mine(pool: Pool, principal: Principal) -> Any:
    return (select(PoolEntry.topic, PoolEntry.doc, PoolJudgment.relevance, PoolJudgment.created_at)
            .outerjoin(PoolJudgment, (PoolJudgment.pool_id == PoolEntry.pool_id)
                       & (PoolJudgment.topic == PoolEntry.topic) & (PoolJudgment.doc == PoolEntry.doc)
                       & (PoolJudgment.assessor == principal.name))
            .where(PoolEntry.pool_id == pool.id)
            .order_by(PoolEntry.topic, PoolEntry.judge_order, PoolEntry.doc))


@dataclass(frozen=True)
class TopicProgress:
    topic: str
    title: str | None
    documents: int
    judged: int  # by this assessor, skips included


def topic_progress(engine: Engine, principal: Principal, pool_name: str) -> tuple[dict[str, Any], list[TopicProgress]]:
    """The pool's settings, and per topic its documents and how many this assessor has judged."""
    with read_only(engine) as session:
        pool = _judged_pool(session, principal, pool_name)
        counts: dict[str, list[int]] = {}
        for topic, _, relevance, _ in session.execute(_entries_with_mine(pool, principal)):
            done = counts.setdefault(topic, [0, 0])
            done[0] += 1
            done[1] += relevance is not None
        titles = {t: collections.topic_statement(session, pool.topic_set, t) for t in counts}
        return _settings(pool), [TopicProgress(t, s.title if (s := titles[t]) else None, n, j)
                                 for t, (n, j) in counts.items()]


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


def judging_screen(engine: Engine, principal: Principal, pool_name: str, topic: str) -> JudgingScreen:
    with read_only(engine) as session:
        pool = _judged_pool(session, principal, pool_name)
        rows = session.execute(_entries_with_mine(pool, principal).where(PoolEntry.topic == topic)).all()
        if not rows:
            raise NotFoundError(f"Pool '{pool_name}' holds no documents for topic '{topic}'.")
        pending = [(i, doc) for i, (_, doc, relevance, _) in enumerate(rows, start=1) if relevance is None]
        judged = [(at, doc, relevance) for _, doc, relevance, at in rows if relevance is not None]
        newest = max(judged, key=lambda j: (jobs.as_utc(j[0]), j[1])) if judged else None
        position, doc = pending[0] if pending else (len(rows), None)
        texts = collections.document_texts(session, pool.collection, [doc] if doc else [])
        return JudgingScreen(pool.name, pool.grades or POOL_GRADES, topic,
                             collections.topic_statement(session, pool.topic_set, topic), doc,
                             texts.get(doc) if doc else None, position, len(judged), len(rows),
                             (newest[1], newest[2]) if newest else None)


def judge_document(engine: Engine, principal: Principal, pool_name: str, topic: str, doc: str, grade: int | None,
                   *, seconds: float | None = None, note: str | None = None) -> None:
    """Record one judgment from the judging screen: a grade of the pool's scale, or None for
    "skipped: not rateable"; with the time it took and the assessor's note."""
    with read_only(engine) as session:
        pool = _judged_pool(session, principal, pool_name)
        grades = pool.grades or POOL_GRADES
    if grade is not None and str(grade) not in grades:
        raise InvalidParameterError(f"Grade {grade} is not on pool '{pool_name}'s scale "
                                    f"({', '.join(f'{g} {label}' for g, label in grades.items())}).")
    if note is not None and len(note) > NOTE_CHARACTERS:
        raise InvalidParameterError(f"A note holds at most {NOTE_CHARACTERS} characters; this one has {len(note)}.")
    if seconds is not None and not 0 <= seconds:
        raise InvalidParameterError("The time spent on a judgment cannot be negative.")
    record_judgments(engine, principal, pool_name,
                     [(topic, doc, SKIPPED if grade is None else grade)],
                     seconds=None if seconds is None else min(seconds, LONGEST_JUDGMENT_SECONDS),
                     note=(note or "").strip() or None)


def record_judgments(engine: Engine, principal: Principal, pool_name: str,
                     judgments: Sequence[tuple[str, str, int]], *, seconds: float | None = None,
                     note: str | None = None) -> int:
    """Record this assessor's judgments (topic, doc, relevance) of pooled documents, all or none;
    a document judged again keeps the newest label. Returns how many were recorded."""
    with unit_of_work(engine) as session:
        pool = _judged_pool(session, principal, pool_name)
        wanted = {(t, d) for t, d, _ in judgments}
        pooled = set(session.execute(select(PoolEntry.topic, PoolEntry.doc).where(
            PoolEntry.pool_id == pool.id, PoolEntry.doc.in_({d for _, d in wanted}))).all())
        outside = sorted(wanted - pooled)
        if outside:
            raise InvalidParameterError(f"Document '{outside[0][1]}' of topic '{outside[0][0]}' is not in pool "
                                        f"'{pool_name}'; nothing was recorded.")
        now = jobs.db_now(session)
        assert principal.name is not None
        for topic, doc, relevance in judgments:
            row = session.get(PoolJudgment, (pool.id, topic, doc, principal.name))
            if row is None:
                session.add(PoolJudgment(pool_id=pool.id, topic=topic, doc=doc, assessor=principal.name,
                                         relevance=relevance, created_at=now, seconds=seconds, note=note))
            else:
                row.relevance, row.created_at, row.seconds, row.note = relevance, now, seconds, note
        audit(session, principal.name, "pools.judge", pool_name, {"judgments": len(judgments)})
        return len(judgments)


def undo_last(engine: Engine, principal: Principal, pool_name: str, topic: str) -> str | None:
    """Take back this assessor's newest judgment of the topic; returns its document (None: there
    was none), which the judging screen then shows again."""
    with unit_of_work(engine) as session:
        pool = _judged_pool(session, principal, pool_name)
        newest = session.execute(
            select(PoolJudgment.doc).where(PoolJudgment.pool_id == pool.id, PoolJudgment.topic == topic,
                                           PoolJudgment.assessor == principal.name)
            .order_by(PoolJudgment.created_at.desc(), PoolJudgment.doc.desc()).limit(1)).scalar()
        if newest is None:
            return None
        session.execute(delete(PoolJudgment).where(
            PoolJudgment.pool_id == pool.id, PoolJudgment.topic == topic, PoolJudgment.doc == newest,
            PoolJudgment.assessor == principal.name))
        audit(session, principal.name, "pools.undo", pool_name, {"topic": topic, "doc": newest})
        return str(newest)
