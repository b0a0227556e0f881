"""Units of work. Only services open them; repositories borrow the session and never commit."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from evalstore.db.engine import writer
from evalstore.errors import LimitExceeded


@contextmanager
def unit_of_work(engine: Engine, attach: Mapping[str, Path] | None = None) -> Iterator[Session]:
    """One transaction: committed when the block ends, rolled back whole on any exception.
    ``attach`` (SQLite: schema name -> file) is readable inside it, e.g. staged bulk rows. Keys
    PostgreSQL cannot index are refused with what is too long (:func:`_unindexable`)."""
    try:
        with Session(writer(engine, attach), expire_on_commit=False) as session, session.begin():
            yield session
    except Exception as error:
        refusal = _unindexable(error)
        if refusal is None:
            raise
        raise refusal from None


# PostgreSQL's "program_limit_exceeded": a B-tree index entry is at most 2704 bytes (a third of a
# page), after compression
_PROGRAM_LIMIT_EXCEEDED = "54000"


def _unindexable(error: BaseException) -> LimitExceeded | None:
    """The refusal of a row whose key is too long for PostgreSQL's B-tree index. Ids of up to the
    readers' 4 KiB each are stored as text, and every key over such ids indexes a digest of a long
    one (migrations 0040 and 0043), so this answers only a key that a later table might take over
    an id itself: in words, not as an outage. SQLite has no such bound."""
    cause = getattr(error, "orig", None) or error
    if getattr(cause, "sqlstate", None) != _PROGRAM_LIMIT_EXCEEDED or "index row size" not in str(cause):
        return None
    found = re.search(r"index row size (\d+) exceeds .* maximum (\d+) for index \"([^\"]+)\"", str(cause))
    size, limit, index = found.groups() if found else ("?", "2704", "?")
    return LimitExceeded(
        "size",
        f"A topic id, docno or other id is too long for this PostgreSQL store: its key takes {size} bytes "
        f"of index {index}, which holds at most {limit} (a label's or prediction's item id, a split's "
        "unit and the other ids of such a key are indexed together); shorten it.",
    )


@contextmanager
def read_only(engine: Engine) -> Iterator[Session]:
    """A session for reads; it is rolled back at the end, so nothing it does can persist.
    Objects it loaded are detached first, so they stay readable after the block."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
        finally:
            session.expunge_all()
            session.rollback()
