"""Each measure's mean and 95% bootstrap interval over an evaluation's topics, computed by the worker
from the values it has just computed and stored beside them (``measure_summaries``), so that a
leaderboard reads one row per run and measure instead of every run's per-topic values, and draws
no bootstrap resamples when it is asked for.

A summary's ``scope`` is "all" (every topic of the evaluation) or a task's public or private topics
(:func:`scope_of` the topics and whether they are excluded): a task with a public/private split
ranks on a subset of the stored per-topic values. The numbers are those the leaderboard computed
on each request before (``statistics.significance.bootstrap_mean_intervals``, seed 0, 10,000
resamples): the same draws, one row per sample.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Engine, delete, func, insert, select
from sqlalchemy.orm import Session

from evalstore.db.models import Evaluation, EvaluationQueries, MeasureSummary, QueryValues, Task
from evalstore.db.repositories import PerQueryValues
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import EvalstoreError
from evalstore.metrics import headline_measures, resolve_measures
from evalstore.services.jobs.options import ChoreInterrupted, Interrupted, never
from evalstore.statistics import significance

ALL_TOPICS = "all"
# Evaluations over more topics are summarised when a board asks: the resample draws (10,000 x
# topics) would take the worker's memory and time for a board few look at (MS MARCO dev's 6,980
# topics: 560 MB), where a DL-sized job's are kept from job to job.
MOST_TOPICS = 1000

Counts = Callable[[int], np.ndarray]  # topics -> bootstrap_counts for that many (kept by the caller)


@dataclass(frozen=True)
class Summary:
    """One measure over one scope of one evaluation's topics; ``topics`` 0: no value in the scope."""

    scope: str
    measure: str
    topics: int
    mean: float
    ci_low: float
    ci_high: float


def scope_of(topics: Collection[str], exclude: bool) -> str:
    """The scope of a topic filter: ``topics`` only, or (``exclude``) every topic but them."""
    payload = json.dumps([bool(exclude), sorted(topics)], separators=(",", ":"))
    return "topics:" + hashlib.sha256(payload.encode()).hexdigest()[:48]


def fresh_counts(topics: int) -> np.ndarray:
    return significance.bootstrap_counts(topics)


def summarise(
    per_query: PerQueryValues,
    filters: dict[str, tuple[frozenset[str], bool] | None],
    counts: Counts = fresh_counts,
    measures: Collection[str] | None = None,
) -> list[Summary]:
    """Each numeric measure's summary (of ``measures``; None: all) in each scope of ``filters``
    (scope -> topics and whether they are excluded; None: all); none when the evaluation has more
    than :data:`MOST_TOPICS`."""
    if not per_query.numbers or len(per_query.query_ids) > MOST_TOPICS:
        return []
    names = [m for m in per_query.numbers if measures is None or m in measures]
    if not names:
        return []
    matrix = np.vstack([np.asarray(per_query.numbers[m], dtype=float) for m in names])
    out: list[Summary] = []
    for scope, chosen in filters.items():
        if chosen is None:
            kept = matrix
        else:
            topics, exclude = chosen
            mask = np.array([(str(q) in topics) != exclude for q in per_query.query_ids], dtype=bool)
            kept = matrix[:, mask]
        n = kept.shape[1]
        if n == 0:
            out += [Summary(scope, m, 0, float("nan"), float("nan"), float("nan")) for m in names]
            continue
        means = kept.mean(axis=1)
        low, high = significance.bootstrap_mean_intervals(kept, 0.95, counts=counts(n) if n >= 2 else None)
        out += [
            Summary(scope, m, n, float(mean), float(lo), float(hi))
            for m, mean, lo, hi in zip(names, means, low, high, strict=True)
        ]
    return out


# the measure a ranking task's compare and run pages open on when the task names no official one:
# the measure trec_eval's summary and most TREC overviews lead with
FALLBACK_OPENING_MEASURE = "AP"


