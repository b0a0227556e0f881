"""A task's leaderboard as the API sends it, computed once per state of its results and kept in the
application context.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from sqlalchemy import Engine, func, select

from evalstore.db.models import (
    Evaluation,
    JudgeProbe,
    NuggetBank,
    QrelsSet,
    Run,
    Submission,
    Task,
)
from evalstore.db.session import read_only
from evalstore.errors import (
    NotFoundError,
)
from evalstore.services.access import Principal
from evalstore.services.context import AppContext, context_for
from evalstore.services.kinds import answers as answer_kind
from evalstore.services.kinds import ranking
from evalstore.services.tasks import judge_made
from evalstore.services.tasks.visibility import (
    HIDDEN,
    LEADERBOARD_MEASURES,
    NO_TASK,
    private_topics,
    public_only,
    public_topics,
    scores_are_visible,
    task_measures,
)

# A board's body is a TypedDict, not a dataclass: it is encoded to JSON once, as built, and the
# pages read it as it is; a dataclass would only be turned back into these dicts.


class ScoreInterval(TypedDict):
    """A measure's mean over the topics and its 95% interval (None: the run has no value)."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None


class PrivateRanking(TypedDict):
    """A row's place on a split task's private topics."""

    rank: int
    topics: int
    scores: dict[str, ScoreInterval]


class BoardEntry(TypedDict):
    """One run on a board, best first. ``evaluation``: an answer task's (the evaluation its
    scores come from); ``private`` and ``swap``: a split task's, for whoever sees the private
    ranking; ``circular``: on labels a judge made, the judge's models the run declares."""

    rank: int
    run: str
    team: str | None
    run_type: str | None
    evaluation: NotRequired[int]
    topics: int
    judged_at_10: float | None
    scores: dict[str, ScoreInterval]
    private: NotRequired[PrivateRanking | None]
    swap: NotRequired[int | None]
    circular: NotRequired[list[str]]


class BoardSplit(TypedDict):
    """What a split task's board ranks on, and whether the private ranking is shown and final."""

    public: str
    private_topics: int
    final: bool
    private_shown: bool


class BoardBody(TypedDict):
    """A board as the API sends it. ``scores`` is "visible" or :data:`HIDDEN` (then no rows);
    ``nuggets``: an answer task's bank; ``judge``: the judge that made the labels, if one did."""

    task: str
    scores: str
    nuggets: NotRequired[str]
    measures: NotRequired[list[str]]
    rows: list[BoardEntry]
    notes: list[str]
    split: NotRequired[BoardSplit]
    judge: NotRequired[judge_made.JudgeBehind]


@dataclass(frozen=True)
class TaskBoard:
    """A task's leaderboard as the API sends it: ``body``, and the same as JSON bytes, encoded once
    per computed board (50 clients reading one board should not each pay for encoding it)."""

    body: BoardBody
    json: bytes

    @classmethod
    def of(cls, body: BoardBody) -> TaskBoard:
        return cls(body, json.dumps(body, separators=(",", ":")).encode())


@dataclass(frozen=True)
class _BoardState:
    """What decides a task's board, as read from the database at one moment: who may see its
    scores, its qrels and measures, and a fingerprint of its finished evaluations (a new result,
    submission or withdrawal changes it)."""

    task_id: int
    owner_id: int | None
    hidden: bool
    released_at: datetime | None
    qrels_name: str | None  # None: a task over a nugget bank (``bank_name``)
    qrels_hash: str | None
    measures: tuple[str, ...]
    official_measure: str | None
    private_topics: tuple[str, ...]
    fingerprint: tuple[Any, ...]
    read_at: float
    bank_name: str | None = None


# How stale a board may be: each server process reads a task's state at most once a second and
# answers from memory in between. Reading it on every request (four round trips with the pool's
# ping) capped PostgreSQL at ~190 leaderboard requests/s, p95 470 ms, under 50 clients; a result
# or a release shows up at most a second later. Who asks is still checked on every request.
BOARD_FRESHNESS = 1.0


