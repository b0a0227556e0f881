"""A run's page (its per-topic picture against the task's median run) and the comparison of a
task's runs (with the topics where they disagree most)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore.db.models import EvaluationQueries, QrelsSet
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError, NotFoundError
from evalstore.metrics.answers import ANSWER_MEASURES, answer_measure
from evalstore.services import collections, comparisons, tasks
from evalstore.services.access import Principal
from evalstore.services.collections import RankedDocument
from evalstore.services.comparisons import Comparison, ScoreMatrix
from evalstore.services.context import AppContext
from evalstore.services.kinds import ranking

DISAGREEING_TOPICS = 5
TOP_DOCUMENTS = 10
PER_TOPIC_COLUMNS = (
    "AP",
    "nDCG@10",
    "nDCG@20",
    "P@10",
    "P@20",
    "RR",
    "Rprec",
    "Bpref",
    "R@1000",
    "NumRel",
    "NumRelRet",
    "NumRet",
)  # canonical names


# --- a run ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunPage:
    # a task's submission (tasks.SubmittedRun) or a collection's run as its lab page shows it
    run: Mapping[str, Any]
    visible: bool
    aggregates: dict[str, Any]
    measure: str | None  # the per-topic picture's measure
    topics: list[str]  # in the picture's order: difference from the median, largest first
    values: list[float]
    medians: list[float]
    per_topic: list[dict[str, Any]]  # topic and the ``columns``, by topic
    measures: list[str]  # with per-topic values
    columns: list[str]  # of the per-topic table (the API's per_query holds every measure)
    task_runs: int
    public_only: bool = False  # a split task before its release: the values are the public topics' only
    private_topics: frozenset[str] = frozenset()  # of a split task, for whoever sees their values


def run_page(
    engine: Engine, principal: Principal, run: str, measure: str | None = None, *, context: AppContext | None = None
) -> RunPage:
    submission = tasks.show_submission(engine, principal, run)
    results = tasks.run_results(engine, principal, run, per_query=True)
    if results.get("scores") is not None or "aggregates" not in results:
        return RunPage(submission, results.get("scores") != tasks.HIDDEN, {}, None, [], [], [], [], [], [], 0)

    access = tasks.task_access(engine, principal, submission["task"])
    qrels = access.qrels
    if qrels is None:  # answers: against the median of the task's board, on its evaluations
        return _answer_run_page(engine, principal, submission, results, measure, context)

    def peers(measure: str) -> ScoreMatrix:
        return median_peers(engine, qrels, board_runs(measure), measure, access.topics)

    def board_runs(measure: str) -> list[str]:
        board = tasks.task_leaderboard(engine, principal, submission["task"], [measure], context=context)
        return [r["run"] for r in board.body["rows"]] or [run]

    def stored(measure: str) -> Picture | None:
        runs = board_runs(measure)
        return stored_picture(engine, qrels, submission["task"], run, runs, measure, access.topics) or values_picture(
            engine, qrels, run, runs, measure, access.topics
        )

    public_only = results.get("topic_set") == "public"
    if access.aggregates_only:  # a split task before its release: no topic is named, so none is known
        return RunPage(submission, True, results["aggregates"], None, [], [], [], [], [], [], 0, public_only=True)
    split = access.board_topics
    per_query = results["per_query"]
    assert per_query is not None  # withheld only before a split task's release, returned above
    return scored_run_page(
        engine,
        submission,
        results["aggregates"],
        per_query,
        measure,
        peers,
        public_only=public_only,
        private=split.topics if split is not None and not public_only else frozenset(),
        stored=stored,
    )


def _answer_run_page(
    engine: Engine,
    principal: Principal,
    submission: tasks.SubmittedRun,
    results: tasks.RunResults,
    measure: str | None,
    context: AppContext | None,
) -> RunPage:
    """An answer run's page: its per-topic answer measures against the median of the task's
    evaluated answer runs, each on the evaluation the task's board shows (an answer task keeps no
    topic private: whoever sees its scores sees every topic's)."""
    task = submission["task"]
    default = tasks.task_leaderboard(engine, principal, task, context=context).body.get("measures") or []
    if measure is not None:
        measure = answer_measure(measure).family.name  # an alias (nuggetizer's name) as the board names it

    def peers(measure: str) -> ScoreMatrix:
        board = tasks.task_leaderboard(engine, principal, task, [measure], context=context).body
        return comparisons.answer_matrix(
            engine,
            bank_name=board["nuggets"],
            answer_names=[r["run"] for r in board["rows"]],
            measures=[measure],
            evaluation_ids={r["run"]: r["evaluation"] for r in board["rows"]},
            missing="zero",
        )

    per_query = results["per_query"]
    assert per_query is not None  # an answer task keeps no topic private: never withheld
    return scored_run_page(
        engine,
        submission,
        results["aggregates"],
        per_query,
        measure,
        peers,
        first=default,
        columns=list(ANSWER_MEASURES),
    )


