"""The leaderboard of runs evaluated against one qrels: which evaluation of each run counts
(Selection), the means and their bootstrap intervals, and the table the CLI shows.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from sqlalchemy import Engine, Select, select
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import Evaluation, QrelsSet, Run
from evalstore.db.session import read_only
from evalstore.errors import InvalidParameterError, NotFoundError, Remedy
from evalstore.metrics import resolve_measures
from evalstore.services import jobs
from evalstore.services.jobs import summaries
from evalstore.services.jobs.summaries import Counts, Summary
from evalstore.services.kinds.base import (
    Leaderboard,
)
from evalstore.services.kinds.ranking.readback import MAIN_MEASURES, topic_counts
from evalstore.statistics import significance

R = TypeVar("R")  # a run, or its name
E = TypeVar("E")  # an evaluation, or its id
S = TypeVar("S", bound=Select[*tuple[Any, ...]])  # a select of any columns


@dataclass(frozen=True)
class Selection:
    """The options that decide what an evaluation's numbers mean. A leaderboard or a correlation
    compares only evaluations made with the same ones (and on the qrels as they are now)."""

    relevance_level: int = 1
    max_docs: int | None = None
    judged_only: bool = False
    missing_topics: str = "zero"
    known_qrels: str | None = None  # the user-oriented measures: against what the user knew (evaluate --known)

    def __post_init__(self) -> None:
        if self.missing_topics not in ("zero", "skip"):
            raise InvalidParameterError(
                f"Missing topics are scored zero or skipped, not '{self.missing_topics}'.",
                remedy=Remedy(cli="Give --missing zero or --missing skip."),
            )

    def matches(self, options: dict[str, Any]) -> bool:
        return all(options.get(key) == value for key, value in self.as_dict().items())

    def holds(self, measure: str, options: dict[str, Any]) -> bool:
        """Whether an evaluation made with ``options`` gives ``measure`` as this selection means it:
        a user-oriented measure only against the known qrels the selection names."""
        if measure in jobs.USER_ORIENTED_MEASURES:
            return self.known_qrels is not None and options.get("known_qrels") == self.known_qrels
        return True

    def as_dict(self) -> dict[str, Any]:
        chosen: dict[str, Any] = {
            "relevance_level": self.relevance_level,
            "max_docs": self.max_docs,
            "judged_only": self.judged_only,
            "missing_topics": self.missing_topics,
        }
        if self.known_qrels is not None:
            chosen["known_qrels"] = self.known_qrels
        return chosen

    def describe(self) -> str:
        """'-l 1, -M none, -J off, missing topics zero'."""
        return (
            f"-l {self.relevance_level}, -M {self.max_docs or 'none'}, -J {'on' if self.judged_only else 'off'}, "
            f"missing topics {self.missing_topics}"
            + (f", known documents '{self.known_qrels}'" if self.known_qrels else "")
        )

    def flags(self) -> str:
        """The same as `evaluate` options: '-l 2 -M 100' (the defaults left out)."""
        parts = [f"-l {self.relevance_level}"] if self.relevance_level != 1 else []
        parts += [f"-M {self.max_docs}"] if self.max_docs is not None else []
        parts += ["--missing skip"] if self.missing_topics == "skip" else []
        parts += [f"--known {self.known_qrels}"] if self.known_qrels else []
        return " ".join(parts)


def chosen_evaluations(
    session: Session, qrels: QrelsSet, measures: list[str], selection: Selection
) -> dict[int, tuple[Run, dict[str, Evaluation]]]:
    """Per run: for each measure, the newest finished evaluation on the qrels (as they are now)
    made with ``selection``'s options that holds it. A measure is looked up across all of a run's
    evaluations with those options, not only the newest: `evaluate --measures nDCG@5` after an
    all_trec one does not hide the older one's values."""
    rows = session.execute(_newest_first(select(Evaluation, Run), qrels)).all()
    return _choose(((run.id, run, evaluation, evaluation.options) for evaluation, run in rows), measures, selection)


def chosen_evaluation_ids(
    session: Session, qrels: QrelsSet, measures: list[str], selection: Selection
) -> dict[int, tuple[str, dict[str, int]]]:
    """:func:`chosen_evaluations` as run names and evaluation ids, read as columns: a job's paired
    tests, an idle worker's letters and a collection's run list need no more, and making an
    evaluation and a run object of every row cost ~9 ms a call on a task of 200 runs."""
    rows = session.execute(_newest_first(select(Evaluation.id, Evaluation.options, Run.id, Run.name), qrels)).all()
    return _choose(
        ((run_id, name, evaluation_id, options) for evaluation_id, options, run_id, name in rows), measures, selection
    )


