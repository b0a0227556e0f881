"""How much a test collection can be trusted, from its runs' stored per-topic scores: what a track
organiser reports in an overview paper (``evalstore health``), and per-topic standardisation
(``evalstore standardize``, Webber, Moffat and Zobel 2008).

- discriminative power (Sakai 2006): the share of run pairs a paired test finds significantly
  different after the correction, and the smallest difference it finds significant;
- ranking stability (Voorhees and Buckley 2002): how often two disjoint topic sets of n topics
  order a pair of runs differently, for growing n (by resampling, seeded);
- topic-set size (Sakai 2016): topics needed for a paired t-test to detect a difference with the
  given power, from the residual variance of the two-way ANOVA (statsmodels' power solver);
- pool bias (Zobel 1998): each run, and each team, evaluated without the relevant documents only
  it brought to the depth-k pool of the runs, against the others on the full qrels;
- Judged@10 per run.

A task's report is computed by a worker once its queue is empty (:func:`refresh_reports`) and
stored keyed by what decides it (:func:`report_key`); its health page reads the stored one
(:func:`stored_report`) and never computes it on a request.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import secrets
import warnings
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine, delete, func, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalstore.db import repositories as repo
from evalstore.db.models import (
    Evaluation,
    HealthReportRow,
    QrelsSet,
    Run,
    Standardisation,
    StandardisationStatistic,
    StandardisedValue,
    Submission,
    Task,
)
from evalstore.db.session import read_only, unit_of_work
from evalstore.errors import EvalstoreError, EvaluationError, InvalidParameterError, Remedy
from evalstore.metrics import resolve_measures
from evalstore.services import comparisons, pools
from evalstore.services.kinds import ranking
from evalstore.statistics import pooling, significance

log = logging.getLogger("evalstore.worker")

SUBSET_RESAMPLES = 1000
HEALTH_MEASURES = ("AP", "nDCG@10", "P@10")
# a stored report's seed: the same inputs give the same report, whichever worker computes it
STORED_SEED = 0
# the parameters of a stored report: the CLI's defaults
STORED_PARAMETERS: dict[str, Any] = {
    "test": "t",
    "correction": "holm",
    "alpha": 0.05,
    "power": 0.8,
    "difference": 0.05,
    "resamples": SUBSET_RESAMPLES,
    "pool_depth": 100,
}
# reports kept per task: the current one and a few older, shown while the current is computed
REPORTS_KEPT_PER_TASK = 4


@dataclass(frozen=True)
class DiscriminativePower:
    measure: str
    pairs: int
    significant: int
    share: float
    smallest_significant_difference: float | None


@dataclass(frozen=True)
class Stability:
    measure: str
    topics: int  # in each of the two disjoint sets
    swap_rate: float  # share of (pair, resample) whose two sets order the pair differently
    swap_rate_large: float | None  # the same among pairs more than ``large`` apart on the first set


@dataclass(frozen=True)
class TopicSetSize:
    measure: str
    residual_variance: float
    difference: float
    topics_needed: int
    detectable_with_these_topics: float  # the smallest difference the current topics detect


@dataclass
class HealthReport:
    qrels: str
    runs: list[str]
    topics: int
    measures: list[str]
    test: str
    correction: str
    alpha: float
    power: float
    seed: int
    large_difference: float
    pool_depth: int
    discriminative_power: list[DiscriminativePower] = field(default_factory=list)
    stability: list[Stability] = field(default_factory=list)
    topic_set_size: list[TopicSetSize] = field(default_factory=list)
    leave_one_run_out: list[dict[str, Any]] = field(default_factory=list)
    leave_one_team_out: list[dict[str, Any]] = field(default_factory=list)
    judged_at_10: dict[str, float | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HealthReport:
        """The report :meth:`as_dict` gave (as stored)."""
        return cls(
            **{
                **data,
                "discriminative_power": [DiscriminativePower(**d) for d in data["discriminative_power"]],
                "stability": [Stability(**d) for d in data["stability"]],
                "topic_set_size": [TopicSetSize(**d) for d in data["topic_set_size"]],
            }
        )


def health(
    engine: Engine,
    *,
    qrels_name: str,
    measures: Sequence[str] = HEALTH_MEASURES,
    test: str = "t",
    correction: str = "holm",
    alpha: float = 0.05,
    power: float = 0.8,
    difference: float = 0.05,
    seed: int | None = None,
    resamples: int = SUBSET_RESAMPLES,
    pool_depth: int = 100,
    only_runs: Collection[str] | None = None,
) -> HealthReport:
    """The collection's report over every run evaluated on it with ``measures`` (of ``only_runs`` only,
    when given: a task's)."""
    if test not in significance.TESTS:
        raise InvalidParameterError(
            f"The paired test is one of {', '.join(significance.TESTS)}; not '{test}'.",
            remedy=Remedy(cli="Choose one with --test."),
        )
    if not 0 < power < 1 or not 0 < alpha < 1:
        raise InvalidParameterError(
            f"The power and the significance level are probabilities between 0 and 1; not {power:g} and {alpha:g}.",
            remedy=Remedy(cli="Set them with --power and --alpha."),
        )
    if difference <= 0:
        raise InvalidParameterError(
            f"The difference to detect is above 0; not {difference}.", remedy=Remedy(cli="Set it with --difference.")
        )
    names = [str(m) for m in resolve_measures(list(measures))]
    board = ranking.leaderboard(engine, qrels_name=qrels_name, measures=names, runs=only_runs)
    runs = [row.run for row in board.rows if all(n in row.values for n in names)]
    if len(runs) < 2:
        raise EvaluationError(
            f"Qrels '{qrels_name}' have fewer than two runs evaluated with {', '.join(names)}.",
            remedy=Remedy(
                cli=f"Evaluate them first: 'evalstore evaluate --qrels {qrels_name} --all-runs --measures "
                f"{','.join(names)} --wait'."
            ),
        )
    matrix = comparisons.score_matrix(
        engine, qrels_name=qrels_name, run_names=runs, measures=names, missing="zero", evaluate_missing=False
    )
    seed = secrets.randbits(31) if seed is None else seed
    report = HealthReport(
        qrels_name,
        runs,
        len(matrix.topics),
        matrix.measures,
        test,
        correction,
        alpha,
        power,
        seed,
        difference,
        pool_depth,
        notes=list(board.notes),
    )
    rng = np.random.default_rng(seed)
    for name in matrix.measures:
        scores = matrix.scores[name]
        report.discriminative_power.append(_discriminative_power(name, scores, test, correction, alpha, rng))
        report.stability.extend(_stability(name, scores, difference, resamples, rng))
        report.topic_set_size.append(_topic_set_size(name, scores, difference, alpha, power))
    report.judged_at_10 = {row.run: row.judged_at_10 for row in board.rows if row.run in runs}
    report.leave_one_run_out, report.leave_one_team_out = _pool_bias(
        engine, qrels_name, runs, matrix.measures[0], pool_depth
    )
    if len(matrix.topics) < 2 * 5:
        report.notes.append("fewer than 10 topics: the stability curve needs two disjoint sets of 5 or more")
    return report


