"""Queries over the store. Every function takes the caller's session and none commits (services
do). Bulk reads into Arrow go through :mod:`evalstore.db.arrow_reads`: on SQLite over the session's
own connection, on PostgreSQL over a kept ADBC connection of their own, which sees committed rows
only (see there why that is enough for what is read that way)."""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import sqlalchemy as sa
from sqlalchemy import and_, case, delete, func, insert, select, text
from sqlalchemy.orm import Session

from evalstore.db import arrow_reads, pgcopy
from evalstore.db.arrow_reads import BATCH_ROWS
from evalstore.db.keys import id_in, same_id
from evalstore.db.models import (
    AggregateResult,
    Base,
    Collection,
    Evaluation,
    EvaluationQueries,
    GoldLabel,
    Judgment,
    Pool,
    Prediction,
    PredictionScore,
    PredictionSet,
    QrelsSet,
    QrelsVersion,
    QueryValues,
    Run,
    RunJudgedRanks,
    RunRow,
    RunTopic,
    Split,
    TopicSet,
)
from evalstore.db.staging import StagedRows
from evalstore.errors import NotFoundError, Remedy
from evalstore.trec_order import ranks_and_counts

PARALLEL_READS = 2  # concurrent PostgreSQL reads of one large query (this service's machines: 2 cores)
Progress = Callable[[int], None]


Named = TypeVar("Named", bound=Base)


def find_named(session: Session, model: type[Named], name: str) -> Named | None:
    """The row of ``model`` (a table with a unique ``name``) called ``name``, or None."""
    return session.scalar(select(model).where(model.__table__.c.name == name))


def get_named(session: Session, model: type[Named], name: str, missing: str, remedy: Remedy) -> Named:
    """:func:`find_named`, refused with ``missing`` (what is wrong) and ``remedy`` when there is none."""
    found = find_named(session, model, name)
    if found is None:
        raise NotFoundError(missing, remedy=remedy)
    return found


def get_run(session: Session, name: str) -> Run:
    remedy = Remedy(cli="See 'evalstore runs list' for the registered runs.")
    return get_named(session, Run, name, f"No run named '{name}'.", remedy)


def get_pool(session: Session, name: str) -> Pool:
    return get_named(
        session,
        Pool,
        name,
        f"No pool named '{name}'.",
        Remedy(
            cli=f"List pools with 'evalstore pool list', or build one with "
            f"'evalstore pool build --name {name} --all-runs'."
        ),
    )


def get_topic_set(session: Session, name: str) -> TopicSet:
    return get_named(
        session,
        TopicSet,
        name,
        f"No topics named '{name}'.",
        Remedy(cli=f"Import them with 'evalstore topics import PATH --name {name}'."),
    )


def get_collection(session: Session, name: str) -> Collection:
    return get_named(
        session,
        Collection,
        name,
        f"No collection named '{name}'.",
        Remedy(cli=f"Import it with 'evalstore documents import PATH --collection {name}'."),
    )


def find_split(session: Session, name: str) -> Split | None:
    return find_named(session, Split, name)


def get_split(session: Session, name: str) -> Split:
    return get_named(
        session,
        Split,
        name,
        f"No split named '{name}'.",
        Remedy(cli="See 'evalstore splits list', or make one with 'evalstore splits make'."),
    )


def find_run(session: Session, name: str) -> Run | None:
    return find_named(session, Run, name)


def list_runs(session: Session) -> list[Run]:
    return list(session.scalars(select(Run).order_by(Run.name)))


def runs_sharing_no_topic(session: Session, qrels: QrelsSet) -> list[str]:
    """The names of the runs none of whose topics the qrels judge (by name); an empty run is not
    one of them (it has no topic to miss)."""
    has_topics = select(RunTopic.run_id).where(RunTopic.run_id == Run.id).exists()
    shared = (
        select(RunTopic.run_id)
        .join(Judgment, and_(Judgment.qrels_id == qrels.id, same_id(Judgment.topic, RunTopic.topic)))
        .where(RunTopic.run_id == Run.id)
        .exists()
    )
    return list(session.scalars(select(Run.name).where(has_topics, ~shared).order_by(Run.name)))


