"""Judgments made, revised and taken back: from the judging screen one document at a time (with
the time it took and a note), or many at once through the API, all or none."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import Session

from evalstore.db.keys import id_in, same_id
from evalstore.db.models import Pool, PoolEntry, PoolJudgment
from evalstore.db.session import unit_of_work
from evalstore.errors import InvalidParameterError, NotFoundError
from evalstore.services import jobs
from evalstore.services.access import Principal, audit
from evalstore.services.judging.assignments import POOL_GRADES, judged_pool

SKIPPED = -1  # seen, not rateable: left out of agreement, and -1 (pooled, not judged) in the qrels
NOTE_CHARACTERS = 2000
# a judgment's time is what passed between showing the document and the key press; longer than
# this, the assessor was away, and the time says nothing about the document
LONGEST_JUDGMENT_SECONDS = 3600.0
# judgments in one request: each is looked up and written in the one transaction, and the pooled
# check names each document twice (the id and its key): 40,000 passed PostgreSQL's 65,535
# parameters (a 503 that blamed the database)
MAX_JUDGMENTS = 10_000


def revise_judgment(
    engine: Engine, principal: Principal, pool_name: str, topic: str, doc: str, grade: int | None, *, note: str | None
) -> None:
    """Change one of the assessor's own judgments: its grade (None: skipped, not rateable) and its
    note (None or blank: no note). Its time stays that of the first judging, so a revision moves
    neither the topic's first assessor nor what an undo takes back."""
    if note is not None and len(note) > NOTE_CHARACTERS:
        raise InvalidParameterError(f"A note holds at most {NOTE_CHARACTERS} characters; this one has {len(note)}.")
    with unit_of_work(engine) as session:
        pool = judged_pool(session, principal, pool_name)
        _check_grade(pool, grade)
        row = session.scalar(
            select(PoolJudgment).where(
                PoolJudgment.pool_id == pool.id,
                same_id(PoolJudgment.topic, topic),
                same_id(PoolJudgment.doc, doc),
                PoolJudgment.assessor == principal.name,
            )
        )
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
        pool = judged_pool(session, principal, pool_name)
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
    if len(judgments) > MAX_JUDGMENTS:
        raise InvalidParameterError(
            f"At most {MAX_JUDGMENTS:,} judgments are recorded at once; {len(judgments):,} were sent. "
            "Send them in parts."
        )
    with unit_of_work(engine) as session:
        _record(session, principal, judged_pool(session, principal, pool_name), judgments)
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
                PoolEntry.pool_id == pool.id, id_in(PoolEntry.doc, {d for _, d in wanted})
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
        row = session.scalar(
            select(PoolJudgment).where(
                PoolJudgment.pool_id == pool.id,
                same_id(PoolJudgment.topic, topic),
                same_id(PoolJudgment.doc, doc),
                PoolJudgment.assessor == principal.name,
            )
        )
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
        pool = judged_pool(session, principal, pool_name)
        found = session.execute(
            select(PoolJudgment.doc, PoolJudgment.relevance, PoolJudgment.note)
            .where(
                PoolJudgment.pool_id == pool.id,
                same_id(PoolJudgment.topic, topic),
                PoolJudgment.assessor == principal.name,
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
                same_id(PoolJudgment.topic, topic),
                same_id(PoolJudgment.doc, newest),
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
