"""Judging pools through the service: which assessor judges which pool, what each sees next,
and the judgments they make (in the browser, one document at a time, or through the API).

Judgments land in ``pool_judgments``, the table ``evalstore judgments import`` fills, so
``judgments agreement`` and ``pool qrels`` read them unchanged. An assessor sees only the pools
assigned to them, and never another assessor's labels (judging is blind).
"""

from __future__ import annotations

import secrets
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import AuditEntry, Pool, PoolAssignment, PoolEntry, PoolJudgment
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import InvalidParameterError, NotFoundError
from evalstore.io.texts import DocumentText, TopicStatement
from evalstore.services import collections, jobs
from evalstore.services.access import Principal, audit, get_user

# the grades an assessor picks from when a pool names none (TREC DL's four-point scale)
POOL_GRADES = {"0": "Not relevant", "1": "Related", "2": "Highly relevant", "3": "Perfectly relevant"}
SKIPPED = -1  # seen, not rateable: left out of agreement, and -1 (pooled, not judged) in the qrels
NOTE_CHARACTERS = 2000
# an assessor's role on a topic of a pool: with no double judging, every document; with it, a
# topic is its first assessor's (who made its earliest judgment) and a sample of it each other's
ROLE_EVERY = "every document"
ROLE_FIRST = "first assessor"
ROLE_SECOND = "second assessor (blind sample)"
ROLE_OPEN = "first assessor, unless another assessor judges this topic first"  # nobody has judged it yet
ROLE_CODES = {ROLE_EVERY: "every", ROLE_FIRST: "first", ROLE_SECOND: "second", ROLE_OPEN: "open"}  # for URLs
# how many of an assessor's newest undos are searched for the note of the document shown again
UNDOS_SEARCHED = 50
# a judgment's time is what passed between showing the document and the key press; longer than
# this, the assessor was away, and the time says nothing about the document
LONGEST_JUDGMENT_SECONDS = 3600.0


def assign_assessor(engine: Engine, pool_name: str, user_name: str, *, by: Principal | None = None) -> None:
    """Let an assessor judge a pool."""
    with unit_of_work(engine) as session:
        pool = repo.get_pool(session, pool_name)
        user = get_user(session, user_name)
        if user.role not in ("assessor", "admin"):
            raise InvalidParameterError(f"User '{user_name}' is a {user.role}; pools are judged by assessors.")
        if session.get(PoolAssignment, (pool.id, user.id)) is None:
            session.add(PoolAssignment(pool_id=pool.id, user_id=user.id))
        audit(session, by.name if by else None, "pools.assign", pool_name, {"assessor": user_name})


def configure_pool(
    engine: Engine,
    pool_name: str,
    *,
    topic_set: str | None = None,
    collection: str | None = None,
    grades: Mapping[int, str] | None = None,
    double_share: float | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """Name the topic statements and documents a pool's assessors read, its grades with their
    labels (each grade a relevance value 0-9), and the share of each topic judged twice: with a
    share, a topic is its first assessor's, and each other assessor judges that seeded share of
    it, blind, for agreement (the seed is drawn and recorded when none is given). Unnamed settings
    keep their value."""
    with unit_of_work(engine) as session:
        pool = repo.get_pool(session, pool_name)
        if topic_set is not None:
            repo.get_topic_set(session, topic_set)
            pool.topic_set = topic_set
        if collection is not None:
            repo.get_collection(session, collection)
            pool.collection = collection
        if grades is not None:
            wrong = [g for g in grades if not 0 <= g <= 9]
            if wrong or not grades:
                raise InvalidParameterError("Give grades as VALUE=LABEL with VALUE 0-9, e.g. --grade '0=Not relevant'.")
            pool.grades = {str(g): label for g, label in sorted(grades.items())}
        if double_share is not None:
            if not 0 <= double_share <= 1:
                raise InvalidParameterError(f"--double-share is a share of each topic, 0 to 1; not {double_share}.")
            pool.double_share = double_share
            pool.double_seed = seed if seed is not None else secrets.randbits(31)
        return _settings(pool)


def _settings(pool: Pool) -> dict[str, Any]:
    return {
        "pool": pool.name,
        "topics": pool.topic_set,
        "collection": pool.collection,
        "grades": pool.grades or POOL_GRADES,
        "double_share": pool.double_share,
        "double_seed": pool.double_seed,
    }


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
                PoolAssignment.user_id == principal.user_id
            )
        pools = list(session.scalars(statement))
        return [
            {
                "name": p.name,
                "strategy": p.strategy,
                "entries": session.scalar(select(func.count()).select_from(PoolEntry).where(PoolEntry.pool_id == p.id)),
                "judged_by_you": session.scalar(
                    select(func.count())
                    .select_from(PoolJudgment)
                    .where(PoolJudgment.pool_id == p.id, PoolJudgment.assessor == principal.name)
                ),
            }
            for p in pools
        ]


