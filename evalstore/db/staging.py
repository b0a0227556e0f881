"""Rows made ready for a bulk insert before the unit of work that stores them begins.

PostgreSQL needs nothing: COPY streams straight from the Arrow table. SQLite gets the rows
written to a scratch database by the ADBC SQLite driver; the unit of work attaches that file and
moves the rows into the store with ``INSERT ... SELECT``, so they are still stored in the one
transaction that stores their run or qrels set.

Why a scratch file: the sqlite3 module binds every value from a Python object, which made it
the slowest part of registering a run (8.8 s of a 7M-row run, against ~3 s for SQLite's own
inserts). ADBC binds straight from the Arrow arrays in C. ADBC cannot write the store itself in
the same transaction as the session, and two copies of SQLite (ADBC bundles its own) must never
hold one database file open in one process: closing a file in one copy drops the other copy's
POSIX locks on it (https://sqlite.org/howtocorrupt.html, section 2.2.1). The scratch file is
written and closed by ADBC before sqlite3 opens it, and no other code ever opens it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from sqlalchemy import Engine

from evalstore import scratch
from evalstore.db.engine import is_sqlite
from evalstore.errors import EvalstoreError

STAGE_SCHEMA = "evalstore_stage"
STAGE_TABLE = "rows"


@dataclass(frozen=True)
class StagedRows:
    """Rows to bulk-insert: ``table`` always; on SQLite also a scratch database holding the same
    rows, in order, as table ``rows`` (its rowid is the 1-based position), to be attached under
    :data:`STAGE_SCHEMA`."""

    table: pa.Table
    attach: Mapping[str, Path] = field(default_factory=dict)
    # rows too many to hold: ``table`` is then empty and gives the columns only, ``count`` says
    # how many rows ``stream`` yields (in file order), on PostgreSQL; on SQLite they are staged
    stream: Iterator[pa.RecordBatch] | None = None
    count: int | None = None

    @property
    def num_rows(self) -> int:
        return self.table.num_rows if self.count is None else self.count

    def batches(self, size: int) -> Iterator[pa.RecordBatch]:
        """The rows in file order, as batches (of ``size`` rows when they come from ``table``)."""
        return self.stream if self.stream is not None else iter(self.table.to_batches(max_chunksize=size))

    @property
    def staged_table(self) -> str | None:
        """The scratch table's qualified name once attached, or None where there is none."""
        return f"{STAGE_SCHEMA}.{STAGE_TABLE}" if self.attach else None


@contextmanager
def staged_stream(engine: Engine, reader: pa.RecordBatchReader, count: int) -> Iterator[StagedRows]:
    """:func:`staged_rows` for ``count`` rows read batch by batch from ``reader`` (in file order),
    never all held at once: PostgreSQL's COPY takes the batches as they come, SQLite's scratch
    database is written from the reader by ADBC."""
    columns = reader.schema.empty_table()
    if not is_sqlite(engine):
        yield StagedRows(columns, stream=iter(reader), count=count)
        return
    with _scratch(reader, count) as path:
        yield StagedRows(columns, {STAGE_SCHEMA: path}, count=count)


@contextmanager
def staged_rows(engine: Engine, table: pa.Table) -> Iterator[StagedRows]:
    """``table`` made ready for a bulk insert into ``engine``'s database; the scratch file, if
    any, is deleted when the block ends."""
    if not is_sqlite(engine):
        yield StagedRows(table)
        return
    with _scratch(table, table.num_rows) as path:
        yield StagedRows(table, {STAGE_SCHEMA: path})


@contextmanager
def _scratch(rows: pa.Table | pa.RecordBatchReader, count: int) -> Iterator[Path]:
    """A scratch SQLite database holding ``rows`` as table ``rows``, deleted when the block ends."""
    import adbc_driver_sqlite.dbapi  # only SQLite registrations need it

    with ExitStack() as cleanup:
        try:
            # what registrations killed before they could remove theirs left (tens of MB each)
            scratch.clean_stale()
            path = cleanup.enter_context(scratch.folder("stage")) / "rows.db"
            # The file is thrown away if anything fails, so it needs neither a journal nor fsync.
            with adbc_driver_sqlite.dbapi.connect(str(path), autocommit=True) as connection:
                with connection.cursor() as cursor:
                    cursor.execute("PRAGMA page_size = 65536")  # read once, front to back
                    cursor.execute("PRAGMA journal_mode = OFF")
                    cursor.execute("PRAGMA synchronous = OFF")
                    cursor.adbc_ingest(STAGE_TABLE, rows, mode="create")
        except (OSError, adbc_driver_sqlite.dbapi.Error) as exc:
            where = tempfile.gettempdir()
            reason = str(exc).splitlines()[0]
            free = _free_bytes(where)
            if free is not None and free < 1 << 20:  # ADBC tells a full disk as a failed rollback
                reason = f"the disk is full: {free:,} bytes free"
            raise EvalstoreError(
                f"Could not write the {count:,} rows to a scratch file in {where} ({reason}). Nothing was "
                "stored. Free space there, or set TMPDIR to a directory with room for them."
            ) from exc
        yield path


def _free_bytes(folder: str) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None