def get_qrels(session: Session, name: str, *, latest: bool = True) -> QrelsSet:
    """The qrels named ``name``; a lineage's name (``qrels build NAME``: its versions are qrels
    ``NAME@v1``, ``NAME@v2``, ...) with no qrels of its own means its newest version, wherever a
    user names qrels (``latest=False``: the name exactly, for what must not guess, e.g. deleting)."""
    found = find_qrels(session, name)
    if found is None and latest:
        found = newest_version(session, name)
    if found is None:
        raise NotFoundError(
            f"No qrels named '{name}'.", remedy=Remedy(cli="See 'evalstore qrels list' for the imported qrels.")
        )
    return found


def newest_version(session: Session, lineage: str) -> QrelsSet | None:
    """The qrels of the newest version of the lineage ``lineage``, or None when it has none."""
    return session.scalar(
        select(QrelsSet)
        .join(QrelsVersion, QrelsVersion.qrels_id == QrelsSet.id)
        .where(QrelsVersion.name == lineage)
        .order_by(QrelsVersion.version.desc())
        .limit(1)
    )


def find_qrels(session: Session, name: str) -> QrelsSet | None:
    return find_named(session, QrelsSet, name)


def list_qrels(session: Session) -> list[QrelsSet]:
    return list(session.scalars(select(QrelsSet).order_by(QrelsSet.name)))


def run_partition(run_id: int) -> str:
    """The PostgreSQL partition of run_rows that holds one run's rows."""
    return f"run_rows_p{int(run_id)}"


def run_doc_index(run_id: int) -> str:
    """The index of a run's partition on its docnos' hashes (PostgreSQL; :func:`index_run`)."""
    return f"ix_run_rows_p{int(run_id)}_doc_hash"


# pg_try_advisory_xact_lock(RUN_INDEX_LOCK, run id): one worker builds a run's index at a time
RUN_INDEX_LOCK = 0x65730001


def run_indexed(session: Session, run_id: int) -> bool:
    """Whether the run's partition has its docno-hash index (never on SQLite)."""
    return session.get_bind().dialect.name == "postgresql" and bool(
        session.scalar(text("SELECT 1 FROM pg_indexes WHERE indexname = :name"), {"name": run_doc_index(run_id)})
    )


def runs_without_index(session: Session, min_rows: int) -> list[int]:
    """PostgreSQL: the runs of at least ``min_rows`` rows whose partition lacks its docno-hash
    index, largest first."""
    indexed = set(session.scalars(text("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'ix_run_rows_p%'")))
    runs = session.scalars(select(Run.id).where(Run.row_count >= min_rows).order_by(Run.row_count.desc(), Run.id))
    return [run_id for run_id in runs if run_doc_index(run_id) not in indexed]


def index_run(session: Session, run_id: int) -> bool:
    """PostgreSQL: index the run's partition on hashtextextended(doc, 0) and refresh its statistics,
    in the session's transaction. :func:`judged_ranks` then finds a 7M-row run's ~10k judged rows
    through it in ~0.08 s, where joining by hashing scans every row (0.6-0.8 s); building it takes
    ~2.4 s, so it is an idle worker's chore, not part of registering (services.store.index_next_run).
    False when another worker is building it or the run is gone."""
    if not session.scalar(select(func.pg_try_advisory_xact_lock(RUN_INDEX_LOCK, run_id))):
        return False
    partition = run_partition(run_id)
    if session.scalar(select(func.to_regclass(partition))) is None:
        return False
    session.execute(
        text(f"CREATE INDEX IF NOT EXISTS {run_doc_index(run_id)} ON {partition} (hashtextextended(doc, 0))")
    )
    session.execute(text(f"ANALYZE {partition}"))
    return True


def count_evaluations(session: Session, *, run_id: int | None = None, qrels_id: int | None = None) -> int:
    """How many evaluations (any state) a run, or a qrels set, has."""
    where = Evaluation.run_id == run_id if run_id is not None else Evaluation.qrels_id == qrels_id
    return int(session.scalar(select(func.count()).select_from(Evaluation).where(where)) or 0)


def delete_run(session: Session, run: Run) -> None:
    # run_rows have no foreign key (see models.RunRow): their rows go in the same transaction;
    # the evaluations themselves cascade.
    _delete_results(session, session.scalars(select(Evaluation.id).where(Evaluation.run_id == run.id)).all())
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f"DROP TABLE IF EXISTS {run_partition(run.id)}"))
    else:
        session.execute(delete(RunRow).where(RunRow.run_id == run.id))
    session.delete(run)
    session.flush()


def delete_qrels(session: Session, qrels: QrelsSet) -> None:
    _delete_results(session, session.scalars(select(Evaluation.id).where(Evaluation.qrels_id == qrels.id)).all())
    session.execute(delete(Judgment).where(Judgment.qrels_id == qrels.id))
    session.delete(qrels)
    session.flush()


