"""What the service's pages show: a task's leaderboard with significance tiers and pool
contribution, a run's per-topic picture against the median run, a comparison of runs with the
topics where they disagree most. Every function takes the principal asking; the visibility rules
are the tasks service's (a hidden task's scores, another team's runs: never shown)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import Engine, select

from evalstore.db.models import Pool
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError, NotFoundError
from evalstore.io import inert
from evalstore.metrics import resolve_measures
from evalstore.services import collections, comparisons, tasks
from evalstore.services.access import Principal
from evalstore.services.collections import RankedDocument
from evalstore.services.context import AppContext, context_for
from evalstore.statistics import significance

JUDGED_WARNING = 0.5  # Judged@10 under this: the run's scores rest on unjudged documents
DISAGREEING_TOPICS = 5
TOP_DOCUMENTS = 10
DOWNLOADS = ("csv", "md", "tex")
# canonical names
PER_TOPIC_COLUMNS = tuple("AP nDCG@10 nDCG@20 P@10 P@20 RR Rprec Bpref R@1000 NumRel NumRelRet NumRet".split())


@dataclass(frozen=True)
class BoardRow:
    rank: int
    run: str
    team: str
    run_type: str
    topics: int
    judged_at_10: float | None
    scores: dict[str, dict[str, float]]  # measure -> mean, ci_low, ci_high
    tier: str  # compact letters: rows sharing a letter are not significantly different
    pooled: bool | None  # contributed to the pool the qrels came from (None: the qrels came from no pool)
    may_open: bool  # the caller may open the run's page


@dataclass(frozen=True)
class BoardPage:
    task: str
    visible: bool
    measures: list[str]
    sort: str
    rows: list[BoardRow]
    tier_measure: str | None
    tier_test: str | None
    notes: list[str] = field(default_factory=list)


def leaderboard(
    engine: Engine,
    principal: Principal,
    task: str,
    measures: Sequence[str] = (),
    sort: str | None = None,
    *,
    context: AppContext | None = None,
) -> BoardPage:
    """The task's leaderboard as ``principal`` may see it, sorted by ``sort`` (a measure shown,
    best first, or ``run``/``team``); tiers from Tukey's HSD on the two-way design (runs x
    topics) for the first measure, or the sort measure. A server passes its ``context`` (boards
    and tiers are kept there)."""
    context = context_for(engine, context)
    access = tasks.task_access(engine, principal, task)
    body = tasks.task_leaderboard(engine, principal, task, list(measures), context=context).body
    if not access.scores_visible:
        return BoardPage(task, False, [], "", [], None, None, [tasks.HIDDEN])
    return board_page(
        context, task, body, access.qrels, access.qrels_source, lambda run, team: access.may_open(team), measures, sort
    )


def board_page(
    context: AppContext,
    name: str,
    body: dict[str, Any],
    qrels: str,
    qrels_source: str | None,
    may_open: Callable[[str, str], bool],
    measures: Sequence[str] = (),
    sort: str | None = None,
) -> BoardPage:
    """A board's body (a task's, or a collection's) as a page: sorted, with tiers and notes;
    ``may_open(run, team)`` tells which runs' pages the reader may open."""
    engine = context.engine
    names: list[str] = body.get("measures", [str(m) for m in resolve_measures(list(measures))] if measures else [])
    sort = sort or (names[0] if names else "run")
    if sort not in (*names, "run", "team"):
        raise InvalidParameterError(
            f"Sort by one of the measures shown ({', '.join(names)}), run or team; not '{sort}'."
        )
    tier_measure = sort if sort in names else (names[0] if names else None)
    raw = body["rows"]
    letters: dict[str, str] = {}
    notes = list(body.get("notes", []))
    if tier_measure is not None and len(raw) >= 2:
        letters = _tiers(context, qrels, [r["run"] for r in raw], tier_measure, body)
        notes.append(
            f"Runs sharing a letter are not significantly different on {tier_measure} (Tukey's HSD, "
            "two-way: runs x topics, family-wise alpha 0.05; topics a run lacks count 0)."
        )
    pooled = _pool_runs(engine, qrels_source)
    rows = [
        BoardRow(
            r["rank"],
            r["run"],
            r["team"],
            r["run_type"],
            r["topics"],
            r["judged_at_10"],
            r["scores"],
            letters.get(r["run"], ""),
            None if pooled is None else r["run"] in pooled,
            may_open(r["run"], r["team"]),
        )
        for r in raw
    ]
    if sort in names:
        rows.sort(key=lambda r: (-r.scores[sort]["mean"], r.run))
    else:
        rows.sort(key=lambda r: (getattr(r, sort), r.run))
    if any(r.judged_at_10 is not None and r.judged_at_10 < JUDGED_WARNING for r in rows):
        notes.append(
            f"⚠ marks a run with under {JUDGED_WARNING:.0%} of its top 10 judged: its scores count "
            "unjudged documents as not relevant, and may understate it."
        )
    return BoardPage(name, True, names, sort, rows, tier_measure, "Tukey HSD" if letters else None, notes)


