from __future__ import annotations

import logging
import math
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from evalstore import plots
from evalstore._version import __version__
from evalstore.db import repositories as repo
from evalstore.db.models import AggregateResult, Evaluation, QrelsSet, Run
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError, InvalidParameterError, NotFoundError
from evalstore.io.formats import Preferences
from evalstore.metrics import Measure, compute, mlflow_key, parse_measure, resolve_measures, summarise
from evalstore.metrics._prepare import PrepareOptions, Ranking, attach_known, prepare_ranked
from evalstore.metrics.diversity import diversity_values
from evalstore.metrics.preferences import evaluate_preferences
from evalstore.services import jobs
from evalstore.services.context import AppContext, Lru, context_for
from evalstore.services.jobs import ClaimedJob
from evalstore.services.kinds import out_of_core
from evalstore.services.kinds.base import (
    ComputedJob,
    EvaluationSummary,
    JobTimings,
    Leaderboard,
    MlflowRun,
    StoredEvaluation,
    per_query_values,
    store_computed,
)
from evalstore.statistics import significance
from evalstore.trec_eval import render_lines, stored_rows

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("evalstore.worker")


def run_job(engine: Engine, job: ClaimedJob, *, context: AppContext | None = None) -> EvaluationSummary:
    """Compute a claimed job and store its results (raises jobs.JobLost if it was taken away)."""
    return store_computed(engine, job, compute_job(engine, job, context=context))


def compute_job(engine: Engine, job: ClaimedJob, *, context: AppContext | None = None) -> ComputedJob:
    """Read a claimed job's run and qrels and compute its results, storing nothing (raises
    jobs.JobLost if either was deleted). ``context`` keeps the qrels read for the next job."""
    qrels_cache = context_for(engine, context).qrels
    timings = JobTimings()
    started = time.perf_counter()
    with read_only(engine) as session:
        run = session.get(Run, job.run_id)
        qrels = session.get(QrelsSet, job.qrels_id)
        if run is None or qrels is None:  # deleted or replaced since: the job went with them
            raise jobs.JobLost(f"the run or qrels of job {job.evaluation_id} was deleted")
        qrels_table = _qrels_cached(session, qrels, qrels_cache)
        options = job.options
        known: tuple[pa.Table, pa.Table] | None = None
        if qrels.kind == "relevance" and not job.backend.local:  # DuckDB or Spark joins the run's rows
            known_table = (repo.qrels_table(session, repo.get_qrels(session, options["known_qrels"]))
                           if options.get("known_qrels") else None)
            retrieved, found = out_of_core.judged_ranks(
                session, run, [qrels_table] if known_table is None else [qrels_table, known_table], job.backend)
            judged = found[0]
            known = None if known_table is None else (known_table, found[1])
        elif qrels.kind == "relevance":
            retrieved, judged = repo.judged_ranks(session, run, qrels)
            if options.get("known_qrels"):  # the user-oriented measures: what the user knew, ranked
                known_qrels = repo.get_qrels(session, options["known_qrels"])
                known = (_qrels_cached(session, known_qrels, qrels_cache),
                         repo.judged_ranks(session, run, known_qrels)[1])
        else:  # ndeval and trec_eval's preference measures rank the whole run themselves
            run_table = repo.run_table(session, run, for_evaluation=True)
    timings.load = time.perf_counter() - started
    measures = [parse_measure(name) for name in options["measures"]]
    started = time.perf_counter()
    rk: Ranking | None = None
    if qrels.kind == "relevance":
        prepare_options = PrepareOptions(max_docs=options["max_docs"], judged_only=options["judged_only"],
                                         complete=options["missing_topics"] == "zero")
        rk = prepare_ranked(qrels_table, retrieved, judged, prepare_options, runid=run.tag)
        if known is not None:
            attach_known(rk, prepare_ranked(known[0], retrieved, known[1], prepare_options))
        values = compute(rk, measures, relevance_level=options["relevance_level"])
        topics, missing = rk.topics, tuple(rk.missing_topics)
    else:
        topics, values, missing = _judgment_kind_values(qrels.kind, qrels_table, run_table, measures, options)
    if not topics:
        raise EvaluationError(f"Run '{run.name}' and qrels '{qrels.name}' share no topic; check the topic ids.")
    per_query, aggregates = _result_tables(topics, values, rk)
    frame = _frame(topics, values)
    system, metadata = run.system, dict(run.metadata_ or {})

    def stored_as(header: dict[str, Any]) -> StoredResults:
        return StoredResults(job.evaluation_id, run.name, run.tag, qrels.name, dict(options), *frame,
                             {a["measure"]: a["value"] for a in aggregates},
                             {**header, "system": system, "run_metadata": metadata})

    timings.compute = time.perf_counter() - started
    return ComputedJob(job.evaluation_id, run.name, qrels.name, len(topics), missing, timings, per_query, aggregates,
                       None, stored_as)


