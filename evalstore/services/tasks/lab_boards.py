"""A qrels set as a lab sees it (a "collection" in the pages): every run evaluated against it, in
or out of a task, with the leaderboard a task has.

Who may see one: admins, and the organisers who may export those qrels (they organise a task over
them), unless a hidden task, or one with a public/private topic split, over the same qrels is
still unreleased and not theirs: its scores (its private topics' values) must not be had through
the qrels instead of the task. To anyone else a collection does not exist
(not found, as another team's run). Inside one, a run submitted to a task the reader does not
organise is listed but not opened (its page is its team's and its organiser's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import AggregateResult, Evaluation, QrelsSet, Run, Submission, Task
from evalstore.db.session import read_only
from evalstore.errors import NotFoundError
from evalstore.services.access import Principal
from evalstore.services.context import AppContext, context_for
from evalstore.services.kinds import ranking
from evalstore.services.tasks.boards import BoardBody, BoardEntry, TaskBoard, intervals
from evalstore.services.tasks.visibility import LEADERBOARD_MEASURES, manages, public_only, scores_are_visible

BOARD_MEASURES = 6  # the board's default columns when no headline measure was computed


@dataclass(frozen=True)
class CollectionAccess:
    """What a principal may do with a collection they may see: which of its runs they may open."""

    qrels: str
    qrels_source: str | None
    tasks: tuple[str, ...]  # the tasks over the qrels
    closed: frozenset[str]  # runs of tasks the principal does not organise

    def may_open(self, run: str) -> bool:
        return run not in self.closed


def _sees(principal: Principal, tasks_over: Sequence[Task]) -> bool:
    if principal.is_admin:
        return True
    return any(manages(principal, t) for t in tasks_over) and not any(
        not scores_are_visible(principal, t) or public_only(principal, t) for t in tasks_over
    )


def _not_found(name: str) -> NotFoundError:
    return NotFoundError(f"No collection named '{name}' that you may see.")


def _tasks_over(session: Session, qrels_id: int) -> list[Task]:
    return list(session.scalars(select(Task).where(Task.qrels_id == qrels_id).order_by(Task.name)))


def collection_access(engine: Engine, principal: Principal, name: str) -> CollectionAccess:
    """The collection of qrels ``name`` as ``principal`` may see it; not found when they may not."""
    principal.require("collections:read")
    with read_only(engine) as session:
        qrels = repo.find_qrels(session, name)
        if qrels is None or qrels.kind != "relevance":
            raise _not_found(name)
        tasks_over = _tasks_over(session, qrels.id)
        if not _sees(principal, tasks_over):
            raise _not_found(name)
        closed: frozenset[str] = frozenset()
        foreign = [t.id for t in tasks_over if not manages(principal, t)]
        if foreign:
            closed = frozenset(
                session.scalars(
                    select(Run.name)
                    .join(Submission, Submission.run_id == Run.id)
                    .where(Submission.task_id.in_(foreign))
                )
            )
        return CollectionAccess(qrels.name, qrels.source, tuple(t.name for t in tasks_over), closed)


@dataclass(frozen=True)
class CollectionSummary:
    """A collection (a set of relevance qrels) as the collections page lists it; ``runs``: the
    runs with a finished evaluation on the qrels as they are now."""

    name: str
    description: str | None
    topics: int
    judgments: int
    runs: int
    tasks: tuple[str, ...]  # the tasks over the qrels


def list_collections(engine: Engine, principal: Principal) -> list[CollectionSummary]:
    """The collections ``principal`` may see: each with its topics, judgments, the runs evaluated
    against it and the tasks over it."""
    principal.require("collections:read")
    with read_only(engine) as session:
        runs = dict(
            session.execute(
                select(Evaluation.qrels_id, func.count(func.distinct(Evaluation.run_id)))
                .join(QrelsSet, QrelsSet.id == Evaluation.qrels_id)
                .where(Evaluation.state == "done", Evaluation.qrels_hash == QrelsSet.content_hash)
                .group_by(Evaluation.qrels_id)
            ).all()
        )
        over: dict[int, list[Task]] = {}
        for task in session.scalars(select(Task).where(Task.qrels_id.is_not(None)).order_by(Task.name)):
            assert task.qrels_id is not None
            over.setdefault(task.qrels_id, []).append(task)
        out = []
        for qrels in session.scalars(select(QrelsSet).where(QrelsSet.kind == "relevance").order_by(QrelsSet.name)):
            tasks_over = over.get(qrels.id, [])
            if _sees(principal, tasks_over):
                out.append(
                    CollectionSummary(
                        qrels.name,
                        qrels.description,
                        qrels.topic_count,
                        qrels.row_count,
                        runs.get(qrels.id, 0),
                        tuple(t.name for t in tasks_over),
                    )
                )
        return out


def _measure_sets(session: Session, qrels: QrelsSet) -> list[set[str]]:
    """Per run, the measures its finished evaluations on the qrels as they are now hold, with
    evaluate's default options (what the board shows); counts such as num_ret are left out: they
    rank nothing."""
    shown = ranking.Selection()
    runs: dict[int, list[int]] = {}
    for evaluation_id, run_id, options in session.execute(
        select(Evaluation.id, Evaluation.run_id, Evaluation.options).where(
            Evaluation.qrels_id == qrels.id, Evaluation.state == "done", Evaluation.qrels_hash == qrels.content_hash
        )
    ):
        if shown.matches(options):
            runs.setdefault(run_id, []).append(evaluation_id)
    held: dict[int, set[str]] = {evaluation_id: set() for ids in runs.values() for evaluation_id in ids}
    for evaluation_id, measure in session.execute(
        select(AggregateResult.evaluation_id, AggregateResult.measure).where(
            AggregateResult.evaluation_id.in_(list(held)), AggregateResult.value.is_not(None)
        )
    ):
        if not measure.startswith("num_"):
            held[evaluation_id].add(measure)
    return [set().union(*(held[i] for i in ids)) for ids in runs.values()]


def collection_measures(engine: Engine, name: str) -> list[str]:
    """The measures the board can show: those some run's evaluation on the qrels holds."""
    with read_only(engine) as session:
        found = set().union(*_measure_sets(session, repo.get_qrels(session, name)))
    return sorted(found, key=str.lower)


