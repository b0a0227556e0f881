"""Bulk reads of the store into Arrow tables: run rows, judgments, gold labels, predictions.

SQLite: the session's own sqlite3 connection and cursor, inside its transaction.

PostgreSQL: ADBC's PostgreSQL driver, which decodes a binary COPY straight into Arrow columns in C
(a 7M-row run in ~2.5 s, against ~8 s through psycopg, which hands Python one row at a time). It
needs a connection of its own: one per thread, opened once and kept (opening one costs ~50 ms,
more than reading a 50k-row run), in autocommit mode so it never holds a lock that would block
dropping a run's partition. Such a read is outside the caller's transaction and sees committed
rows only. That is what every caller reads: a registered run, stored judgments, gold labels and
predictions, all written once in a committed transaction and never updated in place (a replaced
run is a new row set under a new id).
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote, urlencode

import pyarrow as pa
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session

BATCH_ROWS = 200_000  # rows per Arrow batch read or written


def driver_connection(session: Session) -> Any:
    """The DB-API connection (sqlite3's, psycopg's) under the session's current transaction."""
    connection = session.connection().connection.driver_connection
    assert connection is not None, "a session's connection is open while it is used"
    return connection


def _row_type(names: list[str], types: list[pa.DataType]) -> pa.StructType:
    return pa.struct([pa.field(n, t) for n, t in zip(names, types, strict=True)])


def _batch_of_rows(rows: list[tuple[Any, ...]], row_type: pa.StructType) -> pa.RecordBatch:
    """sqlite3's rows (tuples) as a record batch: converted as one struct array in Arrow's C++ and
    split into its columns, 6x faster than transposing them in Python with ``zip(*rows)`` and
    converting each column (1M run rows: 0.2 s against 1.3 s)."""
    return pa.RecordBatch.from_struct_array(pa.array(rows, type=row_type))


def select_table(
    session: Session, statement: Any, names: list[str], types: list[pa.DataType], *, index_join: bool = False
) -> pa.Table:
    """The statement's rows as an Arrow table. ``index_join`` (PostgreSQL): the statement joins
    through an index (a nested loop over it), where these reads otherwise join by hashing."""
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        return _read_arrow_postgres(session, statement, names, types, index_join)
    # SQLite: the sqlite3 cursor itself, not SQLAlchemy's result rows (5x faster: ~1M rows/s,
    # where ORM row processing made reading 1.7M run rows take 9 s)
    compiled = statement.compile(dialect=connection.dialect, compile_kwargs={"render_postcompile": True})
    values = compiled.params  # a property that builds the dict anew: once, not once a parameter (quadratic)
    parameters = [values[name] for name in compiled.positiontup or []]
    cursor = driver_connection(session).cursor()
    cursor.execute(str(compiled), parameters)
    row_type = _row_type(names, types)
    batches = []
    while partition := cursor.fetchmany(BATCH_ROWS):
        batches.append(_batch_of_rows(partition, row_type))
    if not batches:
        return pa.table({n: pa.array([], type=t) for n, t in zip(names, types, strict=True)})
    return pa.Table.from_batches(batches)


_adbc_connections: dict[tuple[str, int], Any] = {}


@atexit.register
def _close_adbc_connections() -> None:
    # closed before the interpreter tears down the modules their finalisers need
    while _adbc_connections:
        _, connection = _adbc_connections.popitem()
        connection.close()


def _read_arrow_postgres(
    session: Session, statement: Any, names: list[str], types: list[pa.DataType], index_join: bool = False
) -> pa.Table:
    """PostgreSQL: the query's rows straight into Arrow columns through ADBC's PostgreSQL driver
    (binary COPY decoded in C). A 7M-row run reads in ~2.5 s this way, against ~8 s through
    psycopg, whose COPY hands Python one row at a time (scripts/bench_worker.py)."""
    return _typed(_fetch_arrow(*_postgres_read(session, statement), index_join=index_join), names, types)


