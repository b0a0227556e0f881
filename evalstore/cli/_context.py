"""The database a command works on, chosen once by the root callback."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from sqlalchemy import Engine


@dataclass
class CliState:
    database_url: str
    _engine: Engine | None = field(default=None, repr=False)

    def engine(self, *, check_schema: bool = True) -> Engine:
        from evalstore.db.engine import make_engine, verify_schema

        if self._engine is None:
            self._engine = make_engine(self.database_url)
        if check_schema:
            verify_schema(self._engine)
        return self._engine


def state(ctx: typer.Context) -> CliState:
    obj = ctx.find_root().obj
    assert isinstance(obj, CliState), "root callback sets the CLI state"
    return obj
