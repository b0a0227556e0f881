"""A scratch PostgreSQL database for a benchmark: created on the server the URL names, dropped after.
(Imported by the bench_*.py scripts, which Python runs with this folder on its path.)"""

from __future__ import annotations

import uuid
from collections.abc import Callable


def scratch_postgres(base_url: str) -> tuple[str, Callable[[], None]]:
    """(the scratch database's URL, a function that drops it)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    base = make_url(base_url)
    name = f"evalstore_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    return base.set(database=name).render_as_string(hide_password=False), drop