def delete_prediction_set(session: Session, prediction_set: PredictionSet) -> None:
    """A prediction set with its rows and its evaluations' values (none of them has a foreign key,
    see models.Prediction); the evaluations themselves cascade."""
    _delete_results(
        session, session.scalars(select(Evaluation.id).where(Evaluation.prediction_set_id == prediction_set.id)).all()
    )
    session.execute(delete(Prediction).where(Prediction.prediction_set_id == prediction_set.id))
    session.execute(delete(PredictionScore).where(PredictionScore.prediction_set_id == prediction_set.id))
    session.delete(prediction_set)
    session.flush()


def _delete_results(session: Session, evaluation_ids: Sequence[int]) -> None:
    """Per-query values of these evaluations."""
    if not evaluation_ids:
        return
    session.execute(delete(QueryValues).where(QueryValues.evaluation_id.in_(evaluation_ids)))
    session.execute(delete(EvaluationQueries).where(EvaluationQueries.evaluation_id.in_(evaluation_ids)))


def run_rows_to_store(table: pa.Table) -> tuple[pa.Table, pa.Table]:
    """A validated run table's rows as stored, in file order (topic, doc, score, rank as given,
    trec_rank: the 1-based rank in trec_eval order), and each topic's row count."""
    ranks, counts = ranks_and_counts(table.select(["topic", "doc", "score"]))
    return table.select(["topic", "doc", "score", "rank"]).append_column("trec_rank", pa.array(ranks)), counts


def judgments_to_store(table: pa.Table) -> pa.Table:
    """A validated qrels table's rows as stored, in file order (preference judgments also have a
    sub-group and a level)."""
    extra = [name for name in ("subgroup", "level") if name in table.column_names]
    return table.select(["topic", "doc", "relevance", "iteration", *extra])


def insert_run_rows(
    session: Session, run_id: int, rows: StagedRows, counts: pa.Table, progress: Progress | None = None
) -> None:
    """Bulk-insert a run's rows and per-topic counts (both from :func:`run_rows_to_store`)."""
    _bulk_insert(session, "run_rows", "run_id", run_id, rows, progress, partition=run_partition(run_id))
    copy_batches(
        session,
        "run_topics",
        counts.add_column(0, "run_id", pa.array(np.full(counts.num_rows, run_id, np.int64))).to_batches(),
    )


def insert_judgments(session: Session, qrels_id: int, rows: StagedRows, progress: Progress | None = None) -> None:
    """Bulk-insert a qrels set's judgments (from :func:`judgments_to_store`)."""
    _bulk_insert(session, "judgments", "qrels_id", qrels_id, rows, progress)


def _bulk_insert(
    session: Session,
    table_name: str,
    owner_column: str,
    owner_id: int,
    rows: StagedRows,
    progress: Progress | None,
    partition: str | None = None,
) -> None:
    """Insert ``rows`` prefixed with (owner id, position in file order); on PostgreSQL into a
    new partition of ``table_name`` for ``owner_id`` when ``partition`` names one."""
    columns = [owner_column, "position", *rows.table.column_names]
    if session.get_bind().dialect.name != "postgresql":
        _sqlite_insert_staged(session, table_name, columns, owner_id, rows, progress)
        return

    def framed() -> Iterator[pa.RecordBatch]:
        offset = 0
        for batch in rows.batches(BATCH_ROWS):
            n = batch.num_rows
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(np.full(n, owner_id, np.int64)),
                    pa.array(np.arange(offset, offset + n, dtype=np.int64)),
                    *batch.columns,
                ],
                names=columns,
            )
            offset += n

    model = Base.metadata.tables[table_name]
    if partition is None:
        copy_batches(session, table_name, framed(), progress, binary=model)
    else:
        _load_partition(session, table_name, partition, owner_column, owner_id, framed(), progress, binary=model)