def _judgment_kind_values(kind: str, judgments: pa.Table, run: pa.Table, measures: list[Measure],
                          options: dict[str, Any]) -> tuple[list[str], dict[Measure, np.ndarray], tuple[str, ...]]:
    """Per-topic values from subtopic qrels (ndeval's measures) or preference judgments (trec_eval's
    prefs_*): the judged topics the run has, and with missing topics 'zero' (trec_eval and ndeval
    -c) also the judged topics it lacks, scored as an empty ranking scores."""
    complete = options["missing_topics"] == "zero"
    if kind == "subtopics":
        topics, values = diversity_values(judgments, run, measures, max_docs=options["max_docs"])
        scored = set(topics)
        missing = tuple(t for t in sorted(set(judgments["topic"].to_pylist()), key=int) if t not in scored)
        if complete and missing:  # a topic with no ranking scores 0 on every ndeval measure
            topics = topics + list(missing)
            values = {m: np.concatenate([v, np.zeros(len(missing))]) for m, v in values.items()}
        return topics, values, missing
    topic, group, subgroup, doc = (np.array(judgments[c].to_pylist(), dtype=object)
                                   for c in ("topic", "iteration", "subgroup", "doc"))
    prefs = Preferences(topic, group, subgroup, doc, judgments["level"].to_numpy(zero_copy_only=False))
    result = evaluate_preferences(prefs, run, max_docs=options["max_docs"], complete=complete)
    return result.topics, {m: result.values[m.family] for m in measures}, tuple(result.missing)


def _qrels_cached(session: Session, qrels: QrelsSet, cache: Lru[tuple[int, str], Any]) -> pa.Table:
    """A worker evaluates run after run against the same qrels: its context keeps the last ones
    read. Keyed by id and content hash, so replaced qrels are read afresh."""
    key = (qrels.id, qrels.content_hash)
    table = cache.get(key)
    return table if table is not None else cache.put(key, repo.qrels_table(session, qrels))


def _result_tables(topics: list[str], values: dict[Measure, np.ndarray], rk: Ranking | None
                   ) -> tuple[repo.PerQueryValues, list[dict[str, Any]]]:
    """The per-query values (:func:`per_query_values`) and the aggregates; ``rk`` is the ranking of
    an evaluation against relevance qrels (some measures summarise from it under -c)."""
    per_query = per_query_values(
        topics, {str(m): values[m] for m in values if m.spec.value_type != "str"},
        {str(m): values[m] for m in values if m.spec.value_type == "str"})
    aggregates = []
    for measure, per_topic in values.items():
        summary = summarise(measure, per_topic, rk)
        if summary is not None:
            aggregates.append({"measure": str(measure), "value": summary, "text_value": None,
                               "query_count": len(topics)})
    return per_query, aggregates