def _board_state(context: AppContext, task_name: str) -> _BoardState:
    state: _BoardState | None = context.board_states.get(task_name)
    if state is not None and time.monotonic() - state.read_at < BOARD_FRESHNESS:
        return state
    with read_only(context.engine) as session:
        found = session.execute(
            select(Task, QrelsSet.name, QrelsSet.content_hash, NuggetBank.name, NuggetBank.content_hash)
            .outerjoin(QrelsSet, QrelsSet.id == Task.qrels_id)
            .outerjoin(NuggetBank, NuggetBank.id == Task.nugget_bank_id)
            .where(Task.name == task_name)
        ).first()
        if found is None:
            raise NotFoundError(f"No task named '{task_name}'.", remedy=NO_TASK)
        task, qrels_name, qrels_hash, bank_name, bank_hash = found
        fingerprint = tuple(
            session.execute(
                select(
                    func.count(Submission.id),
                    func.max(Submission.id),
                    func.max(Evaluation.id),
                    func.max(Evaluation.finished_at),
                    func.max(Evaluation.results_version),
                    # a judge's new probe shows on boards of its labels
                    select(func.max(JudgeProbe.id)).scalar_subquery(),
                )
                .select_from(Submission)
                .outerjoin(Evaluation, (Evaluation.id == Submission.evaluation_id) & (Evaluation.state == "done"))
                .where(Submission.task_id == task.id)
            ).one()
        )
    state = _BoardState(
        task.id,
        task.owner_id,
        task.hidden,
        task.released_at,
        qrels_name,
        qrels_hash or bank_hash,
        tuple(task.measures or ()),
        task.official_measure,
        tuple(task.private_topics or ()),
        fingerprint,
        time.monotonic(),
        bank_name,
    )
    return context.board_states.put(task_name, state)


def task_leaderboard(
    engine: Engine,
    principal: Principal,
    task_name: str,
    measures: Sequence[str] = (),
    *,
    context: AppContext | None = None,
) -> TaskBoard:
    """The task's leaderboard (the numbers `evalstore leaderboard` gives for the task's runs), or,
    before a hidden task's release, only that its scores are hidden. A server passes its
    ``context``: boards are then computed once per state of the task's results (and the task's
    state read at most once every :data:`BOARD_FRESHNESS` seconds).

    A task with a public/private topic split ranks on its public topics; its organiser and admins,
    and everyone once it is released, also get each row's ``private`` ranking (its rank, means and
    topics on the private topics) and its ``swap`` (public rank minus private rank). Before the
    release no one else gets a number computed from a private topic."""
    context = context_for(engine, context)
    state = _board_state(context, task_name)
    if not scores_are_visible(principal, state):
        return TaskBoard.of(BoardBody(task=task_name, scores=HIDDEN, rows=[], notes=[]))
    if state.bank_name is not None:
        names = task_measures(measures, answers=True) or default_measures(
            state.official_measure, state.measures, answers=True
        )
        answers_key = (state.task_id, state.qrels_hash, tuple(names), state.fingerprint, "answers")
        cached_answers: TaskBoard | None = context.boards.get(answers_key)
        if cached_answers is not None:
            return cached_answers
        return context.boards.put(answers_key, TaskBoard.of(_answer_board(engine, state, task_name, names)))
    assert state.qrels_name is not None
    names = list(measures) or default_measures(state.official_measure, state.measures)
    split = bool(state.private_topics)
    with_private = split and not public_only(principal, state)
    final = state.released_at is not None  # a split board says whether its private ranking is the final one
    key = (state.task_id, state.qrels_hash, tuple(names), state.fingerprint, state.private_topics, with_private, final)
    cached: TaskBoard | None = context.boards.get(key)
    if cached is not None:
        return cached
    with read_only(engine) as session:
        teams = {
            run: (team, run_type)
            for run, team, run_type in session.execute(
                select(Run.name, Submission.team, Submission.run_type)
                .join(Submission, Submission.run_id == Run.id)
                .where(Submission.task_id == state.task_id)
            )
        }
    body = BoardBody(task=task_name, scores="visible", rows=[], notes=[])
    if split:
        body["split"] = BoardSplit(
            public="every topic but the private ones",
            private_topics=len(state.private_topics),
            final=final,
            private_shown=with_private,
        )
    if state.fingerprint[2] is not None:  # some run has finished evaluating
        ranked = ranking.leaderboard(
            engine,
            qrels_name=state.qrels_name,
            measures=names,
            runs=set(teams),
            topics=public_topics(state) if split else None,
            counts=context.bootstrap_counts,
        )
        body["measures"] = ranked.names
        body["notes"] = ranked.notes
        body["rows"] = [
            BoardEntry(
                rank=rank,
                run=row.run,
                team=teams[row.run][0],
                run_type=teams[row.run][1],
                topics=row.topics,
                judged_at_10=row.judged_at_10,
                scores=intervals(row.values),
            )
            for rank, row in enumerate(ranked.rows, start=1)
        ]
        if with_private:
            _add_private(context, state, ranked.names, set(teams), body)
        _mark_judge_made(engine, state.qrels_name, body)
    return context.boards.put(key, TaskBoard.of(body))