def median_peers(
    engine: Engine, qrels: str, runs: list[str], measure: str, shown: ranking.TopicFilter | None = None
) -> ScoreMatrix:
    """The per-topic ``measure`` of ``runs`` on ``qrels`` (a task's, a collection's) that a run's
    page sets the run against, over the topics ``shown`` (None: all)."""
    return comparisons.score_matrix(
        engine,
        qrels_name=qrels,
        run_names=runs,
        measures=[measure],
        missing="zero",
        topic_filter=shown,  # a split task before its release: its public topics only
    )


# a run's picture on one measure: the topics, its values and the medians on them, how many runs
Picture = tuple[list[str], np.ndarray, np.ndarray, int]


def stored_picture(
    engine: Engine,
    qrels_name: str,
    task: str,
    run: str,
    runs: list[str],
    measure: str,
    shown: ranking.TopicFilter | None,
) -> Picture | None:
    """The run's picture against the medians a worker stored for the task's ``runs`` on
    ``measure`` (over the topics ``shown``), when they are of the evaluations the page reads;
    else None (the page computes them)."""
    scope = "all" if shown is None else shown.scope
    with read_only(engine) as session:
        qrels = session.scalar(select(QrelsSet).where(QrelsSet.name == qrels_name))
        if qrels is None:
            return None
        found = ranking.stored_medians(session, qrels=qrels, task=task, measure=measure, scope=scope, runs=runs)
        return None if found is None else _picture_of(session, found, run, measure, shown)


def values_picture(
    engine: Engine,
    qrels_name: str,
    run: str,
    runs: list[str],
    measure: str,
    shown: ranking.TopicFilter | None = None,
) -> Picture | None:
    """The run's picture against the medians of ``runs`` on ``measure`` over the topics ``shown``,
    from their stored per-topic values (:func:`~evalstore.services.kinds.ranking.medians_from_values`),
    where no worker stored those medians: a measure off the task's board, a collection of several
    tasks' runs; None when the runs lack them (the page then computes through the score matrix)."""
    with read_only(engine) as session:
        qrels = session.scalar(select(QrelsSet).where(QrelsSet.name == qrels_name))
        if qrels is None:
            return None
        found = ranking.medians_from_values(session, qrels=qrels, runs=runs, measure=measure, shown=shown)
        return None if found is None else _picture_of(session, found, run, measure, shown)


def _picture_of(
    session: Session, found: ranking.StoredMedians, run: str, measure: str, shown: ranking.TopicFilter | None
) -> Picture | None:
    """The run's own values on the medians' topics (0 where it has none, or is not of them)."""
    own = np.zeros(len(found.topics))
    if run in found.runs:
        listed = session.scalar(
            select(EvaluationQueries.query_ids).where(EvaluationQueries.evaluation_id == found.runs[run])
        )
        values = ranking.run_values(session, found.runs[run], measure)
        if values is None or listed is None:
            return None
        column = {topic: i for i, topic in enumerate(found.topics)}
        for topic, value in zip((str(t) for t in listed), values, strict=True):
            if shown is None or shown.keeps(topic):
                own[column[topic]] = value
    return found.topics, own, found.medians, len(found.runs)