def opening_measure(official_measure: str | None) -> str:
    """The measure a ranking task's compare and run pages open on when none is asked for (and
    the one whose paired tests a job stores): the task's official measure (stored by its
    canonical name), else :data:`FALLBACK_OPENING_MEASURE`."""
    return official_measure or FALLBACK_OPENING_MEASURE


def board_measures(task: Task) -> list[str]:
    """The measures a task's board shows by default and can be sorted by: its official measure,
    its measures and the registry's headline ones (canonical names)."""
    asked = [m for m in (task.official_measure, *(task.measures or ()), *headline_measures("ranking")) if m]
    out: list[str] = []
    for name in asked:
        try:
            resolved = [str(m) for m in resolve_measures([name])]
        except EvalstoreError:  # not a measure the registry knows now: its board says so itself
            continue
        out += [m for m in resolved if m not in out]
    return out


def summarise_job(
    session: Session, qrels_id: int, per_query: PerQueryValues, counts: Counts = fresh_counts
) -> list[Summary]:
    """A ranking job's summaries stored with its results: the measures the boards of the tasks on
    its qrels show and sort by (:func:`shown_measures`), in each scope of those tasks
    (:func:`split_filters`), so a board mid-burst reads them. Its other measures are summarised
    once the worker's queue is empty (:func:`summarise_stored`): all_trec's ~100 measures' draws
    cost a job as much again as its paired tests, and a board on one of them computes the few
    runs' intervals stored since the worker last went idle."""
    return summarise(per_query, split_filters(session, qrels_id), counts, shown_measures(session, qrels_id))


def summaries_for(engine: Engine, qrels_id: int, per_query: PerQueryValues, counts: Counts) -> list[Summary]:
    """:func:`summarise_job` in a read-only session of its own, before the job's unit of work."""
    with read_only(engine) as session:
        return summarise_job(session, qrels_id, per_query, counts)


def shown_measures(session: Session, qrels_id: int) -> set[str]:
    """What the boards over these qrels show by default and sort by: each task's
    :func:`board_measures` (the registry's headline ones without a task), and the judged share
    every ranking board shows."""
    shown = {"Judged@10", *(str(m) for m in resolve_measures(headline_measures("ranking")))}
    for task in session.scalars(select(Task).where(Task.qrels_id == qrels_id)):
        shown.update(board_measures(task))
    return shown


def summarise_stored(
    engine: Engine,
    qrels_ids: Iterable[int],
    counts: Counts = fresh_counts,
    *,
    shown_only: bool = False,
    interrupted: Interrupted = never,
) -> int:
    """A use case (a worker's): the summaries of the finished ranking evaluations on these qrels
    that lack some (every numeric measure once its queue is empty; ``shown_only``, between jobs,
    the boards' :func:`shown_measures` alone, for evaluations stored by ``evaluate`` in a process
    that summarised none), from their stored values; how many evaluations were summarised.
    Raises :class:`ChoreInterrupted` between evaluations once ``interrupted()``."""
    done = 0
    for qrels_id in sorted(set(qrels_ids)):
        with read_only(engine) as session:
            filters = split_filters(session, qrels_id)
            shown = shown_measures(session, qrels_id) if shown_only else None
            finished = select(Evaluation.id).where(Evaluation.qrels_id == qrels_id, Evaluation.state == "done")
            values = select(QueryValues.evaluation_id, func.count()).where(
                QueryValues.evaluation_id.in_(finished), QueryValues.numbers.is_not(None)
            )
            held = select(MeasureSummary.evaluation_id, func.count()).where(
                MeasureSummary.evaluation_id.in_(finished), MeasureSummary.scope == ALL_TOPICS
            )
            if shown is not None:
                values = values.where(QueryValues.measure.in_(sorted(shown)))
                held = held.where(MeasureSummary.measure.in_(sorted(shown)))
            numeric = dict(session.execute(values.group_by(QueryValues.evaluation_id)).all())
            summarised = dict(session.execute(held.group_by(MeasureSummary.evaluation_id)).all())
            lacking = sorted(e for e, count in numeric.items() if summarised.get(e, 0) < count)
        for evaluation_id in lacking:
            if interrupted():
                raise ChoreInterrupted
            with read_only(engine) as session:
                made = summarise(_stored_values(session, evaluation_id), filters, counts, shown)
            if not made:
                continue
            with unit_of_work(engine) as session:
                if session.get(Evaluation, evaluation_id) is None:  # deleted meanwhile
                    continue
                store_summaries(session, evaluation_id, made, replace=shown is None)
            done += 1
    return done


