"""Units of work. Only services open them; repositories borrow the session and never commit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from evalstore.db.engine import writer


@contextmanager
def unit_of_work(engine: Engine) -> Iterator[Session]:
    """One transaction: committed when the block ends, rolled back whole on any exception."""
    with Session(writer(engine), expire_on_commit=False) as session, session.begin():
        yield session


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
