"""A failed database call told apart from a bug (evalstore.db.outages), and a worker's pauses."""

from __future__ import annotations

import errno
import logging
import sqlite3

import pytest
from sqlalchemy import exc

from evalstore.db.outages import Backoff, outage


class _Pg(Exception):
    def __init__(self, message: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def _sqlite(code: int, message: str) -> sqlite3.OperationalError:
    error = sqlite3.OperationalError(message)
    error.sqlite_errorcode = code  # type: ignore[attr-defined]
    return error


PG = "postgresql+psycopg://u:secret@db:5432/evalstore"


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (exc.OperationalError("SELECT 1", {}, _Pg("connection refused", None)), "unreachable"),
        (exc.OperationalError("SELECT 1", {}, _Pg("terminating connection", "57P01")), "unreachable"),
        (exc.OperationalError("INSERT", {}, _Pg("could not extend file", "53100")), "disk_full"),
        (exc.InternalError("INSERT", {}, _Pg("read-only transaction", "25006")), "read_only"),
        (exc.IntegrityError("INSERT", {}, _Pg("duplicate key", "23505")), None),  # a bug or a race: not an outage
        (exc.OperationalError("UPDATE", {}, _Pg("deadlock detected", "40P01")), None),
        (exc.OperationalError("BEGIN", {}, _sqlite(5, "database is locked")), "locked"),
        (exc.OperationalError("INSERT", {}, _sqlite(13, "database or disk is full")), "disk_full"),
        (exc.OperationalError("INSERT", {}, _sqlite(8, "attempt to write a readonly database")), "read_only"),
        (exc.OperationalError("SELECT", {}, _sqlite(1, "no such table: runs")), None),
        (exc.TimeoutError("QueuePool limit of size 5 overflow 10 reached"), "unreachable"),
        (OSError(errno.ENOSPC, "No space left on device", "/data/x"), "disk_full"),
        (ValueError("a bug"), None),
    ],
)
def test_each_error_is_told_for_what_it_is(error: BaseException, kind: str | None) -> None:
    found = outage(error, PG)
    assert (found.kind if found else None) == kind


def test_the_database_is_named_without_its_password() -> None:
    found = outage(exc.OperationalError("SELECT 1", {}, _Pg("connection refused", None)), PG)
    assert found is not None
    assert (
        found.describe()
        == "the database postgresql+psycopg://u:***@db:5432/evalstore is not answering (connection refused)"
    )


def test_pauses_double_with_jitter_up_to_the_longest() -> None:
    backoff = Backoff(logging.getLogger("test"), PG, first=0.5, longest=8.0)
    ceilings = []
    for tries in range(1, 9):
        backoff._tries = tries
        pauses = [backoff.next_pause() for _ in range(200)]
        ceiling = min(8.0, 0.5 * 2 ** (tries - 1))
        assert all(ceiling / 2 <= pause <= ceiling for pause in pauses)
        assert max(pauses) - min(pauses) > ceiling / 4  # jitter: not all in step
        ceilings.append(ceiling)
    assert ceilings == [0.5, 1, 2, 4, 8, 8, 8, 8]


def test_one_line_when_an_outage_begins_and_one_when_it_ends(caplog: pytest.LogCaptureFixture) -> None:
    backoff = Backoff(logging.getLogger("test.backoff"), PG, first=0.001, longest=0.002)
    refused = exc.OperationalError("SELECT 1", {}, _Pg("connection refused", None))
    calls = iter([refused, refused, refused, None])

    def step() -> None:
        error = next(calls)
        if error is not None:
            raise error

    with caplog.at_level(logging.WARNING, logger="test.backoff"):
        assert backoff.call(step)
    assert [record.getMessage().split(";")[0] for record in caplog.records] == [
        "the database postgresql+psycopg://u:***@db:5432/evalstore is not answering (connection refused)",
        caplog.records[1].getMessage().split(";")[0],
    ]
    assert caplog.records[1].getMessage().startswith("the database answers again after ")
    assert "(3 tries)" in caplog.records[1].getMessage()


def test_an_error_that_is_no_outage_is_raised_at_once() -> None:
    backoff = Backoff(logging.getLogger("test"), PG)

    def step() -> None:
        raise exc.IntegrityError("INSERT", {}, _Pg("duplicate key", "23505"))

    with pytest.raises(exc.IntegrityError):
        backoff.call(step)