def _discriminative_power(
    name: str, scores: np.ndarray, test: str, correction: str, alpha: float, rng: np.random.Generator
) -> DiscriminativePower:
    pairs = [(i, j) for i in range(len(scores)) for j in range(i + 1, len(scores))]
    diffs = np.vstack([scores[i] - scores[j] for i, j in pairs])
    outcome = significance.paired_test(diffs, test, rng=rng)
    corrected = significance.correct(outcome.p_value, correction, alpha)
    found = corrected < alpha
    means = np.abs(diffs.mean(axis=1))
    return DiscriminativePower(
        name, len(pairs), int(found.sum()), float(found.mean()), float(means[found].min()) if found.any() else None
    )


def _stability(
    name: str, scores: np.ndarray, large: float, resamples: int, rng: np.random.Generator
) -> list[Stability]:
    """Swap rates for two disjoint topic sets of n = 5, 10, ... up to half the topics: one draw of
    ``resamples`` topic permutations, every run pair at once."""
    runs, topics = scores.shape
    first, second = np.triu_indices(runs, k=1)
    found = []
    for n in range(5, topics // 2 + 1, 5):
        order = rng.permuted(np.tile(np.arange(topics), (resamples, 1)), axis=1)
        a = scores[:, order[:, :n]].mean(axis=2)  # runs x resamples
        b = scores[:, order[:, n : 2 * n]].mean(axis=2)
        da, db = a[first] - a[second], b[first] - b[second]  # pairs x resamples
        swapped = np.sign(da) * np.sign(db) < 0
        big = np.abs(da) > large
        found.append(Stability(name, n, float(swapped.mean()), float(swapped[big].mean()) if big.any() else None))
    return found


def _topic_set_size(name: str, scores: np.ndarray, difference: float, alpha: float, power: float) -> TopicSetSize:
    """Sakai's topic-set-size design for a paired t-test: the variance of a pair's per-topic
    differences is twice the two-way ANOVA's residual variance."""
    from statsmodels.stats.power import TTestPower
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    variance, _ = significance.residual_variance(scores)
    solver = TTestPower()
    if variance == 0:
        return TopicSetSize(name, 0.0, difference, 2, 0.0)
    spread = math.sqrt(2 * variance)
    with warnings.catch_warnings():  # its ConvergenceWarning: the NaN is handled below
        warnings.simplefilter("ignore", ConvergenceWarning)
        needed = solver.solve_power(effect_size=difference / spread, alpha=alpha, power=power, alternative="two-sided")
    detectable = solver.solve_power(nobs=scores.shape[1], alpha=alpha, power=power, alternative="two-sided")
    # no root (NaN) when the difference is many spreads wide: the smallest paired design detects it
    topics = math.ceil(float(needed)) if math.isfinite(float(needed)) else 2
    return TopicSetSize(name, variance, difference, topics, float(detectable) * spread)


def _pool_bias(
    engine: Engine, qrels_name: str, runs: list[str], measure: str, depth: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Leave-one-run-out and leave-one-team-out over the depth-``depth`` pool of the runs (a
    run's team: its task submission's, else its system, else its name)."""
    with read_only(engine) as session:
        stored = [repo.get_run(session, name) for name in runs]
        teams = dict(
            session.execute(
                select(Run.name, Submission.team)
                .join(Submission, Submission.run_id == Run.id)
                .where(Run.name.in_(runs))
            ).all()
        )
        qrels = repo.qrels_table(session, repo.get_qrels(session, qrels_name)).to_pandas()
        # every run whole, in one read: trec_eval's order is the stored rank, so -rank scores it
        ranked = pools.read_candidates(session, stored, None, None)
    codes = ranked["run"].to_numpy()
    tables = {
        run.name: pa.table(
            {
                "topic": ranked["topic"],
                "doc": ranked["doc"],
                "score": pa.array(-ranked["rank"].to_numpy().astype(np.float64)),
            }
        ).filter(pa.array(codes == i))
        for i, run in enumerate(stored)
    }
    cands = ranked.filter(pc.less_equal(ranked["rank"], depth))
    pool = pooling.build(cands, runs, pooling.PoolSettings("depth", depth, None)).to_pandas()
    by_team: dict[str, list[str]] = {}
    for run in stored:
        by_team.setdefault(teams.get(run.name) or run.system or run.name, []).append(run.name)
    groups: dict[str, list[str]] = {run: [run] for run in runs}
    groups.update({f"team {team}": members for team, members in by_team.items() if members != [team]})
    rows = pools.leave_out(
        qrels.astype({"topic": object, "doc": object}),
        tables,
        pool[["topic", "doc", "contributors"]],
        groups,
        [measure],
    )
    return [r for r in rows if "group" not in r], [r for r in rows if "group" in r]


# --- stored reports: a task's, computed by a worker, read by its page ----------------------------


def task_measures(task: Task) -> list[str]:
    """The measures a task's report is over: its first three (counts left out), else
    :data:`HEALTH_MEASURES`."""
    return [m for m in (task.measures or ()) if not m.startswith("num_")][:3] or list(HEALTH_MEASURES)


def report_key(session: Session, task: Task) -> str | None:
    """What decides a task's stored report, as a digest: the qrels as they are, the measures, the
    parameters and seed, each of the task's runs with its team and its finished evaluations on the
    qrels (a new one, or other options, changes it); None when the task is over no qrels."""
    if task.qrels_id is None:
        return None
    qrels = session.get(QrelsSet, task.qrels_id)
    if qrels is None:
        return None
    runs = session.execute(
        select(Run.id, Run.name, Run.system, Submission.team)
        .join(Submission, Submission.run_id == Run.id)
        .where(Submission.task_id == task.id)
    ).all()
    finished: dict[int | None, list[int]] = {}
    for evaluation_id, run_id in session.execute(
        select(Evaluation.id, Evaluation.run_id)
        .join(Submission, Submission.run_id == Evaluation.run_id)
        .where(Submission.task_id == task.id, Evaluation.qrels_id == qrels.id, Evaluation.state == "done")
    ):
        finished.setdefault(run_id, []).append(evaluation_id)
    payload = json.dumps(
        [
            qrels.name,
            qrels.content_hash,
            task_measures(task),
            sorted(STORED_PARAMETERS.items()),
            STORED_SEED,
            sorted(
                [name, run_id, system, team, sorted(finished.get(run_id, []))] for run_id, name, system, team in runs
            ),
        ],
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class StoredReport:
    """A task's newest stored report (or the reason it has none) and whether it is ``current``:
    computed from the task's runs as they are now."""

    report: HealthReport | None
    error: str | None
    created_at: datetime
    current: bool


def stored_report(session: Session, task: Task) -> StoredReport | None:
    """The task's report as its page shows it: the one stored under its current key, else the
    newest stored (``current`` False); None when none is stored. Reads only."""
    key = report_key(session, task)
    row = session.get(HealthReportRow, key) if key is not None else None
    if row is None:
        row = session.scalars(
            select(HealthReportRow)
            .where(HealthReportRow.task_id == task.id)
            .order_by(HealthReportRow.created_at.desc(), HealthReportRow.key)
            .limit(1)
        ).first()
    if row is None:
        return None
    report = None if row.report is None else HealthReport.from_dict(json.loads(row.report))
    return StoredReport(report, row.error, _aware(row.created_at), row.key == key)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)  # SQLite drops the zone


def refresh_reports(engine: Engine, qrels_ids: Collection[int] | None = None) -> int:
    """A use case (a worker's, once its queue is empty): the report of every task over these qrels
    (None: over any qrels) with two or more runs evaluated, computed and stored where none is
    stored under its current key; how many were stored. The runs giving no report (fewer than
    two with the measures) store why, for the page to say."""
    with read_only(engine) as session:
        query = select(Task).where(Task.qrels_id.is_not(None)).order_by(Task.id)
        if qrels_ids is not None:
            query = query.where(Task.qrels_id.in_(sorted(set(qrels_ids))))
        plans = []
        for task in session.scalars(query):
            key = report_key(session, task)
            if key is None or session.get(HealthReportRow, key) is not None:
                continue
            qrels = session.get(QrelsSet, task.qrels_id)
            runs = list(
                session.scalars(
                    select(Run.name)
                    .join(Submission, Submission.run_id == Run.id)
                    .where(Submission.task_id == task.id)
                    .order_by(Run.name)
                )
            )
            evaluated = session.scalar(
                select(func.count(func.distinct(Evaluation.run_id))).where(
                    Evaluation.run_id.in_(select(Submission.run_id).where(Submission.task_id == task.id)),
                    Evaluation.qrels_id == task.qrels_id,
                    Evaluation.state == "done",
                )
            )
            if qrels is not None and (evaluated or 0) >= 2:
                plans.append((task.id, key, qrels.name, task_measures(task), runs))
    made = 0
    for task_id, key, qrels_name, measures, runs in plans:
        report, error = None, None
        try:
            report = health(
                engine,
                qrels_name=qrels_name,
                measures=measures,
                seed=STORED_SEED,
                only_runs=runs,
                **STORED_PARAMETERS,
            )
        except EvalstoreError as failed:  # the runs give no report: the page says why
            # and what to do, as a failed job keeps it: the page is the organisers', who run the commands
            error = failed.on_the_command_line()
        try:
            with unit_of_work(engine) as session:
                if session.get(Task, task_id) is None:  # deleted meanwhile
                    continue
                store_report(session, key, task_id, report, error)
        except IntegrityError:  # another worker stored the same report first
            continue
        made += 1
    return made


def store_report(session: Session, key: str, task_id: int, report: HealthReport | None, error: str | None) -> None:
    """A step: a task's report under ``key``, and its oldest beyond :data:`REPORTS_KEPT_PER_TASK`
    let go. Never commits."""
    text = None if report is None else json.dumps(report.as_dict(), default=_plain, separators=(",", ":"))
    session.add(HealthReportRow(key=key, task_id=task_id, report=text, error=error))
    session.flush()
    repo.let_go_oldest(session, HealthReportRow, HealthReportRow.task_id == task_id, REPORTS_KEPT_PER_TASK)


def _plain(value: object) -> object:
    """numpy's scalars in a report (pool bias rows), as JSON takes them."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not stored in a health report")


# --- standardisation ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Standardised:
    name: str
    qrels: str
    runs: list[str]
    statistics: pd.DataFrame  # topic, measure, mean, stddev
    zscores: dict[str, pd.DataFrame]  # measure -> runs x topics


def standardize(
    engine: Engine, *, qrels_name: str, measures: Sequence[str], path: Path | None = None, name: str | None = None
) -> Standardised:
    """Per topic and measure, the mean and standard deviation (n-1) of the scores of every run
    evaluated on the qrels, written as trec_eval's ``-Z`` file (``qid measure mean stddev``, the
    measure by trec_eval's name), and each run's per-topic z-scores ``(score - mean) / stddev``;
    both stored under ``name`` (default ``QRELS-z``), replacing what that name held: they are
    derived from stored scores, so standardising again loses nothing."""
    from evalstore.trec_eval.output import stored_rows

    names = [str(m) for m in resolve_measures(list(measures))]
    board = ranking.leaderboard(engine, qrels_name=qrels_name, measures=names)
    runs = [row.run for row in board.rows if all(n in row.values for n in names)]
    if len(runs) < 2:
        raise EvaluationError(
            f"Standardising needs two or more runs evaluated on '{qrels_name}' with "
            f"{', '.join(names)}; evaluate them first."
        )
    matrix = comparisons.score_matrix(
        engine, qrels_name=qrels_name, run_names=runs, measures=names, missing="zero", evaluate_missing=False
    )
    printed = {str(m): trec_name for _, trec_name, m in stored_rows(resolve_measures(matrix.measures)) if m is not None}
    rows, zscores = [], {}
    for measure in matrix.measures:
        scores = matrix.scores[measure]
        mean, stddev = scores.mean(axis=0), scores.std(axis=0, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(stddev > 0, (scores - mean) / np.where(stddev > 0, stddev, 1), 0.0)
        zscores[measure] = pd.DataFrame(z, index=matrix.runs, columns=matrix.topics)
        rows += [(topic, measure, float(m), float(s)) for topic, m, s in zip(matrix.topics, mean, stddev, strict=True)]
    statistics = pd.DataFrame(rows, columns=["topic", "measure", "mean", "stddev"])
    name = name or f"{qrels_name}-z"
    _store_standardisation(engine, name, qrels_name, list(matrix.runs), statistics, zscores)
    if path is not None:  # measures by trec_eval's names, as its -Z file has them
        path.write_text("".join(f"{t} {printed[m]} {mean:.4f} {sd:.4f}\n" for t, m, mean, sd in rows))
    return Standardised(name, qrels_name, matrix.runs, statistics, zscores)


def _store_standardisation(
    engine: Engine,
    name: str,
    qrels_name: str,
    runs: list[str],
    statistics: pd.DataFrame,
    zscores: dict[str, pd.DataFrame],
) -> None:
    with unit_of_work(engine) as session:
        session.execute(delete(Standardisation).where(Standardisation.name == name))
        stored = Standardisation(name=name, qrels=qrels_name, measures=list(zscores), runs=runs)
        session.add(stored)
        session.flush()
        session.execute(
            insert(StandardisationStatistic),
            [
                {"standardisation_id": stored.id, "topic": str(t), "measure": m, "mean": mean, "stddev": sd}
                for t, m, mean, sd in statistics.itertuples(index=False)
            ],
        )
        session.execute(
            insert(StandardisedValue),
            [
                {
                    "standardisation_id": stored.id,
                    "measure": measure,
                    "run": str(run),
                    "topic": str(topic),
                    "z": float(z),
                }
                for measure, frame in zscores.items()
                for run, row in frame.iterrows()
                for topic, z in row.items()
            ],
        )


def read_standardisation(engine: Engine, name: str) -> Standardised:
    """A stored standardisation: its statistics and z-scores, as :func:`standardize` returned them."""
    with read_only(engine) as session:
        stored = repo.get_named(
            session,
            Standardisation,
            name,
            f"No standardisation named '{name}'.",
            Remedy(cli="Make one with 'evalstore standardize --qrels QRELS --measure M --name NAME'."),
        )
        statistics = pd.DataFrame(
            session.execute(
                select(
                    StandardisationStatistic.topic,
                    StandardisationStatistic.measure,
                    StandardisationStatistic.mean,
                    StandardisationStatistic.stddev,
                )
                .where(StandardisationStatistic.standardisation_id == stored.id)
                .order_by(StandardisationStatistic.measure, StandardisationStatistic.topic)
            ).all(),
            columns=["topic", "measure", "mean", "stddev"],
        )
        values = pd.DataFrame(
            session.execute(
                select(
                    StandardisedValue.measure, StandardisedValue.run, StandardisedValue.topic, StandardisedValue.z
                ).where(StandardisedValue.standardisation_id == stored.id)
            ).all(),
            columns=["measure", "run", "topic", "z"],
        )
        zscores = {
            str(measure): group.pivot(index="run", columns="topic", values="z").rename_axis(index=None, columns=None)
            for measure, group in values.groupby("measure")
        }
        return Standardised(stored.name, stored.qrels, list(stored.runs), statistics, zscores)