def _frame(topics: list[str], values: dict[Measure, np.ndarray]) -> tuple[list[str], list[str], pd.DataFrame]:
    """(topics, measures, frame) as :func:`results` reads them back: topics sorted as text, one
    float column per measure (text for relstring-like ones), in the measures' order."""
    import pandas as pd  # here, not at the top: `evalstore` commands that never build a frame skip its import

    frame = pd.DataFrame(
        {str(m): [str(v) for v in column] if m.spec.value_type == "str" else np.asarray(column, dtype=np.float64)
         for m, column in values.items()},
        index=pd.Index(topics, name="query_id")).sort_index()
    return frame.index.tolist(), list(frame.columns), frame


def _topic_count(session: Session, evaluation_id: int) -> int:
    count = session.scalar(select(AggregateResult.query_count).where(
        AggregateResult.evaluation_id == evaluation_id).limit(1))
    return int(count or 0)


@dataclass(frozen=True)
class StoredResults:
    """One stored evaluation read back: per-topic values and aggregates by canonical measure name."""

    evaluation_id: int
    run: str
    run_tag: str | None
    qrels: str
    options: dict[str, Any]
    topics: list[str]
    measures: list[str]
    frame: pd.DataFrame  # one row per topic (sorted), one column per measure
    aggregates: dict[str, float]
    header: dict[str, Any]  # hashes, versions and the run's metadata
    kind: str = "ranking"

    def as_trec_eval(self, *, per_query: bool, with_counts: bool = True) -> str:
        """What ``evalstore trec-eval`` prints for the same files and options (``-q`` with
        ``per_query``); ``with_counts`` adds its runid and num_q lines."""
        measures = {parse_measure(m): m for m in self.measures}
        rows = stored_rows(list(measures))
        if not with_counts:
            rows = [row for row in rows if row[2] is not None]
        return render_lines(rows, self.topics, lambda m: self.frame[measures[m]].tolist(),
                            lambda m: self.aggregates[measures[m]], self.run_tag, per_query=per_query, summary=True)


def results(engine: Engine, *, qrels_name: str, run_name: str, measures: list[str] | None = None,
            evaluation_id: int | None = None) -> StoredResults:
    """The newest finished evaluation of the run on the qrels (or ``evaluation_id``), read back."""
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, qrels_name)
        run = repo.get_run(session, run_name)
        statement = select(Evaluation).where(Evaluation.run_id == run.id, Evaluation.qrels_id == qrels.id,
                                             Evaluation.state == "done")
        if evaluation_id is not None:
            statement = statement.where(Evaluation.id == evaluation_id)
        newest_first = list(session.scalars(statement.order_by(Evaluation.finished_at.desc(), Evaluation.id.desc())))
        evaluation = newest_first[0] if newest_first else None
        if measures and evaluation_id is None:  # the newest that holds them, not just the newest
            wanted_names = {str(m) for m in resolve_measures(measures)}
            evaluation = next((e for e in newest_first if wanted_names <= set(e.options["measures"])), evaluation)
        if evaluation is None:
            raise NotFoundError(f"No finished evaluation of run '{run_name}' on qrels '{qrels_name}'. "
                                f"Run 'evalstore evaluate --qrels {qrels_name} --run {run_name} --wait'.")
        stored = list(evaluation.options["measures"])
        wanted = stored
        if measures:
            wanted = [str(m) for m in resolve_measures(measures)]
            absent = [m for m in wanted if m not in stored]
            if absent:
                raise NotFoundError(
                    f"Measure '{absent[0]}' is not in evaluation {evaluation.id}. Evaluate it with "
                    f"'evalstore evaluate --qrels {qrels_name} --run {run_name} --measures {absent[0]} --wait'.")
        table = repo.result_table(session, evaluation.id, wanted).to_pandas()
        numbers = table.pivot(index="query_id", columns="measure", values="value")
        texts = table[table["text_value"].notna()]
        frame = numbers.astype(object) if len(texts) else numbers
        if len(texts):
            for measure, column in texts.pivot(index="query_id", columns="measure", values="text_value").items():
                frame[measure] = column
        frame = frame.reindex(columns=wanted)
        frame.columns.name = None
        aggregates = {a.measure: a.value for a in repo.aggregate_values(session, evaluation.id)
                      if a.measure in wanted and a.value is not None}
        header = {"run_hash": evaluation.run_hash, "qrels_hash": evaluation.qrels_hash,
                  "options_hash": evaluation.options_hash, "evalstore_version": evaluation.evalstore_version,
                  "results_version": evaluation.results_version, "system": run.system,
                  "run_metadata": dict(run.metadata_ or {})}
        return StoredResults(evaluation.id, run.name, run.tag, qrels.name, dict(evaluation.options),
                             [str(t) for t in frame.index], wanted, frame, aggregates, header)


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
            raise InvalidParameterError(f"--missing must be zero or skip, not '{self.missing_topics}'.")

    def matches(self, options: dict[str, Any]) -> bool:
        return all(options.get(key) == value for key, value in self.as_dict().items())

    def holds(self, measure: str, options: dict[str, Any]) -> bool:
        """Whether an evaluation made with ``options`` gives ``measure`` as this selection means it:
        a user-oriented measure only against the known qrels the selection names."""
        if measure in jobs.USER_ORIENTED_MEASURES:
            return self.known_qrels is not None and options.get("known_qrels") == self.known_qrels
        return True

    def as_dict(self) -> dict[str, Any]:
        chosen: dict[str, Any] = {"relevance_level": self.relevance_level, "max_docs": self.max_docs,
                                  "judged_only": self.judged_only, "missing_topics": self.missing_topics}
        if self.known_qrels is not None:
            chosen["known_qrels"] = self.known_qrels
        return chosen

    def describe(self) -> str:
        """'-l 1, -M none, -J off, missing topics zero'."""
        return (f"-l {self.relevance_level}, -M {self.max_docs or 'none'}, -J {'on' if self.judged_only else 'off'}, "
                f"missing topics {self.missing_topics}"
                + (f", known documents '{self.known_qrels}'" if self.known_qrels else ""))

    def flags(self) -> str:
        """The same as `evaluate` options: '-l 2 -M 100' (the defaults left out)."""
        parts = [f"-l {self.relevance_level}"] if self.relevance_level != 1 else []
        parts += [f"-M {self.max_docs}"] if self.max_docs is not None else []
        parts += ["--missing skip"] if self.missing_topics == "skip" else []
        parts += [f"--known {self.known_qrels}"] if self.known_qrels else []
        return " ".join(parts)


