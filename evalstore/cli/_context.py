"""The database a command works on, chosen once by the root callback, and the command's
application context (:class:`evalstore.services.context.AppContext`: its caches and the MLflow
loggers it starts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from evalstore.services.context import AppContext


@dataclass
class CliState:
    database_url: str
    _engine: Engine | None = field(default=None, repr=False)
    _context: AppContext | None = field(default=None, repr=False)

    def engine(self, *, check_schema: bool = True) -> Engine:
        from evalstore.db.engine import make_engine, verify_schema

        if self._engine is None:
            self._engine = make_engine(self.database_url)
        if check_schema:
            verify_schema(self._engine)
        return self._engine

    def release(self) -> None:
        """Close the pooled connections at the command's end (the engine stays usable: a caller
        that handed this state in may read through it afterwards). An `evalstore` process exits
        anyway; a command run in-process (a test's CliRunner) would leave them to the collector."""
        if self._engine is not None:
            self._engine.dispose()

    def context(self) -> AppContext:
        """The command's application context, over :meth:`engine` (made on first use)."""
        from evalstore.services.context import AppContext

        if self._context is None:
            self._context = AppContext(self.engine())
        return self._context


def state(ctx: typer.Context) -> CliState:
    obj = ctx.find_root().obj
    assert isinstance(obj, CliState), "root callback sets the CLI state"
    return obj
