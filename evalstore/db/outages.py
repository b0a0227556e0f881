"""What a failed database call means to an operator, told apart from a bug: the database not
answering, SQLite's write lock held by another too long, a full disk, a store that cannot be
written. :func:`outage` gives the facts; the worker, the CLI and the HTTP service each say them
in their own words (and a worker waits them out: none of them is worth exiting over)."""

from __future__ import annotations

import errno
import logging
import random
import shutil
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sqlalchemy import exc
from sqlalchemy.engine import make_url

from evalstore.config import SQLITE_BUSY_SECONDS_ENV, retry_longest_seconds
from evalstore.errors import InvalidParameterError

OutageKind = Literal["unreachable", "locked", "disk_full", "read_only"]

# SQLite's primary result codes (an extended code holds one in its low byte)
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN = 5, 6, 8, 10, 13, 14
# PostgreSQL's SQLSTATE classes and codes: 08 connection exceptions, 57P0x the server shutting
# down or starting, 53100 disk full (53 is "insufficient resources"), 25006 a read-only transaction
_PG_UNREACHABLE_PREFIXES = ("08", "57P", "53")
_PG_DISK_FULL, _PG_READ_ONLY = "53100", "25006"


@dataclass(frozen=True)
class Outage:
    """``kind``: ``unreachable`` (no connection, or it dropped), ``locked`` (another SQLite
    writer held the write lock past the busy timeout), ``disk_full``, ``read_only``. ``where``: the
    database (its URL without the password), or the disk's folder for a full disk, when known.
    ``detail``: the driver's own first line. ``free_bytes``: what the disk has left (a full disk)."""

    kind: OutageKind
    where: str
    detail: str
    free_bytes: int | None = None

    @property
    def busy_setting(self) -> str:
        return SQLITE_BUSY_SECONDS_ENV

    def describe(self) -> str:
        """One clause for a log line: what is wrong, and where."""
        if self.kind == "disk_full":
            free = f", {self.free_bytes:,} bytes free" if self.free_bytes is not None else ""
            return f"the disk holding {self.where} is full ({self.detail}{free})"
        if self.kind == "locked":
            return (
                f"the database {self.where} is locked by another writer for longer than "
                f"{SQLITE_BUSY_SECONDS_ENV} allows ({self.detail})"
            )
        if self.kind == "read_only":
            return f"the database {self.where} cannot be written ({self.detail})"
        return f"the database {self.where} is not answering ({self.detail})"


def outage(error: BaseException, database_url: str | None = None) -> Outage | None:
    """The outage ``error`` reports, or None when it is something else (bad input, a bug)."""
    where = _shown(database_url)
    if isinstance(error, exc.DBAPIError):
        if _told(error.orig):  # the driver said what went wrong: its code decides
            return _from_driver(error.orig, database_url, where)
        if error.connection_invalidated or isinstance(error, exc.OperationalError | exc.InterfaceError):
            return Outage("unreachable", where, _first_line(error.orig))
        return None
    if isinstance(error, exc.TimeoutError):  # no pooled connection came free: the database is stuck
        return Outage("unreachable", where, _first_line(error))
    if isinstance(error, sqlite3.Error):
        return _from_driver(error, database_url, where)
    if isinstance(error, OSError):
        if error.errno == errno.ENOSPC:
            folder = Path(error.filename).parent if error.filename else None
            return Outage(
                "disk_full", str(folder) if folder else where, error.strerror or "no space left", _free(folder)
            )
        if error.errno == errno.EROFS:
            return Outage("read_only", str(error.filename or where), error.strerror or "read-only file system")
    return None


def _from_driver(orig: BaseException | None, database_url: str | None, where: str) -> Outage | None:
    detail = _first_line(orig)
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        primary = code & 0xFF
        if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
            return Outage("locked", where, detail)
        if primary == _SQLITE_READONLY:
            return Outage("read_only", where, detail)
        folder = _sqlite_folder(database_url)
        free = _free(folder)
        if primary == _SQLITE_FULL or (primary == _SQLITE_IOERR and free is not None and free < 1 << 20):
            return Outage("disk_full", str(_sqlite_file(database_url) or where), detail, free)
        if primary in (_SQLITE_IOERR, _SQLITE_CANTOPEN):
            return Outage("unreachable", where, detail)
        return None
    state = getattr(orig, "sqlstate", None)
    if isinstance(state, str):
        if state == _PG_DISK_FULL:
            return Outage("disk_full", f"the PostgreSQL server of {where}", detail)
        if state == _PG_READ_ONLY:
            return Outage("read_only", where, detail)
        if state.startswith(_PG_UNREACHABLE_PREFIXES):
            return Outage("unreachable", where, detail)
    return None


