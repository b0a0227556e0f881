"""Evaluating stored runs against stored qrels, keeping the results, and reading them back.

Computing is a queued job (:mod:`evalstore.services.jobs`): :func:`run_job` is what a worker does
with a claimed job. :func:`evaluate_runs` is the in-process path (queue, then do our own jobs).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from sqlalchemy import Engine, select

from evalstore.db import repositories as repo
from evalstore.db.models import AggregateResult, Evaluation, QrelsSet, Run
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError, NotFoundError
from evalstore.metrics import Measure, compute, parse_measure, resolve_measures, summarise
from evalstore.metrics._prepare import PrepareOptions, Ranking, prepare_ranked
from evalstore.services import jobs
from evalstore.services.jobs import DEFAULT_MEASURE_SET, ClaimedJob, EvaluationOptions

if TYPE_CHECKING:
    import pandas as pd

    from evalstore.services.classification import Evaluated

__all__ = ["DEFAULT_MEASURE_SET", "EvaluationOptions", "evaluate_runs", "leaderboard", "results", "run_job"]

log = logging.getLogger("evalstore.worker")


@dataclass
class JobTimings:
    """Seconds spent in each step of one job (the benchmark reports them)."""

    load: float = 0.0
    compute: float = 0.0
    store: float = 0.0


@dataclass(frozen=True)
class EvaluationSummary:
    evaluation_id: int
    run: str
    qrels: str
    reused: bool
    topics: int
    missing_topics: tuple[str, ...] = ()
    timings: JobTimings = field(default_factory=JobTimings)
    # the results just computed, for MLflow (not when reused); a classification's are Evaluated
    stored: StoredResults | Evaluated | None = None


def run_job(engine: Engine, job: ClaimedJob) -> EvaluationSummary:
    """Compute a claimed job and store its results (raises jobs.JobLost if it was taken away)."""
    if job.prediction_set_id is not None:
        from evalstore.services import classification

        return classification.run_job(engine, job)
    timings = JobTimings()
    started = time.perf_counter()
    with read_only(engine) as session:
        run = session.get(Run, job.run_id)
        qrels = session.get(QrelsSet, job.qrels_id)
        if run is None or qrels is None:  # deleted or replaced since: the job went with them
            raise jobs.JobLost(f"the run or qrels of job {job.evaluation_id} was deleted")
        qrels_table = _qrels_cached(session, qrels)
        if qrels.kind == "relevance":
            retrieved, judged = repo.judged_ranks(session, run, qrels)
        else:  # ndeval and trec_eval's preference measures rank the whole run themselves
            run_table = repo.run_table(session, run, for_evaluation=True)
    timings.load = time.perf_counter() - started
    options = job.options
    measures = [parse_measure(name) for name in options["measures"]]
    started = time.perf_counter()
    rk: Ranking | None = None
    if qrels.kind == "relevance":
        rk = prepare_ranked(qrels_table, retrieved, judged, PrepareOptions(
            max_docs=options["max_docs"], judged_only=options["judged_only"],
            complete=options["missing_topics"] == "zero"), runid=run.tag)
        values = compute(rk, measures, relevance_level=options["relevance_level"])
        topics, missing = rk.topics, tuple(rk.missing_topics)
    else:
        topics, values, missing = _judgment_kind_values(qrels.kind, qrels_table, run_table, measures, options)
    if not topics:
        raise EvaluationError(f"Run '{run.name}' and qrels '{qrels.name}' share no topic; check the topic ids.")
    per_query, aggregates = _result_tables(topics, values, rk)
    timings.compute = time.perf_counter() - started
    started = time.perf_counter()
    header = jobs.complete(engine, job, per_query, aggregates)
    timings.store = time.perf_counter() - started
    stored = StoredResults(
        job.evaluation_id, run.name, run.tag, qrels.name, dict(options), *_frame(topics, values),
        {a["measure"]: a["value"] for a in aggregates},
        {**header, "system": run.system, "run_metadata": dict(run.metadata_ or {})})
    return EvaluationSummary(job.evaluation_id, run.name, qrels.name, False, len(topics), missing, timings, stored)


def _judgment_kind_values(kind: str, judgments: pa.Table, run: pa.Table, measures: list[Measure],
                          options: dict[str, Any]) -> tuple[list[str], dict[Measure, np.ndarray], tuple[str, ...]]:
    """Per-topic values from subtopic qrels (ndeval's measures) or preference judgments (trec_eval's
    prefs_*): the judged topics the run has, and with missing topics 'zero' (trec_eval and ndeval
    -c) also the judged topics it lacks, scored as an empty ranking scores."""
    complete = options["missing_topics"] == "zero"
    if kind == "subtopics":
        from evalstore.metrics.diversity import diversity_values

        topics, values = diversity_values(judgments, run, measures, max_docs=options["max_docs"])
        scored = set(topics)
        missing = tuple(t for t in sorted(set(judgments["topic"].to_pylist()), key=int) if t not in scored)
        if complete and missing:  # a topic with no ranking scores 0 on every ndeval measure
            topics = topics + list(missing)
            values = {m: np.concatenate([v, np.zeros(len(missing))]) for m, v in values.items()}
        return topics, values, missing
    from evalstore.metrics.preferences import Preferences, evaluate_preferences

    prefs = Preferences(*(np.array(judgments[c].to_pylist(), dtype=object)
                          for c in ("topic", "iteration", "subgroup", "doc")),
                        judgments["level"].to_numpy(zero_copy_only=False))
    result = evaluate_preferences(prefs, run, max_docs=options["max_docs"], complete=complete)
    return result.topics, {m: result.values[m.family] for m in measures}, tuple(result.missing)


_qrels_cache: dict[tuple[int, str], pa.Table] = {}


def _qrels_cached(session: Any, qrels: QrelsSet) -> pa.Table:
    """A worker evaluates run after run against the same qrels: keep the last one read. Keyed by
    id and content hash, so replaced qrels are read afresh."""
    key = (qrels.id, qrels.content_hash)
    if key not in _qrels_cache:
        _qrels_cache.clear()
        _qrels_cache[key] = repo.qrels_table(session, qrels)
    return _qrels_cache[key]


def _result_tables(topics: list[str], values: dict[Measure, np.ndarray], rk: Ranking | None
                   ) -> tuple[pa.Table, list[dict[str, Any]]]:
    """The per-query rows (:func:`per_query_table`) and the aggregates; ``rk`` is the ranking of
    an evaluation against relevance qrels (some measures summarise from it under -c)."""
    per_query = per_query_table(
        topics, {str(m): values[m] for m in values if m.spec.value_type != "str"},
        {str(m): [str(v) for v in values[m]] for m in values if m.spec.value_type == "str"})
    aggregates = []
    for measure, per_topic in values.items():
        summary = summarise(measure, per_topic, rk)
        if summary is not None:
            aggregates.append({"measure": str(measure), "value": summary, "text_value": None,
                               "query_count": len(topics)})
    return per_query, aggregates


def per_query_table(query_ids: Sequence[str], numeric: dict[str, np.ndarray],
                    textual: dict[str, list[str]] | None = None) -> pa.Table:
    """Rows (measure, query_id, value, text_value) of ``query_results``, built column-wise: a
    ranking evaluation's per-topic values, or a classification's per-group ones."""
    textual = textual or {}
    n = len(query_ids)
    measure_col = np.repeat(np.asarray([*numeric, *textual], dtype=object), n)
    query_col = np.tile(np.asarray(query_ids, dtype=object), len(numeric) + len(textual))
    numbers = np.concatenate([np.asarray(v, dtype=np.float64) for v in numeric.values()]) if numeric else []
    texts = [v for column in textual.values() for v in column]
    return pa.table({
        "measure": pa.array(measure_col, pa.string()),
        "query_id": pa.array(query_col, pa.string()),
        "value": pa.concat_arrays([pa.array(numbers, pa.float64()), pa.nulls(len(texts), pa.float64())]),
        "text_value": pa.concat_arrays([pa.nulls(len(numbers), pa.string()), pa.array(texts, pa.string())]),
    })


def _frame(topics: list[str], values: dict[Measure, np.ndarray]) -> tuple[list[str], list[str], pd.DataFrame]:
    """(topics, measures, frame) as :func:`results` reads them back: topics sorted as text, one
    float column per measure (text for relstring-like ones), in the measures' order."""
    import pandas as pd

    frame = pd.DataFrame(
        {str(m): [str(v) for v in column] if m.spec.value_type == "str" else np.asarray(column, dtype=np.float64)
         for m, column in values.items()},
        index=pd.Index(topics, name="query_id")).sort_index()
    return frame.index.tolist(), list(frame.columns), frame


