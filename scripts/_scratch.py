"""A scratch PostgreSQL database for a benchmark: created on the server the URL names, dropped after.
(Imported by the bench_*.py scripts, which Python runs with this folder on its path.)"""

from __future__ import annotations

import importlib.util
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType


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


def servers_helper() -> ModuleType:
    """``tests/helpers/servers.py`` of this checkout, loaded from its file: with ``--against``,
    PYTHONPATH holds the other checkout first, whose ``tests`` package may have no such module."""
    path = Path(__file__).resolve().parents[1] / "tests" / "helpers" / "servers.py"
    spec = importlib.util.spec_from_file_location("evalstore_bench_servers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module