def _load_partition(
    session: Session,
    parent: str,
    partition: str,
    key_column: str,
    key: int,
    batches: Iterable[pa.RecordBatch],
    progress: Progress | None = None,
    binary: sa.Table | None = None,
) -> None:
    """PostgreSQL: COPY into a new table, then attach it as ``parent``'s partition for ``key``.

    ATTACH locks the parent only against other attaches, where creating the partition up front
    would lock every reader of the parent out for the whole COPY; the CHECK constraint lets
    ATTACH skip scanning the rows; and a table created in this transaction may take its rows
    frozen (COPY FREEZE), so they are never rewritten later to set hint bits or freeze them."""
    session.execute(
        text(f"CREATE TABLE {partition} (LIKE {parent} INCLUDING DEFAULTS, CHECK ({key_column} = {int(key)}))")
    )
    copy_batches(session, partition, batches, progress, freeze=True, binary=binary)
    session.execute(text(f"ALTER TABLE {parent} ATTACH PARTITION {partition} FOR VALUES IN ({int(key)})"))


def _sqlite_insert_staged(
    session: Session, table_name: str, columns: list[str], owner_id: int, rows: StagedRows, progress: Progress | None
) -> None:
    """SQLite: move the staged rows in with INSERT ... SELECT from the attached scratch table (its
    rowid is the 1-based file position), a slice of rowids per statement for the progress bar."""
    if rows.staged_table is None:
        raise ValueError(
            "SQLite bulk inserts read staged rows: make them with evalstore.db.staging.staged_rows "
            "and pass their `attach` to unit_of_work"
        )
    statement = text(
        f"INSERT INTO {table_name} ({', '.join(columns)}) "
        f"SELECT {int(owner_id)}, rowid - 1, {', '.join(rows.table.column_names)} FROM {rows.staged_table} "
        "WHERE rowid > :after AND rowid <= :until"
    )
    for after in range(0, rows.num_rows, BATCH_ROWS):
        session.execute(statement, {"after": after, "until": after + BATCH_ROWS})
        if progress:
            progress(min(BATCH_ROWS, rows.num_rows - after))


def copy_batches(
    session: Session,
    table_name: str,
    batches: Iterable[pa.RecordBatch],
    progress: Progress | None = None,
    *,
    freeze: bool = False,
    binary: sa.Table | None = None,
) -> None:
    """Bulk-insert Arrow batches whose column names are the table's: COPY on PostgreSQL (pyarrow
    writes each batch's CSV in C, so no per-row Python work), executemany on SQLite. ``freeze``:
    COPY FREEZE, for a table created in this transaction; ``binary``: the model table whose
    column types the batches (with no nulls) are encoded for, in binary COPY (evalstore.db.pgcopy)."""
    connection = session.connection()
    dbapi = arrow_reads.driver_connection(session)
    remaining = iter(batches)
    first = next(remaining, None)
    if first is None:
        return
    names = first.schema.names
    if connection.dialect.name == "postgresql":
        types = pgcopy.column_types(binary, names) if binary is not None else None
        columns = pgcopy.column_order(types) if types else names
        sql = (
            f"COPY {table_name} ({', '.join(columns)}) FROM STDIN "
            f"WITH (FORMAT {'binary' if types else 'csv'}{', FREEZE' if freeze else ''})"
        )
        with dbapi.cursor() as cursor, cursor.copy(sql) as copy:
            if types:
                copy.write(pgcopy.HEADER)
            for batch in itertools.chain([first], remaining):
                copy.write(pgcopy.encode(batch, types) if types else _csv_bytes(batch))
                if progress:
                    progress(batch.num_rows)
            if types:
                copy.write(pgcopy.TRAILER)
        return
    sql = f"INSERT INTO {table_name} ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})"
    cursor = dbapi.cursor()
    try:
        for batch in itertools.chain([first], remaining):
            cursor.executemany(sql, zip(*(column.to_pylist() for column in batch.columns), strict=True))
            if progress:
                progress(batch.num_rows)
    finally:
        cursor.close()


def _csv_bytes(batch: pa.RecordBatch) -> memoryview:
    buffer = io.BytesIO()
    pacsv.write_csv(batch, buffer, write_options=pacsv.WriteOptions(include_header=False, quoting_style="needed"))
    return buffer.getbuffer()


def run_table(session: Session, run: Run, *, for_evaluation: bool = False) -> pa.Table:
    """The run's rows as an Arrow table (topic, doc, rank, score) in file order; for evaluation
    (topic, doc, score) in any order: the measures sort by score and ignore rank, and PostgreSQL
    then skips a 7M-row sort and a column."""
    if for_evaluation:
        return arrow_reads.select_table(
            session,
            select(RunRow.topic, RunRow.doc, RunRow.score).where(RunRow.run_id == run.id),
            ["topic", "doc", "score"],
            [pa.string(), pa.string(), pa.float64()],
        )
    return arrow_reads.select_table(
        session,
        select(RunRow.topic, RunRow.doc, RunRow.rank, RunRow.score)
        .where(RunRow.run_id == run.id)
        .order_by(RunRow.position),
        ["topic", "doc", "rank", "score"],
        [pa.string(), pa.string(), pa.int64(), pa.float64()],
    )