def evaluate_runs(
    engine: Engine,
    *,
    qrels_name: str,
    run_names: list[str] | None,
    measures: list[str] | None = None,
    relevance_level: int = 1,
    max_docs: int | None = None,
    judged_only: bool = False,
    missing_topics: str = "zero",
    force: bool = False,
) -> list[EvaluationSummary]:
    """Evaluate each run (all runs when ``run_names`` is None) in this process and store the results.

    The jobs go through the queue like any other, so a stored result is reused, and a job a worker
    is already running is waited for rather than computed twice.
    """
    from evalstore.services.worker import work_on

    options = EvaluationOptions(tuple(measures or DEFAULT_MEASURE_SET), relevance_level, max_docs, judged_only,
                                missing_topics)
    refs = jobs.enqueue(engine, qrels_name=qrels_name, run_names=run_names, options=options, force=force)
    done = work_on(engine, [r.evaluation_id for r in refs if r.outcome != "reused"], mlflow=False)
    summaries = []
    with read_only(engine) as session:
        for ref in refs:
            if ref.evaluation_id in done:
                summaries.append(done[ref.evaluation_id])
                continue
            job = session.get(Evaluation, ref.evaluation_id)
            assert job is not None
            if job.state != "done":
                raise EvaluationError(f"Evaluation {job.id} of run '{ref.run}' {job.state}: {job.error}")
            summaries.append(EvaluationSummary(job.id, ref.run, ref.qrels, True, _topic_count(session, job.id)))
    return summaries


