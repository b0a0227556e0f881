"""Alembic environment: evalstore builds the Config in code (evalstore.db.engine.alembic_config)
and passes an open connection in ``config.attributes["connection"]``; the ``alembic`` command line
works too, with ``-x url=...`` or ``$EVALSTORE_DATABASE_URL``."""

from __future__ import annotations

import re

from alembic import context
from sqlalchemy import Connection

from evalstore.config import default_database_url
from evalstore.db.engine import make_engine
from evalstore.db.models import Base

config = context.config
target_metadata = Base.metadata


RUN_PARTITION = re.compile(r"run_rows_p\d+\Z")


def _include_name(name: str | None, type_: str, _parent_names: object) -> bool:
    # Per-run partitions of run_rows (PostgreSQL) are created by the service, not by migrations.
    return not (type_ == "table" and name is not None and RUN_PARTITION.match(name))


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_name=_include_name,
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
