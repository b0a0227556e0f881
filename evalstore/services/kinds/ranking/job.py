"""A ranking job: read the run and qrels (the context keeps the qrels for the next job), compute the
measures, and shape the per-topic values and aggregates as they are stored.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from sqlalchemy import Engine

from evalstore.db import repositories as repo
from evalstore.db.models import QrelsSet, Run
from evalstore.db.session import read_only
from evalstore.errors import EvaluationError
from evalstore.io.formats import Preferences
from evalstore.metrics import Measure, compute, parse_measure, summarise
from evalstore.metrics.diversity import diversity_values
from evalstore.metrics.preferences import evaluate_preferences
from evalstore.metrics.preparation import PrepareOptions, Ranking, attach_known, prepare_ranked
from evalstore.services import jobs, store
from evalstore.services.context import AppContext, context_for
from evalstore.services.jobs import ClaimedJob
from evalstore.services.kinds import out_of_core
from evalstore.services.kinds.base import (
    ComputedJob,
    EvaluationSummary,
    JobTimings,
    per_query_values,
    store_computed,
)

log = logging.getLogger("evalstore.worker")


def run_job(engine: Engine, job: ClaimedJob, *, context: AppContext | None = None) -> EvaluationSummary:
    """Compute a claimed job and store its results (raises jobs.JobLost if it was taken away)."""
    return store_computed(engine, job, compute_job(engine, job, context=context))


def compute_job(engine: Engine, job: ClaimedJob, *, context: AppContext | None = None) -> ComputedJob:
    """Read a claimed job's run and qrels and compute its results, storing nothing (raises
    jobs.JobLost if either was deleted). ``context`` keeps the qrels read for the next job."""
    loaded = load_job(engine, job, context=context)
    started = time.perf_counter()
    rk = prepare_job(loaded)
    values = None if rk is None else compute(rk, loaded.measures, relevance_level=loaded.options["relevance_level"])
    return finish_job(loaded, rk, values, started)


@dataclass
class LoadedJob:
    """A claimed job's inputs as read from the store: the run's judged ranks (relevance qrels), or
    the run itself (the judgment kinds that rank it themselves)."""

    job: ClaimedJob
    run: Run
    qrels: QrelsSet
    qrels_table: pa.Table
    measures: list[Measure]
    timings: JobTimings
    retrieved: pa.Table | None = None
    judged: pa.Table | None = None
    known: tuple[pa.Table, pa.Table] | None = None
    run_table: pa.Table | None = None

    @property
    def options(self) -> dict[str, Any]:
        return self.job.options


def load_job(engine: Engine, job: ClaimedJob, *, context: AppContext | None = None) -> LoadedJob:
    """A step of :func:`compute_job`: read its inputs (JobLost if the run or qrels were deleted)."""
    qrels_cache = context_for(engine, context).qrels
    timings = JobTimings()
    started = time.perf_counter()
    with read_only(engine) as session:
        run = session.get(Run, job.run_id)
        qrels = session.get(QrelsSet, job.qrels_id)
        if run is None or qrels is None:  # deleted or replaced since: the job went with them
            raise jobs.JobLost(f"the run or qrels of job {job.evaluation_id} was deleted")
        qrels_table = store.qrels_table_kept(session, qrels, qrels_cache)
        options = job.options
        loaded = LoadedJob(job, run, qrels, qrels_table, [parse_measure(name) for name in options["measures"]], timings)
        if qrels.kind == "relevance" and not job.backend.local:  # DuckDB or Spark joins the run's rows
            known_table = (
                repo.qrels_table(session, repo.get_qrels(session, options["known_qrels"]))
                if options.get("known_qrels")
                else None
            )
            loaded.retrieved, found = out_of_core.judged_ranks(
                session, run, [qrels_table] if known_table is None else [qrels_table, known_table], job.backend
            )
            loaded.judged = found[0]
            loaded.known = None if known_table is None else (known_table, found[1])
        elif qrels.kind == "relevance":
            loaded.retrieved, loaded.judged = repo.judged_ranks(session, run, qrels)
            if options.get("known_qrels"):  # the user-oriented measures: what the user knew, ranked
                known_qrels = repo.get_qrels(session, options["known_qrels"])
                loaded.known = (
                    store.qrels_table_kept(session, known_qrels, qrels_cache),
                    repo.judged_ranks(session, run, known_qrels)[1],
                )
        else:  # ndeval and trec_eval's preference measures rank the whole run themselves
            loaded.run_table = repo.run_table(session, run, for_evaluation=True)
    timings.load = time.perf_counter() - started
    return loaded


def prepare_job(loaded: LoadedJob) -> Ranking | None:
    """A step of :func:`compute_job`: the run's ranking against relevance qrels (None for the
    judgment kinds that rank the run themselves)."""
    if loaded.qrels.kind != "relevance":
        return None
    assert loaded.retrieved is not None and loaded.judged is not None
    options = loaded.options
    prepare_options = PrepareOptions(
        max_docs=options["max_docs"],
        judged_only=options["judged_only"],
        complete=options["missing_topics"] == "zero",
    )
    rk = prepare_ranked(loaded.qrels_table, loaded.retrieved, loaded.judged, prepare_options, runid=loaded.run.tag)
    if loaded.known is not None:
        attach_known(rk, prepare_ranked(loaded.known[0], loaded.retrieved, loaded.known[1], prepare_options))
    return rk


def finish_job(
    loaded: LoadedJob, rk: Ranking | None, values: dict[Measure, np.ndarray] | None, started: float
) -> ComputedJob:
    """A step of :func:`compute_job`: the results as stored, from the ranking's ``values`` (the
    judgment kinds' computed here); ``started`` is when the computing began."""
    job, run, qrels, options, timings = loaded.job, loaded.run, loaded.qrels, loaded.options, loaded.timings
    if rk is not None and values is not None:
        topics, missing = rk.topics, tuple(rk.missing_topics)
    else:
        assert loaded.run_table is not None
        topics, values, missing = _judgment_kind_values(
            qrels.kind, loaded.qrels_table, loaded.run_table, loaded.measures, options
        )
    if not topics:
        raise EvaluationError(f"Run '{run.name}' and qrels '{qrels.name}' share no topic; check the topic ids.")
    per_query, aggregates = _result_tables(topics, values, rk)
    timings.compute = time.perf_counter() - started
    return ComputedJob(
        job.evaluation_id, run.name, qrels.name, len(topics), missing, timings, per_query, aggregates, None
    )


