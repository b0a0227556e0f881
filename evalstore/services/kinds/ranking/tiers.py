"""A board's significance letters: Tukey's HSD on the two-way design (runs x topics, topics a run
lacks scored 0) on one measure, as compact letters. They depend on every run of the board at once,
so they are not made pair by pair: a worker computes them for every task on the qrels it has just
evaluated runs on (:func:`refresh_tiers`), on the task's board measures while its queue is busy
(at most a set time behind the evaluations) and on every measure its runs hold once the queue is
empty, and stores them keyed by what decides them (:func:`tiers_key`) in the slot a page asks for
(:func:`tiers_slot`). A task's page reads them (:func:`stored_tiers`); while its board is ahead of
them it shows the newest of its slot (:func:`nearest_tiers`) and says so, never computing them.

100 runs' letters take seconds (Piepho's algorithm over ~4,000 different pairs), the rest of a board
a few milliseconds: that is why they are made before anyone asks.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Collection, Iterable, Sequence

import numpy as np
from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalstore.db.models import (
    BoardTiers,
    Evaluation,
    EvaluationQueries,
    MeasureSummary,
    QrelsSet,
    QueryValues,
    Run,
    Submission,
    Task,
)
from evalstore.db.repositories import let_go_oldest
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import NotFoundError
from evalstore.services.jobs.options import ChoreInterrupted, Interrupted, never
from evalstore.services.jobs.summaries import Counts, board_measures
from evalstore.services.kinds.ranking.board import (
    LeaderboardRow,
    Selection,
    TopicFilter,
    chosen_evaluation_ids,
    leaderboard,
)
from evalstore.statistics import significance

log = logging.getLogger("evalstore.worker")

# letters kept per qrels: every measure (all_trec: ~130) of every task on them, for the newest
# states of their boards
TIERS_KEPT_PER_QRELS = 2048
TIERS_PER_WRITE = 200  # letters stored per unit of work: a short write turn for the submissions queued

Critical = Callable[[int, int], float]  # (runs, degrees of freedom) -> the studentized range's quantile


def tiers_key(qrels_name: str, qrels_hash: str, measure: str, means: Iterable[tuple[str, float]], scope: str) -> str:
    """What decides a board's letters on ``measure``: the qrels as they are, each run's mean on the
    measure (a new evaluation changes it), the topics (``scope``: "all" or a split's)."""
    payload = json.dumps(
        [qrels_name, qrels_hash, measure, scope, sorted((run, repr(float(mean))) for run, mean in means)],
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def tiers_slot(qrels_name: str, qrels_hash: str, measure: str, scope: str) -> str:
    """What a page asks letters for: the qrels as they are, the measure, the topics' scope."""
    payload = json.dumps([qrels_name, qrels_hash, measure, scope], separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def stored_tiers(session: Session, key: str) -> dict[str, str] | None:
    letters = session.scalar(select(BoardTiers.letters).where(BoardTiers.key == key))
    return None if letters is None else {str(run): str(letter) for run, letter in letters.items()}


def nearest_tiers(session: Session, slot: str) -> dict[str, str] | None:
    """The newest letters stored in ``slot`` (of the board as it was then), or None."""
    letters = session.scalar(
        select(BoardTiers.letters)
        .where(BoardTiers.slot == slot)
        .order_by(BoardTiers.created_at.desc(), BoardTiers.key)
        .limit(1)
    )
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
    per-topic values of the evaluations the board shows (``chosen_evaluation_ids``, evaluate's
    default options); a run without the measure gets none."""
    values = _per_topic(session, qrels, [measure], runs, topics)
    return _letters(values.get(measure, {}), critical)


# (query ids, each measure's values on them) of one evaluation
_Stored = tuple[list[str], dict[str, np.ndarray]]
# run -> (topics, its values on them): one measure's per-topic values on a board
_Values = dict[str, tuple[list[str], np.ndarray]]


def _per_topic(
    session: Session, qrels: QrelsSet, measures: Sequence[str], runs: Collection[str], topics: TopicFilter | None
) -> dict[str, _Values]:
    """measure -> run -> (topics, values) of the topics ``topics`` keeps, from the evaluation the
    board shows for each run and measure; each evaluation's values read once for every measure
    (a measure without numbers: no topics)."""
    chosen = chosen_evaluation_ids(session, qrels, list(measures), Selection())
    wanted = set(runs)
    by_evaluation: dict[int, set[str]] = {}
    for run, holding in chosen.values():
        if run in wanted:
            for measure, evaluation_id in holding.items():
                by_evaluation.setdefault(evaluation_id, set()).add(measure)
    kept: dict[int, tuple[list[str], np.ndarray | None, dict[str, np.ndarray]]] = {}
    for evaluation_id, names in by_evaluation.items():
        query_ids, numbers = _stored_values(session, evaluation_id, sorted(names))
        if topics is None:
            kept[evaluation_id] = (query_ids, None, numbers)
        else:
            mask = np.array([topics.keeps(t) for t in query_ids], dtype=bool)
            kept[evaluation_id] = ([t for t, keep in zip(query_ids, mask, strict=True) if keep], mask, numbers)
    out: dict[str, _Values] = {}
    for run, holding in chosen.values():
        if run not in wanted:
            continue
        for measure, evaluation_id in holding.items():
            shown, keep, held = kept[evaluation_id]
            found = held.get(measure)
            if found is None:
                out.setdefault(measure, {})[run] = ([], np.zeros(0))
            else:
                out.setdefault(measure, {})[run] = (shown, found if keep is None else found[keep])
    return out


def _stored_values(session: Session, evaluation_id: int, measures: list[str]) -> _Stored:
    """The evaluation's query ids and the numeric values of ``measures`` on them (one read)."""
    query_ids = session.scalar(
        select(EvaluationQueries.query_ids).where(EvaluationQueries.evaluation_id == evaluation_id)
    )
    numbers: dict[str, np.ndarray] = {}
    for start in range(0, len(measures), 500):  # bounded IN lists
        rows = session.execute(
            select(QueryValues.measure, QueryValues.numbers).where(
                QueryValues.evaluation_id == evaluation_id, QueryValues.measure.in_(measures[start : start + 500])
            )
        )
        numbers.update({m: np.frombuffer(blob, dtype="<f8") for m, blob in rows if blob is not None})
    return [str(t) for t in query_ids or []], numbers


def _letters(frames: _Values, critical: Critical | None) -> dict[str, str]:
    """The letters of the runs of ``frames`` (run -> its topics and values; topics a run lacks
    count 0)."""
    names = sorted(frames)
    every = sorted(set().union(*(topics for topics, _ in frames.values()))) if frames else []
    if len(names) < 2 or len(every) < 2:
        return {}
    column = {topic: i for i, topic in enumerate(every)}
    scores = np.zeros((len(names), len(every)), dtype=float)
    placed: dict[int, np.ndarray] = {}  # runs of one evaluation share their topics' list
    for row, run in enumerate(names):
        topics, values = frames[run]
        where = placed.get(id(topics))
        if where is None:
            where = placed[id(topics)] = np.array([column[t] for t in topics], dtype=np.intp)
        scores[row, where] = values
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
    engine: Engine,
    qrels_ids: Iterable[int],
    *,
    counts: Counts | None = None,
    critical: Critical | None = None,
    every_measure: bool = True,
    interrupted: Interrupted = never,
) -> int:
    """A use case (a worker's): the letters of every measure the runs of every task on these qrels
    hold (its board's measures first; without ``every_measure`` those alone, as a busy worker
    does), on the task's topics (a split task's public ones) for its runs, computed and stored
    where not stored yet; how many were stored. A board on any measure then reads its letters;
    who may see them is decided when a page reads them. Raises :class:`ChoreInterrupted` between
    boards and between writes once ``interrupted()``."""
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
        for runs, topics, first in plans:
            if interrupted():
                raise ChoreInterrupted
            made += _refresh_board(engine, qrels, runs, topics, first, counts, critical, every_measure, interrupted)
    return made


def _refresh_board(
    engine: Engine,
    qrels: QrelsSet,
    runs: list[str],
    topics: TopicFilter | None,
    first: list[str],
    counts: Counts | None,
    critical: Critical | None,
    every_measure: bool = True,
    interrupted: Interrupted = never,
) -> int:
    """The letters of one task's board on each measure its runs hold (``first`` alone without
    ``every_measure``), where not stored: the board's means on every measure in one read of the
    stored summaries, each evaluation's per-topic values in one read for every measure whose
    letters are missing."""
    if len(runs) < 2:
        return 0
    scope = "all" if topics is None else topics.scope
    with read_only(engine) as session:
        others = _held_measures(session, qrels, runs, scope) if every_measure else []
        measures = [*first, *(m for m in others if m not in first)]
    means_of: dict[str, list[tuple[str, float]]] = {}
    for names in (first, measures[len(first) :]):
        held = _held(engine, qrels, names, runs, topics, counts)
        for measure in names:
            means = [(row.run, row.values[measure][0]) for row in held if measure in row.values]
            if len(means) >= 2:
                means_of[measure] = means
    keys = {m: tiers_key(qrels.name, qrels.content_hash, m, means, scope) for m, means in means_of.items()}
    with read_only(engine) as session:
        have = set(session.scalars(select(BoardTiers.key).where(BoardTiers.key.in_(sorted(set(keys.values()))))))
        lacking = [m for m in measures if m in keys and keys[m] not in have]
        if not lacking:
            return 0
        wanted = {run for m in lacking for run, _ in means_of[m]}
        values = _per_topic(session, qrels, lacking, wanted, topics)
    made = 0
    for start in range(0, len(lacking), TIERS_PER_WRITE):
        letters: dict[str, dict[str, str]] = {}
        slots: dict[str, str] = {}
        stop = False
        for m in lacking[start : start + TIERS_PER_WRITE]:
            if interrupted():  # what was computed is stored first
                stop = True
                break
            letters[keys[m]] = _letters(_frames(values.get(m, {}), means_of[m]), critical)
            slots[keys[m]] = tiers_slot(qrels.name, qrels.content_hash, m, scope)
        if letters:
            try:
                with unit_of_work(engine) as session:
                    made += store_tiers(session, qrels.id, letters, slots)
            except IntegrityError:  # another worker stored some of the same letters first: the next refresh
                pass
        if stop:
            raise ChoreInterrupted
    return made


def _frames(values: _Values, means: list[tuple[str, float]]) -> _Values:
    """The per-topic values of the runs the board shows a mean of (as :func:`compute_tiers` takes)."""
    return {run: values[run] for run, _ in means if run in values}


def _held_measures(session: Session, qrels: QrelsSet, runs: list[str], scope: str) -> list[str]:
    """The measures with a value in ``scope`` in the stored summaries of the runs' finished
    evaluations on the qrels as they are, of those the board's evaluations hold (evaluate's
    default options: ``chosen_evaluation_ids``)."""
    found = session.scalars(
        select(MeasureSummary.measure)
        .distinct()
        .join(Evaluation, Evaluation.id == MeasureSummary.evaluation_id)
        .join(Run, Run.id == Evaluation.run_id)
        .where(
            Evaluation.qrels_id == qrels.id,
            Evaluation.state == "done",
            Evaluation.qrels_hash == qrels.content_hash,
            Run.name.in_(runs),
            MeasureSummary.scope == scope,
            MeasureSummary.topics > 0,
        )
    )
    candidates = sorted(found)
    wanted = set(runs)
    held = {
        measure
        for run, holding in chosen_evaluation_ids(session, qrels, candidates, Selection()).values()
        if run in wanted
        for measure in holding
    }
    return [m for m in candidates if m in held]


def _held(
    engine: Engine,
    qrels: QrelsSet,
    names: list[str],
    runs: list[str],
    topics: TopicFilter | None,
    counts: Counts | None,
) -> list[LeaderboardRow]:
    """The board's rows on ``names`` (those some run holds); none when no run holds any."""
    if not names:
        return []
    try:
        return leaderboard(engine, qrels_name=qrels.name, measures=names, runs=runs, topics=topics, counts=counts).rows
    except NotFoundError:  # some measure no run holds: each measure on its own board
        rows: list[LeaderboardRow] = []
        for name in names:
            try:
                rows += leaderboard(
                    engine, qrels_name=qrels.name, measures=[name], runs=runs, topics=topics, counts=counts
                ).rows
            except NotFoundError:
                continue
        return rows


def store_tiers(
    session: Session, qrels_id: int, letters: dict[str, dict[str, str]], slots: dict[str, str] | None = None
) -> int:
    """A step: boards' letters by key (each kept if another worker stored it first), in their
    ``slots`` (key -> :func:`tiers_slot`), then the qrels' oldest letters beyond
    :data:`TIERS_KEPT_PER_QRELS` let go; how many were new. Never commits."""
    have = set(session.scalars(select(BoardTiers.key).where(BoardTiers.key.in_(sorted(letters)))))
    new = [
        BoardTiers(key=key, qrels_id=qrels_id, slot=(slots or {}).get(key), letters=made)
        for key, made in letters.items()
        if key not in have
    ]
    session.add_all(new)
    session.flush()
    let_go_oldest(session, BoardTiers, BoardTiers.qrels_id == qrels_id, TIERS_KEPT_PER_QRELS)
    return len(new)