def _topic_count(session: Any, evaluation_id: int) -> int:
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

    def as_trec_eval(self, *, per_query: bool, with_counts: bool = True) -> str:
        """What ``evalstore trec-eval`` prints for the same files and options (``-q`` with
        ``per_query``); ``with_counts`` adds its runid and num_q lines."""
        from evalstore.trec_eval import render_lines, stored_rows

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
        evaluation = session.scalars(statement.order_by(Evaluation.finished_at.desc(), Evaluation.id.desc())).first()
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
class LeaderboardRow:
    run: str
    system: str | None
    topics: int
    values: dict[str, tuple[float, float, float]]  # measure -> (mean, ci_low, ci_high)
    judged_at_10: float | None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run": self.run, "system": self.system, "topics": self.topics}
        for measure, (mean, low, high) in self.values.items():
            out[measure] = mean
            out[f"{measure} CI low"], out[f"{measure} CI high"] = low, high
        out["Judged@10"] = self.judged_at_10
        return out


def leaderboard(engine: Engine, *, qrels_name: str, measures: list[str] | None = None,
                sort: str | None = None) -> tuple[list[str], list[LeaderboardRow]]:
    """Every run evaluated on the qrels: mean and 95% t-interval per measure, sorted by ``sort``."""
    from scipy import stats

    names = [str(m) for m in resolve_measures(measures or ["AP", "nDCG@10", "P@10", "RR"])]
    sort_name = str(resolve_measures([sort])[0]) if sort else names[0]
    if sort_name not in names:
        names.append(sort_name)
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, qrels_name)
        evaluations = session.execute(
            select(Evaluation, Run).join(Run, Run.id == Evaluation.run_id)
            .where(Evaluation.qrels_id == qrels.id, Evaluation.state == "done")
            .order_by(Evaluation.finished_at)
        ).all()
        latest: dict[int, tuple[Evaluation, Run]] = {run.id: (ev, run) for ev, run in evaluations}
        rows: list[LeaderboardRow] = []
        for evaluation, run in latest.values():
            table = repo.result_table(session, evaluation.id, [*names, "Judged@10"])
            by_measure = table.to_pandas().groupby("measure")["value"].apply(lambda v: v.to_numpy()).to_dict()
            values: dict[str, tuple[float, float, float]] = {}
            for name in names:
                sample = by_measure.get(name, np.array([]))
                if len(sample) == 0:
                    continue
                mean = float(sample.mean())
                if len(sample) > 1 and sample.std(ddof=1) > 0:
                    low, high = stats.t.interval(0.95, len(sample) - 1, loc=mean, scale=stats.sem(sample))
                else:
                    low = high = mean
                values[name] = (mean, float(low), float(high))
            judged = by_measure.get("Judged@10")
            rows.append(LeaderboardRow(run.name, run.system, _topic_count(session, evaluation.id), values,
                                       float(np.mean(judged)) if judged is not None else None))
    if not rows:
        raise NotFoundError(
            f"No evaluations on qrels '{qrels_name}' yet. "
            f"Run 'evalstore evaluate --qrels {qrels_name} --all-runs --wait'."
        )
    missing = [n for n in names if not any(n in r.values for r in rows)]
    if missing:
        raise NotFoundError(
            f"Measure '{missing[0]}' was not computed for these runs. "
            f"Run 'evalstore evaluate --qrels {qrels_name} --all-runs --measures {missing[0]} --wait'."
        )
    # best first: descending, or ascending for measures where lower is better (Unj, RBP_resid)
    direction = -1.0 if resolve_measures([sort_name])[0].spec.higher_is_better else 1.0
    rows.sort(key=lambda r: direction * r.values.get(sort_name, (-direction * math.inf,))[0])
    return names, rows
