"""Evaluating stored runs against stored qrels, keeping the results, and reading them back.

One evaluation per (run, qrels, measure set, options): asking again for the same inputs returns
the stored result unless ``force``. Per-query values and aggregates are written in one
transaction together with the options that produced them and the content hashes of the inputs.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Engine, delete, insert, select

from evalstore import __version__
from evalstore.db import repositories as repo
from evalstore.db.models import AggregateResult, Evaluation, QueryResult, Run
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import EvaluationError, NotFoundError
from evalstore.metrics import Measure, compute, resolve_measures, summarise
from evalstore.metrics._prepare import PrepareOptions, prepare

DEFAULT_MEASURE_SET = ("all_trec", "Judged@10", "ERR@20", "nDCG(gain=exp)@10")


@dataclass(frozen=True)
class EvaluationSummary:
    evaluation_id: int
    run: str
    qrels: str
    reused: bool
    topics: int
    missing_topics: tuple[str, ...]


def _options(measures: list[Measure], relevance_level: int, max_docs: int | None, judged_only: bool) -> dict[str, Any]:
    return {
        "measures": [str(m) for m in measures], "relevance_level": relevance_level, "max_docs": max_docs,
        "judged_only": judged_only, "missing_topics": "zero", "tie_rule": "score desc, docno desc",
    }


def evaluate_runs(
    engine: Engine,
    *,
    qrels_name: str,
    run_names: list[str] | None,
    measures: list[str] | None = None,
    relevance_level: int = 1,
    max_docs: int | None = None,
    judged_only: bool = False,
    force: bool = False,
) -> list[EvaluationSummary]:
    """Evaluate each run (all runs when ``run_names`` is None) and store the results."""
    wanted = resolve_measures(measures or DEFAULT_MEASURE_SET)
    with read_only(engine) as session:
        qrels = repo.get_qrels(session, qrels_name)
        names = run_names if run_names is not None else [r.name for r in repo.list_runs(session)]
        runs = [repo.get_run(session, name) for name in names]
        qrels_table = repo.qrels_table(session, qrels)
    if not runs:
        raise NotFoundError("No runs to evaluate. Register one with 'evalstore runs register PATH --name NAME'.")
    options = _options(wanted, relevance_level, max_docs, judged_only)
    return [_evaluate_one(engine, run, qrels, qrels_table, wanted, options, force) for run in runs]


def _evaluate_one(engine: Engine, run: Run, qrels: Any, qrels_table: Any, measures: list[Measure],
                  options: dict[str, Any], force: bool) -> EvaluationSummary:
    digest = hashlib.sha256(
        json.dumps({**options, "run_hash": run.content_hash, "qrels_hash": qrels.content_hash},
                   sort_keys=True).encode()
    ).hexdigest()
    with read_only(engine) as session:
        existing = session.scalar(select(Evaluation).where(
            Evaluation.run_id == run.id, Evaluation.qrels_id == qrels.id, Evaluation.options_hash == digest))
        if existing is not None and existing.state == "done" and not force:
            return EvaluationSummary(existing.id, run.name, qrels.name, True,
                                     _topic_count(session, existing.id), ())
        run_table = repo.run_table(session, run)
    rk = prepare(qrels_table, run_table, PrepareOptions(
        max_docs=options["max_docs"], judged_only=options["judged_only"], complete=True), runid=run.tag)
    if rk.n == 0:
        raise EvaluationError(f"Run '{run.name}' and qrels '{qrels.name}' share no topic; check the topic ids.")
    values = compute(rk, measures, relevance_level=options["relevance_level"])
    now = datetime.now(UTC)
    with unit_of_work(engine) as session:
        evaluation = session.scalar(select(Evaluation).where(
            Evaluation.run_id == run.id, Evaluation.qrels_id == qrels.id, Evaluation.options_hash == digest))
        if evaluation is None:
            evaluation = Evaluation(run_id=run.id, qrels_id=qrels.id, options_hash=digest)
            session.add(evaluation)
        evaluation.measures = json.dumps(options["measures"])
        evaluation.options = options
        evaluation.state, evaluation.error = "done", None
        evaluation.attempts = (evaluation.attempts or 0) + 1
        evaluation.evalstore_version = __version__
        evaluation.run_hash, evaluation.qrels_hash = run.content_hash, qrels.content_hash
        evaluation.started_at = evaluation.started_at or now
        evaluation.finished_at = now
        session.flush()
        session.execute(delete(QueryResult).where(QueryResult.evaluation_id == evaluation.id))
        session.execute(delete(AggregateResult).where(AggregateResult.evaluation_id == evaluation.id))
        rows: list[dict[str, Any]] = []
        aggregates: list[dict[str, Any]] = []
        for measure, per_topic in values.items():
            name = str(measure)
            text = measure.spec.value_type == "str"
            for topic, value in zip(rk.topics, per_topic.tolist(), strict=True):
                rows.append({"evaluation_id": evaluation.id, "measure": name, "query_id": topic,
                             "value": None if text else float(value), "text_value": value if text else None})
            summary = summarise(measure, per_topic)
            if summary is not None:
                aggregates.append({"evaluation_id": evaluation.id, "measure": name, "value": summary,
                                   "text_value": None, "query_count": rk.n})
        session.execute(insert(QueryResult), rows)
        session.execute(insert(AggregateResult), aggregates)
        return EvaluationSummary(evaluation.id, run.name, qrels.name, False, rk.n, tuple(rk.missing_topics))


def _topic_count(session: Any, evaluation_id: int) -> int:
    count = session.scalar(select(AggregateResult.query_count).where(
        AggregateResult.evaluation_id == evaluation_id).limit(1))
    return int(count or 0)


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
            out[f"{measure} 95% CI"] = [low, high]
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
            per_query = session.execute(
                select(QueryResult.measure, QueryResult.value)
                .where(QueryResult.evaluation_id == evaluation.id, QueryResult.measure.in_([*names, "Judged@10"]))
            ).all()
            by_measure: dict[str, list[float]] = {}
            for measure, value in per_query:
                by_measure.setdefault(measure, []).append(float(value))
            values: dict[str, tuple[float, float, float]] = {}
            for name in names:
                sample = np.array(by_measure.get(name, []))
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
                                       float(np.mean(judged)) if judged else None))
    if not rows:
        raise NotFoundError(
            f"No evaluations on qrels '{qrels_name}' yet. Run 'evalstore evaluate --qrels {qrels_name} --all-runs'."
        )
    missing = [n for n in names if not any(n in r.values for r in rows)]
    if missing:
        raise NotFoundError(
            f"Measure '{missing[0]}' was not computed for these runs. "
            f"Run 'evalstore evaluate --qrels {qrels_name} --all-runs --measures {missing[0]}'."
        )
    # best first: descending, or ascending for measures where lower is better (Unj, RBP_resid)
    direction = -1.0 if resolve_measures([sort_name])[0].spec.higher_is_better else 1.0
    rows.sort(key=lambda r: direction * r.values.get(sort_name, (-direction * math.inf,))[0])
    return names, rows