# How kept judged ranks were worked out (judged_ranks_in_memory, the trec_eval ranks of
# ranks_and_counts): raise it with any change to either, or to a stored run's trec_rank, and the
# ranks kept before are no longer read (the worker joins in the database instead).
JUDGED_RANKS_VERSION = 1
# what evaluating a stored run needs of the documents the qrels judge: (topic, rank, relevance)
JUDGED_SCHEMA = pa.schema([("topic", pa.string()), ("rank", pa.int32()), ("relevance", pa.int64())])


def judged_ranks(session: Session, run: Run, qrels: QrelsSet, *, kept: bool = True) -> tuple[pa.Table, pa.Table]:
    """What evaluating a stored run needs, worked out by the database from the stored trec_eval
    ranks (see :func:`evalstore.metrics.preparation.prepare_ranked`): (topic, retrieved), each run
    topic's number of documents (kept at registration), and (topic, rank, relevance) for each run
    document the qrels judge, joined in the database. For a 7M-row run that is 7k + ~10k rows to
    send instead of 7M (4-4.5 s of reading, joining and sorting became ~1.2 s on PostgreSQL).
    With ``kept``, the judged ranks worked out when the run was submitted to a task are read
    instead of joined, where they were (:func:`keep_judged_ranks`)."""
    retrieved = arrow_reads.select_table(
        session,
        select(RunTopic.topic, RunTopic.retrieved).where(RunTopic.run_id == run.id),
        ["topic", "retrieved"],
        [pa.string(), pa.int64()],
    )
    found = kept_judged_ranks(session, run, qrels) if kept else None
    if found is not None:
        return retrieved, found
    on = and_(Judgment.qrels_id == qrels.id, Judgment.topic == RunRow.topic, Judgment.doc == RunRow.doc)
    indexed = run_indexed(session, run.id)
    if indexed:  # look each judgment up in the run's docno-hash index (index_run)
        on = and_(on, func.hashtextextended(Judgment.doc, 0) == func.hashtextextended(RunRow.doc, 0))
    judged = (
        select(RunRow.topic, RunRow.trec_rank, Judgment.relevance).join(Judgment, on).where(RunRow.run_id == run.id)
    )
    return retrieved, arrow_reads.select_table(
        session, judged, JUDGED_SCHEMA.names, JUDGED_SCHEMA.types, index_join=indexed
    )


def judged_ranks_in_memory(rows: pa.Table, qrels: pa.Table) -> pa.Table:
    """The judged ranks :func:`judged_ranks` joins in the database, from a run's rows as stored
    (:func:`run_rows_to_store`: topic, doc, trec_rank) and its qrels' judgments (:func:`qrels_table`),
    in the same order as SQLite's join gives them: the run's rows in file order, a document judged
    under two iterations once for each, by relevance then in the qrels' file order. A hash join in
    Arrow: ~2 ms for a DL-sized run (43k rows) against the ~17 ms the database's index probes take."""
    left = pa.table(
        {
            "topic": rows["topic"].cast(pa.string()),
            "doc": rows["doc"].cast(pa.string()),
            "rank": rows["trec_rank"].cast(pa.int32()),
            "at": pa.array(np.arange(rows.num_rows, dtype=np.int64)),
        }
    )
    right = pa.table(
        {
            "topic": qrels["topic"].cast(pa.string()),
            "doc": qrels["doc"].cast(pa.string()),
            "relevance": qrels["relevance"].cast(pa.int64()),
            "judgment": pa.array(np.arange(qrels.num_rows, dtype=np.int64)),
        }
    )
    joined = left.join(right, ["topic", "doc"], join_type="inner", use_threads=False)
    joined = joined.sort_by([("at", "ascending"), ("relevance", "ascending"), ("judgment", "ascending")])
    return joined.select(JUDGED_SCHEMA.names).cast(JUDGED_SCHEMA)


