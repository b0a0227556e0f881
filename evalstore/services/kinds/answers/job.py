"""An answer run's evaluation as a worker runs it: the bank's nuggets and the run's labels read,
every answer measure computed per topic (:mod:`evalstore.metrics.answers`), nothing stored."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine, select

from evalstore.db.models import (
    AnswerCitation,
    AnswerRun,
    AnswerSentence,
    Evaluation,
    Nugget,
    NuggetBank,
)
from evalstore.db.repositories import AggregateRow
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError
from evalstore.metrics import answers as measures
from evalstore.services import jobs
from evalstore.services.answers import assessors
from evalstore.services.context import AppContext
from evalstore.services.kinds.base import ComputedJob, JobTimings, per_query_values


@dataclass(frozen=True)
class _Stored:
    """What an answers job reads: the bank's nuggets, the run's sentences and first citations, and
    the assessor's nugget and support labels."""

    nuggets: Any
    given: assessors.NuggetLabels
    sentences: Any
    cited: set[Any]
    support: Any
    run_name: str
    bank_name: str


def compute_job(engine: Engine, job: jobs.ClaimedJob, *, context: AppContext | None = None) -> ComputedJob:
    """Compute a claimed answers job, storing nothing (JobLost if its run or bank was deleted)."""
    timings = JobTimings()
    started = time.perf_counter()
    assessor = str(job.options["assessor"])
    stored = _read(engine, job, assessor)
    run_name, bank_name = stored.run_name, stored.bank_name
    timings.load = time.perf_counter() - started
    started = time.perf_counter()
    nugget_topics = _assessed_topics(stored.nuggets, stored.given, run_name, bank_name)
    support_topics = sorted({topic for topic, _ in stored.support})
    topics = sorted(set(nugget_topics) | set(support_topics))
    if not topics:
        raise EvaluationError(
            f"No topic of answer run '{run_name}' has {assessor} labels on nugget bank '{bank_name}'."
        )
    code = {topic: i for i, topic in enumerate(topics)}
    values: dict[str, np.ndarray] = {}
    if nugget_topics:
        values.update(_nugget_values(stored, nugget_topics, code))
    if stored.support:
        values.update(_support_values(stored, support_topics, code))
    aggregates: list[AggregateRow] = []
    for name, per_topic in values.items():
        finite = per_topic[np.isfinite(per_topic)]
        mean = float(finite.mean()) if finite.size else None
        aggregates.append({"measure": name, "value": mean, "text_value": None, "query_count": int(finite.size)})
    timings.compute = time.perf_counter() - started
    return ComputedJob(
        job.evaluation_id,
        run_name,
        bank_name,
        len(topics),
        (),
        timings,
        per_query_values(topics, values),
        aggregates,
        None,
    )


def _read(engine: Engine, job: jobs.ClaimedJob, assessor: str) -> _Stored:
    with read_only(engine) as session:
        evaluation = session.get(Evaluation, job.evaluation_id)
        answer_run = session.get(AnswerRun, evaluation.answer_run_id) if evaluation else None
        bank = session.get(NuggetBank, evaluation.nugget_bank_id) if evaluation else None
        if evaluation is None or answer_run is None or bank is None:
            raise jobs.JobLost(f"the answer run or nugget bank of job {job.evaluation_id} was deleted")
        nuggets = session.execute(
            select(Nugget.id, Nugget.topic, Nugget.importance).where(Nugget.bank_id == bank.id)
        ).all()
        given = assessors.nugget_labels(session, bank.id, answer_run.id, assessor)
        sentences = session.execute(
            select(AnswerSentence.topic, AnswerSentence.position).where(AnswerSentence.answer_run_id == answer_run.id)
        ).all()
        cited = set(
            session.execute(
                select(AnswerCitation.topic, AnswerCitation.sentence).where(
                    AnswerCitation.answer_run_id == answer_run.id, AnswerCitation.position == 0
                )
            ).all()
        )
        support = assessors.support_labels(session, answer_run.id, assessor)
        return _Stored(
            nuggets,
            given,
            sentences,
            cited,
            support,
            answer_run.name,
            bank.name,
        )


def _nugget_values(stored: _Stored, nugget_topics: list[str], code: dict[str, int]) -> dict[str, np.ndarray]:
    """The nugget measures per topic (NaN on a topic with support labels only)."""
    labels = stored.given.labels
    values: dict[str, np.ndarray] = {}
    kept = [(topic, importance, labels[i]) for i, topic, importance in stored.nuggets if topic in nugget_topics]
    table = measures.NuggetTable(
        np.array([code[t] for t, _, _ in kept], dtype=np.int64),
        np.array([importance == "vital" for _, importance, _ in kept], dtype=bool),
        np.array([measures.ASSIGNMENT_VALUE[label] for _, _, label in kept], dtype=np.float64),
        len(code),
    )
    assessed = np.isin(np.arange(len(code)), [code[t] for t in nugget_topics])
    for name in measures.NUGGET_MEASURES:
        function = measures.ANSWER_MEASURES[name].nuggets
        assert function is not None
        values[name] = np.where(assessed, function(table), np.nan)
    return values


def _support_values(stored: _Stored, support_topics: list[str], code: dict[str, int]) -> dict[str, np.ndarray]:
    """The citation-support measures per topic, from the sentences of the topics with support labels."""
    support, cited = stored.support, stored.cited
    values: dict[str, np.ndarray] = {}
    rows = [(topic, position) for topic, position in stored.sentences if topic in code and topic in support_topics]
    table_s = measures.SentenceTable(
        np.array([code[t] for t, _ in rows], dtype=np.int64),
        np.array([(t, p) in cited for t, p in rows], dtype=bool),
        np.array(
            [measures.SUPPORT_VALUE[support[t, p]] if (t, p) in support else np.nan for t, p in rows],
            dtype=np.float64,
        ),
        len(code),
    )
    for name in measures.SUPPORT_MEASURES:
        function_s = measures.ANSWER_MEASURES[name].sentences
        assert function_s is not None
        values[name] = function_s(table_s)
    return values


def _assessed_topics(nuggets: Any, given: assessors.NuggetLabels, run: str, bank: str) -> list[str]:
    """The topics whose every nugget the assessor labelled for the run; a topic labelled in part
    is refused (its missing labels would count as not supported)."""
    by_topic: dict[str, list[bool]] = {}
    for nugget_id, topic, _ in nuggets:
        by_topic.setdefault(topic, []).append(nugget_id in given.labels)
    partial = [(t, sum(flags), len(flags)) for t, flags in by_topic.items() if 0 < sum(flags) < len(flags)]
    if partial:
        topic, done, total = partial[0]
        raise EvaluationError(
            f"Answer run '{run}' has {given.by[topic]} labels for {done} of the {total} nuggets of topic {topic} "
            f"in bank '{bank}'; label them all (or none) before evaluating."
        )
    return sorted(t for t, flags in by_topic.items() if all(flags))
