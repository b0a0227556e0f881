"""Alembic environment: evalstore builds the Config in code (evalstore.db.engine.alembic_config)
and passes an open connection in ``config.attributes["connection"]``; the ``alembic`` command line
works too, with ``-x url=...`` or ``$EVALSTORE_DATABASE_URL``."""

from __future__ import annotations

import re
from collections.abc import Callable

from alembic import context
from sqlalchemy import Connection

from evalstore.config import default_database_url
from evalstore.db.engine import make_engine
from evalstore.db.models import Base

config = context.config
target_metadata = Base.metadata


RUN_PARTITION = re.compile(r"run_rows_p\d+\Z")


# PostgreSQL's unique indexes over the keys of ids (0040, 0043), in place of what SQLite keeps
KEY_INDEX = re.compile(r"uq_\w+_key\Z")


def _include_name(name: str | None, type_: str, _parent_names: object) -> bool:
    # Per-run partitions of run_rows (PostgreSQL) are created by the service, not by migrations.
    if type_ == "table" and name is not None and RUN_PARTITION.match(name):
        return False
    # the id-keyed indexes are expressions, which no model can say for one dialect only
    return not (type_ == "index" and name is not None and KEY_INDEX.match(name))


def _include_object(dialect: str) -> Callable[[object, str | None, str, bool, object], bool]:
    def include(item: object, _name: str | None, _type: str, reflected: bool, _compare_to: object) -> bool:
        # the constraints and indexes over ids that PostgreSQL has as indexes over their keys
        return reflected or dialect == "sqlite" or not getattr(item, "info", {}).get("sqlite_only")

    return include


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_name=_include_name,
        include_object=_include_object(connection.dialect.name),
        render_as_batch=True,  # SQLite alters tables by copy-and-move
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    engine = make_engine(url or default_database_url())
    with engine.begin() as connection:
        _run(connection)


if context.is_offline_mode():
    raise SystemExit("evalstore migrations run online only; pass a database URL")
run_migrations_online()
