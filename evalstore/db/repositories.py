"""Queries over the store. Every function borrows a session; none commits (services do)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
from sqlalchemy import delete, func, select, text
from sqlalchemy.orm import Session

from evalstore.db.models import Judgment, QrelsSet, Run, RunRow
from evalstore.errors import NotFoundError

BATCH_ROWS = 200_000
Progress = Callable[[int], None]


def get_run(session: Session, name: str) -> Run:
    run = session.scalar(select(Run).where(Run.name == name))
    if run is None:
        raise NotFoundError(f"No run named '{name}'. See 'evalstore runs list' for the registered runs.")
    return run


def find_run(session: Session, name: str) -> Run | None:
    return session.scalar(select(Run).where(Run.name == name))


def list_runs(session: Session) -> list[Run]:
    return list(session.scalars(select(Run).order_by(Run.name)))


def get_qrels(session: Session, name: str) -> QrelsSet:
    qrels = session.scalar(select(QrelsSet).where(QrelsSet.name == name))
    if qrels is None:
        raise NotFoundError(
            f"No qrels named '{name}'. See 'evalstore qrels list' for the imported qrels."
        )
    return qrels


def find_qrels(session: Session, name: str) -> QrelsSet | None:
    return session.scalar(select(QrelsSet).where(QrelsSet.name == name))


def list_qrels(session: Session) -> list[QrelsSet]:
    return list(session.scalars(select(QrelsSet).order_by(QrelsSet.name)))


def run_partition(run_id: int) -> str:
    """The PostgreSQL partition of run_rows that holds one run's rows."""
    return f"run_rows_p{int(run_id)}"


def delete_run(session: Session, run: Run) -> None:
    # run_rows has no foreign key (see models.RunRow): its rows go in the same transaction.
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f"DROP TABLE IF EXISTS {run_partition(run.id)}"))
    else:
        session.execute(delete(RunRow).where(RunRow.run_id == run.id))
    session.delete(run)
    session.flush()


def delete_qrels(session: Session, qrels: QrelsSet) -> None:
    session.execute(delete(Judgment).where(Judgment.qrels_id == qrels.id))
    session.delete(qrels)
    session.flush()


def insert_run_rows(session: Session, run_id: int, table: pa.Table, progress: Progress | None = None) -> None:
    """Bulk-insert a validated run table (topic, doc, rank, score) in file order."""
    target = "run_rows"
    if session.get_bind().dialect.name == "postgresql":
        target = run_partition(run_id)
        session.execute(text(f"CREATE TABLE {target} PARTITION OF run_rows FOR VALUES IN ({int(run_id)})"))
    _bulk_insert(
        session,
        target,
        ["run_id", "position", "topic", "doc", "score", "rank"],
        run_id,
        table.select(["topic", "doc", "score", "rank"]),
        progress,
    )


def insert_judgments(
    session: Session, qrels_id: int, table: pa.Table, progress: Progress | None = None
) -> None:
    """Bulk-insert a validated qrels table (topic, iteration, doc, relevance)."""
    _bulk_insert(
        session,
        "judgments",
        ["qrels_id", "position", "topic", "doc", "relevance", "iteration"],
        qrels_id,
        table.select(["topic", "doc", "relevance", "iteration"]),
        progress,
    )


def _bulk_insert(
    session: Session,
    table_name: str,
    columns: list[str],
    owner_id: int,
    data: pa.Table,
    progress: Progress | None,
) -> None:
    connection = session.connection()
    dbapi = connection.connection.driver_connection
    if connection.dialect.name == "postgresql":
        _copy_postgres(dbapi, table_name, columns, owner_id, data, progress)
    else:
        placeholders = ", ".join("?" for _ in columns)
        sql = f"INSERT INTO {table_name} ({', '.join(columns)}) VALUES ({placeholders})"
        cursor = dbapi.cursor()
        try:
            for start, rows in _python_batches(owner_id, data):
                cursor.executemany(sql, rows)
                if progress:
                    progress(start)
        finally:
            cursor.close()


def _python_batches(owner_id: int, data: pa.Table) -> Iterator[tuple[int, Any]]:
    """Batches of row tuples for executemany; only one batch is materialised at a time."""
    offset = 0
    for batch in data.to_batches(max_chunksize=BATCH_ROWS):
        n = batch.num_rows
        lists = [column.to_pylist() for column in batch.columns]
        yield n, zip([owner_id] * n, range(offset, offset + n), *lists, strict=True)
        offset += n


def _copy_postgres(
    dbapi: Any, table_name: str, columns: list[str], owner_id: int, data: pa.Table, progress: Progress | None
) -> None:
    """COPY in CSV form; pyarrow writes each batch's CSV in C, so no per-row Python work."""
    sql = f"COPY {table_name} ({', '.join(columns)}) FROM STDIN WITH (FORMAT csv)"
    options = pacsv.WriteOptions(include_header=False, quoting_style="needed")
    offset = 0
    with dbapi.cursor() as cursor, cursor.copy(sql) as copy:
        for batch in data.to_batches(max_chunksize=BATCH_ROWS):
            n = batch.num_rows
            framed = pa.RecordBatch.from_arrays(
                [pa.array([owner_id] * n, pa.int64()), pa.array(range(offset, offset + n), pa.int64()),
                 *batch.columns],
                names=columns,
            )
            buffer = io.BytesIO()
            pacsv.write_csv(framed, buffer, write_options=options)
            copy.write(buffer.getbuffer())
            offset += n
            if progress:
                progress(n)


def run_table(session: Session, run: Run) -> pa.Table:
    """The run's rows in file order, as an Arrow table (topic, doc, rank, score)."""
    return _select_table(
        session,
        select(RunRow.topic, RunRow.doc, RunRow.rank, RunRow.score)
        .where(RunRow.run_id == run.id)
        .order_by(RunRow.position),
        ["topic", "doc", "rank", "score"],
        [pa.string(), pa.string(), pa.int64(), pa.float64()],
    )


def qrels_table(session: Session, qrels: QrelsSet) -> pa.Table:
    """The judgments in file order, as an Arrow table (topic, iteration, doc, relevance)."""
    return _select_table(
        session,
        select(Judgment.topic, Judgment.iteration, Judgment.doc, Judgment.relevance)
        .where(Judgment.qrels_id == qrels.id)
        .order_by(Judgment.position),
        ["topic", "iteration", "doc", "relevance"],
        [pa.string(), pa.string(), pa.string(), pa.int64()],
    )


def _select_table(session: Session, statement: Any, names: list[str], types: list[pa.DataType]) -> pa.Table:
    result = session.execute(statement.execution_options(yield_per=BATCH_ROWS))
    batches = []
    for partition in result.partitions():
        columns = list(zip(*partition, strict=True)) if partition else [[] for _ in names]
        batches.append(
            pa.RecordBatch.from_arrays(
                [pa.array(col, type=t) for col, t in zip(columns, types, strict=True)], names=names
            )
        )
    if not batches:
        return pa.table({n: pa.array([], type=t) for n, t in zip(names, types, strict=True)})
    return pa.Table.from_batches(batches)


def count_run_rows(session: Session, run: Run) -> int:
    return session.scalar(select(func.count()).select_from(RunRow).where(RunRow.run_id == run.id)) or 0