def chosen_evaluations(session: Session, qrels: QrelsSet, measures: list[str], selection: Selection
                       ) -> dict[int, tuple[Run, dict[str, Evaluation]]]:
    """Per run: for each measure, the newest finished evaluation on the qrels (as they are now)
    made with ``selection``'s options that holds it. A measure is looked up across all of a run's
    evaluations with those options, not only the newest: `evaluate --measures nDCG@5` after an
    all_trec one does not hide the older one's values."""
    rows = session.execute(
        select(Evaluation, Run).join(Run, Run.id == Evaluation.run_id)
        .where(Evaluation.qrels_id == qrels.id, Evaluation.state == "done",
               Evaluation.qrels_hash == qrels.content_hash)
        .order_by(Evaluation.finished_at.desc(), Evaluation.id.desc())).all()
    chosen: dict[int, tuple[Run, dict[str, Evaluation]]] = {}
    for evaluation, run in rows:
        if not selection.matches(evaluation.options):
            continue
        holding = chosen.setdefault(run.id, (run, {}))[1]
        stored = set(evaluation.options["measures"])
        for measure in measures:
            if measure in stored and measure not in holding and selection.holds(measure, evaluation.options):
                holding[measure] = evaluation
    return chosen


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


def leaderboard(engine: Engine, *, qrels_name: str, measures: list[str] | None = None, sort: str | None = None,
                selection: Selection | None = None, runs: Collection[str] | None = None) -> RankedRuns:
    """Every run (of ``runs``: a task's) evaluated on the qrels with ``selection``'s options (default:
    evaluate's defaults): mean and 95% percentile bootstrap interval over topics per measure (10,000 resamples, seed 0:
    the same interval every time), sorted by ``sort``, best first. A run evaluated only with other
    options, or lacking a measure under these, is named in ``notes`` with the command that fills
    the gap; it is never shown beside values that mean something else."""
    selection = selection or Selection()
    names = [str(m) for m in resolve_measures(measures or ["AP", "nDCG@10", "P@10", "RR"])]
    sort_name = str(resolve_measures([sort])[0]) if sort else names[0]
    if sort_name not in names:
        names.append(sort_name)
    notes: list[str] = []
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, qrels_name)
        chosen = chosen_evaluations(session, qrels, [*names, "Judged@10"], selection)
        if runs is not None:
            chosen = {run_id: item for run_id, item in chosen.items() if item[0].name in runs}
        other_options = sorted({run.name for _, run in session.execute(
            select(Evaluation.id, Run).join(Run, Run.id == Evaluation.run_id)
            .where(Evaluation.qrels_id == qrels.id, Evaluation.state == "done"))
            if runs is None or run.name in runs} - {run.name for run, holding in chosen.values() if holding})
        per_run = [(run, holding, _samples(session, holding))
                   for run, holding in sorted(chosen.values(), key=lambda item: item[0].name) if holding]
        intervals = _intervals({(run.name, name): sample for run, _, samples in per_run
                                for name, sample in samples.items() if name in names and len(sample)})
        rows: list[LeaderboardRow] = []
        for run, holding, samples in per_run:
            values: dict[str, tuple[float, float, float]] = {}
            for name in names:
                sample = samples.get(name)
                if sample is None or len(sample) == 0:
                    notes.append(f"run '{run.name}' has no {name} evaluated with {selection.describe()}; "
                                 f"run 'evalstore evaluate --qrels {qrels_name} --run {run.name} --measures {name}"
                                 f"{' ' + selection.flags() if selection.flags() else ''} --wait'")
                    continue
                values[name] = (float(sample.mean()), *intervals[(run.name, name)])
            judged = samples.get("Judged@10")
            shown = holding.get(sort_name) or next(iter(holding.values()))
            rows.append(LeaderboardRow(
                run.name, run.system, _topic_count(session, shown.id), values,
                float(np.mean(judged)) if judged is not None and len(judged) else None,
                tuple(sorted({e.id for e in holding.values()})), selection.as_dict()))
    few = [f"{r.run} ({r.topics})" for r in rows if r.topics < significance.FEW_TOPICS]
    if few:
        notes.append(f"fewer than {significance.FEW_TOPICS} topics: the intervals of {', '.join(few)} mean little")
    if other_options:
        notes.append(f"left out, evaluated on '{qrels_name}' only with other options or older qrels: "
                     f"{', '.join(other_options)} (this leaderboard: {selection.describe()})")
    if not rows:
        raise NotFoundError(
            f"No evaluations on qrels '{qrels_name}' with {selection.describe()} yet. "
            f"Run 'evalstore evaluate --qrels {qrels_name} --all-runs"
            f"{' ' + selection.flags() if selection.flags() else ''} --wait'.")
    missing = [n for n in names if not any(n in r.values for r in rows)]
    if missing:
        raise NotFoundError(
            f"Measure '{missing[0]}' was not computed for these runs. "
            f"Run 'evalstore evaluate --qrels {qrels_name} --all-runs --measures {missing[0]}"
            f"{' ' + selection.flags() if selection.flags() else ''} --wait'."
        )
    # best first: descending, or ascending for measures where lower is better (Unj, RBP_resid);
    # a run lacking the sort measure goes last
    direction = -1.0 if resolve_measures([sort_name])[0].spec.higher_is_better else 1.0
    rows.sort(key=lambda r: direction * r.values.get(sort_name, (direction * math.inf,))[0])
    return RankedRuns(names, rows, selection, notes)


