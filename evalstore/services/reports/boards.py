"""A task's leaderboard as its page shows it: significance tiers, pool contribution, a split
task's private ranking and swaps; and its downloads."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalstore.db.models import Pool, QrelsSet, Task
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import InvalidParameterError
from evalstore.io import inert
from evalstore.metrics import headline_measures, resolve_measures
from evalstore.metrics.answers import ANSWER_MEASURES
from evalstore.metrics.registry import REGISTRY, parse
from evalstore.metrics.trec_names import reader_name
from evalstore.services import comparisons, tasks
from evalstore.services.access import Principal
from evalstore.services.context import AppContext, context_for
from evalstore.services.jobs import live_workers
from evalstore.services.kinds import ranking
from evalstore.services.kinds.answers import tiers as answer_tiers
from evalstore.services.tasks.judge_made import JudgeBehind
from evalstore.statistics import significance

JUDGED_WARNING = 0.5  # Judged@10 under this: the run's scores rest on unjudged documents
DOWNLOADS = ("csv", "json", "md", "tex")
FINAL = "final"  # a board's sort by a split task's ranking on its private topics


@dataclass(frozen=True)
class BoardRow:
    rank: int
    run: str
    team: str | None  # None: a collection's run no team submitted
    run_type: str | None
    topics: int
    judged_at_10: float | None
    scores: dict[str, tasks.ScoreInterval]
    tier: str  # compact letters: rows sharing a letter are not significantly different
    pooled: bool | None  # contributed to the pool the qrels came from (None: the qrels came from no pool)
    may_open: bool  # the caller may open the run's page
    private: tasks.PrivateRanking | None = None  # a split task's ranking on its private topics
    swap: int | None = None  # public rank minus private rank (> 0: the run rose on the private topics)
    # the models of the judge that made the qrels' labels that the run declares it used (circularity)
    circular: tuple[str, ...] = ()


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
    split: tasks.BoardSplit | None = None  # a public/private split: its private topic count, whether final
    judge: JudgeBehind | None = None  # the judge behind judge-made qrels


@dataclass(frozen=True)
class MeasureChoice:
    """One measure a board may show: the name it is asked by, the name a reader knows it by."""

    value: str
    label: str
    shown: bool


@dataclass(frozen=True)
class MeasureGroup:
    """The measures of one family (``common``: the headline measures, offered first)."""

    family: str
    common: bool
    choices: list[MeasureChoice]

    @property
    def shown(self) -> int:
        return sum(c.shown for c in self.choices)


def measure_groups(available: Sequence[str], shown: Sequence[str]) -> list[MeasureGroup]:
    """The measures a board's picker offers (``available``: those its runs were evaluated with),
    grouped by family: first the common ones (the headline measures), then each family in the
    registry's order, its members by their parameter; a name the registry does not parse under
    "other"."""
    names = list(dict.fromkeys([*shown, *available]))
    common = [m for m in headline_measures("ranking") if m in names]
    families: dict[str, list[tuple[Any, str]]] = {}
    for name in names:
        if name in common:
            continue
        try:
            measure = parse(name)
            key: tuple[Any, ...] = tuple(str(v) for _, v in measure.params)
            families.setdefault(measure.family, []).append((key, name))
        except InvalidParameterError:
            families.setdefault("other", []).append(((name,), name))
    order = {family: i for i, family in enumerate(REGISTRY)}

    def choice(name: str) -> MeasureChoice:
        return MeasureChoice(name, reader_name(name), name in shown)

    groups = [MeasureGroup("common", True, [choice(m) for m in common])] if common else []
    for family in sorted(families, key=lambda f: (order.get(f, len(order)), f)):
        members = sorted(families[family], key=lambda kv: (_numeric(kv[0]), kv[1]))
        groups.append(MeasureGroup(family, False, [choice(name) for _, name in members]))
    return groups


def _numeric(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """A parameter tuple in numeric order where its values are numbers (P@5 before P@10)."""
    out: list[Any] = []
    for value in key:
        try:
            out.append((0, float(value), ""))
        except ValueError:
            out.append((1, 0.0, value))
    return tuple(out)


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
        context,
        task,
        body,
        access.qrels,
        access.qrels_source,
        lambda run, team: access.may_open(team),
        measures,
        sort,
        topics=access.board_topics,
        prepared=True,
    )


def board_page(
    context: AppContext,
    name: str,
    body: tasks.BoardBody,
    qrels: str | None,
    qrels_source: str | None,
    may_open: Callable[[str, str | None], bool],
    measures: Sequence[str] = (),
    sort: str | None = None,
    *,
    topics: ranking.TopicFilter | None = None,
    prepared: bool = False,
) -> BoardPage:
    """A board's body (a task's, or a collection's) as a page: sorted, with tiers and notes;
    ``may_open(run, team)`` tells which runs' pages the reader may open; ``topics``: the topics the
    board ranks on (a split task's public ones before its release). ``qrels`` None: an answer
    task's board, its measures the answer measures. ``prepared``: a task's ranking board, whose
    letters a worker stores; the page reads them and never computes them."""
    engine = context.engine
    default = [str(m) for m in resolve_measures(list(measures))] if measures and qrels is not None else list(measures)
    names: list[str] = body.get("measures", default)
    split = body.get("split")
    private = bool(split and split.get("private_shown"))
    # once a split task is released its private ranking is the final one, and leads the board
    sort = sort or (FINAL if private and split and split.get("final") else names[0] if names else "run")
    if sort not in (*names, "run", "team", *((FINAL,) if private else ())):
        also = ", final (the ranking on the private topics)" if private else ""
        raise InvalidParameterError(
            f"Sort by one of the measures shown ({', '.join(names)}){also}, run or team; not '{sort}'."
        )
    tier_measure = sort if sort in names else (names[0] if names else None)
    raw = body["rows"]
    letters: dict[str, str] = {}
    notes = list(body.get("notes", []))
    nuggets = body.get("nuggets")
    # Tukey's HSD needs two topics (one left it undefined: a 500 on the page)
    enough = len(raw) >= 2 and max((r["topics"] or 0) for r in raw) >= 2
    if tier_measure is not None and enough and (qrels is not None or nuggets is not None):
        letters, behind = _tiers(
            context, qrels, [r["run"] for r in raw], tier_measure, body, topics, nuggets=nuggets, prepared=prepared
        )
        notes += [behind] if behind else []
        notes.append(
            f"Runs sharing a letter are not significantly different on {tier_measure} (Tukey's HSD, "
            "two-way: runs x topics, family-wise alpha 0.05; topics a run lacks count 0"
            + ("; public topics)." if topics else ").")
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
            r.get("private"),
            r.get("swap"),
            tuple(r.get("circular", ())),
        )
        for r in raw
    ]
    if sort in names:
        rows.sort(key=lambda r: (_mean(r, sort) is None, -(_mean(r, sort) or 0.0), r.run))
    elif sort == FINAL:  # runs with nothing on the private topics last, in their public order
        rows.sort(key=lambda r: (r.private is None, r.private["rank"] if r.private is not None else 0, r.rank))
    else:
        rows.sort(key=lambda r: (getattr(r, sort), r.run))
    if any(r.judged_at_10 is not None and r.judged_at_10 < JUDGED_WARNING for r in rows):
        notes.append(
            f"⚠ marks a run with under {JUDGED_WARNING:.0%} of its top 10 judged: its scores count "
            "unjudged documents as not relevant, and may understate it."
        )
    return BoardPage(
        name, True, names, sort, rows, tier_measure, "Tukey HSD" if letters else None, notes, split, body.get("judge")
    )


def _mean(row: BoardRow, measure: str) -> float | None:
    """The row's mean of ``measure``; None where it has none (an answer run without citation-support
    labels has no support_precision)."""
    found = row.scores.get(measure)
    return None if found is None else found["mean"]


def _tiers(
    context: AppContext,
    qrels: str | None,
    runs: list[str],
    measure: str,
    body: tasks.BoardBody,
    topics: ranking.TopicFilter | None,
    *,
    nuggets: str | None = None,
    prepared: bool = False,
) -> tuple[dict[str, str], str | None]:
    """Compact letters by the measure's Tukey HSD, and a note when they are not of the board as it
    is: as a worker stored them for the board's evaluations (``ranking.refresh_tiers``); on a task's
    board (``prepared``) while a running worker has not stored them yet, the newest it stored for
    the board (fewer runs, older evaluations), never computed on the request; on another board, or
    with no worker running to store them, computed here and kept in ``context.tiers`` while the
    board's numbers stay the same (a page never stores). On an answer task's board (``nuggets``:
    its bank) the same test on the per-topic answer measures of the evaluations the board shows,
    computed here and kept."""
    if qrels is None:
        return _answer_tiers(context, runs, measure, body, nuggets), None
    # a ranking board's means are never None (only an answer board's may be)
    means = [
        (r["run"], mean)
        for r in body["rows"]
        if measure in r["scores"] and (mean := r["scores"][measure]["mean"]) is not None
    ]
    scope = "all" if topics is None else topics.scope
    with read_only(context.engine) as session:
        found = session.execute(select(QrelsSet).where(QrelsSet.name == qrels)).scalar_one_or_none()
        if found is None:
            return {}, None
        key = ranking.tiers_key(qrels, found.content_hash, measure, means, scope)
        cached = context.tiers.get((key,))
        if cached is not None:
            return cached, None
        stored = ranking.stored_tiers(session, key)
        if stored is not None:
            return context.tiers.put((key,), stored), None
        if prepared and live_workers(context.engine, within=WORKER_SILENCE):
            return _nearest_tiers(session, ranking.tiers_slot(qrels, found.content_hash, measure, scope), means)
        # no worker is running to store them (runs evaluated by `evaluate --wait` alone): computed
        letters = ranking.compute_tiers(
            session, found, measure, [run for run, _ in means], topics, critical=context.studentized_quantile
        )
    return context.tiers.put((key,), letters), None


# a worker silent this long is not running (its heartbeat comes every few seconds while alive)
WORKER_SILENCE = timedelta(seconds=90)


def _nearest_tiers(session: Session, slot: str, means: list[tuple[str, float]]) -> tuple[dict[str, str], str]:
    """The newest letters a worker stored for a task's board on the measure (of fewer runs or older
    evaluations than it shows now: a worker is adding them), with a note that says so."""
    nearest = ranking.nearest_tiers(session, slot)
    if nearest is None:
        return {}, "The significance letters are being prepared: a worker stores them as evaluations finish."
    shown = {run for run, _ in means}
    letters = {run: letter for run, letter in nearest.items() if run in shown}
    return letters, (
        "The significance letters are those a worker stored for an earlier state of this board "
        f"({len(letters)} of its {len(shown)} runs lettered): newer evaluations are being added, "
        "and their letters follow shortly."
    )


def _answer_tiers(
    context: AppContext, runs: list[str], measure: str, body: tasks.BoardBody, nuggets: str | None
) -> dict[str, str]:
    """An answer board's letters: as a worker stored them for the board as it is
    (:func:`refresh_answer_tiers`), else computed here and kept while the board stays the same (a
    page never stores; a board of runs evaluated while no worker ran)."""
    assert nuggets is not None
    if not _comparable(body, measure):
        return {}
    key = answer_tiers.tiers_key(nuggets, measure, _answer_rows(body, measure))
    cached = context.tiers.get((key,))
    if cached is not None:
        return cached
    with read_only(context.engine) as session:
        stored = answer_tiers.stored_tiers(session, key)
    if stored is not None:
        return context.tiers.put((key,), stored)
    return context.tiers.put((key,), _answer_letters(context.engine, nuggets, runs, measure, body))


def _comparable(body: tasks.BoardBody, measure: str) -> bool:
    """Whether two of an answer board's runs have a mean on ``measure`` (citation support: runs
    without citations have none), so that letters can tell them apart."""
    return sum(r["scores"][measure]["mean"] is not None for r in body["rows"]) >= 2


def _answer_rows(body: tasks.BoardBody, measure: str) -> list[tuple[str, int | None, float | None]]:
    """Each row's run, evaluation and mean on ``measure``: what decides the board's letters."""
    return [(r["run"], r.get("evaluation"), r["scores"][measure]["mean"]) for r in body["rows"]]


def _answer_letters(
    engine: Engine, nuggets: str, runs: list[str], measure: str, body: tasks.BoardBody
) -> dict[str, str]:
    """Compact letters of an answer board's runs by Tukey's HSD on ``measure``, over the per-topic
    scores of the evaluations the board shows."""
    comparison = comparisons.compare_answers(
        engine,
        bank_name=nuggets,
        answer_names=runs,
        measures=[measure],
        evaluation_ids={r["run"]: r["evaluation"] for r in body["rows"]},
        multi="tukey",
        missing="zero",
    )
    means = comparison.matrix.scores[comparison.settings.measures[0]].mean(axis=1)
    order = [int(i) for i in np.argsort(-means, kind="stable")]
    position = {comparison.matrix.runs[i]: rank for rank, i in enumerate(order)}
    different = {(position[p.run], position[p.versus]) for p in comparison.pairs if p.significant}
    letters = significance.compact_letters(len(order), different)
    return {run: letters[position[run]] for run in comparison.matrix.runs}


# Who the worker reads an answer task's board as: its letters are of the board every reader who
# may see the task's scores is shown (all its evaluated runs); never a caller of a route
_WORKER = Principal(user_id=None, name="evalstore worker", role="admin")


def refresh_answer_tiers(engine: Engine, qrels_ids: Collection[int] | None = None) -> int:
    """A use case (a worker's refresher, once its queue is empty): every answer task's letters on
    every answer measure (an answer evaluation computes each of them, and a reader may pick any,
    not only the board's), stored where not stored for the board as it is, so its page reads
    them; how many were stored. ``qrels_ids``: the worker's qrels touched by ranking jobs, which
    no answer task is on (only the sweep, None, looks at them)."""
    if qrels_ids is not None:
        return 0
    with read_only(engine) as session:
        found = session.execute(
            select(Task.id, Task.name).where(Task.nugget_bank_id.is_not(None)).order_by(Task.id)
        ).all()
    made = 0
    for task_id, name in found:
        body = tasks.task_leaderboard(engine, _WORKER, name, list(ANSWER_MEASURES)).body
        nuggets, rows = body.get("nuggets"), body["rows"]
        # as the page: Tukey's HSD needs two runs and two topics
        if nuggets is None or len(rows) < 2 or max((r["topics"] or 0) for r in rows) < 2:
            continue
        letters: dict[str, dict[str, str]] = {}
        for measure in body.get("measures", []):
            if not _comparable(body, measure):
                continue
            key = answer_tiers.tiers_key(nuggets, measure, _answer_rows(body, measure))
            with read_only(engine) as session:
                if answer_tiers.stored_tiers(session, key) is not None:
                    continue
            letters[key] = _answer_letters(engine, nuggets, [r["run"] for r in rows], measure, body)
        if letters:
            try:
                with unit_of_work(engine) as session:
                    made += answer_tiers.store_tiers(session, task_id, letters)
            except IntegrityError:  # another worker stored some of the same letters first: the next sweep
                continue
    return made


def _pool_runs(engine: Engine, qrels_source: str | None) -> set[str] | None:
    """The runs of the pool the qrels were made from (``pool qrels``), or None."""
    if not qrels_source or not qrels_source.startswith("pool:"):
        return None
    name = qrels_source.removeprefix("pool:").split(" (")[0]
    with read_only(engine) as session:
        params = session.scalar(select(Pool.params).where(Pool.name == name))
    return None if params is None else set(params.get("runs", []))


def board_download(page: BoardPage, fmt: str) -> str:
    """The leaderboard as CSV, JSON, a Markdown table or a LaTeX tabular (for a paper): each
    measure's mean with its 95% interval's bounds, and the number of topics the means are over
    (a split task's public topics; its private ranking too, where the reader may see it)."""
    if fmt not in DOWNLOADS:
        raise InvalidParameterError(f"Download as one of {', '.join(DOWNLOADS)}, not '{fmt}'.")
    private = bool(page.split and page.split.get("private_shown"))
    if fmt == "json":
        rows = [
            {
                "rank": i,
                "run": r.run,
                "team": r.team,
                "type": r.run_type,
                "topics": r.topics,
                "scores": r.scores,
                "tier": r.tier,
                "judged_at_10": r.judged_at_10,
                **({"private": r.private, "swap": r.swap} if private else {}),
            }
            for i, r in enumerate(page.rows, start=1)
        ]
        board = {"task": page.task, "measures": page.measures, "sort": page.sort, "split": page.split, "rows": rows}
        # the same JSON, with no "<", ">" or "&" a browser sniffing it as HTML could act on
        text = json.dumps(board, indent=1).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        return text + "\n"
    header = ["rank", "run", "team", "type", *(f"{m}{end}" for m in page.measures for end in _BOUNDS), "topics"]
    header += ["tier", "judged@10"]
    if private:
        header += ["private rank", *(f"private {m}" for m in page.measures), "private topics", "swap"]
    body = []
    for i, r in enumerate(page.rows, start=1):
        row = [str(i), r.run, r.team or "", r.run_type or ""]
        row += [f"{r.scores[m][key]:.4f}" for m in page.measures for key in ("mean", "ci_low", "ci_high")]
        row += [str(r.topics), r.tier, "" if r.judged_at_10 is None else f"{r.judged_at_10:.2f}"]
        if private:
            mine = r.private
            row += ["" if mine is None else str(mine["rank"])]
            row += [
                f"{mine['scores'][m]['mean']:.4f}" if mine is not None and m in mine["scores"] else ""
                for m in page.measures
            ]
            row += ["" if mine is None else str(mine["topics"]), "" if r.swap is None else f"{r.swap:+d}"]
        body.append(row)
    numeric = frozenset(i for i, h in enumerate(header) if h not in ("run", "team", "type", "tier"))
    return inert.table(header, body, fmt, right=numeric)


_BOUNDS = ("", " CI low", " CI high")
