"""A judge's suggestion on the judging page, as Argilla keeps a model's suggestions apart
from human responses: only when the pool's organiser turns it on (``pool configure POOL
--suggestions JUDGE``; off by default, so human labels stay independent) does the page show the
judge's label and explanation beside the document. The assessor's label is stored as usual, with
the suggestion they were shown (``pool_judgments.suggested``/``suggested_by``), and agreement with
the suggestion is reported apart, over the judgments it was shown for only, beside the agreement
with the same judge where it was not shown (the difference is how far assessors follow it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import Judge, JudgeLabel, Pool, PoolJudgment
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import InvalidParameterError
from evalstore.services import judging
from evalstore.services.access import Principal, audit
from evalstore.services.judges.registry import get_judge
from evalstore.statistics import judgment_agreement as agreement


@dataclass(frozen=True)
class Suggestion:
    judge: str
    grade: int
    label: str | None  # the grade's label on the pool's scale
    explanation: str | None


def set_suggestions(engine: Engine, pool_name: str, judge: str | None, *, by: Principal | None = None) -> str | None:
    """Show ``judge``'s labels to the pool's assessors as suggestions (None: show none)."""
    with unit_of_work(engine) as session:
        pool = repo.get_pool(session, pool_name)
        if judge is not None:
            get_judge(session, judge)
        pool.suggest_judge = judge
        audit(session, by.name if by else None, "pools.suggestions", pool_name, {"judge": judge})
        return judge


def _current_label(session: Session, pool: Pool, judge: Judge, topic: str, doc: str) -> JudgeLabel | None:
    return session.scalar(
        select(JudgeLabel).where(
            JudgeLabel.judge_id == judge.id,
            JudgeLabel.config_hash == judge.config_hash,
            JudgeLabel.pool_id == pool.id,
            JudgeLabel.topic == topic,
            JudgeLabel.doc == doc,
            JudgeLabel.relevance.is_not(None),
        )
    )


def _suggestion(session: Session, pool: Pool, topic: str, doc: str) -> Suggestion | None:
    if not pool.suggest_judge:
        return None
    judge = session.scalar(select(Judge).where(Judge.name == pool.suggest_judge))
    label = _current_label(session, pool, judge, topic, doc) if judge is not None else None
    if judge is None or label is None or label.relevance is None:
        return None  # not judged (or unrateable): nothing to suggest
    grades = pool.grades or judging.POOL_GRADES
    return Suggestion(judge.name, int(label.relevance), grades.get(str(label.relevance)), label.explanation)


def judging_screen(
    engine: Engine, principal: Principal, pool_name: str, topic: str
) -> tuple[judging.JudgingScreen, Suggestion | None]:
    """The judging screen, and the suggestion for its document when the pool shows suggestions."""
    screen = judging.judging_screen(engine, principal, pool_name, topic)  # checks the principal's access
    if screen.doc is None:
        return screen, None
    with read_only(engine) as session:
        return screen, _suggestion(session, repo.get_pool(session, pool_name), topic, screen.doc)


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
    suggested: int | None = None,
    suggested_by: str | None = None,
) -> None:
    """:func:`judging.judge_document`, recording the suggestion the page showed (``suggested_by``'s
    label ``suggested``), which must be a label that judge gave the document."""
    shown: tuple[str, int] | None = None
    if suggested is not None or suggested_by:
        with read_only(engine) as session:
            pool = session.scalar(select(Pool).where(Pool.name == pool_name))
            judge = session.scalar(select(Judge).where(Judge.name == suggested_by))
            given = (
                session.scalars(
                    select(JudgeLabel.relevance).where(
                        JudgeLabel.judge_id == judge.id,
                        JudgeLabel.pool_id == pool.id,
                        JudgeLabel.topic == topic,
                        JudgeLabel.doc == doc,
                    )
                ).all()
                if pool is not None and judge is not None
                else []
            )
        if suggested is None or suggested not in given:
            raise InvalidParameterError(
                "The suggestion this form sent is not a label the pool's judge gave this document; "
                "reload the judging page and judge it again."
            )
        shown = (str(suggested_by), suggested)
    judging.judge_document(
        engine, principal, pool_name, topic, doc, grade, seconds=seconds, note=note, suggestion=shown
    )


@dataclass(frozen=True)
class AssessorFollowing:
    """How often an assessor gave the label the judge suggested, of the suggestions shown to them."""

    assessor: str
    shown: int
    followed: int
    share_followed: float


@dataclass(frozen=True)
class SuggestionAgreement:
    """Human labels against a judge's: where its suggestion was shown (``shown``), where it was
    not (``not_shown``: the same judge's labels); None with nothing to compare. Sent without the
    agreements' per-topic figures."""

    pool: str
    judge: str | None  # the judge the pool shows now
    judges_shown: list[str]  # every judge whose suggestions were shown
    judgments: int
    shown: agreement.LabelAgreement | None
    not_shown: agreement.LabelAgreement | None
    assessors: list[AssessorFollowing]

    def as_dict(self) -> dict[str, object]:
        def overall(labels: agreement.LabelAgreement | None) -> dict[str, object] | None:
            return None if labels is None else {k: v for k, v in asdict(labels).items() if k != "per_topic"}

        return {
            "pool": self.pool,
            "judge": self.judge,
            "judges_shown": self.judges_shown,
            "judgments": self.judgments,
            "shown": overall(self.shown),
            "not_shown": overall(self.not_shown),
            "assessors": self.assessors,
        }


def suggestion_agreement(engine: Engine, pool_name: str) -> SuggestionAgreement:
    """Human labels against the judge's suggestions, over the judgments a suggestion was shown for
    (``shown``); beside it, against the same judge's labels where none was shown (``not_shown``,
    when the pool names a judge), and per assessor how often they gave the suggested label."""
    with read_only(engine) as session:
        pool = repo.get_pool(session, pool_name)
        rows = session.execute(
            select(
                PoolJudgment.topic,
                PoolJudgment.doc,
                PoolJudgment.assessor,
                PoolJudgment.relevance,
                PoolJudgment.suggested,
                PoolJudgment.suggested_by,
            ).where(PoolJudgment.pool_id == pool.id, PoolJudgment.relevance >= 0)
        ).all()
        judge = session.scalar(select(Judge).where(Judge.name == pool.suggest_judge)) if pool.suggest_judge else None
        judge_labels: dict[tuple[str, str], int] = {}
        if judge is not None:
            judge_labels = {
                (t, d): int(r)
                for t, d, r in session.execute(
                    select(JudgeLabel.topic, JudgeLabel.doc, JudgeLabel.relevance).where(
                        JudgeLabel.judge_id == judge.id,
                        JudgeLabel.config_hash == judge.config_hash,
                        JudgeLabel.pool_id == pool.id,
                        JudgeLabel.relevance.is_not(None),
                    )
                )
                if r is not None
            }
    shown = [(t, h, s) for t, _, _, h, s, _ in rows if s is not None]
    unshown = [(t, h, judge_labels[(t, d)]) for t, d, _, h, s, _ in rows if s is None and (t, d) in judge_labels]
    assessors: dict[str, list[bool]] = {}
    for _, _, assessor, human, suggested, _ in rows:
        if suggested is not None:
            assessors.setdefault(assessor, []).append(human == suggested)
    return SuggestionAgreement(
        pool_name,
        pool.suggest_judge,
        sorted({str(by) for *_, s, by in rows if s is not None}),
        len(rows),
        _agreement(shown),
        _agreement(unshown),
        [
            AssessorFollowing(name, len(same), sum(same), sum(same) / len(same))
            for name, same in sorted(assessors.items())
        ],
    )


def _agreement(rows: list[tuple[str, int, int]]) -> agreement.LabelAgreement | None:
    """Human (first) against the judge (second), or None with nothing to compare."""
    if not rows:
        return None
    topics, human, judge = (np.array(column, dtype=object) for column in zip(*rows, strict=True))
    return agreement.label_agreement(topics, human.astype(np.int64), judge.astype(np.int64))


def shown_by(engine: Engine, pool_name: str) -> str | None:
    """The judge whose suggestions the pool's assessors see (None: none)."""
    with read_only(engine) as session:
        return repo.get_pool(session, pool_name).suggest_judge
