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

import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from sqlalchemy import Engine

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

    @property
    def staged_table(self) -> str | None:
        """The scratch table's qualified name once attached, or None where there is none."""
        return f"{STAGE_SCHEMA}.{STAGE_TABLE}" if self.attach else None


@contextmanager
def staged_rows(engine: Engine, table: pa.Table) -> Iterator[StagedRows]:
    """``table`` made ready for a bulk insert into ``engine``'s database; the scratch file, if
    any, is deleted when the block ends."""
    if not is_sqlite(engine):
        yield StagedRows(table)
        return
    import adbc_driver_sqlite.dbapi  # only SQLite registrations need it

    with ExitStack() as cleanup:
        try:
            path = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="evalstore-stage-"))) / "rows.db"
            # The file is thrown away if anything fails, so it needs neither a journal nor fsync.
            with adbc_driver_sqlite.dbapi.connect(str(path), autocommit=True) as connection:
                with connection.cursor() as cursor:
                    cursor.execute("PRAGMA page_size = 65536")  # read once, front to back
                    cursor.execute("PRAGMA journal_mode = OFF")
                    cursor.execute("PRAGMA synchronous = OFF")
                    cursor.adbc_ingest(STAGE_TABLE, table, mode="create")
        except (OSError, adbc_driver_sqlite.dbapi.Error) as exc:
            raise EvalstoreError(
                f"Could not write the {table.num_rows:,} rows to a scratch file in {tempfile.gettempdir()} "
                f"({str(exc).splitlines()[0]}). Nothing was stored. Free space there, or set TMPDIR to a "
                "directory with room for them."
            ) from exc
        yield StagedRows(table, {STAGE_SCHEMA: path})