def scored_run_page(
    engine: Engine,
    submission: Mapping[str, Any],
    aggregates: dict[str, Any],
    per_query: dict[str, dict[str, Any]],
    measure: str | None,
    peers: Callable[[str], ScoreMatrix],
    *,
    public_only: bool = False,
    private: frozenset[str] = frozenset(),
    first: Sequence[str] = ("AP", "nDCG@10"),
    columns: Sequence[str] = PER_TOPIC_COLUMNS,
    stored: Callable[[str], Picture | None] | None = None,
) -> RunPage:
    """A run's page from its scores: the per-topic picture of ``measure`` (by default the first of
    ``first`` it has) against the median of the runs ``peers(measure)`` holds (a task's, or a
    collection's, over the topics their reader may see); the per-topic table's ``columns``;
    ``private``: a split task's private topics, for whoever may see their values."""
    run = submission["run"]
    measures = [m for m in aggregates if any(isinstance(v.get(m), float) for v in per_query.values())]
    measure = measure or next((m for m in (*first, *measures) if m in measures), None)
    if measure is not None and measure not in measures:
        raise InvalidParameterError(f"Run '{run}' has no per-topic {measure}; pick one of {', '.join(measures)}.")
    topics: list[str] = []
    values: list[float] = []
    medians: list[float] = []
    others = 0
    if measure is not None:
        picture = stored(measure) if stored is not None else None
        if picture is None:  # none stored for these runs' evaluations: computed (never stored here)
            matrix = peers(measure)
            scores = matrix.scores[matrix.measures[0]]
            own = scores[matrix.runs.index(run)] if run in matrix.runs else np.zeros(len(matrix.topics))
            picture = (matrix.topics, own, np.median(scores, axis=0), len(matrix.runs))
        listed, own, median, others = picture
        order = np.lexsort((np.array(listed), -(own - median)))
        topics = [listed[i] for i in order]
        values = [float(own[i]) for i in order]
        medians = [float(median[i]) for i in order]
    shown = [m for m in dict.fromkeys((measure or "", *columns)) if m in measures]
    rows = [{"topic": t, **{m: per_query[t].get(m) for m in shown}} for t in sorted(per_query, key=_topic_key)]
    return RunPage(
        submission,
        True,
        aggregates,
        measure,
        topics,
        values,
        medians,
        rows,
        measures,
        shown,
        others,
        public_only,
        private,
    )


def _topic_key(topic: str) -> tuple[int, int | str]:
    return (0, int(topic)) if topic.isdigit() else (1, topic)


# --- comparing runs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Disagreement:
    topic: str
    values: list[float]  # per run, in the comparison's run order
    spread: float
    documents: list[list[RankedDocument]]  # per run, its top documents


@dataclass(frozen=True)
class ComparePage:
    task: str
    runs: list[str]
    measure: str
    comparison: comparisons.Comparison
    differences: list[tuple[str, float]]  # (topic, first run - second run), largest first
    disagreements: list[Disagreement]
    judgments_shown: bool = True  # the top documents' grades in the qrels (the organisers', or after release)
    aggregates_only: bool = False  # a split task before its release: the tests alone, no topic named
    answers: bool = False  # answer runs: their topics' values, no ranked documents


def compare_page(
    engine: Engine,
    principal: Principal,
    task: str,
    runs: Sequence[str],
    measure: str | None = None,
    test: str = "t",
    collection: str | None = None,
    *,
    context: AppContext | None = None,
) -> ComparePage:
    """Two or more of a task's runs: the paired tests of `evalstore compare` (Holm-corrected), the
    per-topic differences, and the topics where the runs disagree most with their top documents
    (with their titles and first words when ``collection`` holds them). ``measure`` None: the
    measure the task's pages open on (:attr:`TaskView.opening_measure`); on an answer task its
    board's first measure."""
    runs = list(dict.fromkeys(runs))
    if len(runs) < 2:
        raise InvalidParameterError("Pick at least two runs to compare.")
    access = tasks.task_access(engine, principal, task)
    for run in runs:
        submission = tasks.show_submission(engine, principal, run)  # another team's run: not found
        if submission["task"] != task:
            raise NotFoundError(f"Run '{run}' is not a run of task '{task}'.")
    if not access.scores_visible:
        raise NotFoundError(f"The scores of task '{task}' are {tasks.HIDDEN}.")
    if access.qrels is None:
        return _compared_answers(engine, principal, task, runs, measure, test, context)
    return compared(
        engine,
        task,
        access.qrels,
        runs,
        measure or tasks.show_task(engine, task).opening_measure,
        test,
        collection,
        shown=access.topics,
        judgments=access.judgments_visible,
        per_topic=not access.aggregates_only,
        tasks=(task,),
    )


