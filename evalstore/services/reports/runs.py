"""A run's page (its per-topic picture against the task's median run) and the comparison of a
task's runs (with the topics where they disagree most)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine

from evalstore.errors import InvalidParameterError, NotFoundError
from evalstore.services import collections, comparisons, tasks
from evalstore.services.access import Principal
from evalstore.services.collections import RankedDocument
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
    run: dict[str, Any]  # the submission: team, type, rows, topics, state, ...
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
    if qrels is None:  # answers: their scores on the task's nugget bank, without the per-topic picture
        return RunPage(submission, True, results["aggregates"], None, [], [], [], [], [], [], 0)

    def peers(measure: str) -> tuple[str, list[str]]:
        board = tasks.task_leaderboard(engine, principal, submission["task"], [measure], context=context)
        return qrels, [r["run"] for r in board.body["rows"]]

    public_only = results.get("topic_set") == "public"
    if access.aggregates_only:  # a split task before its release: no topic is named, so none is known
        return RunPage(submission, True, results["aggregates"], None, [], [], [], [], [], [], 0, public_only=True)
    split = access.board_topics
    return scored_run_page(
        engine,
        submission,
        results["aggregates"],
        results["per_query"],
        measure,
        peers,
        shown=access.topics,
        public_only=public_only,
        private=split.topics if split is not None and not public_only else frozenset(),
    )


def scored_run_page(
    engine: Engine,
    submission: dict[str, Any],
    aggregates: dict[str, Any],
    per_query: dict[str, dict[str, Any]],
    measure: str | None,
    peers: Callable[[str], tuple[str, list[str]]],
    *,
    shown: ranking.TopicFilter | None = None,
    public_only: bool = False,
    private: frozenset[str] = frozenset(),
) -> RunPage:
    """A run's page from its scores: the per-topic picture of ``measure`` against the median of
    the runs ``peers(measure)`` gives (their qrels and names: a task's, or a collection's), over
    the topics ``shown`` (a split task's public ones before its release; None: all); ``private``:
    a split task's private topics, for whoever may see their values."""
    run = submission["run"]
    measures = [m for m in aggregates if any(isinstance(v.get(m), float) for v in per_query.values())]
    measure = measure or next((m for m in ("AP", "nDCG@10", *measures) if m in measures), None)
    if measure is not None and measure not in measures:
        raise InvalidParameterError(f"Run '{run}' has no per-topic {measure}; pick one of {', '.join(measures)}.")
    topics: list[str] = []
    values: list[float] = []
    medians: list[float] = []
    others = 0
    if measure is not None:
        qrels, done = peers(measure)
        matrix = comparisons.score_matrix(
            engine,
            qrels_name=qrels,
            run_names=done or [run],
            measures=[measure],
            missing="zero",
            topic_filter=shown,  # a split task before its release: its public topics only
        )
        scores = matrix.scores[matrix.measures[0]]
        median = np.median(scores, axis=0)
        own = scores[matrix.runs.index(run)] if run in matrix.runs else np.zeros(len(matrix.topics))
        order = np.lexsort((np.array(matrix.topics), -(own - median)))
        topics = [matrix.topics[i] for i in order]
        values = [float(own[i]) for i in order]
        medians = [float(median[i]) for i in order]
        others = len(matrix.runs)
    columns = [m for m in dict.fromkeys((measure or "", *PER_TOPIC_COLUMNS)) if m in measures]
    rows = [{"topic": t, **{m: per_query[t].get(m) for m in columns}} for t in sorted(per_query, key=_topic_key)]
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
        columns,
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


def compare_page(
    engine: Engine,
    principal: Principal,
    task: str,
    runs: Sequence[str],
    measure: str = "AP",
    test: str = "t",
    collection: str | None = None,
) -> ComparePage:
    """Two or more of a task's runs: the paired tests of `evalstore compare` (Holm-corrected), the
    per-topic differences, and the topics where the runs disagree most with their top documents
    (with their titles and first words when ``collection`` holds them)."""
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
        raise InvalidParameterError(f"Task '{task}' takes answers; comparing its runs is not on these pages yet.")
    return compared(
        engine,
        task,
        access.qrels,
        runs,
        measure,
        test,
        collection,
        shown=access.topics,
        judgments=access.judgments_visible,
        per_topic=not access.aggregates_only,
    )


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
) -> ComparePage:
    """The comparison of runs the caller may see, on ``qrels``, for the page of ``name`` (a task or
    a collection), over the topics ``shown`` (None: all); only what their evaluations stored is
    used. ``judgments``: whether the top documents carry their grades in the qrels; without
    ``per_topic``, the tests alone (no topic's difference, no disagreement named)."""
    comparison = comparisons.compare(
        engine,
        qrels_name=qrels,
        run_names=runs,
        measures=[measure],
        test=test,
        missing="zero",
        evaluate_missing=False,
        topic_filter=shown,  # a split task before its release: its public topics only
    )  # a GET never stores
    matrix = comparison.matrix
    if not per_topic:
        return ComparePage(name, runs, matrix.measures[0], comparison, [], [], judgments, aggregates_only=True)
    scores = matrix.scores[matrix.measures[0]]
    first_minus_second = scores[0] - scores[1]
    order = np.lexsort((np.array(matrix.topics), -first_minus_second))
    differences = [(matrix.topics[i], float(first_minus_second[i])) for i in order]
    spread = scores.max(axis=0) - scores.min(axis=0)
    worst = [i for i in np.lexsort((np.array(matrix.topics), -spread))[:DISAGREEING_TOPICS] if spread[i] > 0]
    chosen = [matrix.topics[i] for i in worst]
    documents = collections.top_documents(engine, qrels if judgments else None, runs, chosen, collection, TOP_DOCUMENTS)
    disagreements = [
        Disagreement(
            matrix.topics[i],
            [float(v) for v in scores[:, i]],
            float(spread[i]),
            [documents.get((run, matrix.topics[i]), []) for run in runs],
        )
        for i in worst
    ]
    return ComparePage(name, runs, matrix.measures[0], comparison, differences, disagreements, judgments)
