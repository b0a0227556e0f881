"""Engines, the Alembic configuration, and the schema check every command runs first."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.orm import configure_mappers

from evalstore.config import sqlite_busy_seconds
from evalstore.errors import InvalidParameterError, Remedy, SchemaOutOfDateError

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def migrations_dir() -> Path:
    """The shipped migrations (wheel: ``evalstore/_migrations``; checkout: ``migrations/``)."""
    shipped = _PACKAGE_DIR / "_migrations"
    return shipped if shipped.is_dir() else _PACKAGE_DIR.parent / "migrations"


# A writer that finds the write lock taken tries again after this long, doubling up to the cap.
_FIRST_PAUSE, _LONGEST_PAUSE = 0.0005, 0.002
_SQLITE_BUSY = 5  # the primary result code (an extended code holds it in its low byte)


def is_sqlite(engine_or_url: Engine | str) -> bool:
    url = engine_or_url.url if isinstance(engine_or_url, Engine) else make_url(engine_or_url)
    return url.get_backend_name() == "sqlite"


def make_engine(url: str, *, pool_size: int | None = None, busy_seconds: float | None = None) -> Engine:
    """An engine with the settings evalstore relies on (SQLite: WAL, foreign keys, busy timeout).
    ``pool_size``: a fixed number of pooled connections (the HTTP server's; a command keeps
    SQLAlchemy's 5, growing to 15 under load). ``busy_seconds``: how long a SQLite writer waits
    for another's write lock (default: ``config.sqlite_busy_seconds``). A SQLite file this
    process cannot write (its mode, its folder's, a read-only mount) is opened read-only: reads
    work, and a write fails as SQLite's 'attempt to write a readonly database'."""
    if is_sqlite(url):
        if busy_seconds is None:
            try:
                busy_seconds = sqlite_busy_seconds()
            except ValueError as error:
                raise InvalidParameterError(str(error)) from None
        database = make_url(url).database
        in_file = bool(database) and database != ":memory:" and not str(database).startswith("file:")
        read_only = False
        if in_file:
            path = Path(str(database))
            if not path.parent.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
            read_only = _unwritable(path)
            if read_only:
                url = _read_only_url(path)
        # the server's pool size holds for a SQLite file too: past SQLAlchemy's 5 its overflow
        # connections were closed on return, and each new one costs ~50 ms of pragmas and file
        # mapping (20 clients sending tokens: a new connection every ~200 requests). An in-memory
        # database has one connection a thread: no pool to size.
        sized = {"pool_size": pool_size, "max_overflow": 0} if pool_size is not None and in_file else {}
        engine = create_engine(url, connect_args={"timeout": busy_seconds}, **sized)
        event.listen(engine, "connect", _read_only_pragmas if read_only else _pragmas(busy_seconds))
        # pysqlite opens transactions lazily and never for DDL/SELECT; take control so that
        # BEGIN is emitted by SQLAlchemy and every unit of work is one real transaction.
        turns = _WriteTurns(busy_seconds)
        event.listen(engine, "begin", turns.begin)
        event.listen(engine, "commit", turns.end)
        event.listen(engine, "rollback", turns.end)
        event.listen(engine, "checkin", turns.checkin)
        return engine
    if pool_size is not None:
        return create_engine(url, pool_pre_ping=True, pool_size=pool_size, max_overflow=0)
    return create_engine(url, pool_pre_ping=True)


def _unwritable(path: Path) -> bool:
    """Whether this process cannot write the SQLite file at ``path`` (a WAL database also needs
    its folder, for the -wal and -shm files). ``os.access`` asks as the process would write: a
    read-only mount refuses even root."""
    if not path.exists():
        return False  # made here, where its folder is writable or the error says why
    return not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK))


def _read_only_url(path: Path) -> str:
    """The URL that opens ``path`` read-only. In a folder no one may write, no -wal file can be
    made or grow, so none left behind means the file alone is the database: opened immutable
    (SQLite then needs no -shm file, which it could not make there)."""
    immutable = not os.access(path.parent, os.W_OK | os.X_OK) and not Path(f"{path}-wal").exists()
    query = "mode=ro" + ("&immutable=1" if immutable else "")
    return f"sqlite:///file:{quote(str(path.resolve()))}?{query}&uri=true"