def _intervals(samples: dict[tuple[str, str], np.ndarray]) -> dict[tuple[str, str], tuple[float, float]]:
    """Each (run, measure) sample's 95% percentile bootstrap interval: samples of one length are
    resampled together (one weight matrix and one matrix product for all of them)."""
    by_length: dict[int, list[tuple[str, str]]] = {}
    for key, sample in samples.items():
        by_length.setdefault(len(sample), []).append(key)
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for keys in by_length.values():
        low, high = significance.bootstrap_mean_intervals(np.vstack([samples[key] for key in keys]), 0.95)
        out.update({key: (float(lo), float(hi)) for key, lo, hi in zip(keys, low, high, strict=True)})
    return out


def _samples(session: Session, holding: dict[str, Evaluation]) -> dict[str, np.ndarray]:
    """Per-topic values of each measure, from the evaluation chosen for it (one read each)."""
    by_evaluation: dict[int, list[str]] = {}
    for measure, evaluation in holding.items():
        by_evaluation.setdefault(evaluation.id, []).append(measure)
    samples: dict[str, np.ndarray] = {}
    for evaluation_id, measures in by_evaluation.items():
        table = repo.result_table(session, evaluation_id, measures)
        samples.update(table.to_pandas().groupby("measure")["value"].apply(lambda v: v.to_numpy()).to_dict())
    return samples


