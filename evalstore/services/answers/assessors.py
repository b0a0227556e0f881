"""Whose labels an answer evaluation reads: ``judge:NAME`` or ``human:NAME`` (one judge's or one
person's, as stored), or ``human``: people's labels as a track would pool them.

``human`` is, for each answer run and topic, the labels imported for it (NIST's assignments,
stored as ``human``) when it has any, and otherwise those of the topic's first assessor on the
nugget page (``human:NAME``: who labelled one of the topic's nuggets first, as the page's blind
double assessment counts them) among the people who labelled every nugget of the topic for that
run. A topic only some people started is read from the one with the most labels, so the
evaluation refuses it as labelled in part and names them. One person per topic, never a mix: two
people's labels on one answer would be neither's judgment. Citation support is chosen the same
way, per run and topic.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Row, func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from evalstore.db.models import CitationSupport, Nugget, NuggetAssignment

PEOPLE = "human"


def reads(column: InstrumentedAttribute[str], assessor: str) -> ColumnElement[bool]:
    """The rows ``assessor``'s labels may come from (people's are chosen among afterwards)."""
    if assessor == PEOPLE:
        return (column == PEOPLE) | column.like("human:%")
    return column == assessor


@dataclass(frozen=True)
class NuggetLabels:
    """One answer run's labels on a bank's nuggets: ``labels`` by nugget id, and who gave each
    topic's (``assessor`` for a single assessor; the chosen person or ``human`` per topic)."""

    labels: dict[int, str]
    by: dict[str, str]


def nugget_labels(session: Session, bank_id: int, answer_run_id: int, assessor: str) -> NuggetLabels:
    rows = session.execute(
        select(
            Nugget.topic,
            NuggetAssignment.nugget_id,
            NuggetAssignment.assessor,
            NuggetAssignment.label,
            NuggetAssignment.assessed_at,
        )
        .join(Nugget, Nugget.id == NuggetAssignment.nugget_id)
        .where(
            Nugget.bank_id == bank_id,
            NuggetAssignment.answer_run_id == answer_run_id,
            reads(NuggetAssignment.assessor, assessor),
        )
    ).all()
    if assessor != PEOPLE:
        return NuggetLabels({nugget: label for _, nugget, _, label, _ in rows}, {t: assessor for t, *_ in rows})
    sizes: dict[str, int] = dict(
        session.execute(
            select(Nugget.topic, func.count()).where(Nugget.bank_id == bank_id).group_by(Nugget.topic)
        ).all()
    )
    began = _by_pair(
        session.execute(
            select(Nugget.topic, NuggetAssignment.assessor, func.min(NuggetAssignment.assessed_at))
            .join(Nugget, Nugget.id == NuggetAssignment.nugget_id)
            .where(Nugget.bank_id == bank_id, NuggetAssignment.assessor.like("human:%"))
            .group_by(Nugget.topic, NuggetAssignment.assessor)
        ).all()
    )
    given: dict[tuple[str, str], dict[int, str]] = defaultdict(dict)
    for topic, nugget, who, label, _ in rows:
        given[topic, who][nugget] = label
    chosen = _choose({key: len(labels) for key, labels in given.items()}, began, sizes)
    labels = {nugget: label for topic, who in chosen.items() for nugget, label in given[topic, who].items()}
    return NuggetLabels(labels, chosen)


def support_labels(session: Session, answer_run_id: int, assessor: str) -> dict[tuple[str, int], int]:
    """One answer run's citation-support labels by (topic, sentence)."""
    rows = session.execute(
        select(
            CitationSupport.topic,
            CitationSupport.sentence,
            CitationSupport.assessor,
            CitationSupport.label,
            CitationSupport.assessed_at,
        ).where(CitationSupport.answer_run_id == answer_run_id, reads(CitationSupport.assessor, assessor))
    ).all()
    if assessor != PEOPLE:
        return {(topic, sentence): label for topic, sentence, _, label, _ in rows}
    topics = {topic for topic, *_ in rows}
    began = _by_pair(
        session.execute(
            select(CitationSupport.topic, CitationSupport.assessor, func.min(CitationSupport.assessed_at))
            .where(CitationSupport.topic.in_(topics), CitationSupport.assessor.like("human:%"))
            .group_by(CitationSupport.topic, CitationSupport.assessor)
        ).all()
    )
    given: dict[tuple[str, str], dict[int, int]] = defaultdict(dict)
    for topic, sentence, who, label, _ in rows:
        given[topic, who][sentence] = label
    chosen = _choose({key: len(labels) for key, labels in given.items()}, began, None)
    return {(topic, sentence): label for topic, who in chosen.items() for sentence, label in given[topic, who].items()}


def _by_pair(rows: Iterable[Row[str, str, datetime]]) -> dict[tuple[str, str], datetime]:
    return {(topic, who): at for topic, who, at in rows}


def _choose(
    counts: dict[tuple[str, str], int], began: dict[tuple[str, str], datetime], sizes: dict[str, int] | None
) -> dict[str, str]:
    """Per topic, whose labels: ``human`` (imported) first; else the people who labelled all of it
    (``sizes``; any count when None), the one who began the topic first, then by name; else the
    most labels."""
    by_topic: dict[str, list[str]] = defaultdict(list)
    for topic, who in counts:
        by_topic[topic].append(who)
    chosen = {}
    for topic, people in by_topic.items():
        if PEOPLE in people:
            chosen[topic] = PEOPLE
            continue
        complete = [p for p in people if sizes is None or counts[topic, p] >= sizes.get(topic, 0)]
        if complete:
            chosen[topic] = min(complete, key=lambda p: (began[topic, p], p))
        else:
            chosen[topic] = min(people, key=lambda p: (-counts[topic, p], p))
    return chosen