def _tiers(context: AppContext, qrels: str, runs: list[str], measure: str, body: dict[str, Any]) -> dict[str, str]:
    """Compact letters by the measure's Tukey HSD; kept in ``context.tiers`` while the board's
    numbers stay the same (a board's numbers change with every new result, so only the newest few
    boards' tiers are kept)."""
    key = (qrels, tuple(sorted(runs)), measure, tuple((r["run"], r["scores"][measure]["mean"]) for r in body["rows"]))
    cached = context.tiers.get(key)
    if cached is not None:
        return cached
    comparison = comparisons.compare(
        context.engine, qrels_name=qrels, run_names=runs, measures=[measure], multi="tukey", missing="zero"
    )
    means = comparison.matrix.scores[comparison.settings.measures[0]].mean(axis=1)
    order = [int(i) for i in np.argsort(-means, kind="stable")]
    position = {comparison.matrix.runs[i]: rank for rank, i in enumerate(order)}
    different = {(position[p.run], position[p.versus]) for p in comparison.pairs if p.significant}
    letters = significance.compact_letters(len(order), different)
    tiers = {run: letters[position[run]] for run in comparison.matrix.runs}
    return context.tiers.put(key, tiers)


def _pool_runs(engine: Engine, qrels_source: str | None) -> set[str] | None:
    """The runs of the pool the qrels were made from (``pool qrels``), or None."""
    if not qrels_source or not qrels_source.startswith("pool:"):
        return None
    name = qrels_source.removeprefix("pool:").split(" (")[0]
    with read_only(engine) as session:
        params = session.scalar(select(Pool.params).where(Pool.name == name))
    return None if params is None else set(params.get("runs", []))


def board_download(page: BoardPage, fmt: str) -> str:
    """The leaderboard as CSV, a Markdown table or a LaTeX tabular (for a paper)."""
    if fmt not in DOWNLOADS:
        raise InvalidParameterError(f"Download as one of {', '.join(DOWNLOADS)}, not '{fmt}'.")
    header = ["rank", "run", "team", "type", *page.measures, "tier", "judged@10"]
    body = [
        [
            str(i),
            r.run,
            r.team,
            r.run_type,
            *(f"{r.scores[m]['mean']:.4f}" for m in page.measures),
            r.tier,
            "" if r.judged_at_10 is None else f"{r.judged_at_10:.2f}",
        ]
        for i, r in enumerate(page.rows, start=1)
    ]
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        writer.writerows([inert.csv_cell(cell) for cell in row] for row in body)
        return out.getvalue()
    if fmt == "md":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(inert.markdown_cell(cell) for cell in row) + " |" for row in body]
        return "\n".join(lines) + "\n"
    lines = [
        r"\begin{tabular}{rlll" + "r" * len(page.measures) + "lr}",
        r"\toprule",
        " & ".join(_tex(h) for h in header) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(_tex(cell) for cell in row) + r" \\" for row in body]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


_tex = inert.latex_cell


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


def run_page(
    engine: Engine, principal: Principal, run: str, measure: str | None = None, *, context: AppContext | None = None
) -> RunPage:
    submission = tasks.show_submission(engine, principal, run)
    results = tasks.run_results(engine, principal, run, per_query=True)
    if results.get("scores") is not None or "aggregates" not in results:
        return RunPage(submission, results.get("scores") != tasks.HIDDEN, {}, None, [], [], [], [], [], [], 0)

    def peers(measure: str) -> tuple[str, list[str]]:
        access = tasks.task_access(engine, principal, submission["task"])
        board = tasks.task_leaderboard(engine, principal, submission["task"], [measure], context=context)
        return access.qrels, [r["run"] for r in board.body["rows"]]

    return scored_run_page(engine, submission, results["aggregates"], results["per_query"], measure, peers)


def scored_run_page(
    engine: Engine,
    submission: dict[str, Any],
    aggregates: dict[str, Any],
    per_query: dict[str, dict[str, Any]],
    measure: str | None,
    peers: Callable[[str], tuple[str, list[str]]],
) -> RunPage:
    """A run's page from its scores: the per-topic picture of ``measure`` against the median of
    the runs ``peers(measure)`` gives (their qrels and names: a task's, or a collection's)."""
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
            engine, qrels_name=qrels, run_names=done or [run], measures=[measure], missing="zero"
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
    return RunPage(submission, True, aggregates, measure, topics, values, medians, rows, measures, columns, others)


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
    return compared(engine, task, access.qrels, runs, measure, test, collection)


def compared(
    engine: Engine, name: str, qrels: str, runs: list[str], measure: str, test: str, collection: str | None
) -> ComparePage:
    """The comparison of runs the caller may see, on ``qrels``, for the page of ``name`` (a task or
    a collection); only what their evaluations stored is used."""
    comparison = comparisons.compare(
        engine,
        qrels_name=qrels,
        run_names=runs,
        measures=[measure],
        test=test,
        missing="zero",
        evaluate_missing=False,
    )  # a GET never stores
    matrix = comparison.matrix
    scores = matrix.scores[matrix.measures[0]]
    first_minus_second = scores[0] - scores[1]
    order = np.lexsort((np.array(matrix.topics), -first_minus_second))
    differences = [(matrix.topics[i], float(first_minus_second[i])) for i in order]
    spread = scores.max(axis=0) - scores.min(axis=0)
    worst = [i for i in np.lexsort((np.array(matrix.topics), -spread))[:DISAGREEING_TOPICS] if spread[i] > 0]
    chosen = [matrix.topics[i] for i in worst]
    documents = collections.top_documents(engine, qrels, runs, chosen, collection, TOP_DOCUMENTS)
    disagreements = [
        Disagreement(
            matrix.topics[i],
            [float(v) for v in scores[:, i]],
            float(spread[i]),
            [documents.get((run, matrix.topics[i]), []) for run in runs],
        )
        for i in worst
    ]
    return ComparePage(name, runs, matrix.measures[0], comparison, differences, disagreements)