def pool_entries(
    engine: Engine, principal: Principal, pool_name: str, *, topic: str | None = None
) -> list[dict[str, Any]]:
    """The documents to judge, in judging order, with this assessor's judgments so far."""
    with read_only(engine) as session:
        pool = _judged_pool(session, principal, pool_name)
        statement = _entries_with_mine(pool, principal)
        if topic is not None:
            statement = statement.where(PoolEntry.topic == topic)
        return [{"topic": t, "doc": d, "relevance": r} for t, d, r, _ in session.execute(statement)]


def _entries_with_mine(pool: Pool, principal: Principal) -> Any:
    return (
        select(PoolEntry.topic, PoolEntry.doc, PoolJudgment.relevance, PoolJudgment.created_at)
        .outerjoin(
            PoolJudgment,
            (PoolJudgment.pool_id == PoolEntry.pool_id)
            & (PoolJudgment.topic == PoolEntry.topic)
            & (PoolJudgment.doc == PoolEntry.doc)
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


def topic_progress(engine: Engine, principal: Principal, pool_name: str) -> tuple[dict[str, Any], list[TopicProgress]]:
    """The pool's settings, and per topic the documents this assessor judges (all, or the
    double-judged share of another assessor's topic) and how many they have judged."""
    with read_only(engine) as session:
        pool = _judged_pool(session, principal, pool_name)
        by_topic: dict[str, list[tuple[str, int | None]]] = {}
        for topic, doc, relevance, _ in session.execute(_entries_with_mine(pool, principal)):
            by_topic.setdefault(topic, []).append((doc, relevance))
        firsts = _first_assessors(session, pool)
        progress = []
        for topic, rows in by_topic.items():
            mine = _my_share(pool, principal, topic, rows, firsts.get(topic))
            statement = collections.topic_statement(session, pool.topic_set, topic)
            progress.append(
                TopicProgress(
                    topic,
                    statement.title if statement else None,
                    len(mine),
                    sum(r is not None for _, r in mine),
                    _role(pool, principal, firsts.get(topic)),
                )
            )
        return _settings(pool), progress


def _first_assessors(session: Session, pool: Pool) -> dict[str, str]:
    """Each topic's first assessor: who made its earliest judgment (a topic is theirs to judge
    whole when the pool shares topics out)."""
    if pool.double_share is None:
        return {}
    earliest = (
        select(PoolJudgment.topic, func.min(PoolJudgment.created_at).label("at"))
        .where(PoolJudgment.pool_id == pool.id)
        .group_by(PoolJudgment.topic)
        .subquery()
    )
    rows = session.execute(
        select(PoolJudgment.topic, PoolJudgment.assessor)
        .join(earliest, (earliest.c.topic == PoolJudgment.topic) & (earliest.c.at == PoolJudgment.created_at))
        .where(PoolJudgment.pool_id == pool.id)
        .order_by(PoolJudgment.assessor.desc())
    ).all()
    return {topic: assessor for topic, assessor in rows}  # a tie in time: the first name wins


def _role(pool: Pool, principal: Principal, first: str | None) -> str:
    """The assessor's role on a topic. Before anyone has judged it, nobody is its first assessor
    yet: two assessors who open it then are both told it is open, not both told it is theirs."""
    if pool.double_share is None:
        return ROLE_EVERY
    if first is None:
        return ROLE_OPEN
    return ROLE_FIRST if first == principal.name else ROLE_SECOND


def topic_role(engine: Engine, principal: Principal, pool_name: str, topic: str) -> str:
    """The principal's role on a topic of the pool now (the judging screen compares it with the
    role it showed, and tells the assessor when it changed)."""
    with read_only(engine) as session:
        pool = _judged_pool(session, principal, pool_name)
        return _role(pool, principal, _first_assessors(session, pool).get(topic))


def role_changed(shown: str, now: str) -> bool:
    """Whether the assessor must be told that their role changed since the screen showed ``shown``
    (an open topic becoming theirs with their first judgment is what they were told would happen)."""
    return shown in ROLE_CODES and shown != now and (shown, now) != (ROLE_OPEN, ROLE_FIRST)


def double_sample(pool_seed: int, share: float, topic: str, docs: Sequence[str]) -> set[str]:
    """The documents of a topic a second assessor judges: ``share`` of them (at least one when the
    share is above 0), drawn by a generator seeded with the pool's seed and the topic, so every
    assessor and every server process draws the same ones."""
    if share <= 0 or not docs:
        return set()
    count = min(len(docs), max(1, round(share * len(docs))))
    rng = np.random.default_rng([pool_seed, zlib.crc32(topic.encode())])
    ordered = sorted(docs)
    return {ordered[i] for i in rng.choice(len(ordered), size=count, replace=False)}


def _my_share(
    pool: Pool, principal: Principal, topic: str, rows: list[tuple[str, int | None]], first: str | None
) -> list[tuple[str, int | None]]:
    """The (doc, my relevance) of the topic this assessor judges, in judging order."""
    if pool.double_share is None or first in (None, principal.name):
        return rows
    assert pool.double_seed is not None
    sample = double_sample(pool.double_seed, pool.double_share, topic, [d for d, _ in rows])
    return [(d, r) for d, r in rows if d in sample or r is not None]


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
        pool = _judged_pool(session, principal, pool_name)
        everything = session.execute(_entries_with_mine(pool, principal).where(PoolEntry.topic == topic)).all()
        if not everything:
            raise NotFoundError(f"Pool '{pool_name}' holds no documents for topic '{topic}'.")
        first = _first_assessors(session, pool).get(topic)
        share = {d for d, _ in _my_share(pool, principal, topic, [(d, r) for _, d, r, _ in everything], first)}
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
            _role(pool, principal, first),
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
        pool = _judged_pool(session, principal, pool_name)
        rows = session.execute(
            _entries_with_mine(pool, principal).add_columns(PoolJudgment.note).where(PoolEntry.topic == topic)
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
        return pool.grades or POOL_GRADES, _role(pool, principal, _first_assessors(session, pool).get(topic)), judgments


def revise_judgment(
    engine: Engine, principal: Principal, pool_name: str, topic: str, doc: str, grade: int | None, *, note: str | None
) -> None:
    """Change one of the assessor's own judgments: its grade (None: skipped, not rateable) and its
    note (None or blank: no note). Its time stays that of the first judging, so a revision moves
    neither the topic's first assessor nor what an undo takes back."""
    if note is not None and len(note) > NOTE_CHARACTERS:
        raise InvalidParameterError(f"A note holds at most {NOTE_CHARACTERS} characters; this one has {len(note)}.")
    with unit_of_work(engine) as session:
        pool = _judged_pool(session, principal, pool_name)
        _check_grade(pool, grade)
        row = session.get(PoolJudgment, (pool.id, topic, doc, principal.name))
        if row is None:
            raise NotFoundError(
                f"You have not judged document '{doc}' of topic '{topic}' in pool '{pool_name}'; "
                "judge it on the topic's judging screen first."
            )
        before = row.relevance
        row.relevance, row.note = SKIPPED if grade is None else grade, (note or "").strip() or None
        audit(
            session,
            principal.name,
            "pools.revise",
            pool.name,
            {"topic": topic, "doc": doc, "from": before, "to": row.relevance},
        )


def _check_grade(pool: Pool, grade: int | None) -> None:
    grades = pool.grades or POOL_GRADES
    if grade is not None and str(grade) not in grades:
        raise InvalidParameterError(
            f"Grade {grade} is not on pool '{pool.name}'s scale "
            f"({', '.join(f'{g} {label}' for g, label in grades.items())})."
        )


def judge_document(
    engine: Engine,
    principal: Principal,
    pool_name: str,
    topic: str,
    doc: str,
    grade: int | None,
    *,
    seconds: float | None = None,
    note: str | None = None,
    suggestion: tuple[str, int] | None = None,
) -> None:
    """Record one judgment from the judging screen: a grade of the pool's scale, or None for
    "skipped: not rateable"; with the time it took, the assessor's note, and the suggestion
    (judge, label) the screen showed (services.judges.suggestions checks it)."""
    if note is not None and len(note) > NOTE_CHARACTERS:
        raise InvalidParameterError(f"A note holds at most {NOTE_CHARACTERS} characters; this one has {len(note)}.")
    if seconds is not None and not 0 <= seconds:
        raise InvalidParameterError("The time spent on a judgment cannot be negative.")
    with unit_of_work(engine) as session:
        pool = _judged_pool(session, principal, pool_name)
        _check_grade(pool, grade)
        _record(
            session,
            principal,
            pool,
            [(topic, doc, SKIPPED if grade is None else grade)],
            seconds=None if seconds is None else min(seconds, LONGEST_JUDGMENT_SECONDS),
            note=(note or "").strip() or None,
            suggestion=suggestion,
        )


def record_judgments(
    engine: Engine, principal: Principal, pool_name: str, judgments: Sequence[tuple[str, str, int]]
) -> int:
    """Record this assessor's judgments (topic, doc, relevance) of pooled documents, all or none;
    a document judged again keeps the newest label. Returns how many were recorded."""
    with unit_of_work(engine) as session:
        _record(session, principal, _judged_pool(session, principal, pool_name), judgments)
        return len(judgments)


def _record(
    session: Session,
    principal: Principal,
    pool: Pool,
    judgments: Sequence[tuple[str, str, int]],
    *,
    seconds: float | None = None,
    note: str | None = None,
    suggestion: tuple[str, int] | None = None,
) -> None:
    wanted = {(t, d) for t, d, _ in judgments}
    pooled = set(
        session.execute(
            select(PoolEntry.topic, PoolEntry.doc).where(
                PoolEntry.pool_id == pool.id, PoolEntry.doc.in_({d for _, d in wanted})
            )
        ).all()
    )
    outside = sorted(wanted - pooled)
    if outside:
        raise InvalidParameterError(
            f"Document '{outside[0][1]}' of topic '{outside[0][0]}' is not in pool '{pool.name}'; nothing was recorded."
        )
    now = jobs.db_now(session)
    assert principal.name is not None
    for topic, doc, relevance in judgments:
        row = session.get(PoolJudgment, (pool.id, topic, doc, principal.name))
        if row is None:
            session.add(
                PoolJudgment(
                    pool_id=pool.id,
                    topic=topic,
                    doc=doc,
                    assessor=principal.name,
                    relevance=relevance,
                    created_at=now,
                    seconds=seconds,
                    note=note,
                    suggested_by=suggestion[0] if suggestion else None,
                    suggested=suggestion[1] if suggestion else None,
                )
            )
        else:
            row.relevance, row.created_at, row.seconds, row.note = relevance, now, seconds, note
            row.suggested_by, row.suggested = suggestion or (None, None)
    audit(session, principal.name, "pools.judge", pool.name, {"judgments": len(judgments)})


def undo_last(engine: Engine, principal: Principal, pool_name: str, topic: str) -> str | None:
    """Take back this assessor's newest judgment of the topic; returns its document (None: there
    was none), which the judging screen then shows again, with the judgment's note (the audit log
    keeps the grade and the note taken back)."""
    with unit_of_work(engine) as session:
        pool = _judged_pool(session, principal, pool_name)
        found = session.execute(
            select(PoolJudgment.doc, PoolJudgment.relevance, PoolJudgment.note)
            .where(
                PoolJudgment.pool_id == pool.id, PoolJudgment.topic == topic, PoolJudgment.assessor == principal.name
            )
            .order_by(PoolJudgment.created_at.desc(), PoolJudgment.doc.desc())
            .limit(1)
        ).first()
        if found is None:
            return None
        newest, relevance, note = found
        session.execute(
            delete(PoolJudgment).where(
                PoolJudgment.pool_id == pool.id,
                PoolJudgment.topic == topic,
                PoolJudgment.doc == newest,
                PoolJudgment.assessor == principal.name,
            )
        )
        audit(
            session,
            principal.name,
            "pools.undo",
            pool.name,
            {"topic": topic, "doc": newest, "relevance": relevance, "note": note},
        )
        return str(newest)