class _WriteTurns:
    """How an engine's writers take SQLite's write lock (BEGIN IMMEDIATE), one at a time.

    SQLite's own wait for a taken lock (its busy handler) sleeps in growing steps up to 100 ms
    and is woken by nothing: 20 uploads at once left the lock idle ~37 % of the time they queued
    for it, between one writer's commit and the next one's waking. So the writers of this process
    queue on a lock of their own (released at commit or rollback, woken at once), and the one at
    the front asks SQLite again every 0.5-2 ms (a writer of another process may hold it), not by
    SQLite's steps. After busy_seconds it fails as SQLite's busy timeout would ('database is
    locked'). A turn ends at the commit or rollback event (just before the statement is sent) or,
    for a connection invalidated or closed mid-transaction, when it goes back to the pool. Plain
    BEGIN (readers) is SQLite's own, as are PostgreSQL's transactions."""

    def __init__(self, busy_seconds: float) -> None:
        self._turn = threading.Lock()
        self.busy_seconds = busy_seconds

    def begin(self, connection: Any) -> None:
        options = connection.get_execution_options()
        # SQLite refuses ATTACH inside a transaction, so databases a unit of work reads from
        # (staged rows, see evalstore.db.staging) are attached here, just before BEGIN, and
        # detached when the connection goes back to the pool.
        for schema, path in options.get("sqlite_attach", {}).items():
            connection.exec_driver_sql(f"ATTACH DATABASE ? AS {schema}", (str(path),))
            connection.connection.info.setdefault("attached", set()).add(schema)
        # Writers take the write lock up front (BEGIN IMMEDIATE): a deferred transaction that reads
        # and then writes can fail with SQLITE_BUSY_SNAPSHOT under WAL, which busy_timeout cannot
        # wait out.
        if not options.get("sqlite_immediate", False):
            connection.exec_driver_sql("BEGIN")
            return
        deadline = time.monotonic() + self.busy_seconds
        try:
            # taken and recorded in one statement: only an exception raised by a signal handler
            # between the two would leave the turn taken (each later writer of the process would
            # then wait busy_seconds for it, and go on asking SQLite: slow, not stuck)
            connection.connection.info["write_turn"] = self._turn.acquire(timeout=self.busy_seconds)
            self._begin_immediate(connection, deadline, self.busy_seconds)
        except BaseException:
            self.end(connection)
            raise

    @staticmethod
    def _begin_immediate(connection: Any, deadline: float, busy_seconds: float) -> None:
        raw = connection.connection.dbapi_connection
        try:
            if _polled(raw, deadline):
                return
            # out of time, or another error: raised as SQLAlchemy raises it (wrapped, a lost
            # connection recognised as one), at once (the busy timeout is still 0)
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        finally:
            with contextlib.suppress(sqlite3.Error):  # a closed connection: the error above says so
                raw.execute(f"PRAGMA busy_timeout = {int(busy_seconds * 1000)}")

    def end(self, connection: Any) -> None:
        """At commit or rollback (SQLAlchemy's events come just before the statement is sent)."""
        if connection.invalidated or connection.closed:
            return  # its pool entry's checkin gives the turn back
        if connection.connection.info.pop("write_turn", False):
            self._turn.release()

    def checkin(self, dbapi_connection: Any, record: Any) -> None:
        # a connection back in the pool holds no turn (one closed mid-transaction, say)
        if record.info.pop("write_turn", False):
            self._turn.release()
        attached = record.info.pop("attached", set())
        if dbapi_connection is not None:
            for schema in attached:
                dbapi_connection.execute(f"DETACH DATABASE {schema}")


