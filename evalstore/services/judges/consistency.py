"""A judge's self-consistency: how far its answers to the same prompt agree with each other across
repeats (``judges run --repeats K``; the first answer is the label, the others its repeats). Scores
that move between identical runs are what labs ask about first: a judge whose repeats disagree
gives labels that a second run would not give again."""

from __future__ import annotations

from typing import TypedDict

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from evalstore.db.models import Judge, JudgeLabel, JudgeRepeat


class SelfConsistency(TypedDict):
    """A judge's agreement with itself across repeats: over how many documents and answers, the
    share of documents whose answers all agree, the mean share of agreeing pairs, and
    Krippendorff's ordinal alpha."""

    documents: int
    answers: int
    all_agree: float
    pairwise_agreement: float
    krippendorff_alpha: float


def self_consistency(session: Session, judge: Judge) -> SelfConsistency | None:
    """Over the documents with two or more graded answers under the judge's configuration: how
    many, the share whose answers all agree, the mean share of agreeing pairs of answers, and
    Krippendorff's ordinal alpha with the repeats as coders (the ``krippendorff`` package); None
    when no document was asked twice."""
    import krippendorff

    current = (JudgeLabel.judge_id == judge.id, JudgeLabel.config_hash == judge.config_hash)
    answers: dict[tuple[int, str, str], dict[int, int]] = {}
    for pool, topic, doc, relevance in session.execute(
        select(JudgeLabel.pool_id, JudgeLabel.topic, JudgeLabel.doc, JudgeLabel.relevance).where(
            *current, JudgeLabel.relevance.is_not(None)
        )
    ):
        answers.setdefault((pool, topic, doc), {})[1] = int(relevance or 0)  # None filtered out above
    for pool, topic, doc, number, relevance in session.execute(
        select(
            JudgeRepeat.pool_id, JudgeRepeat.topic, JudgeRepeat.doc, JudgeRepeat.repeat, JudgeRepeat.relevance
        ).where(
            JudgeRepeat.judge_id == judge.id,
            JudgeRepeat.config_hash == judge.config_hash,
            JudgeRepeat.relevance.is_not(None),
        )
    ):
        answers.setdefault((pool, topic, doc), {})[int(number)] = int(relevance or 0)
    repeated = [given for given in answers.values() if len(given) >= 2]
    if not repeated:
        return None
    coders = max(max(given) for given in repeated)
    data = np.full((coders, len(repeated)), np.nan)
    for column, given in enumerate(repeated):
        for number, relevance in given.items():
            data[number - 1, column] = relevance
    pairs = []
    for given in repeated:
        values = list(given.values())
        agreeing = sum(values[i] == values[j] for i in range(len(values)) for j in range(i + 1, len(values)))
        pairs.append(agreeing / (len(values) * (len(values) - 1) / 2))
    labels = sorted({v for given in repeated for v in given.values()})
    alpha = (
        float(krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal", value_domain=labels))
        if len(labels) > 1
        else 1.0
    )
    return SelfConsistency(
        documents=len(repeated),
        answers=int(np.isfinite(data).sum()),
        all_agree=float(np.mean([len(set(given.values())) == 1 for given in repeated])),
        pairwise_agreement=float(np.mean(pairs)),
        krippendorff_alpha=alpha,
    )