def _leaderboard_view(qrels_name: str, board: RankedRuns, sort: str | None) -> Leaderboard:
    names, rows = board.names, board.rows
    interval = [f"{n} CI {end}" for n in names for end in ("low", "high")]
    # subtopic and preference judgments have no Judged@10: no empty column for them
    coverage = ["Judged@10"] if any(row.judged_at_10 is not None for row in rows) else []
    cells = []
    for rank, row in enumerate(rows, start=1):
        cell = {"#": str(rank), "run": row.run, "topics": str(row.topics),
                "Judged@10": "" if row.judged_at_10 is None else f"{row.judged_at_10:.2f}"}
        for name in names:
            mean, low, high = row.values.get(name, (float("nan"),) * 3)
            cell[f"{name} [95% CI]"] = f"{mean:.4f} [{low:.4f}, {high:.4f}]"
        cells.append(cell)
    poorly = [r.run for r in rows if r.judged_at_10 is not None and r.judged_at_10 < 0.5]
    warnings = [*board.notes, *([f"less than half of the top 10 is judged for: {', '.join(poorly)}; their scores "
                                 "are unreliable"] if poorly else [])]
    return Leaderboard(
        title=f"leaderboard: {qrels_name} (sorted by {sort or names[0]}; {board.selection.describe()}; "
              "95% percentile bootstrap intervals over topics)",
        record_columns=["run", "system", "topics", *names, *interval, "Judged@10", *board.selection.as_dict(),
                        "evaluations"],
        records=[r.as_dict() for r in rows],
        cell_columns=["#", "run", "topics", *[f"{n} [95% CI]" for n in names], *coverage],
        cells=cells, warnings=warnings)


def main_scores(engine: Engine, evaluation_ids: list[int]) -> dict[int, dict[str, float]]:
    """The main measures' aggregates (AP, nDCG@10, P@10, RR: those computed) of each evaluation,
    for `evaluate --wait` to print."""
    if not evaluation_ids:
        return {}
    with read_only(engine) as session:
        rows = session.execute(select(AggregateResult.evaluation_id, AggregateResult.measure, AggregateResult.value)
                               .where(AggregateResult.evaluation_id.in_(evaluation_ids),
                                      AggregateResult.measure.in_(MAIN_MEASURES))).all()
    scores: dict[int, dict[str, float]] = {}
    for evaluation_id, measure, value in rows:
        if value is not None:
            scores.setdefault(evaluation_id, {})[measure] = value
    return scores


def read_back(engine: Engine, evaluation_id: int) -> StoredResults:
    """A finished evaluation read back whole, by id."""
    with read_only(engine) as session:
        names = session.execute(select(Run.name, QrelsSet.name).select_from(Evaluation)
                                .join(Run, Evaluation.run_id == Run.id)
                                .join(QrelsSet, QrelsSet.id == Evaluation.qrels_id)
                                .where(Evaluation.id == evaluation_id)).one()
    return results(engine, qrels_name=names[1], run_name=names[0], evaluation_id=evaluation_id)