def _newest_first(statement: S, qrels: QrelsSet) -> S:
    """The finished evaluations on ``qrels`` as they are now, with their runs, newest first."""
    return (
        statement.join(Run, Run.id == Evaluation.run_id)
        .where(Evaluation.qrels_id == qrels.id, Evaluation.state == "done", Evaluation.qrels_hash == qrels.content_hash)
        .order_by(Evaluation.finished_at.desc(), Evaluation.id.desc())
    )


def _choose(
    rows: Iterable[tuple[int, R, E, dict[str, Any]]], measures: list[str], selection: Selection
) -> dict[int, tuple[R, dict[str, E]]]:
    """The choice of :func:`chosen_evaluations` from (run id, run, evaluation, its options) rows,
    newest first."""
    chosen: dict[int, tuple[R, dict[str, E]]] = {}
    for run_id, run, evaluation, options in rows:
        if not selection.matches(options):
            continue
        holding = chosen.setdefault(run_id, (run, {}))[1]
        stored = set(options["measures"])
        for measure in measures:
            if measure in stored and measure not in holding and selection.holds(measure, options):
                holding[measure] = evaluation
    return chosen


@dataclass(frozen=True)
class TopicFilter:
    """Which topics a mean is over: ``topics`` only, or (``exclude``) every topic but them. A
    task's public/private split ranks on a subset of the stored per-topic values (no re-evaluation)."""

    topics: frozenset[str]
    exclude: bool = False

    def keeps(self, topic: str) -> bool:
        return (topic in self.topics) != self.exclude

    @property
    def scope(self) -> str:
        """The scope the worker stores summaries over these topics in (jobs.summaries)."""
        return summaries.scope_of(self.topics, self.exclude)


@dataclass(frozen=True)
class LeaderboardRow:
    run: str
    system: str | None
    topics: int
    values: dict[str, tuple[float, float, float]]  # measure -> (mean, ci_low, ci_high)
    judged_at_10: float | None
    evaluation_ids: tuple[int, ...] = ()  # the evaluations the values come from
    options: dict[str, Any] = field(default_factory=dict)  # the Selection they were made with

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run": self.run, "system": self.system, "topics": self.topics}
        for measure, (mean, low, high) in self.values.items():
            out[measure] = mean
            out[f"{measure} CI low"], out[f"{measure} CI high"] = low, high
        out["Judged@10"] = self.judged_at_10
        out.update(self.options)
        out["evaluations"] = ",".join(map(str, self.evaluation_ids))
        return out


@dataclass(frozen=True)
class RankedRuns:
    """A ranking leaderboard: the measures shown, the rows best first, the options every row's
    values were computed with, and what could not be shown (a run lacking a measure under them)."""

    names: list[str]
    rows: list[LeaderboardRow]
    selection: Selection
    notes: list[str]


def leaderboard(
    engine: Engine,
    *,
    qrels_name: str,
    measures: list[str] | None = None,
    sort: str | None = None,
    selection: Selection | None = None,
    runs: Collection[str] | None = None,
    topics: TopicFilter | None = None,
    counts: Counts | None = None,
) -> RankedRuns:
    """Every run (of ``runs``: a task's) evaluated on the qrels with ``selection``'s options (default:
    evaluate's defaults): mean and 95% percentile bootstrap interval over topics per measure (10,000 resamples, seed 0:
    the same interval every time), sorted by ``sort``, best first. A run evaluated only with other
    options, or lacking a measure under these, is named in ``notes`` with the command that fills
    the gap; it is never shown beside values that mean something else. With ``topics``, means,
    intervals and topic counts are over the topics it keeps. The means and intervals are those the
    worker stored with each evaluation (jobs.summaries); ``counts``: the bootstrap draws of a
    caller that keeps them (a server's context), for evaluations that have none stored."""
    selection = selection or Selection()
    names = [str(m) for m in resolve_measures(measures or list(MAIN_MEASURES))]
    sort_name = str(resolve_measures([sort])[0]) if sort else names[0]
    if sort_name not in names:
        names.append(sort_name)
    notes: list[str] = []
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, qrels_name)
        chosen = chosen_evaluations(session, qrels, [*names, "Judged@10"], selection)
        if runs is not None:
            chosen = {run_id: item for run_id, item in chosen.items() if item[0].name in runs}
        shown = {run.name for run, holding in chosen.values() if holding}
        other_options = _other_options(session, qrels.id, runs, shown)
        per_run = _summarised(
            session,
            [item for item in sorted(chosen.values(), key=lambda item: item[0].name) if item[1]],
            [*names, "Judged@10"],
            topics,
            counts,
        )
        counted = (
            topic_counts(
                session, [(holding.get(sort_name) or next(iter(holding.values()))).id for _, holding, _ in per_run]
            )
            if topics is None
            else {}
        )
        rows = _rows(per_run, names, sort_name, selection, qrels_name, topics, counted, notes)
    few = [f"{r.run} ({r.topics})" for r in rows if r.topics < significance.FEW_TOPICS]
    if few:
        notes.append(f"fewer than {significance.FEW_TOPICS} topics: the intervals of {', '.join(few)} mean little")
    if other_options:
        notes.append(
            f"left out, evaluated on '{qrels_name}' only with other options or older qrels: "
            f"{', '.join(other_options)} (this leaderboard: {selection.describe()})"
        )
    if not rows:
        raise NotFoundError(
            f"No evaluations on qrels '{qrels_name}' with {selection.describe()} yet.",
            remedy=Remedy(
                cli=f"Run 'evalstore evaluate --qrels {qrels_name} --all-runs"
                f"{' ' + selection.flags() if selection.flags() else ''} --wait'."
            ),
        )
    missing = [n for n in names if not any(n in r.values for r in rows)]
    if missing:
        raise NotFoundError(
            f"Measure '{missing[0]}' was not computed for these runs.",
            remedy=Remedy(
                cli=f"Run 'evalstore evaluate --qrels {qrels_name} --all-runs --measures {missing[0]}"
                f"{' ' + selection.flags() if selection.flags() else ''} --wait'."
            ),
        )
    # best first: descending, or ascending for measures where lower is better (Unj, RBP_resid);
    # a run lacking the sort measure goes last
    direction = -1.0 if resolve_measures([sort_name])[0].spec.higher_is_better else 1.0
    rows.sort(key=lambda r: direction * r.values.get(sort_name, (direction * math.inf,))[0])
    return RankedRuns(names, rows, selection, notes)