def _default_measures(session: Session, qrels: QrelsSet) -> list[str]:
    """The headline measures every run has, else those some run has, else the first computed."""
    sets = _measure_sets(session, qrels)
    every = set.intersection(*sets) if sets else set()
    some = set().union(*sets)
    return (
        [m for m in LEADERBOARD_MEASURES if m in every]
        or [m for m in LEADERBOARD_MEASURES if m in some]
        or sorted(some, key=str.lower)[:BOARD_MEASURES]
    )


def collection_board(
    engine: Engine, name: str, measures: Sequence[str] = (), *, context: AppContext | None = None
) -> TaskBoard:
    """The board of every run evaluated on the qrels, in the body a task's board has (a run of a
    task under its team and run type, another under its system). The caller checked who asks
    (:func:`collection_access`). Kept in ``context.boards`` while the qrels' evaluations stay the
    same."""
    context = context_for(engine, context)
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, name)
        names = list(measures) or _default_measures(session, qrels)
        fingerprint = tuple(
            session.execute(
                select(
                    func.count(Evaluation.id),
                    func.max(Evaluation.id),
                    func.max(Evaluation.finished_at),
                    func.max(Evaluation.results_version),
                ).where(Evaluation.qrels_id == qrels.id, Evaluation.state == "done")
            ).one()
        ) + (session.scalar(select(func.count(Submission.id))),)
        key = ("collection", qrels.id, qrels.content_hash, tuple(names), fingerprint)
        cached: TaskBoard | None = context.boards.get(key)
        if cached is not None:
            return cached
        teams = {
            run: (team or system or "", run_type or "")
            for run, system, team, run_type in session.execute(
                select(Run.name, Run.system, Submission.team, Submission.run_type)
                .outerjoin(Submission, Submission.run_id == Run.id)
                .where(Run.id.in_(select(Evaluation.run_id).where(Evaluation.qrels_id == qrels.id)))
            )
        }
    body = BoardBody(task=name, scores="visible", rows=[], notes=[])
    if names:
        ranked = ranking.leaderboard(engine, qrels_name=name, measures=names)
        body["measures"] = ranked.names
        body["notes"] = ranked.notes
        body["rows"] = [
            BoardEntry(
                rank=rank,
                run=row.run,
                team=teams.get(row.run, ("", ""))[0],
                run_type=teams.get(row.run, ("", ""))[1],
                topics=row.topics,
                judged_at_10=row.judged_at_10,
                scores=intervals(row.values),
            )
            for rank, row in enumerate(
                # a run lacking a measure shown is left out; the notes say which, and how to fill it
                (r for r in ranked.rows if all(m in r.values for m in ranked.names)),
                start=1,
            )
        ]
    return context.boards.put(key, TaskBoard.of(body))
