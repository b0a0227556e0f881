"""SQLAlchemy 2 typed models. Tables only: no queries, no behaviour.

The schema is created and changed only by Alembic migrations (``migrations/``); every
constraint and index is named (batch migrations on SQLite cannot drop what they cannot name).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "pk": "pk_%(table_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
}

Double = Float(precision=53)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


# A key over ids read from files (topic ids, docnos, item ids, split units: up to 4 KiB each) is
# on PostgreSQL a unique index over each id's key instead (migrations 0040 and 0043: a B-tree
# entry holds at most 2704 bytes), named uq_<table>_key; lookups name it through
# evalstore.db.keys. The constraints and primary keys below stay what SQLite has; the unique
# constraints PostgreSQL does not have say so here (SQLITE_ONLY), and migrations/env.py leaves
# them out of its comparison there (Alembic does not compare primary keys).
SQLITE_ONLY = {"sqlite_only": True}


QRELS_KINDS = ("relevance", "subtopics", "preferences")


class QrelsSet(Base):
    """A named set of judgments: relevance (qrels), subtopic (diversity) or preference judgments."""

    __tablename__ = "qrels_sets"
    __table_args__ = (CheckConstraint("kind IN ('relevance', 'subtopics', 'preferences')", name="kind"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    kind: Mapped[str] = mapped_column(String(20), server_default="relevance")
    description: Mapped[str | None] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64), index=True)
    row_count: Mapped[int] = mapped_column(Integer)
    topic_count: Mapped[int] = mapped_column(Integer)
    source: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Judgment(Base):
    """One judgment of a document for a topic: once per topic in relevance qrels (negative relevance
    is trec_eval's "pooled but unjudged"), once per subtopic in subtopic qrels, once per judgment
    sub-group in preference judgments."""

    __tablename__ = "judgments"
    __table_args__ = (
        UniqueConstraint("qrels_id", "topic", "doc", "iteration", "subgroup", info=SQLITE_ONLY),
        # serves the run-to-judgments join by itself (repositories.judged_ranks; migration 0009)
        Index("ix_judgments_qrels_id_topic_doc_relevance", "qrels_id", "topic", "doc", "relevance", info=SQLITE_ONLY),
        {"sqlite_with_rowid": False},
    )

    qrels_id: Mapped[int] = mapped_column(ForeignKey("qrels_sets.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    topic: Mapped[str] = mapped_column(Text)
    doc: Mapped[str] = mapped_column(Text)
    relevance: Mapped[int] = mapped_column(SmallInteger)
    # TREC's second qrels column: usually 0; the judgment group under `-R qrels_jg` and in
    # preference judgments; the subtopic in subtopic qrels.
    iteration: Mapped[str] = mapped_column(Text, default="0")
    # preference judgments: the judgment sub-group, and the level as written (relevance then says
    # relevant, level > 0, or not); "0" and NULL for the other kinds
    subgroup: Mapped[str] = mapped_column(Text, server_default="0")
    level: Mapped[float | None] = mapped_column(Double)
    assessor: Mapped[str | None] = mapped_column(String(200))


class Run(Base):
    """A registered system run: a ranked list of documents per topic."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    system: Mapped[str | None] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    tag: Mapped[str | None] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64), index=True)
    row_count: Mapped[int] = mapped_column(Integer)
    topic_count: Mapped[int] = mapped_column(Integer)
    source: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RunRow(Base):
    """One ranked row of a run, in file order. ``rank`` is kept as given and never used to rank:
    evaluation orders by score descending, then docno descending (trec_eval)."""

    __tablename__ = "run_rows"
    # Bulk loads decide this table's shape (7M rows per run is normal):
    # - no unique index on (run_id, topic, doc): ingestion refuses duplicates before storing;
    # - no foreign key to runs: its per-row trigger makes COPY 3x slower; the service deletes a
    #   run's rows in the same transaction as the run;
    # - PostgreSQL: LIST-partitioned by run_id, one partition per run (run_rows_p<id>), with no
    #   index at all: COPY into a fresh partition runs at ~1M rows/s, a run is read by scanning its
    #   own partition, and deleting a run is DROP TABLE. The primary key below exists on SQLite
    #   (WITHOUT ROWID, clustered by run) and for the ORM; migration 0001 says so.
    __table_args__ = ({"sqlite_with_rowid": False, "postgresql_partition_by": "LIST (run_id)"},)

    run_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    topic: Mapped[str] = mapped_column(Text)
    doc: Mapped[str] = mapped_column(Text)
    score: Mapped[float] = mapped_column(Double)
    rank: Mapped[int] = mapped_column(Integer)
    # 1-based rank within the topic in trec_eval order (score desc, docno desc), computed at
    # registration so pools can read a run's top k in SQL; the server default only serves
    # migration 0003 on SQLite.
    trec_rank: Mapped[int] = mapped_column(Integer, server_default="0")


class RunTopic(Base):
    """How many documents a run retrieved for a topic: with the stored trec_eval ranks, this is
    all an evaluation needs of the run's unjudged documents (see repositories.judged_ranks)."""

    __tablename__ = "run_topics"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    topic: Mapped[str] = mapped_column(Text, primary_key=True)
    retrieved: Mapped[int] = mapped_column(Integer)


class RunJudgedRanks(Base):
    """A run's judged ranks against one relevance qrels set, as :func:`repositories.judged_ranks`
    joins them (topic, rank, relevance; Arrow IPC), worked out in memory when a task's submission
    is stored: the server holds the run's rows and the task's qrels then, and the worker reads this
    one row instead of joining the run's rows with the judgments (~20-28 ms of a DL-sized job on
    SQLite). Read only while both hashes match the run and qrels they were worked out from, and
    the version the way they were worked out."""

    __tablename__ = "run_judged_ranks"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    qrels_id: Mapped[int] = mapped_column(ForeignKey("qrels_sets.id", ondelete="CASCADE"), primary_key=True)
    run_hash: Mapped[str] = mapped_column(String(64))
    qrels_hash: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)  # repositories.JUDGED_RANKS_VERSION
    ranks: Mapped[bytes] = mapped_column(LargeBinary)


