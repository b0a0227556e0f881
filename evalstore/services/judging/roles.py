"""An assessor's role on a topic of a pool. With no double judging they judge every document; with
it, a topic is its first assessor's (who made its earliest judgment) and a seeded blind sample of it
each other assessor's, for agreement."""

from __future__ import annotations

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from evalstore.db.models import Pool, PoolJudgment
from evalstore.db.session import read_only
from evalstore.services.access import Principal
from evalstore.services.judging.assignments import judged_pool
from evalstore.statistics.sampling import double_sample

# an assessor's role on a topic of a pool: with no double judging, every document; with it, a
# topic is its first assessor's (who made its earliest judgment) and a sample of it each other's
ROLE_EVERY = "every document"
ROLE_FIRST = "first assessor"
ROLE_SECOND = "second assessor (blind sample)"
ROLE_OPEN = "first assessor, unless another assessor judges this topic first"  # nobody has judged it yet
ROLE_CODES = {ROLE_EVERY: "every", ROLE_FIRST: "first", ROLE_SECOND: "second", ROLE_OPEN: "open"}  # for URLs


def first_assessors(session: Session, pool: Pool) -> dict[str, str]:
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


def role_of(pool: Pool, principal: Principal, first: str | None) -> str:
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
        pool = judged_pool(session, principal, pool_name)
        return role_of(pool, principal, first_assessors(session, pool).get(topic))


def role_changed(shown: str, now: str) -> bool:
    """Whether the assessor must be told that their role changed since the screen showed ``shown``
    (an open topic becoming theirs with their first judgment is what they were told would happen)."""
    return shown in ROLE_CODES and shown != now and (shown, now) != (ROLE_OPEN, ROLE_FIRST)


def my_share(
    pool: Pool, principal: Principal, topic: str, rows: list[tuple[str, int | None]], first: str | None
) -> list[tuple[str, int | None]]:
    """The (doc, my relevance) of the topic this assessor judges, in judging order."""
    if pool.double_share is None or first in (None, principal.name):
        return rows
    assert pool.double_seed is not None
    sample = double_sample(pool.double_seed, pool.double_share, topic, [d for d, _ in rows])
    return [(d, r) for d, r in rows if d in sample or r is not None]
