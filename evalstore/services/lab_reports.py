"""What a collection's pages show (a qrels set as a lab sees it, tasks.lab_boards): the leaderboard
of every run evaluated against it, a run's page and a comparison of runs, made by the same pieces
as a task's (reports)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from sqlalchemy import Engine, select

from evalstore.db import repositories as repo
from evalstore.db.models import Submission, Task
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError, NotFoundError
from evalstore.services import reports, tasks
from evalstore.services.access import Principal
from evalstore.services.comparisons import ScoreMatrix
from evalstore.services.context import AppContext, context_for
from evalstore.services.kinds import ranking
from evalstore.services.tasks.visibility import iso_text, number_text


def collection_leaderboard(
    engine: Engine,
    principal: Principal,
    name: str,
    measures: Sequence[str] = (),
    sort: str | None = None,
    *,
    context: AppContext | None = None,
) -> reports.BoardPage:
    """The leaderboard of every run evaluated on the collection's qrels, as a task's page has it."""
    context = context_for(engine, context)
    access = tasks.collection_access(engine, principal, name)
    body = tasks.collection_board(engine, name, list(measures), context=context).body
    return reports.board_page(
        context, name, body, access.qrels, access.qrels_source, lambda run, team: access.may_open(run), measures, sort
    )


class LabRun(TypedDict):
    """A collection's run as its page shows it (the keys of a task's ``SubmittedRun`` it has)."""

    run: str
    team: str | None  # the submitting team, else the run's system
    run_type: str | None
    description: str | None
    rows: int
    topics: int
    submitted_at: str | None
    state: str
    task: str | None


def _openable(engine: Engine, principal: Principal, name: str, run: str) -> tasks.CollectionAccess:
    access = tasks.collection_access(engine, principal, name)
    if not access.may_open(run):
        raise NotFoundError(f"No run named '{run}' of collection '{name}' that you may open.")
    return access


def _run_view(engine: Engine, run_name: str) -> LabRun:
    """The run as a run page shows it: a task's submission with its team, else the run's system."""
    with read_only(engine) as session:
        run = repo.get_run(session, run_name)
        found = session.execute(
            select(Submission, Task.name).join(Task, Task.id == Submission.task_id).where(Submission.run_id == run.id)
        ).first()
        submission, task = found if found is not None else (None, None)
        return LabRun(
            run=run.name,
            team=submission.team if submission else run.system,
            run_type=submission.run_type if submission else None,
            description=run.description,
            rows=run.row_count,
            topics=run.topic_count,
            submitted_at=iso_text(submission.created_at if submission else run.created_at),
            state="done",
            task=task,
        )


def collection_run_page(
    engine: Engine,
    principal: Principal,
    name: str,
    run: str,
    measure: str | None = None,
    *,
    context: AppContext | None = None,
) -> reports.RunPage:
    """A run's scores on the collection's qrels (its newest evaluation there) against the median of
    the collection's runs."""
    access = _openable(engine, principal, name, run)
    try:
        stored = ranking.results(engine, qrels_name=access.qrels, run_name=run)
    except NotFoundError:
        raise NotFoundError(f"Run '{run}' has no finished evaluation on collection '{name}'.") from None
    aggregates = {m: number_text(v) for m, v in stored.aggregates.items()}
    per_query = {
        str(topic): {str(m): number_text(v) for m, v in row.items()}
        for topic, row in stored.frame.to_dict(orient="index").items()
    }

    def board_runs(measure: str) -> list[str]:
        board = tasks.collection_board(engine, name, [measure], context=context)
        return [r["run"] for r in board.body["rows"]] or [run]

    def peers(measure: str) -> ScoreMatrix:
        return reports.median_peers(engine, access.qrels, board_runs(measure), measure)

    def prepared(measure: str) -> reports.Picture | None:
        # the medians a worker stored for a task over the qrels, when its runs are the collection's
        # (a median is its runs' evaluations' alone, whichever task stored it); else the runs'
        # stored values' (a collection holding several tasks' runs, or runs of none)
        runs = board_runs(measure)
        for task in access.tasks:
            picture = reports.stored_picture(engine, access.qrels, task, run, runs, measure, None)
            if picture is not None:
                return picture
        return reports.values_picture(engine, access.qrels, run, runs, measure)

    return reports.scored_run_page(
        engine, _run_view(engine, run), aggregates, per_query, measure, peers, stored=prepared
    )


def collection_runs(engine: Engine, principal: Principal, name: str) -> list[str]:
    """The collection's runs the reader may open (what its compare form offers)."""
    access = tasks.collection_access(engine, principal, name)
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, access.qrels)
        runs = ranking.chosen_evaluation_ids(session, qrels, [], ranking.Selection())
        return sorted(run for run, _ in runs.values() if access.may_open(run))


def collection_compare_page(
    engine: Engine,
    principal: Principal,
    name: str,
    runs: Sequence[str],
    measure: str = "AP",
    test: str = "t",
    collection: str | None = None,
) -> reports.ComparePage:
    """Two or more of the collection's runs compared as a task's compare page does."""
    runs = list(dict.fromkeys(runs))
    if len(runs) < 2:
        raise InvalidParameterError("Pick at least two runs to compare.")
    access = tasks.collection_access(engine, principal, name)
    for run in runs:
        if not access.may_open(run):
            raise NotFoundError(f"No run named '{run}' of collection '{name}' that you may open.")
    return reports.compared(engine, name, access.qrels, runs, measure, test, collection, tasks=access.tasks)
