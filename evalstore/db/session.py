"""Units of work. Only services open them; repositories borrow the session and never commit."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from evalstore.db.engine import writer


@contextmanager
def unit_of_work(engine: Engine, attach: Mapping[str, Path] | None = None) -> Iterator[Session]:
    """One transaction: committed when the block ends, rolled back whole on any exception.
    ``attach`` (SQLite: schema name -> file) is readable inside it, e.g. staged bulk rows."""
    with Session(writer(engine, attach), expire_on_commit=False) as session, session.begin():
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