def _polled(raw: sqlite3.Connection, deadline: float) -> bool:
    """BEGIN IMMEDIATE on ``raw``, asked again after a short pause while another connection holds
    the write lock, until ``deadline``: True once it began; False out of time or on another
    error (which the caller raises as SQLAlchemy would)."""
    pause = _FIRST_PAUSE
    try:
        raw.execute("PRAGMA busy_timeout = 0")
        while time.monotonic() < deadline:
            try:
                raw.execute("BEGIN IMMEDIATE")
                return True
            except sqlite3.OperationalError as error:
                if error.sqlite_errorcode & 0xFF != _SQLITE_BUSY:
                    return False
            time.sleep(pause)
            pause = min(2 * pause, _LONGEST_PAUSE)
    except sqlite3.Error:
        return False
    return False


def writer(engine: Engine, attach: Mapping[str, Path] | None = None) -> Engine:
    """The engine to open write transactions with (on SQLite they start with BEGIN IMMEDIATE,
    after attaching ``attach``: schema name -> database file)."""
    if not is_sqlite(engine):
        return engine
    return engine.execution_options(sqlite_immediate=True, sqlite_attach=dict(attach or {}))


def _pragmas(busy_seconds: float) -> Any:
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        _sqlite_pragmas(dbapi_connection, busy_seconds)

    return on_connect


def _read_only_pragmas(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.execute("PRAGMA cache_size = -262144")
    cursor.execute("PRAGMA temp_store = MEMORY")
    cursor.close()


def _sqlite_pragmas(dbapi_connection: Any, busy_seconds: float) -> None:
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys = ON")
    # Takes effect only in a new, empty database (an existing one keeps its page size). 16 KiB
    # pages instead of 4 KiB: a 7M-row run goes in and is checkpointed ~1.4 s faster (of ~5 s),
    # and reads scan fewer pages; the cost is 16 KiB WAL frames for the small job-queue writes.
    cursor.execute("PRAGMA page_size = 16384")
    cursor.execute("PRAGMA journal_mode = WAL")
    # WAL + NORMAL is durable against application crashes; only a power loss may drop the
    # last commits, never corrupt the file.
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute(f"PRAGMA busy_timeout = {int(busy_seconds * 1000)}")
    cursor.execute("PRAGMA cache_size = -262144")
    cursor.execute("PRAGMA temp_store = MEMORY")
    cursor.close()


def alembic_config(url: str) -> Any:
    """An Alembic Config built in code, so upgrades work from an installed package."""
    from alembic.config import Config  # alembic is slow to import; only db commands need it

    # Pass the stream at call time: Config's default is sys.stdout as it was when alembic was
    # first imported (a closed test-runner stream, in a test session). Diagnostics go to stderr.
    config = Config(stdout=sys.stderr)
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


# The newest migration, which this code's models match. Every command checks the database against
# it: reading it from the migrations with alembic took 0.2-0.3 s of each command's start-up.
# tests/db/test_migrations.py keeps it equal to the migrations' head.
SCHEMA_REVISION = "0047_answer_tiers"


@cache
def head_revision() -> str:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    heads = script.get_heads()
    if len(heads) != 1:
        raise RuntimeError(f"migrations have {len(heads)} heads; merge them into one")
    return heads[0]


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        return connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


def configure_models() -> None:
    """Configure the ORM's mappers now (once per process): otherwise the first query of a process
    does it, and a server's first page after a restart pays for every model's relationships and
    attributes (most of a leaderboard's first request)."""
    from evalstore.db import models  # noqa: F401 (every model registered before configuring)

    configure_mappers()


def verify_schema(engine: Engine) -> None:
    """Raise SchemaOutOfDateError unless the database is at the head revision."""
    current = current_revision(engine)
    if current == SCHEMA_REVISION:
        return
    head = head_revision()
    where = engine.url.render_as_string(hide_password=True)
    if current is None:
        raise SchemaOutOfDateError(
            f"The database {where} has no evalstore schema.",
            remedy=Remedy(cli="Run 'evalstore db upgrade' to create it."),
        )
    raise SchemaOutOfDateError(
        f"The database {where} is at schema revision {current}, but this evalstore needs {head}.",
        remedy=Remedy(cli="Take a backup, then run 'evalstore db upgrade'."),
    )


def upgrade(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def downgrade(engine: Engine, revision: str) -> None:
    from alembic import command

    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