# what one evaluation evaluates: a run on qrels, a prediction set, or an answer run on a nugget bank
EVALUATION_INPUTS = (
    "(run_id IS NOT NULL AND qrels_id IS NOT NULL AND prediction_set_id IS NULL "
    "AND answer_run_id IS NULL AND nugget_bank_id IS NULL) OR "
    "(run_id IS NULL AND qrels_id IS NULL AND prediction_set_id IS NOT NULL "
    "AND answer_run_id IS NULL AND nugget_bank_id IS NULL) OR "
    "(run_id IS NULL AND qrels_id IS NULL AND prediction_set_id IS NULL "
    "AND answer_run_id IS NOT NULL AND nugget_bank_id IS NOT NULL)"
)


class Evaluation(Base):
    """An evaluation job and the header of its results: one per (run, qrels, measures, options)
    for a ranking run, or one per (prediction set, options) for classifier predictions or a
    clustering (migration 0007). Both kinds share the queue, the workers and MLflow logging; a
    classification's per-group values are its ``query_values`` (the groups as its queries)."""

    __tablename__ = "evaluations"
    __table_args__ = (
        UniqueConstraint("run_id", "qrels_id", "options_hash"),
        UniqueConstraint("prediction_set_id", "options_hash"),
        CheckConstraint(EVALUATION_INPUTS, name="inputs"),
        # an index rather than a constraint: SQLite adds it without copying the table (0026_answers)
        Index("ix_evaluations_answers_options", "answer_run_id", "nugget_bank_id", "options_hash", unique=True),
        Index("ix_evaluations_state_lease", "state", "lease_expires_at"),
        Index("ix_evaluations_mlflow_state", "mlflow_state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    qrels_id: Mapped[int | None] = mapped_column(ForeignKey("qrels_sets.id", ondelete="CASCADE"), index=True)
    prediction_set_id: Mapped[int | None] = mapped_column(
        ForeignKey("prediction_sets.id", ondelete="CASCADE"), index=True
    )
    # an answer run judged by a nugget bank (migration 0026_answers)
    answer_run_id: Mapped[int | None] = mapped_column(ForeignKey("answer_runs.id", ondelete="CASCADE"), index=True)
    nugget_bank_id: Mapped[int | None] = mapped_column(ForeignKey("nugget_banks.id", ondelete="CASCADE"), index=True)
    # classification: what the options led to (threshold used, confusion matrix, curve points)
    settings: Mapped[dict[str, Any] | None] = mapped_column(JSON, deferred=True)
    # where the heavy part runs and with what settings ({"name": "duckdb", "memory_limit": "2GB"});
    # None: the local engine (migration 0017). Not in the options hash: the numbers are the same
    backend: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    measures: Mapped[str] = mapped_column(Text)
    options: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    options_hash: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(20), default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    error: Mapped[str | None] = mapped_column(Text)
    worker_id: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    evalstore_version: Mapped[str | None] = mapped_column(String(50))
    run_hash: Mapped[str | None] = mapped_column(String(64))
    qrels_hash: Mapped[str | None] = mapped_column(String(64))
    # Bumped each time results are stored, so MLflow gets one run per stored result, never two.
    results_version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # MLflow logging is its own small job: pending -> logging (leased) -> logged, or back to
    # pending with the error when MLflow fails; "none" before results exist.
    mlflow_state: Mapped[str] = mapped_column(String(20), default="pending")
    mlflow_run_id: Mapped[str | None] = mapped_column(String(64))
    mlflow_error: Mapped[str | None] = mapped_column(Text)
    mlflow_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    mlflow_lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Worker(Base):
    """A worker process, so that `evaluate --wait` knows whether anyone will pick its jobs up."""

    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    hostname: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(20), default="running")
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    jobs_done: Mapped[int] = mapped_column(Integer, default=0)


class EvaluationQueries(Base):
    """The queries (topics, or groups of a classification) an evaluation's per-query values are
    given for, in the order :class:`QueryValues` holds them."""

    __tablename__ = "evaluation_queries"

    evaluation_id: Mapped[int] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), primary_key=True)
    query_ids: Mapped[list[str]] = mapped_column(JSON)


class QueryValues(Base):
    """One measure's values on every query of one evaluation (migration 0018): ``numbers`` holds
    them as float64 (little-endian, in :class:`EvaluationQueries` order), ``texts`` the values
    of relstring-like measures. An all_trec evaluation of a 7M-row run is ~100 rows here, where
    a row per value was ~700k (0.35-0.5 s of COPY, beside ~0.1 s of work)."""

    __tablename__ = "query_values"

    evaluation_id: Mapped[int] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), primary_key=True)
    measure: Mapped[str] = mapped_column(String(200), primary_key=True)
    numbers: Mapped[bytes | None] = mapped_column(LargeBinary)
    texts: Mapped[list[str] | None] = mapped_column(JSON)