def intervals(values: dict[str, tuple[float, float, float]]) -> dict[str, ScoreInterval]:
    """A ranking row's (mean, low, high) per measure as the board sends them."""
    return {m: ScoreInterval(mean=v[0], ci_low=v[1], ci_high=v[2]) for m, v in values.items()}


def default_measures(official: str | None, measures: Sequence[str], *, answers: bool = False) -> list[str]:
    """A board's measures when none are asked for: the official measure first, then the task's
    (up to six; per-cutoff families such as P_5 left out), else the registry's headline ones (on
    an answer task: the task's measures, else the nugget scores the track reports)."""
    if answers:
        names = list(measures)[:6] or list(answer_kind.DEFAULT_MEASURES)
    else:
        names = [m for m in measures if "_" not in m][:6] or list(LEADERBOARD_MEASURES)
    return [official, *(m for m in names if m != official)] if official else names


def _answer_board(engine: Engine, state: _BoardState, task_name: str, names: list[str]) -> BoardBody:
    """An answer task's board: each submission's evaluation on the task's bank (the one its
    organisers queued last), each measure's mean over the topics assessed with a 95% t interval,
    best first by the first measure. Submissions not evaluated yet are left out."""
    assert state.bank_name is not None
    body = BoardBody(task=task_name, scores="visible", nuggets=state.bank_name, measures=names, rows=[], notes=[])
    with read_only(engine) as session:
        found = session.execute(
            select(Run.name, Submission.team, Submission.run_type, Evaluation.id)
            .join(Submission, Submission.run_id == Run.id)
            .join(Evaluation, (Evaluation.id == Submission.evaluation_id) & (Evaluation.state == "done"))
            .where(Submission.task_id == state.task_id)
        ).all()
        scored = [
            (run, team, run_type, job, answer_kind.evaluation_scores(session, job, names))
            for run, team, run_type, job in found
        ]
    first = names[0]
    scored.sort(key=lambda r: (r[4][first] is None, -(r[4][first] or 0.0), r[0]))
    body["rows"] = [
        BoardEntry(
            rank=rank,
            run=run,
            team=team,
            run_type=run_type,
            evaluation=evaluation,
            topics=max((record[f"{m}_topics"] for m in names), default=0),
            judged_at_10=None,
            scores={
                m: ScoreInterval(mean=record[m], ci_low=record[f"{m}_ci_low"], ci_high=record[f"{m}_ci_high"])
                for m in names
            },
        )
        for rank, (run, team, run_type, evaluation, record) in enumerate(scored, start=1)
    ]
    if len({row["topics"] for row in body["rows"]}) > 1:
        body["notes"].append("The runs are not assessed on the same topics: their means are over different topics.")
    return body


def _add_private(context: AppContext, state: _BoardState, names: list[str], runs: set[str], body: BoardBody) -> None:
    """Each row's ranking on the private topics (the first measure ranks), from the same stored
    per-topic values as the public one, and its swap: public rank minus private rank (> 0: it
    rose on the private topics)."""
    assert state.qrels_name is not None
    try:
        ranked = ranking.leaderboard(
            context.engine,
            qrels_name=state.qrels_name,
            measures=names,
            runs=runs,
            topics=private_topics(state),
            counts=context.bootstrap_counts,
        )
    except NotFoundError:  # no run has a value on a private topic: nothing to show beside the public board
        return
    private = {
        row.run: PrivateRanking(rank=rank, topics=row.topics, scores=intervals(row.values))
        for rank, row in enumerate(ranked.rows, start=1)
    }
    for row in body["rows"]:
        found = private.get(row["run"])
        row["private"] = found
        row["swap"] = None if found is None else row["rank"] - found["rank"]


def _mark_judge_made(engine: Engine, qrels_name: str, body: BoardBody) -> None:
    """On labels a judge made: the judge, its model and probe result under ``judge``, and on each
    row the judge's models the run declares (``circular``: empty when none)."""
    with read_only(engine) as session:
        behind = judge_made.judge_behind(session, qrels_name)
        if behind is None:
            return
        circular = judge_made.circular_by_name(session, qrels_name, [r["run"] for r in body["rows"]])
    body["judge"] = behind
    for row in body["rows"]:
        row["circular"] = circular.get(row["run"], [])
