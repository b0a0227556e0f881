"""SQLite writers take the write lock in turn (evalstore.db.engine._WriteTurns): a writer waiting
for it starts within milliseconds of its release, whether the holder is a writer of the same
engine or another process's; one that cannot have it fails as before ('database is locked'), and
no turn outlives its transaction."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, event, text
from sqlalchemy.exc import OperationalError

from evalstore.db.engine import make_engine, writer

# SQLite's own busy handler (sqlite3_busy_timeout) tries again 1, 3, 8, ... 228 and 328 ms after a
# waiter began to wait: a lock held 240 ms is taken ~90 ms after its release (measured: 85-90 ms
# before the write turns). In turn, a waiter starts within a few ms; one slow trial of six is
# allowed for a loaded machine.
HOLD = 0.24
TRIALS = 6
PROMPT = 0.02


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE log (who TEXT)"))
    yield engine
    engine.dispose()


def _write(engine: Engine, who: str) -> float:
    """A write transaction; the time its BEGIN IMMEDIATE returned."""
    with writer(engine).begin() as connection:
        began = time.monotonic()
        connection.execute(text("INSERT INTO log VALUES (:who)"), {"who": who})
    return began


def _delays_after_release(
    engine: Engine, hold_and_release: Callable[[threading.Event, list[float]], None]
) -> list[float]:
    """For each trial: how long after the holder released the lock a waiting writer's BEGIN
    returned (the holder sets the event once it holds the lock, and notes when it releases it)."""
    delays = []
    for _ in range(TRIALS):
        holding = threading.Event()
        times: list[float] = []
        holder = threading.Thread(target=hold_and_release, args=(holding, times))
        holder.start()
        holding.wait()
        waiter = threading.Thread(target=lambda noted=times: noted.append(_write(engine, "waiter")))
        waiter.start()
        holder.join()
        waiter.join()
        delays.append(times[1] - times[0])
    return delays


def test_a_writer_of_the_same_engine_starts_as_soon_as_the_lock_is_released(engine: Engine) -> None:

    def hold_and_release(holding: threading.Event, released: list[float]) -> None:
        with writer(engine).begin() as connection:
            connection.execute(text("INSERT INTO log VALUES ('holder')"))
            holding.set()
            time.sleep(HOLD)
            released.append(time.monotonic())

    delays = _delays_after_release(engine, hold_and_release)
    assert sum(delay < PROMPT for delay in delays) >= TRIALS - 1, delays
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM log")).scalar() == 2 * TRIALS


def test_a_writer_starts_as_soon_as_another_process_releases_the_lock(engine: Engine, tmp_path: Path) -> None:
    """The holder is a connection of its own, as another process's would be: SQLite's lock."""

    def hold_and_release(holding: threading.Event, released: list[float]) -> None:
        other = sqlite3.connect(tmp_path / "store.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO log VALUES ('other')")
        holding.set()
        time.sleep(HOLD)
        released.append(time.monotonic())
        other.execute("COMMIT")
        other.close()

    delays = _delays_after_release(engine, hold_and_release)
    assert sum(delay < PROMPT for delay in delays) >= TRIALS - 1, delays


def test_a_writer_that_cannot_have_the_lock_fails_as_sqlite_would(engine: Engine, tmp_path: Path) -> None:
    impatient = make_engine(str(engine.url), busy_seconds=0.2)
    other = sqlite3.connect(tmp_path / "store.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with pytest.raises(OperationalError, match="database is locked"):
            _write(impatient, "late")
        assert 0.2 <= time.monotonic() - started < 5
    finally:
        other.execute("ROLLBACK")
        other.close()
    # the failed writer gave its turn back: the next one goes ahead at once
    started = time.monotonic()
    _write(impatient, "next")
    assert time.monotonic() - started < 1
    impatient.dispose()


def test_no_turn_outlives_its_transaction(engine: Engine) -> None:
    """Commit, rollback and an exception inside the block all give the turn back: otherwise the
    next writer would wait out the busy timeout."""
    _write(engine, "committed")
    with pytest.raises(RuntimeError), writer(engine).begin() as connection:
        connection.execute(text("INSERT INTO log VALUES ('rolled back')"))
        raise RuntimeError("a step failed")
    connection = writer(engine).connect()
    transaction = connection.begin()
    connection.execute(text("INSERT INTO log VALUES ('explicit rollback')"))
    transaction.rollback()
    connection.close()
    done = threading.Thread(target=_write, args=(engine, "from another thread"))
    started = time.monotonic()
    done.start()
    done.join(timeout=10)
    assert not done.is_alive() and time.monotonic() - started < 1
    with engine.connect() as connection:
        assert [row[0] for row in connection.execute(text("SELECT who FROM log"))] == [
            "committed",
            "from another thread",
        ]


class _Stop(BaseException):
    """As the worker's StopNow: raised by a signal handler, not an Exception."""


def test_a_base_exception_inside_a_write_reaches_the_caller_as_itself_and_frees_the_turn(engine: Engine) -> None:
    """SQLAlchemy invalidates a connection on a BaseException during a statement and then sends
    the rollback event: the turn must come back through the pool, and the caller see its own
    exception (a second SIGTERM's StopNow), not an error about the invalidated connection."""

    def stop(*_: object) -> None:
        raise _Stop

    event.listen(engine, "before_cursor_execute", stop)
    try:
        with pytest.raises(_Stop), writer(engine).begin() as connection:
            connection.execute(text("INSERT INTO log VALUES ('stopped')"))
    finally:
        event.remove(engine, "before_cursor_execute", stop)
    done = threading.Thread(target=_write, args=(engine, "next"))
    started = time.monotonic()
    done.start()
    done.join(timeout=10)
    assert not done.is_alive() and time.monotonic() - started < 1