# --- MLflow --------------------------------------------------------------------------------------

MAIN_MEASURES = ("AP", "nDCG@10", "P@10", "RR")


def mlflow_run(stored: StoredResults) -> MlflowRun:
    """Params (the run's metadata and the options), every aggregate as a metric, the per-topic
    table (Parquet and an MLflow table), trec_eval's text, and two plots."""
    meta = stored.header
    tags = {
        "evalstore.evaluation_id": str(stored.evaluation_id), "evalstore.results_version": str(meta["results_version"]),
        "evalstore.kind": stored.kind, "evalstore.run": stored.run, "evalstore.qrels": stored.qrels,
        "evalstore.run_hash": meta["run_hash"], "evalstore.qrels_hash": meta["qrels_hash"],
        "evalstore.options_hash": meta["options_hash"], "evalstore.version": meta["evalstore_version"] or __version__,
    }
    params: dict[str, Any] = {f"run.{k}": v for k, v in meta["run_metadata"].items()}
    params.update({"run.system": meta["system"] or "", "run.tag": stored.run_tag or ""})
    options = stored.options
    params.update({k: options[k] for k in ("relevance_level", "max_docs", "judged_only", "missing_topics", "tie_rule")})
    params["measures"] = len(options["measures"])
    params["topics"] = len(stored.topics)
    frame = stored.frame.rename_axis("query_id")
    return MlflowRun(
        experiment=stored.qrels, name=stored.run, tags=tags, params=params, metrics=dict(stored.aggregates),
        parquet={"per_query.parquet": frame}, tables={"per_query_table.json": frame.reset_index()},
        texts={"trec_eval.txt": stored.as_trec_eval(per_query=True)},
        dicts={"evaluation.json": {"evaluation_id": stored.evaluation_id, "run": stored.run, "qrels": stored.qrels,
                                   **stored.options, **{k: v for k, v in meta.items() if k != "run_metadata"}}},
        figures=lambda: _figures(stored))


def _figures(stored: StoredResults) -> Iterator[tuple[str, Any]]:
    main = next((m for m in MAIN_MEASURES if m in stored.measures), None)
    if main is not None:
        values = sorted(zip(stored.frame[main].astype(float).tolist(), stored.topics, strict=True), reverse=True)
        yield f"per_topic_{mlflow_key(main)}.png", plots.per_topic(
            values, stored.aggregates.get(main), ylabel=main, title=f"{main} per topic: {stored.run} on {stored.qrels}")
    curve = sorted((parse_measure(m).param("recall"), value) for m, value in stored.aggregates.items()
                   if parse_measure(m).family == "IPrec")
    if len(curve) >= 2:
        figure, axes = plots.curve_axes("recall", "interpolated precision",
                                        f"Interpolated precision-recall: {stored.run}")
        axes.plot([r for r, _ in curve], [p for _, p in curve], marker="o", color=plots.BLUE)
        yield "precision_recall.png", figure


class RankingKind:
    """Runs against qrels: see the module's functions."""

    name = "ranking"

    def compute(self, engine: Engine, job: ClaimedJob, *, context: AppContext | None = None) -> ComputedJob:
        return compute_job(engine, job, context=context)

    def read_back(self, engine: Engine, evaluation_id: int) -> StoredEvaluation:
        return read_back(engine, evaluation_id)

    def mlflow_run(self, stored: StoredEvaluation) -> MlflowRun:
        assert isinstance(stored, StoredResults), f"a ranking kind was handed a {stored.kind} evaluation"
        return mlflow_run(stored)

    def leaderboard(self, engine: Engine, *, judgments: str, measures: list[str], sort: str | None,
                    options: dict[str, Any] | None = None) -> Leaderboard:
        board = leaderboard(engine, qrels_name=judgments, measures=measures or None, sort=sort,
                            selection=Selection(**options) if options else None)
        return _leaderboard_view(judgments, board, sort)


RANKING = RankingKind()