class AggregateResult(Base):
    """A measure's summary over the queries of one evaluation (trec_eval's ``all`` line)."""

    __tablename__ = "aggregate_results"

    evaluation_id: Mapped[int] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), primary_key=True)
    measure: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[float | None] = mapped_column(Double)
    text_value: Mapped[str | None] = mapped_column(Text)
    query_count: Mapped[int] = mapped_column(Integer)


class MeasureSummary(Base):
    """A measure's mean and 95% bootstrap interval over the topics of one evaluation (``scope``
    "all"), or over a task's public or private topics (``scope`` a digest of the topic filter):
    stored by the worker with the values, so a leaderboard reads a row per run and measure
    instead of each run's per-topic values."""

    __tablename__ = "measure_summaries"

    evaluation_id: Mapped[int] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), primary_key=True)
    scope: Mapped[str] = mapped_column(String(64), primary_key=True)
    measure: Mapped[str] = mapped_column(String(200), primary_key=True)
    topics: Mapped[int] = mapped_column(Integer)
    mean: Mapped[float | None] = mapped_column(Double)
    ci_low: Mapped[float | None] = mapped_column(Double)
    ci_high: Mapped[float | None] = mapped_column(Double)


class BoardTiers(Base):
    """A board's significance letters on one measure (Tukey's HSD, runs x topics), keyed by a
    digest of what decides them: the qrels as they are, the measure, each run's evaluation and
    mean, the topics. Computed by a worker after evaluations finish; a page reads them. ``slot``:
    a digest of what a page asks for (the qrels as they are, the measure, the topics' scope), so a
    page whose board is ahead of the stored letters shows the newest of its slot."""

    __tablename__ = "board_tiers"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    qrels_id: Mapped[int] = mapped_column(ForeignKey("qrels_sets.id", ondelete="CASCADE"), index=True)
    slot: Mapped[str | None] = mapped_column(String(64), index=True)  # None: stored before slots
    letters: Mapped[dict[str, str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class HealthReportRow(Base):
    """A task's collection-health report (``services.health``), computed by a worker after
    evaluations finish, keyed by a digest of what decides it (:func:`health.report_key`: the
    qrels as they are, the task's runs with their finished evaluations and teams, the measures,
    the parameters and the seed); ``error`` instead of ``report`` when the runs give none. A page
    reads the newest; its key says whether it is still current."""

    __tablename__ = "health_reports"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    report: Mapped[str | None] = mapped_column(Text)  # HealthReport as JSON text (NaN kept)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PairTests(Base):
    """A task's paired tests on one measure (the compare page's, for every pair of its runs),
    computed by a worker after evaluations finish. ``slot`` is a digest of what is asked (the
    qrels as they are, the task, the measure, the topics' scope, the test, alpha and the seed);
    ``key`` adds what decides the numbers (each run's evaluation, the topics). ``stats`` holds the
    pairs' arrays packed (``ranking.pairs``); a page reads the newest of a slot."""

    __tablename__ = "pair_tests"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    slot: Mapped[str] = mapped_column(String(64), index=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    measure: Mapped[str] = mapped_column(String(200))
    test: Mapped[str] = mapped_column(String(32))
    seed: Mapped[int | None] = mapped_column(Integer)  # None: nothing random was drawn
    runs: Mapped[dict[str, int]] = mapped_column(JSON)  # run -> the evaluation its values are from
    topics: Mapped[str] = mapped_column(String(64))  # a digest of the topics, in order
    stats: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TopicMedians(Base):
    """The per-topic medians of a task's runs on one measure (a run's page sets the run against
    them), computed by a worker as evaluations finish. ``slot`` is a digest of what a page asks
    for (the qrels as they are, the task, the measure, the topics' scope); ``key`` adds each run's
    evaluation. ``topics`` in the medians' order (sorted); ``medians`` float64 little-endian."""

    __tablename__ = "topic_medians"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    slot: Mapped[str] = mapped_column(String(64), index=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    measure: Mapped[str] = mapped_column(String(200))
    runs: Mapped[dict[str, int]] = mapped_column(JSON)  # run -> the evaluation its values are from
    topics: Mapped[list[str]] = mapped_column(JSON)
    medians: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AnswerTiers(Base):
    """An answer task's board's significance letters on one measure (Tukey's HSD on the answer
    runs' per-topic scores), keyed by a digest of what decides them: the nugget bank, the measure,
    each run's evaluation and mean. Computed by a worker after evaluations finish; a page reads
    them."""

    __tablename__ = "answer_tiers"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    letters: Mapped[dict[str, str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Pool(Base):
    """A judging pool built from runs by a strategy; the same inputs and seed give the same pool."""

    __tablename__ = "pools"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    strategy: Mapped[str] = mapped_column(String(50))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    seed: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # what assessors see in the browser: the topics' statements, the documents' text, and the
    # grades with their labels ({"0": "Not relevant", ...}; None: POOL_GRADES)
    # (names: a topic set imported again with --replace stays this pool's)
    topic_set: Mapped[str | None] = mapped_column(String(200))
    collection: Mapped[str | None] = mapped_column(String(200))
    grades: Mapped[dict[str, str] | None] = mapped_column(JSON)
    # None: every assessor judges every document. A share: a topic is its first assessor's, and
    # this seeded share of it is shown, blind, to each other assessor (for agreement)
    double_share: Mapped[float | None] = mapped_column(Double)
    double_seed: Mapped[int | None] = mapped_column(BigInteger)
    # the judge whose label and explanation assessors see beside each document (None: none, so
    # human labels stay independent; 0023)
    suggest_judge: Mapped[str | None] = mapped_column(String(200))


class PoolEntry(Base):
    """A (topic, doc) in a pool, with its contributing runs, best rank and judging order.

    No foreign key to pools, as for run_rows: its per-row trigger made the COPY of a 1M-entry
    pool 2.5x slower; the service deletes a pool's entries in the transaction that deletes it."""

    __tablename__ = "pool_entries"
    __table_args__ = ({"sqlite_with_rowid": False},)

    pool_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    topic: Mapped[str] = mapped_column(Text, primary_key=True)
    doc: Mapped[str] = mapped_column(Text, primary_key=True)
    contributors: Mapped[list[str]] = mapped_column(JSON, default=list)
    best_rank: Mapped[int] = mapped_column(Integer)
    judge_order: Mapped[int | None] = mapped_column(Integer)


class PoolJudgment(Base):
    """One assessor's label for a pooled document (several assessors per pool)."""

    __tablename__ = "pool_judgments"
    __table_args__ = ({"sqlite_with_rowid": False},)

    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id", ondelete="CASCADE"), primary_key=True)
    topic: Mapped[str] = mapped_column(Text, primary_key=True)
    doc: Mapped[str] = mapped_column(Text, primary_key=True)
    assessor: Mapped[str] = mapped_column(String(200), primary_key=True)
    relevance: Mapped[int] = mapped_column(SmallInteger)  # -1: seen, not rateable (skipped)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    seconds: Mapped[float | None] = mapped_column(Double)  # time the assessor spent on it (browser judging)
    note: Mapped[str | None] = mapped_column(Text)
    # the judge's label shown to the assessor as a suggestion when they judged, and the judge's
    # name (None: no suggestion was shown); agreement with it is reported apart (0023)
    suggested: Mapped[int | None] = mapped_column(SmallInteger)
    suggested_by: Mapped[str | None] = mapped_column(String(200))


class TopicSet(Base):
    """Topic statements (title, description, narrative), shown to assessors and on run pages."""

    __tablename__ = "topic_sets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    source: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Topic(Base):
    __tablename__ = "topics"

    topic_set_id: Mapped[int] = mapped_column(ForeignKey("topic_sets.id", ondelete="CASCADE"), primary_key=True)
    topic: Mapped[str] = mapped_column(Text, primary_key=True)
    title: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    narrative: Mapped[str | None] = mapped_column(Text)


class Collection(Base):
    """Documents' text, for judging in the browser (only the pooled documents need to be here)."""

    __tablename__ = "collections"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    source: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Document(Base):
    """A document's title and text. No foreign key, as run_rows: millions go in by COPY; the
    service deletes a collection's documents in the transaction that deletes it."""

    __tablename__ = "documents"
    __table_args__ = ({"sqlite_with_rowid": False},)

    collection_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    doc: Mapped[str] = mapped_column(Text, primary_key=True)
    title: Mapped[str | None] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text)


class Split(Base):
    """A split of a qrels set's topics (or a label set's items) into folds of train and test units,
    by one estimation method, reproducible from its seed."""

    __tablename__ = "splits"
    __table_args__ = (CheckConstraint("source_kind IN ('qrels', 'labels')", name="source_kind"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    source_kind: Mapped[str] = mapped_column(String(20))
    source: Mapped[str] = mapped_column(String(200))  # the qrels' or label set's name
    method: Mapped[str] = mapped_column(String(20))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    seed: Mapped[int | None] = mapped_column(BigInteger)
    folds: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SplitMember(Base):
    """A unit (topic or item) in a fold's train or test part; ``weight``: how often a bootstrap
    drew it (1 otherwise). No foreign key, as run_rows: a split of 1M items goes in by COPY."""

    __tablename__ = "split_members"
    __table_args__ = (CheckConstraint("part IN ('train', 'test')", name="part"), {"sqlite_with_rowid": False})

    split_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    fold: Mapped[int] = mapped_column(Integer, primary_key=True)
    part: Mapped[str] = mapped_column(String(5), primary_key=True)
    unit: Mapped[str] = mapped_column(Text, primary_key=True)
    weight: Mapped[int] = mapped_column(Integer, default=1)


class FoldResult(Base):
    """An evaluation's mean over one fold's test topics (``evaluate --splits``)."""

    __tablename__ = "fold_results"

    split_id: Mapped[int] = mapped_column(ForeignKey("splits.id", ondelete="CASCADE"), primary_key=True)
    evaluation_id: Mapped[int] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), primary_key=True)
    fold: Mapped[int] = mapped_column(Integer, primary_key=True)
    measure: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[float | None] = mapped_column(Double)


class ReproResult(Base):
    """How far a reproduced run is from the original (``evalstore repro``; Breuer et al. 2020),
    kept with the evaluations it was computed from: KTU, RBO, RMSE, nRMSE, ER, DeltaRI and the
    t-tests' p-values in ``figures`` (rows of part, measure, figure, value)."""

    __tablename__ = "repro_results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(20))  # reproducibility (same qrels) | replicability
    original_evaluation_id: Mapped[int] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), index=True)
    reproduced_evaluation_id: Mapped[int] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), index=True)
    original_baseline_evaluation_id: Mapped[int | None] = mapped_column(
        ForeignKey("evaluations.id", ondelete="CASCADE")
    )
    reproduced_baseline_evaluation_id: Mapped[int | None] = mapped_column(
        ForeignKey("evaluations.id", ondelete="CASCADE")
    )
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    figures: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Standardisation(Base):
    """Per-topic means and standard deviations of measures over a qrels set's runs (Webber, Moffat
    & Zobel 2008), with the z-scores of the runs they came from (``evalstore standardize``); the
    statistics standardize later runs too (``trec-eval -Z``)."""

    __tablename__ = "standardisations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    qrels: Mapped[str] = mapped_column(String(200))  # the qrels set's name, as splits keep theirs
    measures: Mapped[list[str]] = mapped_column(JSON)
    runs: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class StandardisationStatistic(Base):
    __tablename__ = "standardisation_statistics"

    standardisation_id: Mapped[int] = mapped_column(
        ForeignKey("standardisations.id", ondelete="CASCADE"), primary_key=True
    )
    measure: Mapped[str] = mapped_column(String(200), primary_key=True)
    topic: Mapped[str] = mapped_column(Text, primary_key=True)
    mean: Mapped[float] = mapped_column(Double)
    stddev: Mapped[float] = mapped_column(Double)


class StandardisedValue(Base):
    """A run's z-score on one topic: (score - the topic's mean) / its standard deviation."""

    __tablename__ = "standardised_values"

    standardisation_id: Mapped[int] = mapped_column(
        ForeignKey("standardisations.id", ondelete="CASCADE"), primary_key=True
    )
    measure: Mapped[str] = mapped_column(String(200), primary_key=True)
    run: Mapped[str] = mapped_column(String(200), primary_key=True)
    topic: Mapped[str] = mapped_column(Text, primary_key=True)
    z: Mapped[float] = mapped_column(Double)


# --- classification and clustering --------------------------------------------------------------
# Row tables (gold_labels, predictions, prediction_scores) have no foreign key, as run_rows: 10M
# predictions go in by COPY, which a per-row trigger slows ~3x; the services delete rows with
# their set in one transaction.


class LabelSet(Base):
    """Gold labels of a classification task: one label (a set of labels when ``multilabel``),
    and optionally a group and a sample weight, per item."""

    __tablename__ = "label_sets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    description: Mapped[str | None] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    row_count: Mapped[int] = mapped_column(Integer)
    classes: Mapped[list[str]] = mapped_column(JSON)  # sorted; codes are positions in this list
    group_count: Mapped[int] = mapped_column(Integer)
    source: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    multilabel: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    weighted: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class GoldLabel(Base):
    __tablename__ = "gold_labels"
    __table_args__ = ({"sqlite_with_rowid": False},)

    label_set_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    item_id: Mapped[str] = mapped_column(Text, primary_key=True)
    label: Mapped[str] = mapped_column(Text)  # multilabel: the set as "a|b"
    group_id: Mapped[str | None] = mapped_column(Text)
    weight: Mapped[float | None] = mapped_column(Double)


class PredictionSet(Base):
    """A system's predictions for one label set: a classifier's labels and/or scores, or a
    clustering's cluster ids (kept in ``label``)."""

    __tablename__ = "prediction_sets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    label_set_id: Mapped[int] = mapped_column(ForeignKey("label_sets.id"), index=True)
    kind: Mapped[str] = mapped_column(String(20))  # classifier | clustering
    system: Mapped[str | None] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    content_hash: Mapped[str] = mapped_column(String(64))
    row_count: Mapped[int] = mapped_column(Integer)
    has_label: Mapped[bool] = mapped_column(Boolean)
    has_score: Mapped[bool] = mapped_column(Boolean)  # one binary score (P(positive class))
    score_classes: Mapped[list[str]] = mapped_column(JSON, default=list)  # one score per class
    probabilities: Mapped[bool] = mapped_column(Boolean)
    source: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Prediction(Base):
    __tablename__ = "predictions"
    __table_args__ = ({"sqlite_with_rowid": False},)

    prediction_set_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    item_id: Mapped[str] = mapped_column(Text, primary_key=True)
    label: Mapped[str | None] = mapped_column(Text)  # multilabel: the set as "a|b"
    score: Mapped[float | None] = mapped_column(Double)
    group_id: Mapped[str | None] = mapped_column(Text)


class PredictionScore(Base):
    """One class's score for one item (multiclass score columns)."""

    __tablename__ = "prediction_scores"
    __table_args__ = ({"sqlite_with_rowid": False},)

    prediction_set_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    item_id: Mapped[str] = mapped_column(Text, primary_key=True)
    class_label: Mapped[str] = mapped_column(Text, primary_key=True)
    score: Mapped[float] = mapped_column(Double)


# --- the HTTP service: accounts, tasks, submissions (migration 0012) ----------------------------

ROLES = ("admin", "organiser", "participant", "assessor", "viewer")


class User(Base):
    """A person (or a script) the HTTP service knows; the database's own credentials stay with the
    server. Passwords are kept as argon2 hashes only."""

    __tablename__ = "users"
    __table_args__ = (
        CheckConstraint("role IN ('admin', 'organiser', 'participant', 'assessor', 'viewer')", name="role"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    role: Mapped[str] = mapped_column(String(20))
    team: Mapped[str | None] = mapped_column(String(200))
    password_hash: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # asked for at /sign-up and not yet approved (disabled until an admin approves it)
    requested_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ApiToken(Base):
    """A bearer token (``purpose`` api) or a browser session (``purpose`` session). The secret is
    shown once and kept as an argon2 hash; the row id travels in the token so it is found without
    scanning."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    purpose: Mapped[str] = mapped_column(String(20), default="api")
    secret_hash: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class AccountLink(Base):
    """A single-use link an admin makes: an invite (``kind`` invite: a new account with the link's
    role and team, the name and password chosen by whoever opens it) or a password reset (``kind``
    reset, of ``user_id``). The secret travels in the link only; its SHA-256 is kept (256 random
    bits need no slow hash), and the row id in the link finds it without scanning."""

    __tablename__ = "account_links"
    __table_args__ = (CheckConstraint("kind IN ('invite', 'reset')", name="kind"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(10))
    secret_hash: Mapped[str] = mapped_column(String(64))
    role: Mapped[str | None] = mapped_column(String(20))
    team: Mapped[str | None] = mapped_column(String(200))
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_by: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    used_by: Mapped[str | None] = mapped_column(String(200))  # the account it made or reset
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Task(Base):
    """A shared task: participants submit runs, which are evaluated against the task's qrels, or
    generated answers, evaluated on a nugget bank's assignments (``nugget_bank_id``; 0036): one of
    the two is set. A hidden task shows scores to its organiser only, until it is released."""

    __tablename__ = "tasks"
    __table_args__ = (CheckConstraint("(qrels_id IS NULL) <> (nugget_bank_id IS NULL)", name="judged_by"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    qrels_id: Mapped[int | None] = mapped_column(ForeignKey("qrels_sets.id"), index=True)
    nugget_bank_id: Mapped[int | None] = mapped_column(ForeignKey("nugget_banks.id"), index=True)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), index=True)
    hidden: Mapped[bool] = mapped_column(Boolean, default=False)
    released_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    opens_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    closes_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    max_runs_per_team: Mapped[int | None] = mapped_column(Integer)
    # each team's runs per UTC day; null: the server's EVALSTORE_RUNS_PER_DAY, if set (0022)
    daily_cap: Mapped[int | None] = mapped_column(Integer)
    measures: Mapped[list[str]] = mapped_column(JSON, default=list)  # empty: evaluate's defaults
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    description: Mapped[str | None] = mapped_column(Text)  # the organiser's words to participants (0020)
    official_measure: Mapped[str | None] = mapped_column(String(200))  # what ranks the leaderboard (0022)
    # a public/private topic split (0022): the drawn private topics, stored so that they never change
    # (the qrels may gain topics later: those are public), and the fraction and seed they were drawn with
    private_topics: Mapped[list[str] | None] = mapped_column(JSON)
    private_fraction: Mapped[float | None] = mapped_column(Double)
    split_seed: Mapped[int | None] = mapped_column(BigInteger)
    # the time the organiser scheduled its release at (0036): the worker releases it then; cleared
    # by a release or a cancel
    release_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # the topic statements its participants download (0036)
    topic_set_id: Mapped[int | None] = mapped_column(ForeignKey("topic_sets.id", ondelete="SET NULL"), index=True)


class Submission(Base):
    """A run submitted to a task by a team, with what a TREC submission form asks."""

    __tablename__ = "submissions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), unique=True)
    team: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    evaluation_id: Mapped[int | None] = mapped_column(ForeignKey("evaluations.id", ondelete="SET NULL"))
    run_type: Mapped[str] = mapped_column(String(20))  # automatic | manual
    judging_precedence: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PoolAssignment(Base):
    """An assessor assigned to judge a pool."""

    __tablename__ = "pool_assignments"

    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)


class AuditEntry(Base):
    """Who did what through the service. Names, not foreign keys: the log outlives what it names."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    user_name: Mapped[str | None] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(100))
    target: Mapped[str | None] = mapped_column(String(400))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Judge(Base):
    """An LLM assessor: one OpenAI-compatible endpoint, model, prompt and parameters.
    The API key is never stored: ``api_key_env`` names the environment variable that holds it."""

    __tablename__ = "judges"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    endpoint: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(400))
    api_key_env: Mapped[str | None] = mapped_column(String(200))
    prompt_name: Mapped[str] = mapped_column(String(400))  # "umbrela", or the file it was read from
    prompt_template: Mapped[str] = mapped_column(Text)
    prompt_hash: Mapped[str] = mapped_column(String(64))
    # temperature, seed, scale, max_tokens, structured, max_concurrency, timeout
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    config_hash: Mapped[str] = mapped_column(String(64))  # what decides a label: labels are reused under it
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # the organiser who added it from the console (0036): they run and read it there; null: added
    # on the command line (an admin's on the console)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), index=True)


class JudgeLabel(Base):
    """One label a judge gave a pooled document, with its provenance (the configuration it was made
    under, the raw answer, the explanation); ``relevance`` None is unrateable, ``reason`` says why.
    Apart from the human ``pool_judgments``: a judge never overwrites a human label."""

    __tablename__ = "judge_labels"
    __table_args__ = (UniqueConstraint("judge_id", "config_hash", "pool_id", "topic", "doc", info=SQLITE_ONLY),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    judge_id: Mapped[int] = mapped_column(ForeignKey("judges.id", ondelete="CASCADE"), index=True)
    config_hash: Mapped[str] = mapped_column(String(64))
    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id", ondelete="CASCADE"), index=True)
    topic: Mapped[str] = mapped_column(Text)
    doc: Mapped[str] = mapped_column(Text)
    relevance: Mapped[int | None] = mapped_column(SmallInteger)
    reason: Mapped[str | None] = mapped_column(Text)
    raw_output: Mapped[str | None] = mapped_column(Text)
    explanation: Mapped[str | None] = mapped_column(Text)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # endpoint, model, prompt hash, params
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    seconds: Mapped[float | None] = mapped_column(Double)
    # tokens the calls for this label used, summed over its attempts and runs (None: not reported)
    input_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class JudgeRepeat(Base):
    """A label asked again (``judges run --repeats K``: repeats 2..K; the first is the
    ``JudgeLabel``), kept for the judge's self-consistency and cost, never used as a label."""

    __tablename__ = "judge_repeats"
    __table_args__ = (
        UniqueConstraint("judge_id", "config_hash", "pool_id", "topic", "doc", "repeat", info=SQLITE_ONLY),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    judge_id: Mapped[int] = mapped_column(ForeignKey("judges.id", ondelete="CASCADE"), index=True)
    config_hash: Mapped[str] = mapped_column(String(64))
    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id", ondelete="CASCADE"))
    topic: Mapped[str] = mapped_column(Text)
    doc: Mapped[str] = mapped_column(Text)
    repeat: Mapped[int] = mapped_column(Integer)
    relevance: Mapped[int | None] = mapped_column(SmallInteger)
    reason: Mapped[str | None] = mapped_column(Text)
    raw_output: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    seconds: Mapped[float | None] = mapped_column(Double)
    input_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class JudgePreference(Base):
    """One pairwise preference of a judge: for a topic, which of two runs' top ``depth`` documents
    (``kind`` "ranking") or two answer runs' answers (``kind`` "answers", depth 0) it prefers, shown
    in the order ``first``, ``second`` (each pair is asked in both orders: two rows).
    ``preferred`` 1 is the first, 2 the second, 0 a tie, None unrateable (``reason`` says why).
    ``prompt_hash`` is the SHA-256 of the prompt as sent: an answer is reused only while the runs
    still show the judge the same texts."""

    __tablename__ = "judge_preferences"
    # named by hand: the convention's name would pass PostgreSQL's 63 characters
    __table_args__ = (
        UniqueConstraint(
            "judge_id", "config_hash", "kind", "depth", "topic", "first", "second", name="uq_judge_preferences_pair"
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    judge_id: Mapped[int] = mapped_column(ForeignKey("judges.id", ondelete="CASCADE"), index=True)
    config_hash: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(20))
    depth: Mapped[int] = mapped_column(Integer)
    topic: Mapped[str] = mapped_column(String(200))
    first: Mapped[str] = mapped_column(String(200))
    second: Mapped[str] = mapped_column(String(200))
    prompt_hash: Mapped[str] = mapped_column(String(64))
    preferred: Mapped[int | None] = mapped_column(SmallInteger)
    reason: Mapped[str | None] = mapped_column(Text)
    raw_output: Mapped[str | None] = mapped_column(Text)
    explanation: Mapped[str | None] = mapped_column(Text)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    seconds: Mapped[float | None] = mapped_column(Double)
    input_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class JudgeProbe(Base):
    """A robustness probe of a judge: how many labels rise when query words or an instruction are
    inserted into judged documents."""

    __tablename__ = "judge_probes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    judge_id: Mapped[int] = mapped_column(ForeignKey("judges.id", ondelete="CASCADE"), index=True)
    config_hash: Mapped[str] = mapped_column(String(64))
    collection: Mapped[str] = mapped_column(String(200))
    qrels: Mapped[str] = mapped_column(String(200))
    result: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class QrelsVersion(Base):
    """An immutable, content-hashed version of a named qrels lineage, built from a pool's labels
    (human, a judge's, or both); its judgments are the qrels set ``qrels_id`` (named NAME@vN)."""

    __tablename__ = "qrels_versions"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    version: Mapped[int] = mapped_column(Integer)
    qrels_id: Mapped[int] = mapped_column(ForeignKey("qrels_sets.id", ondelete="CASCADE"), unique=True)
    pool_name: Mapped[str] = mapped_column(String(200))
    sources: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("qrels_versions.id", ondelete="SET NULL"))
    content_hash: Mapped[str] = mapped_column(String(64))
    counts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


# --- generated answers and nuggets (TREC RAG; migration 0026_answers) ----------------------------
# Ids are as long as the readers accept (evalstore.io.answers: runs and topics 200 characters,
# segments 400, as a ranking run's), texts of any length (Text).


class AnswerRun(Base):
    """A run of generated answers with citations. ``ranking_run_id``: its references, registered
    with it as a ranking run of the same name (rank = position in ``references``)."""

    __tablename__ = "answer_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    team: Mapped[str | None] = mapped_column(String(200))
    layout: Mapped[str] = mapped_column(String(20))  # rag24 | rag25 | assessed (text from an assignment file)
    content_hash: Mapped[str] = mapped_column(String(64))
    topic_count: Mapped[int] = mapped_column(Integer)
    ranking_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"), index=True)
    source: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AnswerTopic(Base):
    """One topic's answer: the topic's text as the run gives it, and its length in words."""

    __tablename__ = "answers"

    answer_run_id: Mapped[int] = mapped_column(ForeignKey("answer_runs.id", ondelete="CASCADE"), primary_key=True)
    topic: Mapped[str] = mapped_column(String(200), primary_key=True)
    topic_text: Mapped[str | None] = mapped_column(Text)
    response_length: Mapped[int | None] = mapped_column(Integer)


class AnswerReference(Base):
    __tablename__ = "answer_references"

    answer_run_id: Mapped[int] = mapped_column(ForeignKey("answer_runs.id", ondelete="CASCADE"), primary_key=True)
    topic: Mapped[str] = mapped_column(String(200), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)  # 0-based, as cited
    segment: Mapped[str] = mapped_column(String(400))


class AnswerSentence(Base):
    __tablename__ = "answer_sentences"

    answer_run_id: Mapped[int] = mapped_column(ForeignKey("answer_runs.id", ondelete="CASCADE"), primary_key=True)
    topic: Mapped[str] = mapped_column(String(200), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)  # 0-based
    text: Mapped[str] = mapped_column(Text)


class AnswerCitation(Base):
    """A sentence's citation: ``position`` 0 is its first."""

    __tablename__ = "answer_citations"

    answer_run_id: Mapped[int] = mapped_column(ForeignKey("answer_runs.id", ondelete="CASCADE"), primary_key=True)
    topic: Mapped[str] = mapped_column(String(200), primary_key=True)
    sentence: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    reference: Mapped[int] = mapped_column(Integer)  # the position in the answer's references
    score: Mapped[float | None] = mapped_column(Double)


class NuggetBank(Base):
    __tablename__ = "nugget_banks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    content_hash: Mapped[str] = mapped_column(String(64))
    topic_count: Mapped[int] = mapped_column(Integer)
    nugget_count: Mapped[int] = mapped_column(Integer)
    source: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # ``judge:NAME`` for a bank an LLM judge drafted (``nuggets create``): a draft is not used for
    # scoring until a person accepts it (``accepted_at``)
    drafted_by: Mapped[str | None] = mapped_column(String(200))
    accepted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # assessing in the browser (0036): who edits the bank (None: admins only), the segments'
    # texts the support page shows, and the share of each topic's answers a second assessor
    # assesses, blind, with its recorded seed (None: every assessor assesses every answer)
    organiser_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    collection: Mapped[str | None] = mapped_column(String(200))
    double_share: Mapped[float | None] = mapped_column(Double)
    double_seed: Mapped[int | None] = mapped_column(BigInteger)


class NuggetBankAssessor(Base):
    """An assessor assigned to assess answers by a nugget bank in the browser."""

    __tablename__ = "nugget_bank_assessors"

    bank_id: Mapped[int] = mapped_column(ForeignKey("nugget_banks.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)


class NuggetTopic(Base):
    __tablename__ = "nugget_topics"

    bank_id: Mapped[int] = mapped_column(ForeignKey("nugget_banks.id", ondelete="CASCADE"), primary_key=True)
    topic: Mapped[str] = mapped_column(String(200), primary_key=True)
    query: Mapped[str | None] = mapped_column(Text)


class Nugget(Base):
    __tablename__ = "nuggets"
    __table_args__ = (
        UniqueConstraint("bank_id", "topic", "position"),
        CheckConstraint("importance IN ('vital', 'okay')", name="importance"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bank_id: Mapped[int] = mapped_column(ForeignKey("nugget_banks.id", ondelete="CASCADE"))
    topic: Mapped[str] = mapped_column(String(200))
    position: Mapped[int] = mapped_column(Integer)  # 0-based, the bank's order
    text: Mapped[str] = mapped_column(Text)
    importance: Mapped[str] = mapped_column(String(10))
    # provenance (0036): the judge that drafted it (``judge:NAME``), the person who last changed
    # it (added, edited, merged, split) and the person who reviewed it (accepted or edited)
    drafted_by: Mapped[str | None] = mapped_column(String(200))
    edited_by: Mapped[str | None] = mapped_column(String(200))
    reviewed_by: Mapped[str | None] = mapped_column(String(200))


class NuggetAssignment(Base):
    """Whether an answer holds a nugget, and who said so: ``assessor`` is ``human`` (an assessor's
    or NIST's labels, imported) or ``judge:NAME`` (an LLM judge)."""

    __tablename__ = "nugget_assignments"
    __table_args__ = (
        CheckConstraint("label IN ('support', 'partial_support', 'not_support')", name="label"),
        Index("ix_nugget_assignments_answer_run_id", "answer_run_id"),
    )

    nugget_id: Mapped[int] = mapped_column(ForeignKey("nuggets.id", ondelete="CASCADE"), primary_key=True)
    answer_run_id: Mapped[int] = mapped_column(ForeignKey("answer_runs.id", ondelete="CASCADE"), primary_key=True)
    assessor: Mapped[str] = mapped_column(String(200), primary_key=True)
    label: Mapped[str] = mapped_column(String(20))
    source: Mapped[str | None] = mapped_column(Text)  # the file imported, or the judge's model
    assessed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    seconds: Mapped[float | None] = mapped_column(Double)  # a person's time on it (browser assessing)


class CitationSupport(Base):
    """Whether a sentence's first citation (``segment``) supports it: 2 fully, 1 partly, 0 not;
    who said so."""

    __tablename__ = "citation_supports"
    __table_args__ = (CheckConstraint("label IN (0, 1, 2)", name="label"),)

    answer_run_id: Mapped[int] = mapped_column(ForeignKey("answer_runs.id", ondelete="CASCADE"), primary_key=True)
    topic: Mapped[str] = mapped_column(String(200), primary_key=True)
    sentence: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    assessor: Mapped[str] = mapped_column(String(200), primary_key=True)
    segment: Mapped[str] = mapped_column(String(400))
    label: Mapped[int] = mapped_column(SmallInteger)
    assessed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    seconds: Mapped[float | None] = mapped_column(Double)  # a person's time on it (browser assessing)
    source: Mapped[str | None] = mapped_column(Text)  # a judge's label: its provenance, as JSON


class JudgeAnswerCall(Base):
    """One call an answer assessor made (``purpose``: nuggets assign, support assess, nuggets
    create), in the judges' cost ledger beside their relevance labels: what it used, whether it
    gave a label (``labelled``; else ``reason``). ``item`` names what was asked; a label made by
    the call names its id in its provenance."""

    __tablename__ = "judge_answer_calls"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    judge_id: Mapped[int] = mapped_column(ForeignKey("judges.id", ondelete="CASCADE"), index=True)
    config_hash: Mapped[str] = mapped_column(String(64))
    purpose: Mapped[str] = mapped_column(String(40))
    item: Mapped[str] = mapped_column(Text)
    labelled: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer)
    seconds: Mapped[float | None] = mapped_column(Double)
    input_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
