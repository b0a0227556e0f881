"""A board's significance letters: Tukey's HSD on the two-way design (runs x topics, topics a run
lacks scored 0) on one measure, as compact letters. A worker computes them for every task on the
qrels it has just evaluated runs on, once its queue is empty (:func:`refresh_tiers`), and stores
them keyed by what decides them (:func:`tiers_key`); a page reads them (:func:`stored_tiers`) and
computes them itself only when none are stored for the board it shows.

100 runs' letters take ~2 s (Piepho's algorithm over ~4,000 different pairs, and the studentized
range's quantile), the rest of a board a few milliseconds: that is why they are made before anyone
asks.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Sequence

import numpy as np
from sqlalchemy import Engine, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import BoardTiers, QrelsSet, Run, Submission, Task
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import NotFoundError
from evalstore.services.jobs.summaries import Counts, board_measures
from evalstore.services.kinds.ranking.board import Selection, TopicFilter, chosen_evaluations, leaderboard
from evalstore.statistics import significance

log = logging.getLogger("evalstore.worker")

# letters kept per qrels: every measure of every task on them, for the newest states of their boards
TIERS_KEPT_PER_QRELS = 256

Critical = Callable[[int, int], float]  # (runs, degrees of freedom) -> the studentized range's quantile


def tiers_key(qrels_name: str, qrels_hash: str, measure: str, means: Iterable[tuple[str, float]], scope: str) -> str:
    """What decides a board's letters on ``measure``: the qrels as they are, each run's mean on the
    measure (a new evaluation changes it), the topics (``scope``: "all" or a split's)."""
    payload = json.dumps(
        [qrels_name, qrels_hash, measure, scope, sorted((run, repr(float(mean))) for run, mean in means)],
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def stored_tiers(session: Session, key: str) -> dict[str, str] | None:
    letters = session.scalar(select(BoardTiers.letters).where(BoardTiers.key == key))
    return None if letters is None else {str(run): str(letter) for run, letter in letters.items()}


def compute_tiers(
    session: Session,
    qrels: QrelsSet,
    measure: str,
    runs: Sequence[str],
    topics: TopicFilter | None,
    *,
    critical: Critical | None = None,
) -> dict[str, str]:
    """Compact letters of ``runs`` by Tukey's HSD on ``measure`` (family-wise alpha 0.05), from the
    per-topic values of the evaluations the board shows (``chosen_evaluations``, evaluate's
    default options); a run without the measure gets none."""
    chosen = chosen_evaluations(session, qrels, [measure], Selection())
    wanted = set(runs)
    frames: dict[str, dict[str, float]] = {}
    for run, holding in chosen.values():
        evaluation = holding.get(measure)
        if run.name not in wanted or evaluation is None:
            continue
        table = repo.result_table(session, evaluation.id, [measure])
        values = dict(zip(table.column("query_id").to_pylist(), table.column("value").to_pylist(), strict=True))
        frames[run.name] = {
            str(t): (0.0 if v is None else float(v))
            for t, v in values.items()
            if topics is None or topics.keeps(str(t))
        }
    names = sorted(frames)
    every = sorted(set().union(*(frame.keys() for frame in frames.values()))) if frames else []
    if len(names) < 2 or len(every) < 2:
        return {}
    scores = np.array([[frames[run].get(t, 0.0) for t in every] for run in names], dtype=float)
    means = scores.mean(axis=1)
    order = [int(i) for i in np.argsort(-means, kind="stable")]
    position = {names[i]: rank for rank, i in enumerate(order)}
    # the pairs are indices of ``scores``' rows; the letters go to runs best first
    different = {
        (position[names[i]], position[names[j]])
        for i, j in significance.tukey_hsd_different(scores, confidence=0.95, critical=critical)
    }
    letters = significance.compact_letters(len(order), different)
    return {run: letters[position[run]] for run in names}


def refresh_tiers(
    engine: Engine, qrels_ids: Iterable[int], *, counts: Counts | None = None, critical: Critical | None = None
) -> int:
    """A use case (a worker's, once its queue is empty): the letters of every board measure of
    every task on these qrels, on its topics (a split task's public ones) for its runs, computed
    and stored where not stored yet; how many were stored. Who may see them is decided when a
    page reads them."""
    made = 0
    for qrels_id in sorted(set(qrels_ids)):
        with read_only(engine) as session:
            qrels = session.get(QrelsSet, qrels_id)
            if qrels is None:
                continue
            tasks = list(session.scalars(select(Task).where(Task.qrels_id == qrels_id)))
            plans = []
            for task in tasks:
                runs = sorted(
                    session.scalars(
                        select(Run.name)
                        .join(Submission, Submission.run_id == Run.id)
                        .where(Submission.task_id == task.id)
                    )
                )
                topics = TopicFilter(frozenset(task.private_topics), exclude=True) if task.private_topics else None
                plans.append((runs, topics, board_measures(task)))
        for runs, topics, measures in plans:
            made += _refresh_board(engine, qrels, runs, topics, measures, counts, critical)
    return made


def _refresh_board(
    engine: Engine,
    qrels: QrelsSet,
    runs: list[str],
    topics: TopicFilter | None,
    measures: list[str],
    counts: Counts | None,
    critical: Critical | None,
) -> int:
    if len(runs) < 2:
        return 0
    scope = "all" if topics is None else topics.scope
    made = 0
    for measure in measures:
        try:
            board = leaderboard(
                engine, qrels_name=qrels.name, measures=[measure], runs=runs, topics=topics, counts=counts
            )
        except NotFoundError:  # no run holds the measure: no board on it to sort
            continue
        means = [(row.run, row.values[measure][0]) for row in board.rows if measure in row.values]
        if len(means) < 2:
            continue
        key = tiers_key(qrels.name, qrels.content_hash, measure, means, scope)
        with read_only(engine) as session:
            if stored_tiers(session, key) is not None:
                continue
            letters = compute_tiers(session, qrels, measure, [run for run, _ in means], topics, critical=critical)
        try:
            with unit_of_work(engine) as session:
                store_tiers(session, key, qrels.id, letters)
        except IntegrityError:  # another worker stored the same board's letters first
            continue
        made += 1
    return made


def store_tiers(session: Session, key: str, qrels_id: int, letters: dict[str, str]) -> None:
    """A step: a board's letters under ``key`` (kept if another worker stored them first), and
    the qrels' oldest letters beyond :data:`TIERS_KEPT_PER_QRELS` let go. Never commits."""
    if session.get(BoardTiers, key) is None:
        session.add(BoardTiers(key=key, qrels_id=qrels_id, letters=letters))
        session.flush()
    kept = select(BoardTiers.key).where(BoardTiers.qrels_id == qrels_id)
    old = list(
        session.scalars(kept.order_by(BoardTiers.created_at.desc(), BoardTiers.key).offset(TIERS_KEPT_PER_QRELS))
    )
    if old:
        session.execute(delete(BoardTiers).where(BoardTiers.key.in_(old)))
