"""`nuggets compare`: how far two assessors' nugget assignments on one bank agree, on the labels
(Cohen's kappa, weighted kappa, Krippendorff's alpha over the (run, nugget) pairs both labelled:
not_support 0 < partial_support 1 < support 2) and on the order of the answer runs (Kendall's
tau, tau-AP of their mean scores over the topics both assessed in full), with the agreement code
judges' qrels are compared with (:mod:`evalstore.statistics.judgment_agreement`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sqlalchemy import Engine, select

from evalstore.db.models import AnswerRun, Nugget, NuggetAssignment
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError, InvalidParameterError
from evalstore.metrics import answers as measures
from evalstore.services.answers import assessors
from evalstore.services.answers.nuggets import get_bank
from evalstore.statistics import judgment_agreement as agreement

ORDINAL = {"not_support": 0, "partial_support": 1, "support": 2}


@dataclass(frozen=True)
class AssessedPairs:
    """The (run, nugget) pairs each assessor labelled, and both."""

    first: int
    second: int
    both: int


@dataclass(frozen=True)
class AssignmentComparison:
    """Two assessors' nugget assignments on a bank compared: on the labels of the pairs both
    labelled, and (with two runs or more assessed by both) on the order of the runs by
    ``measure``; ``topics``: per run, the topics both assessed in full."""

    bank: str
    first: str
    second: str
    pairs: AssessedPairs
    labels: agreement.LabelAgreement
    measure: str
    topics: dict[str, int]
    systems: agreement.SystemAgreement | None = None
    note: str | None = None  # why there is no run order to compare

    def as_dict(self) -> dict[str, object]:
        head = {
            "bank": self.bank,
            "first": self.first,
            "second": self.second,
            "pairs": self.pairs,
            "labels": self.labels,
            "measure": self.measure,
            "topics": self.topics,
        }
        return head | ({"systems": self.systems} if self.systems is not None else {"note": self.note})


def compare_assignments(
    engine: Engine, bank_name: str, first: str, second: str, *, measure: str = "W", top_k: int = 5
) -> AssignmentComparison:
    """The agreement of ``second``'s assignments with ``first``'s (the reference, e.g. ``human``)."""
    if first == second:
        raise InvalidParameterError("Name two different assessors to compare (human, judge:NAME).")
    function = measures.answer_measure(measure)
    if function.nuggets is None:
        raise InvalidParameterError(f"{function.family.name} is not computed from nugget assignments.")
    with read_only(engine) as session:
        bank = get_bank(session, bank_name)
        nuggets = {
            n.id: (n.topic, n.importance) for n in session.scalars(select(Nugget).where(Nugget.bank_id == bank.id))
        }
        runs = session.execute(
            select(AnswerRun.id, AnswerRun.name)
            .join(NuggetAssignment, AnswerRun.id == NuggetAssignment.answer_run_id)
            .join(Nugget, Nugget.id == NuggetAssignment.nugget_id)
            .where(
                Nugget.bank_id == bank.id,
                assessors.reads(NuggetAssignment.assessor, first) | assessors.reads(NuggetAssignment.assessor, second),
            )
            .distinct()
        ).all()
        labels: dict[str, dict[tuple[str, int], str]] = {first: {}, second: {}}
        for run_id, run in runs:
            for assessor in (first, second):
                read = assessors.nugget_labels(session, bank.id, run_id, assessor).labels
                labels[assessor].update(((run, nugget), label) for nugget, label in read.items())
    for assessor, given in labels.items():
        if not given:
            raise EvaluationError(f"'{assessor}' assigned none of the nuggets of bank '{bank_name}'.")
    both = sorted(set(labels[first]) & set(labels[second]))
    if not both:
        raise EvaluationError(f"'{first}' and '{second}' label no (run, nugget) in common on bank '{bank_name}'.")
    label_agreement = agreement.label_agreement(
        np.array([nuggets[n][0] for _, n in both], dtype=object),
        np.array([ORDINAL[labels[first][key]] for key in both]),
        np.array([ORDINAL[labels[second][key]] for key in both]),
    )
    scores = _run_scores(nuggets, labels[first], labels[second], function.nuggets)
    report = AssignmentComparison(
        bank_name,
        first,
        second,
        AssessedPairs(len(labels[first]), len(labels[second]), len(both)),
        label_agreement,
        function.family.name,
        scores.topics,
    )
    names = sorted(scores.first)
    if len(names) < 2:
        return replace(report, note="fewer than two answer runs are assessed by both: no run order to compare")
    systems = agreement.system_agreement(
        names,
        np.array([scores.first[n] for n in names]),
        np.array([scores.second[n] for n in names]),
        top_k=top_k,
    )
    return replace(report, systems=systems)


@dataclass(frozen=True)
class _RunScores:
    """Each run's mean under each assessor, and how many topics both labelled in full."""

    first: dict[str, float]
    second: dict[str, float]
    topics: dict[str, int]


def _run_scores(
    nuggets: dict[int, tuple[str, str]],
    first: dict[tuple[str, int], str],
    second: dict[tuple[str, int], str],
    function: Any,
) -> _RunScores:
    """Each run's mean ``function`` under each assessor, over the topics both labelled in full."""
    by_topic: dict[str, list[int]] = {}
    for nugget, (topic, _) in nuggets.items():
        by_topic.setdefault(topic, []).append(nugget)
    runs = sorted({run for run, _ in first} & {run for run, _ in second})
    out = _RunScores({}, {}, {})
    for run in runs:
        topics = sorted(t for t, ids in by_topic.items() if all((run, i) in first and (run, i) in second for i in ids))
        if not topics:
            continue
        out.topics[run] = len(topics)
        code = {t: i for i, t in enumerate(topics)}
        ids = [i for t in topics for i in by_topic[t]]
        for side, given in ((out.first, first), (out.second, second)):
            table = measures.NuggetTable(
                np.array([code[nuggets[i][0]] for i in ids], dtype=np.int64),
                np.array([nuggets[i][1] == "vital" for i in ids], dtype=bool),
                np.array([measures.ASSIGNMENT_VALUE[given[run, i]] for i in ids], dtype=np.float64),
                len(topics),
            )
            side[run] = float(function(table).mean())
    return out
