"""What every evaluation kind provides, and the types the layers above share.

An evaluation *kind* (ranking, classifier, clustering) is one object (:class:`EvaluationKind`)
that runs a claimed job, reads a finished evaluation back, ranks what was evaluated against the
same judgments, and says what MLflow should receive. The worker, MLflow tracking, leaderboards and
comparisons look the kind up in :data:`evalstore.services.kinds.KINDS`; none of them branches on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from sqlalchemy import Engine

from evalstore.db.repositories import AggregateRow, PerQueryValues
from evalstore.db.session import unit_of_work
from evalstore.services import jobs
from evalstore.services.context import AppContext
from evalstore.services.jobs import ClaimedJob

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class JobTimings:
    """Seconds spent in each step of one job (the benchmark reports them)."""

    load: float = 0.0
    compute: float = 0.0
    store: float = 0.0


class StoredEvaluation(Protocol):
    """A finished evaluation of any kind, as computed just now or read back from the store."""

    @property
    def kind(self) -> str: ...

    @property
    def evaluation_id(self) -> int: ...

    @property
    def header(self) -> dict[str, Any]: ...  # hashes and versions; "results_version" at least


@dataclass(frozen=True)
class EvaluationSummary:
    """What running (or reusing) one job led to. ``inputs`` names what was evaluated (a run, a
    prediction set) and ``judgments`` what against (qrels, gold labels)."""

    evaluation_id: int
    inputs: str
    judgments: str
    reused: bool
    topics: int  # topics of a ranking, groups of a classification
    missing_topics: tuple[str, ...] = ()
    timings: JobTimings = field(default_factory=JobTimings)


# (artifact file, figure): SVG text (evalstore.svg_charts) or a matplotlib Figure (evalstore.plots)
Figures = Callable[[], Iterator[tuple[str, Any]]]


@dataclass
class ComputedJob:
    """A claimed job's results, computed and not yet stored: what :func:`jobs.store_results`
    writes. MLflow gets them later, read back from the store by the deliverer."""

    evaluation_id: int
    inputs: str
    judgments: str
    topics: int
    missing_topics: tuple[str, ...]
    timings: JobTimings
    per_query: PerQueryValues
    aggregates: list[AggregateRow]
    settings: dict[str, Any] | None

    def summary(self) -> EvaluationSummary:
        return EvaluationSummary(
            self.evaluation_id, self.inputs, self.judgments, False, self.topics, self.missing_topics, self.timings
        )


def store_computed(engine: Engine, job: ClaimedJob, computed: ComputedJob) -> EvaluationSummary:
    """Store a computed job's results in one unit of work (JobLost if the job was taken away), their
    MLflow delivery pending; the worker does the same with every measure's summaries
    (:meth:`Worker.process_one`)."""
    started = time.perf_counter()
    with unit_of_work(engine) as session:
        header = jobs.results_header(session, job)
        jobs.store_results(session, job, header, computed.per_query, computed.aggregates, computed.settings)
    computed.timings.store = time.perf_counter() - started
    return computed.summary()


@dataclass(frozen=True)
class MlflowRun:
    """Everything one MLflow run of an evaluation (or comparison) holds; tracking logs it as it
    is, whatever the kind. ``experiment`` is the judgments' name (qrels or gold labels)."""

    experiment: str
    name: str
    tags: dict[str, str]
    params: dict[str, Any]
    metrics: dict[str, float | None]  # canonical measure name -> value (None and NaN are skipped)
    parquet: dict[str, pd.DataFrame] = field(default_factory=dict)  # artifact file -> frame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # MLflow log_table file -> frame
    texts: dict[str, str] = field(default_factory=dict)
    dicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    figures: Figures | None = None  # drawn only when logged


@dataclass(frozen=True)
class Report:
    """What ``evaluate`` shows of the jobs it asked for (:mod:`evalstore.services.orchestration`)."""

    title: str
    columns: list[str]
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class Leaderboard:
    """Everything evaluated against one set of judgments, best first. ``records`` carry full
    precision (JSON, CSV); ``cells`` are the same rows as a table shows them."""

    title: str
    record_columns: list[str]
    records: list[dict[str, Any]]
    cell_columns: list[str]
    cells: list[dict[str, str]]
    warnings: list[str] = field(default_factory=list)


class EvaluationKind(Protocol):
    """One kind of evaluation, registered once in :data:`evalstore.services.kinds.KINDS`."""

    name: str

    def compute(self, engine: Engine, job: ClaimedJob, *, context: AppContext | None = None) -> ComputedJob:
        """Read a claimed job's inputs and compute its results, storing nothing (JobLost if its
        inputs were deleted). ``context`` keeps the judgments read, for the next job."""
        ...

    def read_back(self, engine: Engine, evaluation_id: int) -> StoredEvaluation:
        """A finished evaluation as MLflow gets it."""
        ...

    def mlflow_run(self, stored: StoredEvaluation) -> MlflowRun:
        """What MLflow receives for a finished evaluation."""
        ...

    def leaderboard(
        self,
        engine: Engine,
        *,
        judgments: str,
        measures: list[str],
        sort: str | None,
        options: dict[str, Any] | None = None,
    ) -> Leaderboard:
        """Everything evaluated against ``judgments`` (qrels or gold labels), best first; with
        ``options``, only evaluations made with them (the ranking kind's -l, -M, -J, missing)."""
        ...


def per_query_values(
    query_ids: Iterable[object], numeric: dict[str, np.ndarray], textual: dict[str, Iterable[object]] | None = None
) -> PerQueryValues:
    """An evaluation's values as stored: a ranking evaluation's per-topic values, or a
    classification's per-group ones, each measure's on ``query_ids``."""
    return PerQueryValues(
        [str(q) for q in query_ids],
        {name: np.asarray(values, dtype=np.float64) for name, values in numeric.items()},
        {name: [str(v) for v in values] for name, values in (textual or {}).items()},
    )


def topic_list(topics: Sequence[str], shown: int = 5) -> str:
    """'qrels topic 7', '3 qrels topics (1, 2, 3)', or the first few and how many more."""
    if len(topics) == 1:
        return f"qrels topic {topics[0]}"
    listed = ", ".join(topics[:shown])
    more = f" and {len(topics) - shown} more" if len(topics) > shown else ""
    return f"{len(topics)} qrels topics ({listed}{more})"