def _stored_values(session: Session, evaluation_id: int) -> PerQueryValues:
    query_ids = session.scalar(
        select(EvaluationQueries.query_ids).where(EvaluationQueries.evaluation_id == evaluation_id)
    )
    rows = session.execute(
        select(QueryValues.measure, QueryValues.numbers).where(
            QueryValues.evaluation_id == evaluation_id, QueryValues.numbers.is_not(None)
        )
    )
    numbers = {measure: np.frombuffer(blob, dtype="<f8") for measure, blob in rows if blob is not None}
    return PerQueryValues(list(query_ids or []), numbers, {})


def split_filters(session: Session, qrels_id: int) -> dict[str, tuple[frozenset[str], bool] | None]:
    """The scopes a ranking evaluation on these qrels is summarised in: all its topics, and the
    public and private topics of each task over them that splits its topics."""
    filters: dict[str, tuple[frozenset[str], bool] | None] = {ALL_TOPICS: None}
    for private in session.scalars(select(Task.private_topics).where(Task.qrels_id == qrels_id)):
        if private:
            topics = frozenset(str(t) for t in private)
            filters[scope_of(topics, True)] = (topics, True)
            filters[scope_of(topics, False)] = (topics, False)
    return filters


def store_summaries(
    session: Session, evaluation_id: int, summaries: Iterable[Summary], *, replace: bool = True
) -> None:
    """A step: an evaluation's summaries in place of any it had (``replace`` False: in place of
    those of the same measures alone). Never commits."""
    summaries = list(summaries)
    chosen = delete(MeasureSummary).where(MeasureSummary.evaluation_id == evaluation_id)
    if not replace:
        chosen = chosen.where(MeasureSummary.measure.in_(sorted({s.measure for s in summaries})))
    session.execute(chosen)
    rows = [
        {
            "evaluation_id": evaluation_id,
            "scope": s.scope,
            "measure": s.measure,
            "topics": s.topics,
            # SQLite keeps NaN as NULL: read_summaries tells them apart by ``topics``
            "mean": None if s.topics == 0 else s.mean,
            "ci_low": None if s.topics == 0 else s.ci_low,
            "ci_high": None if s.topics == 0 else s.ci_high,
        }
        for s in summaries
    ]
    if rows:
        session.execute(insert(MeasureSummary), rows)


def read_summaries(
    session: Session, evaluation_ids: Collection[int], measures: Collection[str], scope: str
) -> dict[tuple[int, str], Summary]:
    """The stored summaries of these evaluations' measures in ``scope``, by (evaluation, measure)."""
    if not evaluation_ids or not measures:
        return {}
    found: dict[tuple[int, str], Summary] = {}
    ids = sorted(evaluation_ids)
    for start in range(0, len(ids), 500):  # bounded IN lists
        rows = session.execute(
            select(
                MeasureSummary.evaluation_id,
                MeasureSummary.measure,
                MeasureSummary.topics,
                MeasureSummary.mean,
                MeasureSummary.ci_low,
                MeasureSummary.ci_high,
            ).where(
                MeasureSummary.evaluation_id.in_(ids[start : start + 500]),
                MeasureSummary.scope == scope,
                MeasureSummary.measure.in_(sorted(measures)),
            )
        )
        for evaluation_id, measure, topics, mean, low, high in rows:
            found[(evaluation_id, measure)] = Summary(scope, measure, topics, *(_number(v) for v in (mean, low, high)))
    return found


def _number(value: float | None) -> float:
    return float("nan") if value is None else float(value)
