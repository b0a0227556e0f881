"""A submitted run's results as the asker may see them: its scores on its task, hidden before a
hidden task's release, over the public topics alone (as aggregates, no topic named) before a split
task's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

import numpy as np
from sqlalchemy import Engine, select

from evalstore.db.models import Evaluation, QrelsSet
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError
from evalstore.metrics import resolve_measures, summarise
from evalstore.metrics.answers import answer_measure
from evalstore.services.access import Principal
from evalstore.services.kinds import answers as answer_kind
from evalstore.services.kinds import ranking
from evalstore.services.tasks.visibility import (
    HIDDEN,
    number_text,
    public_only,
    public_topics,
    scores_are_visible,
    visible_submission,
)

PER_TOPIC_WITHHELD = (
    "The task keeps some topics private until the organisers release it: until then its runs' "
    "scores are aggregates over the public topics, and no topic is named."
)


class RunResults(TypedDict):
    """A submitted run's results as the API sends them (a TypedDict: it goes to JSON as built).
    ``scores``: :data:`HIDDEN`, or None while there are none; else ``aggregates`` per measure,
    ``topics`` counted, ``topic_set`` "public" before a split task's release, and with
    ``per_query`` asked for the values per topic (or None and ``per_query_withheld`` saying why)."""

    run: str
    task: str
    team: str
    state: str | None
    scores: NotRequired[str | None]
    aggregates: NotRequired[dict[str, Any]]
    topics: NotRequired[int]
    topic_set: NotRequired[str]
    per_query: NotRequired[dict[str, dict[str, Any]] | None]
    per_query_withheld: NotRequired[str]


def run_results(
    engine: Engine, principal: Principal, run_name: str, *, per_query: bool = False, measures: Sequence[str] = ()
) -> RunResults:
    """A submitted run's scores on its task, or, before a hidden task's release, that it was
    evaluated and its scores are hidden."""
    with read_only(engine) as session:
        submission, task = visible_submission(session, principal, run_name)
        job = session.get(Evaluation, submission.evaluation_id) if submission.evaluation_id else None
        qrels_name = str(session.scalar(select(QrelsSet.name).where(QrelsSet.id == task.qrels_id)))
        takes_answers = task.nugget_bank_id is not None
        out = RunResults(
            run=run_name, task=task.name, team=submission.team, state=job.state if job is not None else None
        )
        if not scores_are_visible(principal, task):
            out["scores"] = HIDDEN
            return out
    if job is None or job.state != "done":
        if takes_answers and job is None:
            out["state"] = "awaiting assessment"
        out["scores"] = None
        return out
    if takes_answers:  # answers scored on the task's nugget bank: every topic assessed
        evaluated = answer_kind.stored_evaluation(engine, job.id, with_topics=per_query)
        wanted = [answer_measure(m).family.name for m in measures]
        out["aggregates"] = {m: number_text(v) for m, v in evaluated.aggregates.items() if not wanted or m in wanted}
        out["topics"] = max(evaluated.topic_counts.values(), default=0)
        if per_query:
            frame = evaluated.per_topic
            rows: dict[Any, dict[str, Any]] = {} if frame is None else frame.to_dict(orient="index")  # type: ignore[assignment]
            out["per_query"] = {
                str(t): {m: number_text(v) for m, v in row.items() if not wanted or m in wanted}
                for t, row in rows.items()
            }
        return out
    stored = ranking.results(
        engine, qrels_name=qrels_name, run_name=run_name, measures=list(measures) or None, evaluation_id=job.id
    )
    per_topic: dict[Any, dict[str, Any]] = stored.frame.to_dict(orient="index")  # type: ignore[assignment]
    if public_only(principal, task):  # a split task before its release: the public topics' values only
        shown = public_topics(task)
        per_topic = {t: row for t, row in per_topic.items() if shown.keeps(str(t))}
        out["aggregates"] = _public_means(per_topic)
        out["topics"] = len(per_topic)
        out["topic_set"] = "public"
    else:
        out["aggregates"] = {m: number_text(v) for m, v in stored.aggregates.items()}
        out["topics"] = len(stored.topics)
    if per_query and out.get("topic_set") == "public":
        # naming the public topics would name the private ones (the rest of the qrels' topics)
        out["per_query"] = None
        out["per_query_withheld"] = PER_TOPIC_WITHHELD
    elif per_query:
        out["per_query"] = {topic: {m: number_text(v) for m, v in row.items()} for topic, row in per_topic.items()}
    return out


def _public_means(per_topic: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    """Each measure's summary (trec_eval's: a mean, a sum or a geometric mean) over the given
    topics' stored values, as the evaluation summarised all of them; a measure with no per-topic
    values is left out rather than given over every topic."""
    columns: dict[str, list[float]] = {}
    for row in per_topic.values():
        for measure, value in row.items():
            if isinstance(value, float | np.floating | int) and not isinstance(value, bool) and not np.isnan(value):
                columns.setdefault(measure, []).append(float(value))
    out: dict[str, Any] = {}
    for name, values in columns.items():
        try:
            (resolved,) = resolve_measures([name])
        except InvalidParameterError:  # not a registry measure (none is stored so): no summary known
            continue
        out[name] = number_text(summarise(resolved, np.array(values)))
    return out
