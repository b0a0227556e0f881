"""A task's paired tests, ready before anyone asks: for every pair of its runs, on the measures
the task evaluates (its board's: :func:`~evalstore.services.jobs.summaries.board_measures`), the
numbers the compare page shows for a pair (mean difference and its interval, the test's statistic
and p-value, the effect size, wins/ties/losses). One row a pair (:class:`~evalstore.db.models.PairTests`),
keyed by what decides its numbers: the task, the measure, the topics' scope, the two runs'
evaluations and the topics they are over. A pair's numbers depend on its two runs alone, so they
are made as evaluations finish: right after a job stores a run's results, the worker stores that
run's pairs with the task's other runs (:func:`prepare_pairs` with the run: 99 pairs a measure at
100 runs); once its queue is empty it stores any pair still missing (two workers finishing two runs
of a task at once each miss the other's) and lets go of the pairs of evaluations no longer shown.
The page reads them (:func:`stored_pairs`) and computes a comparison itself only when a pair of
the runs' evaluations as they are is missing.

Only the page's default test is stored (the t-test, alpha 0.05: nothing random drawn, so no seed);
the Holm correction is over the pairs a page compares, so it is applied when the page reads them.

The pairs made together are one matrix of differences (pairs x topics) a measure, the t-test
vectorised over its rows; a row's numbers are those of the pair alone (numpy reduces each row of a
C-ordered matrix alone). A stored pair is six float64 and two uint32.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
from sqlalchemy import Engine, delete, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalstore.db.models import (
    PairTests,
    QrelsSet,
    Run,
    Submission,
    Task,
)
from evalstore.db.session import read_only, unit_of_work
from evalstore.services.jobs.options import ChoreInterrupted, Interrupted, never
from evalstore.services.jobs.summaries import board_measures, opening_measure
from evalstore.services.kinds.ranking.board import Selection, TopicFilter, chosen_evaluation_ids
from evalstore.services.kinds.ranking.medians import (
    HeldValues,
    held_values,
    medians_row,
    medians_slot,
    score_rows,
    store_medians,
)
from evalstore.statistics import significance

log = logging.getLogger("evalstore.worker")

PAIRED_TEST = "t"  # the compare page's default
PAIRED_ALPHA = 0.05
PAIRS_PER_WRITE = 2000  # pairs stored per unit of work (~0.7 MB): a short write turn
_FLOATS = ("difference", "ci_low", "ci_high", "statistic", "p_value", "effect_size")
# one stored pair, as pack() lays out the arrays of one pair
_PAIR = np.dtype([*((name, "<f8") for name in _FLOATS), ("wins", "<u4"), ("losses", "<u4")])


def slot_key(qrels_name: str, qrels_hash: str, task: str, measure: str, scope: str, test: str, alpha: float) -> str:
    """What a page asks for: the qrels as they are, the task, the measure, the topics' scope
    ("all" or a split's), the test and alpha (and the seed: none for the t-test)."""
    payload = json.dumps(
        [qrels_name, qrels_hash, task, measure, scope, test, repr(float(alpha)), None], separators=(",", ":")
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def topics_digest(topics: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps(list(topics), separators=(",", ":")).encode()).hexdigest()


def pair_key(slot: str, first: tuple[str, int], second: tuple[str, int], topics: str) -> str:
    """One pair's stored tests: the slot, its two runs (the first by name) with the evaluations
    their values are from, the digest of the topics the test is over."""
    payload = json.dumps([slot, *first, *second, topics], separators=(",", ":"))
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


def paired_arrays(
    scores: np.ndarray, alpha: float = PAIRED_ALPHA, pairs: tuple[np.ndarray, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """The t-tests of ``pairs`` (rows of ``scores``, runs x topics; None: every pair, in
    ``np.triu_indices`` order), as the compare page computes one pair's: the same functions on the
    same rows of differences."""
    first, second = np.triu_indices(len(scores), 1) if pairs is None else pairs
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
    """The stored tests of every pair of the task's runs compared (``evaluations``: run -> the
    evaluation its values are from) on ``measure`` over ``topic_list``, when a worker stored each
    pair from these very evaluations and topics; else None (the caller computes)."""
    scope = "all" if topics is None else topics.scope
    runs = sorted(evaluations)
    digest = topics_digest(topic_list)
    with read_only(engine) as session:
        qrels = session.scalar(select(QrelsSet).where(QrelsSet.name == qrels_name))
        if qrels is None:
            return None
        slot = slot_key(qrels.name, qrels.content_hash, task, measure, scope, test, alpha)
        keys = [pair_key(slot, (a, evaluations[a]), (b, evaluations[b]), digest) for a, b in combinations(runs, 2)]
        found: dict[str, bytes] = {}
        for start in range(0, len(keys), 500):  # bounded IN lists
            rows = session.execute(
                select(PairTests.key, PairTests.stats).where(PairTests.key.in_(keys[start : start + 500]))
            )
            found.update((key, stats) for key, stats in rows)
    if len(found) < len(keys):
        return None
    packed = np.frombuffer(b"".join(found[key] for key in keys), dtype=_PAIR)
    arrays = {name: packed[name] for name in (*_FLOATS, "wins", "losses")}
    return StoredPairs(runs, len(topic_list), arrays, test, alpha, None)


# --- the worker's side ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    task_id: int
    task: str
    runs: list[str]
    scopes: list[TopicFilter | None]
    measures: list[str]


def holds_a_task(engine: Engine) -> bool:
    """Whether the store holds a task: the runs whose pairs a worker tests after its batches
    (:func:`prepare_pairs`) are a task's."""
    with read_only(engine) as session:
        return session.scalar(select(Task.id).limit(1)) is not None


def prepare_pairs(
    engine: Engine, qrels_id: int, run_ids: Collection[int] | None = None, *, interrupted: Interrupted = never
) -> int:
    """A use case (a worker's): the paired tests of the tasks on these qrels, on the measures each
    task evaluates (its board's), over each scope its pages show (every topic; a split task's
    public ones too), stored where missing. ``run_ids``: only those runs' pairs with their tasks'
    other runs, on the measure the task's pages open on (:func:`opening_measure`), right
    after a worker stored their results (nothing else changed; a batch's runs together, so the
    task's values are read once a batch); None: every pair on every board measure, and the stored
    pairs that are no longer of the tasks' runs' evaluations as they are let go (an idle
    worker's). The board's other measures wait for the idle worker: each is as many pairs again
    (80,000 rows for 200 runs on four measures), written while the queue is busy.
    How many pairs were stored. Raises :class:`ChoreInterrupted` between tasks once
    ``interrupted()``."""
    with read_only(engine) as session:
        qrels = session.get(QrelsSet, qrels_id)
        if qrels is None:
            return 0
        chosen = select(Task).where(Task.qrels_id == qrels_id).order_by(Task.id)
        involving: frozenset[str] | None = None
        if run_ids is not None:
            ids = sorted(set(run_ids))
            involving = frozenset(session.scalars(select(Run.name).where(Run.id.in_(ids))))
            chosen = chosen.where(
                Task.id.in_(select(Submission.task_id).where(Submission.run_id.in_(ids)).scalar_subquery())
            )
        plans = []
        for task in session.scalars(chosen):
            runs = sorted(
                session.scalars(
                    select(Run.name).join(Submission, Submission.run_id == Run.id).where(Submission.task_id == task.id)
                )
            )
            scopes: list[TopicFilter | None] = [None]
            if task.private_topics:
                scopes.append(TopicFilter(frozenset(task.private_topics), exclude=True))
            measures = board_measures(task)
            if run_ids is not None:  # the compare and run pages' first measure: the others when idle
                opening = opening_measure(task.official_measure)
                measures = [m for m in measures if m == opening]
            plans.append(_Plan(task.id, task.name, runs, scopes, measures))
    made = 0
    for plan in plans:
        if interrupted():
            raise ChoreInterrupted
        if run_ids is None or (involving and len(plan.runs) >= 2):
            made += _prepare_task(engine, qrels, plan, involving)
    return made


def refresh_pairs(engine: Engine, qrels_ids: Iterable[int], *, interrupted: Interrupted = never) -> int:
    """Every pair of the tasks on these qrels (:func:`prepare_pairs` without a run: an idle
    worker's); how many pairs were stored. Raises :class:`ChoreInterrupted` between tasks once
    ``interrupted()``."""
    return sum(prepare_pairs(engine, qrels_id, interrupted=interrupted) for qrels_id in sorted(set(qrels_ids)))


# key -> (slot, measure, scope, first run, second run, topics)
_Wanted = dict[str, tuple[str, str, str, str, str, tuple[str, ...]]]


def _prepare_task(engine: Engine, qrels: QrelsSet, plan: _Plan, involving: frozenset[str] | None) -> int:
    """One task's pairs (``involving``: only those runs'), stored where missing; without runs,
    the task's stored pairs not wanted any more let go."""
    held: dict[str, HeldValues] = {}  # scope -> its values
    wanted: _Wanted = {}
    medians: list[dict[str, Any]] = []
    with read_only(engine) as session:
        for topics in plan.scopes:
            scope = "all" if topics is None else topics.scope
            held[scope] = _held_values(session, qrels, plan.runs, topics, plan.measures)
            slot_of = {
                m: slot_key(qrels.name, qrels.content_hash, plan.task, m, scope, PAIRED_TEST, PAIRED_ALPHA)
                for m in held[scope]
            }
            wanted.update(_wanted_pairs(held[scope], slot_of, scope, involving))
            medians += _medians_rows(qrels, plan, scope, held[scope])
        if involving is None:
            have = set(session.scalars(select(PairTests.key).where(PairTests.task_id == plan.task_id)))
        else:
            keys = sorted(wanted)
            have = set()
            for start in range(0, len(keys), 500):  # bounded IN lists
                have.update(session.scalars(select(PairTests.key).where(PairTests.key.in_(keys[start : start + 500]))))
    lacking = [key for key in wanted if key not in have]
    rows = _computed_rows(plan.task_id, wanted, lacking, held)
    if medians:
        try:
            with unit_of_work(engine) as session:
                store_medians(session, medians)
        except IntegrityError:  # another worker stored the same first
            pass
    made = 0
    for start in range(0, len(rows), PAIRS_PER_WRITE):
        chunk = rows[start : start + PAIRS_PER_WRITE]
        try:  # the keys were looked up above: inserted without a second look
            with unit_of_work(engine) as session:
                session.execute(insert(PairTests), chunk)
            made += len(chunk)
        except IntegrityError:  # another worker stored some of them first: the rest stored, theirs kept
            try:
                with unit_of_work(engine) as session:
                    made += store_pairs(session, chunk)
            except IntegrityError:  # and again meanwhile: the idle refresh stores what is missing
                continue
    if involving is None:
        let_go = sorted(have - set(wanted))
        for start in range(0, len(let_go), 500):
            with unit_of_work(engine) as session:
                session.execute(delete(PairTests).where(PairTests.key.in_(let_go[start : start + 500])))
    return made


def _wanted_pairs(held: HeldValues, slot_of: dict[str, str], scope: str, involving: frozenset[str] | None) -> _Wanted:
    """The key of each pair of runs with every value of a measure (``involving``: only the pairs
    of those runs), each over the topics either run has (the page's missing="zero")."""
    wanted: _Wanted = {}
    for measure, by_run in held.items():
        names = sorted(run for run, (_, shown, values) in by_run.items() if shown and not np.isnan(values).any())
        if involving is not None and involving.isdisjoint(names):
            continue
        topics = {run: tuple(sorted(by_run[run][1])) for run in names}
        digests: dict[tuple[str, ...], str] = {}
        for a, b in combinations(names, 2):
            if involving is not None and a not in involving and b not in involving:
                continue
            every = topics[a] if topics[a] == topics[b] else tuple(sorted(set(topics[a]) | set(topics[b])))
            digest = digests.get(every)
            if digest is None:
                digest = digests[every] = topics_digest(every)
            key = pair_key(slot_of[measure], (a, by_run[a][0]), (b, by_run[b][0]), digest)
            wanted[key] = (slot_of[measure], measure, scope, a, b, every)
    return wanted


def _medians_rows(qrels: QrelsSet, plan: _Plan, scope: str, held: HeldValues) -> list[dict[str, Any]]:
    """The per-topic medians of the task's runs on each measure (a run's page's), where every run
    holding the measure has a value on each of its topics (a page refuses a measure without)."""
    rows = []
    placed: dict[tuple[int, int], np.ndarray] = {}
    for measure, by_run in held.items():
        names = sorted(by_run)
        if not names or any(np.isnan(by_run[run][2]).any() for run in names):
            continue
        every = sorted(set().union(*(by_run[run][1] for run in names)))
        slot = medians_slot(qrels.name, qrels.content_hash, plan.task, measure, scope)
        evaluations = {run: by_run[run][0] for run in names}
        rows.append(
            medians_row(plan.task_id, slot, measure, evaluations, every, score_rows(by_run, names, every, placed))
        )
    return rows


def _computed_rows(
    task_id: int, wanted: _Wanted, lacking: list[str], held: dict[str, HeldValues]
) -> list[dict[str, Any]]:
    """The rows of the ``lacking`` pairs: the pairs of one measure, scope and topics computed
    together, from one matrix of their runs' scores."""
    groups: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for key in lacking:
        _, measure, scope, _, _, every = wanted[key]
        groups.setdefault((measure, scope, every), []).append(key)
    rows: list[dict[str, Any]] = []
    placed: dict[tuple[int, int], np.ndarray] = {}
    lists: dict[tuple[str, ...], list[str]] = {}  # one list per topics, for placed's keys
    for (measure, scope, every), keys in groups.items():
        by_run = held[scope][measure]
        runs = sorted({run for key in keys for run in wanted[key][3:5]})
        index = {run: i for i, run in enumerate(runs)}
        first = np.array([index[wanted[key][3]] for key in keys], dtype=np.intp)
        second = np.array([index[wanted[key][4]] for key in keys], dtype=np.intp)
        listed = lists.setdefault(every, list(every))
        arrays = paired_arrays(score_rows(by_run, runs, listed, placed), pairs=(first, second))
        packed = np.empty(len(keys), dtype=_PAIR)
        for name in _PAIR.names or ():
            packed[name] = arrays[name]
        digest = topics_digest(every)
        for row, key in enumerate(keys):
            slot, _, _, a, b, _ = wanted[key]
            rows.append(
                {
                    "key": key,
                    "slot": slot,
                    "task_id": task_id,
                    "measure": measure,
                    "test": PAIRED_TEST,
                    "seed": None,
                    "runs": {a: by_run[a][0], b: by_run[b][0]},
                    "topics": digest,
                    "stats": packed[row].tobytes(),  # as pack() lays out one pair's arrays
                }
            )
    return rows


def store_pairs(session: Session, rows: list[dict[str, Any]]) -> int:
    """A step: pairs' tests (:class:`PairTests` columns) by key, each kept if another worker
    stored it first; how many were new. Never commits."""
    have = set(session.scalars(select(PairTests.key).where(PairTests.key.in_([r["key"] for r in rows]))))
    new = [r for r in rows if r["key"] not in have]
    if new:
        session.execute(insert(PairTests), new)
    return len(new)


def _held_values(
    session: Session, qrels: QrelsSet, runs: Collection[str], topics: TopicFilter | None, measures: list[str]
) -> HeldValues:
    """measure -> run -> (its evaluation, topics ``topics`` keeps, values) for each of ``measures``
    the evaluations a board shows for ``runs`` hold (evaluate's default options), in a few reads."""
    wanted = set(runs)
    chosen = chosen_evaluation_ids(session, qrels, measures, Selection()).values()
    return held_values(session, [(run, holding) for run, holding in chosen if run in wanted], topics)