def _other_options(session: Session, qrels_id: int, runs: Collection[str] | None, shown: set[str]) -> list[str]:
    """The runs evaluated on the qrels (of ``runs``) but not ``shown``: only with other options."""
    return sorted(
        {
            run.name
            for _, run in session.execute(
                select(Evaluation.id, Run)
                .join(Run, Run.id == Evaluation.run_id)
                .where(Evaluation.qrels_id == qrels_id, Evaluation.state == "done")
            )
            if runs is None or run.name in runs
        }
        - shown
    )


def _rows(
    per_run: list[tuple[Run, dict[str, Evaluation], dict[str, Summary]]],
    names: list[str],
    sort_name: str,
    selection: Selection,
    qrels_name: str,
    topics: TopicFilter | None,
    counted: dict[int, int],
    notes: list[str],
) -> list[LeaderboardRow]:
    """A row a run, in ``per_run``'s order; a measure a run lacks is named in ``notes`` instead."""
    rows: list[LeaderboardRow] = []
    for run, holding, found in per_run:
        values: dict[str, tuple[float, float, float]] = {}
        for name in names:
            summary = found.get(name)
            if summary is None:
                notes.append(
                    f"run '{run.name}' has no {name} evaluated with {selection.describe()}; "
                    f"run 'evalstore evaluate --qrels {qrels_name} --run {run.name} --measures {name}"
                    f"{' ' + selection.flags() if selection.flags() else ''} --wait'"
                )
                continue
            values[name] = (summary.mean, summary.ci_low, summary.ci_high)
        judged = found.get("Judged@10")
        shown = holding.get(sort_name) or next(iter(holding.values()))
        rows.append(
            LeaderboardRow(
                run.name,
                run.system,
                counted.get(shown.id, 0) if topics is None else _subset_count(found, sort_name),
                values,
                judged.mean if judged is not None else None,
                tuple(sorted({e.id for e in holding.values()})),
                selection.as_dict(),
            )
        )
    return rows


