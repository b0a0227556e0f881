"""Who judges which pool, and the pool's judging settings (topic statements, documents, grades,
the share judged twice)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TypedDict

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import Pool, PoolAssignment, PoolEntry, PoolJudgment
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import InvalidParameterError, NotFoundError, Remedy
from evalstore.services.access import Principal, audit, get_user

# the grades an assessor picks from when a pool names none (TREC DL's four-point scale)
POOL_GRADES = {"0": "Not relevant", "1": "Related", "2": "Highly relevant", "3": "Perfectly relevant"}


class PoolSettings(TypedDict):
    """What a pool's assessors read and how they judge, as `pool configure` and the judging pages
    give it: the topic set and collection, the grades with their labels, and the share of each
    topic judged twice with its seed."""

    pool: str
    topics: str | None
    collection: str | None
    grades: dict[str, str]
    double_share: float | None
    double_seed: int | None


class AssessorPool(TypedDict):
    """A pool an assessor judges, as the API and the pools page list it."""

    name: str
    strategy: str
    entries: int
    judged_by_you: int


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
) -> PoolSettings:
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
                shown = ", ".join(str(g) for g in wrong) or "none"
                raise InvalidParameterError(
                    f"A pool's grades are one or more relevance values 0-9, each with its label; not {shown}.",
                    remedy=Remedy(cli="Give each as --grade VALUE=LABEL, e.g. --grade '0=Not relevant'."),
                )
            pool.grades = {str(g): label for g, label in sorted(grades.items())}
        if double_share is not None:
            if not 0 <= double_share <= 1:
                raise InvalidParameterError(
                    f"The share of each topic judged twice is 0 to 1; not {double_share}.",
                    remedy=Remedy(cli="Set it with --double-share."),
                )
            pool.double_share = double_share
            pool.double_seed = seed if seed is not None else secrets.randbits(31)
        return judging_settings(pool)


def judging_settings(pool: Pool) -> PoolSettings:
    return PoolSettings(
        pool=pool.name,
        topics=pool.topic_set,
        collection=pool.collection,
        grades=pool.grades or POOL_GRADES,
        double_share=pool.double_share,
        double_seed=pool.double_seed,
    )


def judged_pool(session: Session, principal: Principal, name: str) -> Pool:
    """A pool the principal judges: an assessor's assigned pools; any pool for an admin."""
    principal.require("pools:judge")
    pool = session.scalar(select(Pool).where(Pool.name == name))
    assigned = pool is not None and session.get(PoolAssignment, (pool.id, principal.user_id)) is not None
    if pool is None or not (principal.is_admin or assigned):
        raise NotFoundError(f"No pool named '{name}' assigned to you.")
    return pool


def assessor_pools(engine: Engine, principal: Principal) -> list[AssessorPool]:
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
            AssessorPool(
                name=p.name,
                strategy=p.strategy,
                entries=session.scalar(select(func.count()).select_from(PoolEntry).where(PoolEntry.pool_id == p.id))
                or 0,
                judged_by_you=session.scalar(
                    select(func.count())
                    .select_from(PoolJudgment)
                    .where(PoolJudgment.pool_id == p.id, PoolJudgment.assessor == principal.name)
                )
                or 0,
            )
            for p in pools
        ]
