"""A task's per-topic medians, ready before anyone asks: a run's page draws the run's value on
each topic minus the median of the task's runs there. A worker stores them with each run's paired
tests (:func:`~evalstore.services.kinds.ranking.pairs.prepare_pairs`: the same values, read once),
per task, measure and topics' scope, keyed by each run's evaluation (:func:`medians_key`); the page
reads them (:func:`stored_medians`) and computes them itself only when none are of the runs'
evaluations as they are.

A median over 100 runs x 250 topics is a few microseconds of numpy; reading the runs' values is
what a page would pay (a query and a table pivot a run).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from evalstore.db.models import Evaluation, EvaluationQueries, QrelsSet, QueryValues, Run, TopicMedians
from evalstore.services.kinds.ranking.board import TopicFilter


def medians_slot(qrels_name: str, qrels_hash: str, task: str, measure: str, scope: str) -> str:
    """What a page asks for: the qrels as they are, the task, the measure, the topics' scope."""
    payload = json.dumps([qrels_name, qrels_hash, task, measure, scope], separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def medians_key(slot: str, evaluations: Mapping[str, int]) -> str:
    payload = json.dumps([slot, sorted(evaluations.items())], separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class StoredMedians:
    runs: dict[str, int]  # run -> the evaluation its values are from
    topics: list[str]
    medians: np.ndarray


def medians_row(
    task_id: int, slot: str, measure: str, evaluations: dict[str, int], topics: list[str], scores: np.ndarray
) -> dict[str, object]:
    """The row of the medians of ``scores`` (runs x ``topics``, a topic a run lacks scored 0),
    as a run's page computes them (``np.median`` over the runs)."""
    return {
        "key": medians_key(slot, evaluations),
        "slot": slot,
        "task_id": task_id,
        "measure": measure,
        "runs": evaluations,
        "topics": topics,
        "medians": np.ascontiguousarray(np.median(scores, axis=0), dtype="<f8").tobytes(),
    }


def store_medians(session: Session, rows: list[dict[str, object]]) -> int:
    """A step: each row kept if stored already, the older rows of its slot let go (a page reads
    the one of its runs' evaluations); how many were new. Never commits."""
    keys = [str(r["key"]) for r in rows]
    have = set(session.scalars(select(TopicMedians.key).where(TopicMedians.key.in_(keys))))
    new = [r for r in rows if r["key"] not in have]
    if not new:
        return 0
    # the older rows of the new rows' slots, in one statement (a slot holds one row at a time)
    session.execute(
        delete(TopicMedians).where(
            TopicMedians.slot.in_([r["slot"] for r in new]), TopicMedians.key.not_in([r["key"] for r in new])
        )
    )
    session.execute(insert(TopicMedians), new)
    return len(new)


def stored_medians(
    session: Session, *, qrels: QrelsSet, task: str, measure: str, scope: str, runs: list[str]
) -> StoredMedians | None:
    """The stored medians of ``runs`` on ``measure``, when their evaluations are those a page
    reads (each run's newest finished evaluation on the qrels holding the measure); else None."""
    slot = medians_slot(qrels.name, qrels.content_hash, task, measure, scope)
    row = session.execute(
        select(TopicMedians.runs, TopicMedians.topics, TopicMedians.medians).where(TopicMedians.slot == slot)
    ).first()
    if row is None:
        return None
    held, topics, blob = row
    if sorted(held) != sorted(runs) or newest_evaluations(session, qrels, runs, measure) != held:
        return None
    return StoredMedians(dict(held), [str(t) for t in topics], np.frombuffer(blob, dtype="<f8"))


# measure -> run -> (its evaluation, the topics kept, its values on them)
HeldValues = dict[str, dict[str, tuple[int, list[str], np.ndarray]]]


def held_values(
    session: Session, chosen: Iterable[tuple[str, Mapping[str, int]]], topics: TopicFilter | None
) -> HeldValues:
    """The stored per-topic values of each run's evaluations (``chosen``: run -> measure -> the
    evaluation holding it) over the topics ``topics`` keeps (None: all), in a few reads; a measure
    an evaluation has no numbers for is left out."""
    chosen = [(run, dict(holding)) for run, holding in chosen]
    ids = sorted({evaluation_id for _, holding in chosen for evaluation_id in holding.values()})
    names = sorted({measure for _, holding in chosen for measure in holding})
    query_ids: dict[int, list[str]] = {}
    numbers: dict[tuple[int, str], bytes] = {}
    for start in range(0, len(ids), 200):  # bounded IN lists
        some = ids[start : start + 200]
        for evaluation_id, listed in session.execute(
            select(EvaluationQueries.evaluation_id, EvaluationQueries.query_ids).where(
                EvaluationQueries.evaluation_id.in_(some)
            )
        ):
            query_ids[evaluation_id] = [str(t) for t in listed or []]
        for evaluation_id, measure, blob in session.execute(
            select(QueryValues.evaluation_id, QueryValues.measure, QueryValues.numbers).where(
                QueryValues.evaluation_id.in_(some), QueryValues.measure.in_(names)
            )
        ):
            if blob is not None:
                numbers[(evaluation_id, measure)] = blob
    kept: dict[int, tuple[list[str], np.ndarray | None]] = {}
    for evaluation_id in ids:
        listed = query_ids.get(evaluation_id, [])
        keep = None if topics is None else np.array([topics.keeps(t) for t in listed], dtype=bool)
        kept[evaluation_id] = (listed if keep is None else [t for t, k in zip(listed, keep, strict=True) if k], keep)
    out: HeldValues = {}
    for run, holding in chosen:
        for measure, evaluation_id in holding.items():
            blob = numbers.get((evaluation_id, measure))
            if blob is None:
                continue
            shown, keep = kept[evaluation_id]
            values = np.frombuffer(blob, dtype="<f8")
            out.setdefault(measure, {})[run] = (evaluation_id, shown, values if keep is None else values[keep])
    return out


def score_rows(
    by_run: dict[str, tuple[int, list[str], np.ndarray]],
    runs: list[str],
    every: list[str],
    placed: dict[tuple[int, int], np.ndarray] | None = None,
) -> np.ndarray:
    """runs x ``every`` topics, a topic a run has no value on scored 0 (the page's missing="zero").
    ``placed``: each topics' list's columns in ``every``, kept from call to call (an evaluation's
    list is shared by its measures)."""
    placed = {} if placed is None else placed
    column: dict[str, int] | None = None
    scores = np.zeros((len(runs), len(every)), dtype=float)
    for row, run in enumerate(runs):
        _, shown, values = by_run[run]
        where = placed.get((id(shown), id(every)))
        if where is None:
            column = column or {topic: i for i, topic in enumerate(every)}
            where = placed[(id(shown), id(every))] = np.array([column[t] for t in shown], dtype=np.intp)
        scores[row, where] = values
    return scores


def medians_from_values(
    session: Session, *, qrels: QrelsSet, runs: list[str], measure: str, shown: TopicFilter | None = None
) -> StoredMedians | None:
    """The per-topic medians of ``runs`` on ``measure`` over the topics ``shown`` (None: all),
    from each run's stored values (its newest finished evaluation on the qrels holding the
    measure, as a page's score matrix reads it; a topic a run lacks scored 0), as a worker computes
    the ones it stores (:func:`held_values`, :func:`score_rows`): two reads, where the score matrix
    reads and pivots a table a run (~0.5 s for 100 runs x 250 topics). None when a run has no such
    evaluation or no value on one of its topics (the page then says why through the score matrix)."""
    chosen = newest_evaluations(session, qrels, runs, measure)
    names = sorted(runs)
    if not runs or sorted(chosen) != names:
        return None
    by_run = held_values(session, [(run, {measure: chosen[run]}) for run in names], shown).get(measure, {})
    if sorted(by_run) != names or any(np.isnan(values).any() for _, _, values in by_run.values()):
        return None
    every = sorted(set().union(*(by_run[run][1] for run in names)))
    return StoredMedians(chosen, every, np.median(score_rows(by_run, names, every), axis=0))


def newest_evaluations(session: Session, qrels: QrelsSet, runs: list[str], measure: str) -> dict[str, int]:
    """Each run's newest finished evaluation on the qrels holding ``measure`` (the one the page's
    score matrix reads), in one query."""
    chosen: dict[str, int] = {}
    for evaluation_id, name, options in session.execute(
        select(Evaluation.id, Run.name, Evaluation.options)
        .join(Run, Run.id == Evaluation.run_id)
        .where(Evaluation.qrels_id == qrels.id, Evaluation.state == "done", Run.name.in_(runs))
        .order_by(Evaluation.finished_at.desc(), Evaluation.id.desc())
    ):
        if name not in chosen and measure in options["measures"]:
            chosen[name] = evaluation_id
    return chosen


def run_values(session: Session, evaluation_id: int, measure: str) -> np.ndarray | None:
    blob = session.scalar(
        select(QueryValues.numbers).where(QueryValues.evaluation_id == evaluation_id, QueryValues.measure == measure)
    )
    return None if blob is None else np.frombuffer(blob, dtype="<f8")