def _compared_answers(
    engine: Engine,
    principal: Principal,
    task: str,
    runs: list[str],
    measure: str | None,
    test: str,
    context: AppContext | None,
) -> ComparePage:
    """An answer task's runs compared on an answer measure, each on the evaluation the task's
    board shows (an answer task keeps no topic private)."""
    board = tasks.task_leaderboard(engine, principal, task, [measure] if measure else [], context=context).body
    measure = board["measures"][0]
    rows = {r["run"]: r for r in board["rows"]}
    for run in runs:
        if run not in rows:
            raise InvalidParameterError(f"Run '{run}' has no scores yet: its answers are not assessed.")
    if all(rows[run]["scores"][measure]["mean"] is None for run in runs):
        raise InvalidParameterError(
            f"None of these runs has {measure} on task '{task}': their answers' citations are not assessed."
        )
    comparison = comparisons.compare_answers(
        engine,
        bank_name=board["nuggets"],
        answer_names=runs,
        measures=[measure],
        evaluation_ids={run: rows[run]["evaluation"] for run in runs},
        test=test,
        missing="zero",
    )
    return _laid_out(task, runs, comparison, answers=True)


def compared(
    engine: Engine,
    name: str,
    qrels: str,
    runs: list[str],
    measure: str,
    test: str,
    collection: str | None,
    *,
    shown: ranking.TopicFilter | None = None,
    judgments: bool = True,
    per_topic: bool = True,
    tasks: Sequence[str] = (),
) -> ComparePage:
    """The comparison of runs the caller may see, on ``qrels``, for the page of ``name`` (a task or
    a collection), over the topics ``shown`` (None: all); only what their evaluations stored is
    used. ``judgments``: whether the top documents carry their grades in the qrels; without
    ``per_topic``, the tests alone (no topic's difference, no disagreement named). ``tasks``: the
    tasks whose paired tests a worker stored, the first holding every pair read (a pair's numbers
    are its two evaluations' and topics' alone, whichever task stored them: a collection's page
    reads those of a task over its qrels)."""

    def stored(matrix: ScoreMatrix) -> ranking.StoredPairs | None:
        for task in tasks:
            found = ranking.stored_pairs(
                engine,
                task=task,
                qrels_name=qrels,
                measure=matrix.measures[0],
                topics=shown,
                evaluations=matrix.evaluation_ids,
                topic_list=matrix.topics,
            )
            if found is not None:
                return found
        return None

    comparison = comparisons.compare(
        engine,
        qrels_name=qrels,
        run_names=runs,
        measures=[measure],
        test=test,
        missing="zero",
        evaluate_missing=False,
        topic_filter=shown,  # a split task before its release: its public topics only
        stored=stored,
    )  # a GET never stores
    if not per_topic:
        measure = comparison.matrix.measures[0]
        return ComparePage(name, runs, measure, comparison, [], [], judgments, aggregates_only=True)
    return _laid_out(
        name,
        runs,
        comparison,
        judgments=judgments,
        documents=lambda chosen: collections.top_documents(
            engine, qrels if judgments else None, runs, chosen, collection, TOP_DOCUMENTS
        ),
    )


def _laid_out(
    name: str,
    runs: list[str],
    comparison: Comparison,
    *,
    judgments: bool = True,
    documents: Callable[[list[str]], dict[tuple[str, str], list[RankedDocument]]] | None = None,
    answers: bool = False,
) -> ComparePage:
    """A comparison as its page: the first two runs' per-topic differences, and the topics where
    the runs disagree most, with each run's top ``documents`` there (None: no documents)."""
    matrix = comparison.matrix
    scores = matrix.scores[matrix.measures[0]]
    first_minus_second = scores[0] - scores[1]
    order = np.lexsort((np.array(matrix.topics), -first_minus_second))
    differences = [(matrix.topics[i], float(first_minus_second[i])) for i in order]
    spread = scores.max(axis=0) - scores.min(axis=0)
    worst = [i for i in np.lexsort((np.array(matrix.topics), -spread))[:DISAGREEING_TOPICS] if spread[i] > 0]
    chosen = [matrix.topics[i] for i in worst]
    found = documents(chosen) if documents is not None else {}
    disagreements = [
        Disagreement(
            matrix.topics[i],
            [float(v) for v in scores[:, i]],
            float(spread[i]),
            [found.get((run, matrix.topics[i]), []) for run in runs],
        )
        for i in worst
    ]
    return ComparePage(
        name, runs, matrix.measures[0], comparison, differences, disagreements, judgments, answers=answers
    )
