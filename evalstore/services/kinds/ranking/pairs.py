"""A task's paired tests, ready before anyone asks: for every pair of its runs, on every measure
they hold, the numbers the compare page shows for a pair (mean difference and its interval, the
test's statistic and p-value, the effect size, wins/ties/losses). A worker computes them once its
queue is empty, after the letters (:func:`refresh_pairs`), and stores them per task, measure and
topics' scope (:class:`~evalstore.db.models.PairTests`); the page reads them (:func:`stored_pairs`)
and computes a comparison itself only when nothing stored matches the runs' evaluations and topics.

Only the page's default test is stored (the t-test, alpha 0.05: nothing random drawn, so no seed);
the Holm correction is over the pairs a page compares, so it is applied when the page reads them.

Every pair at once: one matrix of differences (pairs x topics) per measure, the t-test vectorised
over its rows. 100 runs are 4,950 pairs: ~0.3 MB a measure (six float64 and two uint32 a pair).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Engine, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalstore.db.models import (
    Evaluation,
    EvaluationQueries,
    PairTests,
    QrelsSet,
    QueryValues,
    Run,
    Submission,
    Task,
)
from evalstore.db.session import read_only, unit_of_work
from evalstore.services.kinds.ranking.board import Selection, TopicFilter, chosen_evaluations
from evalstore.statistics import significance

log = logging.getLogger("evalstore.worker")

PAIRED_TEST = "t"  # the compare page's default
PAIRED_ALPHA = 0.05
PAIRS_PER_WRITE = 16  # measures stored per unit of work (100 runs: ~5 MB): a short write turn
_FLOATS = ("difference", "ci_low", "ci_high", "statistic", "p_value", "effect_size")


def slot_key(qrels_name: str, qrels_hash: str, task: str, measure: str, scope: str, test: str, alpha: float) -> str:
    """What a page asks for: the qrels as they are, the task, the measure, the topics' scope
    ("all" or a split's), the test and alpha (and the seed: none for the t-test)."""
    payload = json.dumps(
        [qrels_name, qrels_hash, task, measure, scope, test, repr(float(alpha)), None], separators=(",", ":")
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def topics_digest(topics: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps(list(topics), separators=(",", ":")).encode()).hexdigest()


def _key(slot: str, evaluations: dict[str, int], topics: str) -> str:
    payload = json.dumps([slot, sorted(evaluations.items()), topics], separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class PairStats:
    """One pair's test, ``run`` against ``versus``."""

    difference: float  # mean of run - versus over the topics
    ci_low: float
    ci_high: float
    statistic: float
    p_value: float
    effect_size: float
    wins: int
    ties: int
    losses: int


@dataclass(frozen=True)
class StoredPairs:
    """Every pair of ``runs`` (sorted) on one measure: arrays over the pairs (i, j), i < j, in
    ``np.triu_indices`` order, of ``runs[i] - runs[j]``."""

    runs: list[str]
    topics: int
    arrays: dict[str, np.ndarray]  # _FLOATS, "wins", "losses"
    test: str = PAIRED_TEST
    alpha: float = PAIRED_ALPHA
    seed: int | None = None  # of a random test's draws (None: nothing random)

    def pair(self, run: str, versus: str) -> PairStats:
        i, j = self.runs.index(run), self.runs.index(versus)
        low, high = min(i, j), max(i, j)
        n = len(self.runs)
        row = low * n - low * (low + 1) // 2 + (high - low - 1)
        a = {name: float(self.arrays[name][row]) for name in _FLOATS}
        wins, losses = int(self.arrays["wins"][row]), int(self.arrays["losses"][row])
        if i > j:  # the other way round: every value's sign turned (0.0 - x: a zero stays +0.0, as computed)
            a = {
                "difference": 0.0 - a["difference"],
                "ci_low": 0.0 - a["ci_high"],
                "ci_high": 0.0 - a["ci_low"],
                "statistic": 0.0 - a["statistic"],
                "p_value": a["p_value"],
                "effect_size": 0.0 - a["effect_size"],
            }
            wins, losses = losses, wins
        return PairStats(**a, wins=wins, ties=self.topics - wins - losses, losses=losses)


def pack(arrays: dict[str, np.ndarray]) -> bytes:
    floats = b"".join(np.ascontiguousarray(arrays[name], dtype="<f8").tobytes() for name in _FLOATS)
    counts = b"".join(np.ascontiguousarray(arrays[name], dtype="<u4").tobytes() for name in ("wins", "losses"))
    return floats + counts


def unpack(blob: bytes, pairs: int) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    offset = 0
    for name in _FLOATS:
        out[name] = np.frombuffer(blob, dtype="<f8", count=pairs, offset=offset)
        offset += 8 * pairs
    for name in ("wins", "losses"):
        out[name] = np.frombuffer(blob, dtype="<u4", count=pairs, offset=offset)
        offset += 4 * pairs
    return out


def paired_arrays(scores: np.ndarray, alpha: float = PAIRED_ALPHA) -> dict[str, np.ndarray]:
    """Every pair's t-test of ``scores`` (runs x topics), as the compare page computes one pair's:
    the same functions on the same rows of differences."""
    first, second = np.triu_indices(len(scores), 1)
    diffs = scores[first] - scores[second]
    outcome = significance.paired_test(diffs, PAIRED_TEST, confidence=1 - alpha)
    wins, _, losses = significance.wins_ties_losses(diffs)
    return {
        # numpy reduces each row of a C-ordered matrix alone: the same bits as the page's row.mean()
        "difference": diffs.mean(axis=1),
        "ci_low": outcome.ci_low,
        "ci_high": outcome.ci_high,
        "statistic": outcome.statistic,
        "p_value": outcome.p_value,
        "effect_size": significance.effect_size(diffs),
        "wins": wins,
        "losses": losses,
    }


def stored_pairs(
    engine: Engine,
    *,
    task: str,
    qrels_name: str,
    measure: str,
    topics: TopicFilter | None,
    evaluations: dict[str, int],
    topic_list: Sequence[str],
    test: str = PAIRED_TEST,
    alpha: float = PAIRED_ALPHA,
) -> StoredPairs | None:
    """The stored tests of the task's runs on ``measure`` over ``topic_list`` (the runs compared:
    their evaluations) when a worker stored them from these very evaluations and topics; else
    None (the caller computes)."""
    scope = "all" if topics is None else topics.scope
    with read_only(engine) as session:
        qrels = session.scalar(select(QrelsSet).where(QrelsSet.name == qrels_name))
        if qrels is None:
            return None
        slot = slot_key(qrels.name, qrels.content_hash, task, measure, scope, test, alpha)
        row = session.execute(
            select(PairTests.runs, PairTests.topics, PairTests.stats, PairTests.seed)
            .where(PairTests.slot == slot)
            .order_by(PairTests.created_at.desc(), PairTests.key)
            .limit(1)
        ).first()
    if row is None:
        return None
    held, digest, blob, seed = row
    if digest != topics_digest(topic_list) or any(held.get(run) != e for run, e in evaluations.items()):
        return None
    runs = sorted(held)
    pairs = len(runs) * (len(runs) - 1) // 2
    return StoredPairs(runs, len(topic_list), unpack(blob, pairs), test, alpha, seed)


# --- the worker's side ----------------------------------------------------------------------------


def refresh_pairs(engine: Engine, qrels_ids: Iterable[int]) -> int:
    """A use case (a worker's, once its queue is empty, after the letters): the paired tests of
    every task on these qrels, on every measure its runs hold, over each scope its pages show
    (every topic; a split task's public ones too), computed and stored where the stored ones are
    not of the runs' evaluations as they are; how many measures' were stored."""
    made = 0
    for qrels_id in sorted(set(qrels_ids)):
        with read_only(engine) as session:
            qrels = session.get(QrelsSet, qrels_id)
            if qrels is None:
                continue
            plans = []
            for task in session.scalars(select(Task).where(Task.qrels_id == qrels_id).order_by(Task.id)):
                runs = sorted(
                    session.scalars(
                        select(Run.name)
                        .join(Submission, Submission.run_id == Run.id)
                        .where(Submission.task_id == task.id)
                    )
                )
                scopes: list[TopicFilter | None] = [None]
                if task.private_topics:
                    scopes.append(TopicFilter(frozenset(task.private_topics), exclude=True))
                plans.append((task.id, task.name, runs, scopes))
        for task_id, name, runs, scopes in plans:
            if len(runs) < 2:
                continue
            for topics in scopes:
                made += _refresh_task(engine, qrels, task_id, name, runs, topics)
    return made


# measure -> run -> (evaluation id, topics, values)
_Held = dict[str, dict[str, tuple[int, list[str], np.ndarray]]]


def _refresh_task(
    engine: Engine, qrels: QrelsSet, task_id: int, task: str, runs: list[str], topics: TopicFilter | None
) -> int:
    scope = "all" if topics is None else topics.scope
    with read_only(engine) as session:
        held = _held_values(session, qrels, runs, topics)
        planned: dict[str, tuple[str, str, dict[str, int], list[str]]] = {}
        for measure, by_run in held.items():
            names = sorted(run for run, (_, shown, values) in by_run.items() if shown and not np.isnan(values).any())
            if len(names) < 2:
                continue
            every = sorted(set().union(*(by_run[run][1] for run in names)))
            slot = slot_key(qrels.name, qrels.content_hash, task, measure, scope, PAIRED_TEST, PAIRED_ALPHA)
            evaluations = {run: by_run[run][0] for run in names}
            planned[measure] = (slot, _key(slot, evaluations, topics_digest(every)), evaluations, every)
        have = set(
            session.scalars(
                select(PairTests.key).where(PairTests.key.in_(sorted(k for _, k, _, _ in planned.values())))
            )
        )
    lacking = [m for m, (_, key, _, _) in planned.items() if key not in have]
    made = 0
    for start in range(0, len(lacking), PAIRS_PER_WRITE):
        rows = []
        for measure in lacking[start : start + PAIRS_PER_WRITE]:
            slot, key, evaluations, every = planned[measure]
            scores = _scores(held[measure], sorted(evaluations), every)
            rows.append(
                PairTests(
                    key=key,
                    slot=slot,
                    task_id=task_id,
                    measure=measure,
                    test=PAIRED_TEST,
                    seed=None,
                    runs=evaluations,
                    topics=topics_digest(every),
                    stats=pack(paired_arrays(scores)),
                )
            )
        try:
            with unit_of_work(engine) as session:
                made += store_pairs(session, rows)
        except IntegrityError:  # another worker stored some of them first: the next refresh
            continue
    return made


def store_pairs(session: Session, rows: list[PairTests]) -> int:
    """A step: each measure's pairs (kept if another worker stored the same first), the older ones
    of their slots let go (a page reads only the newest); how many were new. Never commits."""
    have = set(session.scalars(select(PairTests.key).where(PairTests.key.in_([r.key for r in rows]))))
    new = [r for r in rows if r.key not in have]
    session.add_all(new)
    session.flush()
    for row in new:
        session.execute(delete(PairTests).where(PairTests.slot == row.slot, PairTests.key != row.key))
    return len(new)


def _scores(by_run: dict[str, tuple[int, list[str], np.ndarray]], runs: list[str], every: list[str]) -> np.ndarray:
    """runs x ``every`` topics, a topic a run has no value on scored 0 (the page's missing="zero")."""
    column = {topic: i for i, topic in enumerate(every)}
    scores = np.zeros((len(runs), len(every)), dtype=float)
    for row, run in enumerate(runs):
        _, shown, values = by_run[run]
        scores[row, [column[t] for t in shown]] = values
    return scores


def _held_values(session: Session, qrels: QrelsSet, runs: Collection[str], topics: TopicFilter | None) -> _Held:
    """measure -> run -> (its evaluation, topics ``topics`` keeps, values) for every numeric
    measure of the evaluations a board shows for ``runs`` (evaluate's default options), each
    evaluation's values read once."""
    wanted = set(runs)
    options = session.scalars(
        select(Evaluation.options)
        .join(Run, Run.id == Evaluation.run_id)
        .where(
            Evaluation.qrels_id == qrels.id,
            Evaluation.state == "done",
            Evaluation.qrels_hash == qrels.content_hash,
            Run.name.in_(sorted(wanted)),
        )
    )
    candidates = sorted({str(m) for o in options for m in o.get("measures", ())})
    chosen = chosen_evaluations(session, qrels, candidates, Selection())
    by_evaluation: dict[int, set[str]] = {}
    for run, holding in chosen.values():
        if run.name in wanted:
            for measure, evaluation in holding.items():
                by_evaluation.setdefault(evaluation.id, set()).add(measure)
    read: dict[int, tuple[list[str], dict[str, np.ndarray]]] = {}
    for evaluation_id, names in by_evaluation.items():
        query_ids = [
            str(t)
            for t in session.scalar(
                select(EvaluationQueries.query_ids).where(EvaluationQueries.evaluation_id == evaluation_id)
            )
            or []
        ]
        keep = None if topics is None else np.array([topics.keeps(t) for t in query_ids], dtype=bool)
        shown = query_ids if keep is None else [t for t, k in zip(query_ids, keep, strict=True) if k]
        numbers: dict[str, np.ndarray] = {}
        ordered = sorted(names)
        for start in range(0, len(ordered), 500):  # bounded IN lists
            for measure, blob in session.execute(
                select(QueryValues.measure, QueryValues.numbers).where(
                    QueryValues.evaluation_id == evaluation_id, QueryValues.measure.in_(ordered[start : start + 500])
                )
            ):
                if blob is not None:
                    values = np.frombuffer(blob, dtype="<f8")
                    numbers[measure] = values if keep is None else values[keep]
        read[evaluation_id] = (shown, numbers)
    out: _Held = {}
    for run, holding in chosen.values():
        if run.name not in wanted:
            continue
        for measure, evaluation in holding.items():
            shown, numbers = read[evaluation.id]
            if measure in numbers:
                out.setdefault(measure, {})[run.name] = (evaluation.id, shown, numbers[measure])
    return out