def judged_ranks_bytes(judged: pa.Table) -> bytes:
    """Judged ranks (:func:`judged_ranks_in_memory`) as :func:`keep_judged_ranks` stores them
    (Arrow IPC): encoded before the write transaction, not inside it."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, JUDGED_SCHEMA) as writer:
        writer.write_table(judged.cast(JUDGED_SCHEMA))
    return cast(bytes, sink.getvalue().to_pybytes())


def keep_judged_ranks(session: Session, run: Run, qrels: QrelsSet, judged: pa.Table | bytes) -> None:
    """Keep a run's judged ranks against ``qrels`` (:func:`judged_ranks_in_memory`, or those
    ranks already encoded by :func:`judged_ranks_bytes`), under the hashes of both, for
    :func:`judged_ranks` to read instead of joining."""
    ranks = judged if isinstance(judged, bytes) else judged_ranks_bytes(judged)
    session.execute(delete(RunJudgedRanks).where(RunJudgedRanks.run_id == run.id, RunJudgedRanks.qrels_id == qrels.id))
    session.execute(
        insert(RunJudgedRanks).values(
            run_id=run.id,
            qrels_id=qrels.id,
            run_hash=run.content_hash,
            qrels_hash=qrels.content_hash,
            version=JUDGED_RANKS_VERSION,
            ranks=ranks,
        )
    )


def kept_judged_ranks(session: Session, run: Run, qrels: QrelsSet) -> pa.Table | None:
    """The judged ranks kept for the run against ``qrels`` (:func:`keep_judged_ranks`), or None
    where none were kept, the run or qrels are no longer what they were worked out from, or they
    were worked out another way (:data:`JUDGED_RANKS_VERSION`)."""
    ranks = session.execute(
        select(RunJudgedRanks.ranks).where(
            RunJudgedRanks.run_id == run.id,
            RunJudgedRanks.qrels_id == qrels.id,
            RunJudgedRanks.run_hash == run.content_hash,
            RunJudgedRanks.qrels_hash == qrels.content_hash,
            RunJudgedRanks.version == JUDGED_RANKS_VERSION,
        )
    ).scalar_one_or_none()
    return None if ranks is None else pa.ipc.open_stream(ranks).read_all()


RUN_BATCH_SCHEMA = pa.schema([("topic", pa.string()), ("doc", pa.string()), ("score", pa.float64())])


def run_batches(session: Session, run: Run) -> Iterator[pa.RecordBatch]:
    """The run's rows (topic, doc, score), in any order, a batch at a time (a run too large to
    hold, handed to DuckDB or Spark)."""
    return arrow_reads.select_batches(
        session,
        select(RunRow.topic, RunRow.doc, RunRow.score).where(RunRow.run_id == run.id),
        RUN_BATCH_SCHEMA.names,
        RUN_BATCH_SCHEMA.types,
    )


BINARY_BATCH_SCHEMA = pa.schema([("y", pa.int64()), ("s", pa.float64()), ("g", pa.string()), ("predicted", pa.int64())])


def binary_prediction_batches(
    session: Session, prediction_set: PredictionSet, positive: str, threshold: float | None
) -> Iterator[pa.RecordBatch]:
    """A binary prediction set joined with its gold labels, a batch at a time: y (1: the gold
    label is ``positive``), s (the score), g (the group: the predictions', when every one has a
    group, else the gold labels'; NULL without groups) and predicted (1: predicted positive: the
    score is at least ``threshold``, or without one the predicted label is ``positive``)."""
    groups_given = not session.scalar(
        select(func.count())
        .select_from(Prediction)
        .where(Prediction.prediction_set_id == prediction_set.id, Prediction.group_id.is_(None))
    )
    predicted = (Prediction.score >= threshold) if threshold is not None else (Prediction.label == positive)
    statement = (
        select(
            case((GoldLabel.label == positive, 1), else_=0),
            Prediction.score,
            Prediction.group_id if groups_given else GoldLabel.group_id,
            case((predicted, 1), else_=0),
        )
        .join(
            GoldLabel,
            and_(GoldLabel.label_set_id == prediction_set.label_set_id, GoldLabel.item_id == Prediction.item_id),
        )
        .where(Prediction.prediction_set_id == prediction_set.id)
    )
    return arrow_reads.select_batches(session, statement, BINARY_BATCH_SCHEMA.names, BINARY_BATCH_SCHEMA.types)


def top_ranked(session: Session, run_ids: list[int], depth: int | None, topics: list[str] | None = None) -> pa.Table:
    """(run_id, topic, doc, rank) of each run's top ``depth`` documents per topic in trec_eval
    order (all of them when ``depth`` is None), optionally for some topics only. The database
    filters on the stored rank, so a depth-100 pool over 1,000-document runs reads a tenth of the
    rows; on PostgreSQL two connections read half the runs each (3.6 s -> 1.7 s for 2.5M rows of
    100 runs: the server scans and ADBC decodes in parallel)."""
    names = ["run_id", "topic", "doc", "rank"]
    types = [pa.int64(), pa.string(), pa.string(), pa.int32()]

    def statement(ids: list[int]) -> Any:
        query = select(RunRow.run_id, RunRow.topic, RunRow.doc, RunRow.trec_rank).where(RunRow.run_id.in_(ids))
        if depth is not None:
            query = query.where(RunRow.trec_rank <= depth)
        return query if topics is None else query.where(RunRow.topic.in_(topics))

    if session.get_bind().dialect.name != "postgresql" or len(run_ids) < 2:
        return arrow_reads.select_table(session, statement(run_ids), names, types)
    parts = arrow_reads.read_together(
        session, [(statement(run_ids[i::PARALLEL_READS]), names, types) for i in range(PARALLEL_READS)]
    )
    return pa.concat_tables(parts)


def qrels_table(session: Session, qrels: QrelsSet) -> pa.Table:
    """The judgments in file order, as an Arrow table (topic, iteration, doc, relevance; and
    subgroup and level for preference judgments)."""
    if qrels.kind == "preferences":
        return arrow_reads.select_table(
            session,
            select(
                Judgment.topic, Judgment.iteration, Judgment.subgroup, Judgment.doc, Judgment.relevance, Judgment.level
            )
            .where(Judgment.qrels_id == qrels.id)
            .order_by(Judgment.position),
            ["topic", "iteration", "subgroup", "doc", "relevance", "level"],
            [pa.string(), pa.string(), pa.string(), pa.string(), pa.int64(), pa.float64()],
        )
    return arrow_reads.select_table(
        session,
        select(Judgment.topic, Judgment.iteration, Judgment.doc, Judgment.relevance)
        .where(Judgment.qrels_id == qrels.id)
        .order_by(Judgment.position),
        ["topic", "iteration", "doc", "relevance"],
        [pa.string(), pa.string(), pa.string(), pa.int64()],
    )


def grades_of(session: Session, qrels: QrelsSet, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """The relevance of each (topic, doc) of ``pairs`` that ``qrels`` judges, read through the
    judgments' index for those topics and documents alone (a page shows a few dozen of a qrels'
    100,000s); a pair judged more than once (one row a subtopic) gets its last row in file order,
    as a dict built from :func:`qrels_table` would."""
    wanted = set(pairs)
    if not wanted:
        return {}
    topics = sorted({topic for topic, _ in wanted})
    docs = sorted({doc for _, doc in wanted})
    grades: dict[tuple[str, str], int] = {}
    for start in range(0, len(docs), 500):  # bounded IN lists
        rows = session.execute(
            select(Judgment.topic, Judgment.doc, Judgment.relevance)
            .where(
                Judgment.qrels_id == qrels.id,
                id_in(Judgment.topic, topics),
                id_in(Judgment.doc, docs[start : start + 500]),
            )
            .order_by(Judgment.position)
        )
        grades.update(((topic, doc), int(relevance)) for topic, doc, relevance in rows if (topic, doc) in wanted)
    return grades


def count_run_rows(session: Session, run: Run) -> int:
    return session.scalar(select(func.count()).select_from(RunRow).where(RunRow.run_id == run.id)) or 0


# --- evaluation results ---------------------------------------------------------------------


@dataclass(frozen=True)
class PerQueryValues:
    """An evaluation's per-query values: each measure's on the same queries, in ``query_ids``
    order (numbers as float64; the values of relstring-like measures as text)."""

    query_ids: list[str]
    numbers: dict[str, np.ndarray]
    texts: dict[str, list[str]]


class AggregateRow(TypedDict):
    """One measure's aggregate as an evaluation stores it (models.AggregateResult's columns)."""

    measure: str
    value: float | None
    text_value: str | None
    query_count: int


def _core(model: type[Any]) -> sa.Table:
    """A mapped class's table, for Core statements."""
    return cast(sa.Table, model.__table__)


