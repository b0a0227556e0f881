"""Who labelled what: every label of a pool's documents, human and judge-made, with its provenance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Engine, select

from evalstore.db import repositories as repo
from evalstore.db.models import Judge, JudgeLabel, PoolJudgment
from evalstore.db.session import read_only


@dataclass(frozen=True, slots=True)
class LabelProvenance:
    """One label of a pool's document, with who made it, when and how."""

    topic: str
    doc: str
    by: Literal["human", "judge"]
    who: str  # the assessor, or the judge's name
    relevance: int | None  # None: unrateable
    reason: str | None  # why it is unrateable
    at: str  # ISO 8601
    seconds: float | None  # the time spent
    explanation: str | None  # the assessor's note, the judge's explanation
    raw_output: str | None  # the judge's answer as it came
    provenance: dict[str, Any]  # the assessor; a judge's configuration as stored with the label


def label_provenance(
    engine: Engine, pool_name: str, *, topic: str | None = None, doc: str | None = None, judge: str | None = None
) -> list[LabelProvenance]:
    """The pool's labels (of one topic or document when named), humans' first: a human's is who
    (the assessor) and when, with the time spent and the note; a judge's is the configuration it
    was made under, the raw answer and the explanation, or the reason it is unrateable."""
    with read_only(engine) as session:
        pool = repo.get_pool(session, pool_name)
        found: list[LabelProvenance] = []
        if judge is None:
            human = select(PoolJudgment).where(PoolJudgment.pool_id == pool.id)
            if topic is not None:
                human = human.where(PoolJudgment.topic == topic)
            if doc is not None:
                human = human.where(PoolJudgment.doc == doc)
            for row in session.scalars(human.order_by(PoolJudgment.topic, PoolJudgment.doc, PoolJudgment.assessor)):
                found.append(
                    LabelProvenance(
                        topic=row.topic,
                        doc=row.doc,
                        by="human",
                        who=row.assessor,
                        relevance=None if row.relevance < 0 else row.relevance,
                        reason="skipped: not rateable" if row.relevance < 0 else None,
                        at=row.created_at.isoformat(),
                        seconds=row.seconds,
                        explanation=row.note,
                        raw_output=None,
                        provenance={"assessor": row.assessor},
                    )
                )
        made = (
            select(JudgeLabel, Judge.name)
            .join(Judge, Judge.id == JudgeLabel.judge_id)
            .where(JudgeLabel.pool_id == pool.id)
        )
        if topic is not None:
            made = made.where(JudgeLabel.topic == topic)
        if doc is not None:
            made = made.where(JudgeLabel.doc == doc)
        if judge is not None:
            made = made.where(Judge.name == judge)
        for label, name in session.execute(made.order_by(JudgeLabel.topic, JudgeLabel.doc, Judge.name, JudgeLabel.id)):
            found.append(
                LabelProvenance(
                    topic=label.topic,
                    doc=label.doc,
                    by="judge",
                    who=name,
                    relevance=label.relevance,
                    reason=label.reason,
                    at=label.created_at.isoformat(),
                    seconds=label.seconds,
                    explanation=label.explanation,
                    raw_output=label.raw_output,
                    provenance={**label.provenance, "config_hash": label.config_hash, "attempts": label.attempts},
                )
            )
        return found