def _judgment_kind_values(
    kind: str, judgments: pa.Table, run: pa.Table, measures: list[Measure], options: dict[str, Any]
) -> tuple[list[str], dict[Measure, np.ndarray], tuple[str, ...]]:
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
    topic, group, subgroup, doc = (
        np.array(judgments[c].to_pylist(), dtype=object) for c in ("topic", "iteration", "subgroup", "doc")
    )
    prefs = Preferences(topic, group, subgroup, doc, judgments["level"].to_numpy(zero_copy_only=False))
    result = evaluate_preferences(prefs, run, max_docs=options["max_docs"], complete=complete)
    return result.topics, {m: result.values[m.family] for m in measures}, tuple(result.missing)


def _result_tables(
    topics: list[str], values: dict[Measure, np.ndarray], rk: Ranking | None
) -> tuple[repo.PerQueryValues, list[repo.AggregateRow]]:
    """The per-query values (:func:`per_query_values`) and the aggregates; ``rk`` is the ranking of
    an evaluation against relevance qrels (some measures summarise from it under -c)."""
    per_query = per_query_values(
        topics,
        {str(m): values[m] for m in values if m.spec.value_type != "str"},
        {str(m): values[m] for m in values if m.spec.value_type == "str"},
    )
    aggregates: list[repo.AggregateRow] = []
    for measure, per_topic in values.items():
        summary = summarise(measure, per_topic, rk)
        if summary is not None:
            aggregates.append(
                {"measure": str(measure), "value": summary, "text_value": None, "query_count": len(topics)}
            )
    return per_query, aggregates