def replace_results(
    session: Session, evaluation_id: int, per_query: PerQueryValues, aggregates: list[AggregateRow]
) -> None:
    """Swap an evaluation's stored values for new ones (aggregates: measure, value, text_value,
    query_count): one row per measure, its values side by side (models.QueryValues)."""
    _delete_results(session, [evaluation_id])
    session.execute(delete(AggregateResult).where(AggregateResult.evaluation_id == evaluation_id))
    # Core inserts into the tables, not the ORM's bulk inserts of the entities: the same rows and one
    # executemany each, without the ORM's bulk-insert bookkeeping (a DL-sized job's: 3.0 -> 2.0 ms)
    session.execute(insert(_core(EvaluationQueries)).values(evaluation_id=evaluation_id, query_ids=per_query.query_ids))
    rows: list[dict[str, Any]] = [
        {
            "evaluation_id": evaluation_id,
            "measure": measure,
            "texts": None,
            "numbers": np.ascontiguousarray(values, dtype="<f8").tobytes(),
        }
        for measure, values in per_query.numbers.items()
    ]
    rows += [
        {"evaluation_id": evaluation_id, "measure": measure, "numbers": None, "texts": values}
        for measure, values in per_query.texts.items()
    ]
    if rows:
        session.execute(insert(_core(QueryValues)), rows)
    if aggregates:
        session.execute(insert(_core(AggregateResult)), [{"evaluation_id": evaluation_id, **a} for a in aggregates])