def _summarised(
    session: Session,
    chosen: list[tuple[Run, dict[str, Evaluation]]],
    measures: list[str],
    topics: TopicFilter | None,
    counts: Counts | None,
) -> list[tuple[Run, dict[str, Evaluation], dict[str, Summary]]]:
    """Each run's summary of each measure it holds (mean and interval over the topics ``topics``
    keeps): as the worker stored them, and for a run whose evaluation has none (evaluated before
    summaries were stored, over more topics than the worker summarises, or a split made after
    it) from its per-topic values, resampled now; a measure without a value is left out."""
    scope = summaries.ALL_TOPICS if topics is None else topics.scope
    wanted = {evaluation.id for _, holding in chosen for m, evaluation in holding.items() if m in measures}
    stored = summaries.read_summaries(session, wanted, measures, scope)
    out: list[tuple[Run, dict[str, Evaluation], dict[str, Summary]]] = []
    missing: dict[int, dict[str, np.ndarray]] = {}
    for index, (run, holding) in enumerate(chosen):
        found = {m: stored[(e.id, m)] for m, e in holding.items() if (e.id, m) in stored}
        if any(m in measures and m not in found for m in holding):
            missing[index] = _samples(session, {m: e for m, e in holding.items() if m in measures}, topics)
        out.append((run, holding, found))
    if missing:
        intervals = _intervals(
            {(index, m): sample for index, samples in missing.items() for m, sample in samples.items()},
            counts or summaries.fresh_counts,
        )
        for index, samples in missing.items():
            found = out[index][2]
            for m, sample in samples.items():
                low, high = intervals.get((index, m), (float("nan"), float("nan")))
                found[m] = Summary(
                    scope, m, len(sample), float(sample.mean()) if len(sample) else float("nan"), low, high
                )
    for _, _, found in out:  # a scope without the measure's values: as if it had none
        for m in [m for m, s in found.items() if s.topics == 0]:
            del found[m]
    return out


def _intervals(
    samples: dict[tuple[int, str], np.ndarray], counts: Counts
) -> dict[tuple[int, str], tuple[float, float]]:
    """Each (run, measure) sample's 95% percentile bootstrap interval: samples of one length are
    resampled together (one weight matrix and one matrix product for all of them)."""
    by_length: dict[int, list[tuple[int, str]]] = {}
    for key, sample in samples.items():
        if len(sample):
            by_length.setdefault(len(sample), []).append(key)
    out: dict[tuple[int, str], tuple[float, float]] = {}
    for length, keys in by_length.items():
        low, high = significance.bootstrap_mean_intervals(
            np.vstack([samples[key] for key in keys]), 0.95, counts=counts(length) if length >= 2 else None
        )
        out.update({key: (float(lo), float(hi)) for key, lo, hi in zip(keys, low, high, strict=True)})
    return out


def _subset_count(found: dict[str, Summary], sort_name: str) -> int:
    summary = found.get(sort_name) or next(iter(found.values()), None)
    return 0 if summary is None else summary.topics


def _samples(session: Session, holding: dict[str, Evaluation], topics: TopicFilter | None) -> dict[str, np.ndarray]:
    """Per-topic values of each measure, from the evaluation chosen for it (one read each), of the
    topics ``topics`` keeps."""
    by_evaluation: dict[int, list[str]] = {}
    for measure, evaluation in holding.items():
        by_evaluation.setdefault(evaluation.id, []).append(measure)
    samples: dict[str, np.ndarray] = {}
    for evaluation_id, measures in by_evaluation.items():
        frame = repo.result_table(session, evaluation_id, measures).to_pandas()
        if topics is not None:
            frame = frame[[topics.keeps(str(t)) for t in frame["query_id"]]]
        samples.update(frame.groupby("measure")["value"].apply(lambda v: v.to_numpy()).to_dict())
    return samples


def leaderboard_view(qrels_name: str, board: RankedRuns, sort: str | None) -> Leaderboard:
    names, rows = board.names, board.rows
    interval = [f"{n} CI {end}" for n in names for end in ("low", "high")]
    # subtopic and preference judgments have no Judged@10: no empty column for them
    coverage = ["Judged@10"] if any(row.judged_at_10 is not None for row in rows) else []
    cells = []
    for rank, row in enumerate(rows, start=1):
        cell = {
            "#": str(rank),
            "run": row.run,
            "topics": str(row.topics),
            "Judged@10": "" if row.judged_at_10 is None else f"{row.judged_at_10:.2f}",
        }
        for name in names:
            mean, low, high = row.values.get(name, (float("nan"),) * 3)
            cell[f"{name} [95% CI]"] = f"{mean:.4f} [{low:.4f}, {high:.4f}]"
        cells.append(cell)
    poorly = [r.run for r in rows if r.judged_at_10 is not None and r.judged_at_10 < 0.5]
    warnings = [
        *board.notes,
        *(
            [f"less than half of the top 10 is judged for: {', '.join(poorly)}; their scores are unreliable"]
            if poorly
            else []
        ),
    ]
    return Leaderboard(
        title=f"leaderboard: {qrels_name} (sorted by {sort or names[0]}; {board.selection.describe()}; "
        "95% percentile bootstrap intervals over topics)",
        record_columns=[
            "run",
            "system",
            "topics",
            *names,
            *interval,
            "Judged@10",
            *board.selection.as_dict(),
            "evaluations",
        ],
        records=[r.as_dict() for r in rows],
        cell_columns=["#", "run", "topics", *[f"{n} [95% CI]" for n in names], *coverage],
        cells=cells,
        warnings=warnings,
    )