def _postgres_read(session: Session, statement: Any) -> tuple[str, str]:
    """(ADBC URI, SQL text) of a statement, for :func:`_fetch_arrow`."""
    engine = session.get_bind().engine
    sql = str(statement.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
    return libpq_uri(engine.url), sql


def libpq_uri(url: URL) -> str:
    """``url`` as a libpq connection URI, for ADBC. SQLAlchemy renders a space in a query value as
    ``+`` (form encoding), which libpq keeps as a plus: ``?options=-c%20statement_timeout%3D5s``
    reached the server as ``-c+statement_timeout=5s`` and every ADBC read failed to connect."""
    url = url.set(drivername="postgresql")
    base = url.set(query={}).render_as_string(hide_password=False)
    query = urlencode(list(url.query.items()), doseq=True, quote_via=quote)
    return f"{base}?{query}" if query else base


def _fetch_arrow(uri: str, sql: str, *, index_join: bool = False) -> pa.Table:
    """Run ``sql`` on this thread's ADBC connection to ``uri``. The connection is kept per thread
    (opening one costs ~50 ms, more than reading a 50k-row run) and in autocommit mode, so it never
    holds a lock that would block dropping a run's partition."""
    import adbc_driver_postgresql.dbapi as adbc

    key = (uri, threading.get_ident())
    connection = _adbc_connections.get(key)
    if connection is not None:
        try:
            return _read_on(connection, sql, index_join)
        except adbc.OperationalError:
            _adbc_connections.pop(key, None)  # the server restarted or dropped us: reconnect once
            connection.close()
    connection = _adbc_connections[key] = adbc.connect(uri, autocommit=True)
    with connection.cursor() as cursor:
        # these reads are scans, and a run's rows joined to its judgments: JIT-compiling them (the
        # planner asks for it over a few million rows) cost 0.2 s of a 100-partition read and
        # saved nothing. A run partition just loaded has no statistics until autovacuum analyzes
        # it, and the planner, guessing ~1k rows, may pick a nested loop for that join (7M x 10k
        # comparisons); a hash join over the judgments is right here unless the run has its
        # docno-hash index (index_join; repositories.index_run).
        cursor.execute("SET jit = off")
        cursor.execute("SET enable_nestloop = off")
    return _read_on(connection, sql, index_join)


def _read_on(connection: Any, sql: str, index_join: bool) -> pa.Table:
    with connection.cursor() as cursor:
        if not index_join:
            cursor.execute(sql)
            return cursor.fetch_arrow_table()
        cursor.execute("SET enable_nestloop = on")
        cursor.execute("SET enable_hashjoin = off")
        try:
            cursor.execute(sql)
            return cursor.fetch_arrow_table()
        finally:
            cursor.execute("SET enable_nestloop = off")
            cursor.execute("SET enable_hashjoin = on")


def select_batches(
    session: Session, statement: Any, names: list[str], types: list[pa.DataType]
) -> Iterator[pa.RecordBatch]:
    """:func:`select_table`'s rows a batch at a time, never all in memory: for handing a stored
    run or prediction set too large to hold to DuckDB or Spark. PostgreSQL: a connection of its
    own for the read, closed after it (the kept ones serve the whole-table reads)."""
    schema = pa.schema([pa.field(n, t) for n, t in zip(names, types, strict=True)])
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        import adbc_driver_postgresql.dbapi as adbc

        uri, sql = _postgres_read(session, statement)
        with adbc.connect(uri, autocommit=True) as adbc_connection, adbc_connection.cursor() as cursor:
            cursor.execute("SET jit = off")  # as in _fetch_arrow, for the same reasons: a set just stored
            cursor.execute("SET enable_nestloop = off")  # has no statistics, and a nested loop join would be n x n
            cursor.execute(sql)
            for batch in cursor.fetch_record_batch():
                yield pa.RecordBatch.from_arrays(batch.columns, names=names).cast(schema)
        return
    compiled = statement.compile(dialect=connection.dialect, compile_kwargs={"render_postcompile": True})
    cursor = driver_connection(session).cursor()
    cursor.execute(str(compiled), [compiled.params[name] for name in compiled.positiontup or []])
    row_type = _row_type(names, types)
    while partition := cursor.fetchmany(BATCH_ROWS):
        yield _batch_of_rows(partition, row_type)


def _typed(table: pa.Table, names: list[str], types: list[pa.DataType]) -> pa.Table:
    schema = pa.schema([pa.field(n, t) for n, t in zip(names, types, strict=True)])
    return table.rename_columns(names).cast(schema)


def read_together(session: Session, reads: list[tuple[Any, list[str], list[pa.DataType]]]) -> list[pa.Table]:
    """Several SELECTs as :func:`select_table` reads them; on PostgreSQL at the same time, each on
    its own ADBC connection (reading 10M gold labels and 10M predictions: ~4.5 s each, and the
    server and the decoding overlap)."""
    if session.get_bind().dialect.name != "postgresql" or len(reads) < 2:
        return [select_table(session, *read) for read in reads]
    # the threads share no Session (not thread-safe): each gets its SQL and its own connection
    sql = [_postgres_read(session, statement) for statement, _, _ in reads]
    with ThreadPoolExecutor(len(reads)) as pool:
        tables = list(pool.map(lambda read: _fetch_arrow(*read), sql))
    return [_typed(table, names, types) for table, (_, names, types) in zip(tables, reads, strict=True)]