def _told(orig: BaseException | None) -> bool:
    return isinstance(getattr(orig, "sqlite_errorcode", None), int) or isinstance(getattr(orig, "sqlstate", None), str)


def _shown(database_url: str | None) -> str:
    if not database_url:
        return "(unknown)"
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        return str(url.database or ":memory:")
    return url.render_as_string(hide_password=True)


def _sqlite_file(database_url: str | None) -> Path | None:
    if not database_url:
        return None
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database.removeprefix("file:").split("?")[0])


def _sqlite_folder(database_url: str | None) -> Path | None:
    path = _sqlite_file(database_url)
    return path.parent if path is not None else None


def _free(folder: Path | None) -> int | None:
    if folder is None:
        return None
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _first_line(error: BaseException | None) -> str:
    text = str(error or "").strip()
    return text.splitlines()[0] if text else type(error).__name__


class Backoff:
    """Waits out outages for a process that must not exit over one (a worker): after each failed
    try a pause, doubling from ``first`` up to ``longest`` seconds, each drawn from its upper half
    (jitter, so that workers cut off together do not all come back in step). One log line when an
    outage begins or changes kind, one when the database answers again; none per try.
    ``stopping``: asked between short sleeps, so a stop request ends a pause at once."""

    def __init__(
        self,
        log: logging.Logger,
        database_url: str,
        *,
        first: float = 0.5,
        longest: float = 30.0,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.log, self.database_url = log, database_url
        self.first, self.longest = first, max(first, longest)
        self.stopping = stopping
        self.current: Outage | None = None
        self._since = 0.0
        self._tries = 0
        self._random = random.Random()

    def failed(self, error: BaseException) -> bool:
        """After ``error``: False when it is no outage (the caller raises it); else say so if it is
        a new one, pause, and True (the caller tries again)."""
        found = outage(error, self.database_url)
        if found is None:
            return False
        if self.current is None or (found.kind, found.where) != (self.current.kind, self.current.where):
            if self.current is None:
                self._since = time.monotonic()
            self.log.warning(
                "%s; trying again with pauses of up to %gs until it is back", found.describe(), self.longest
            )
        self.current = found
        self._tries += 1
        self._pause(self.next_pause())
        return True

    def next_pause(self) -> float:
        ceiling = min(self.longest, self.first * 2 ** min(self._tries - 1, 30))
        return self._random.uniform(ceiling / 2, ceiling)

    def answered(self) -> None:
        """The database answered: say so once, after an outage, and start the pauses afresh."""
        if self.current is not None:
            self.log.warning(
                "the database answers again after %.1fs (%d tries); carrying on",
                time.monotonic() - self._since,
                self._tries,
            )
        self.current, self._tries = None, 0

    def call(self, step: Callable[[], object], *, give_up_after: float | None = None) -> bool:
        """Run ``step`` until it works: True; False when stopping (or after ``give_up_after``
        seconds of outage) first. An error that is no outage is raised."""
        started = time.monotonic()
        while True:
            try:
                step()
            except Exception as error:
                if not self.failed(error):
                    raise
                if self.stopping() or (give_up_after is not None and time.monotonic() - started >= give_up_after):
                    return False
                continue
            self.answered()
            return True

    def _pause(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        while not self.stopping() and (left := until - time.monotonic()) > 0:
            time.sleep(min(left, 0.1))


def worker_backoff(log: logging.Logger, database_url: str, stopping: Callable[[], bool]) -> Backoff:
    """A worker's :class:`Backoff`: pauses from 0.5 s up to ``config.retry_longest_seconds``."""
    try:
        longest = retry_longest_seconds()
    except ValueError as error:
        raise InvalidParameterError(str(error)) from None
    return Backoff(log, database_url, first=min(0.5, longest), longest=longest, stopping=stopping)