@dataclass(frozen=True)
class StoredColumns:
    """One evaluation's per-query values as they are stored: the query ids, and each measure's
    values on them in that order (float64, or None for a textual measure) and its texts (or
    None). What :func:`result_table` lays out as a long table, left as it is."""

    query_ids: list[str]
    numbers: dict[str, np.ndarray | None]
    texts: dict[str, list[str] | None]


def result_columns(session: Session, evaluation_id: int, measures: list[str] | None = None) -> StoredColumns:
    """The per-query values of one evaluation (of ``measures``, or all), as stored."""
    query_ids = (
        session.scalar(select(EvaluationQueries.query_ids).where(EvaluationQueries.evaluation_id == evaluation_id))
        or []
    )
    statement = select(QueryValues.measure, QueryValues.numbers, QueryValues.texts).where(
        QueryValues.evaluation_id == evaluation_id
    )
    if measures is not None:
        statement = statement.where(QueryValues.measure.in_(measures))
    numbers: dict[str, np.ndarray | None] = {}
    texts: dict[str, list[str] | None] = {}
    for measure, stored, stored_texts in session.execute(statement):
        numbers[measure] = np.frombuffer(stored, dtype="<f8") if stored is not None else None
        texts[measure] = stored_texts
    return StoredColumns([str(q) for q in query_ids], numbers, texts)


def result_table(session: Session, evaluation_id: int, measures: list[str] | None = None) -> pa.Table:
    """(measure, query_id, value, text_value) rows of one evaluation, as Arrow columns: the
    stored columns (:func:`result_columns`) laid out as a long table."""
    stored = result_columns(session, evaluation_id, measures)
    n, names = len(stored.query_ids), list(stored.numbers)
    values = [
        pa.array(numbers, pa.float64()) if (numbers := stored.numbers[name]) is not None else pa.nulls(n, pa.float64())
        for name in names
    ]
    texts = [
        pa.array(found, pa.string()) if (found := stored.texts[name]) is not None else pa.nulls(n, pa.string())
        for name in names
    ]
    return pa.table(
        {
            "measure": pc.take(pa.array(names, pa.string()), pa.array(np.repeat(np.arange(len(names)), n), pa.int64())),
            "query_id": pc.take(
                pa.array(stored.query_ids, pa.string()), pa.array(np.tile(np.arange(n), len(names)), pa.int64())
            ),
            "value": pa.concat_arrays(values) if values else pa.array([], pa.float64()),
            "text_value": pa.concat_arrays(texts) if texts else pa.array([], pa.string()),
        }
    )


def aggregate_values(session: Session, evaluation_id: int) -> list[AggregateResult]:
    return list(session.scalars(select(AggregateResult).where(AggregateResult.evaluation_id == evaluation_id)))


def let_go_oldest(session: Session, model: Any, owned: Any, kept: int) -> None:
    """A step: of the prepared rows of ``model`` (a table keyed by ``key`` with ``created_at``:
    stored letters, reports) that match ``owned``, those beyond the ``kept`` newest deleted (by
    creation, then key), so what a worker prepares for newer states does not pile up. Never
    commits."""
    old = list(
        session.scalars(select(model.key).where(owned).order_by(model.created_at.desc(), model.key).offset(kept))
    )
    if old:
        session.execute(delete(model).where(model.key.in_(old)))
