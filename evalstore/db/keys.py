"""Looking up rows by ids read from files (topic ids, docnos) through their keys' indexes.

On PostgreSQL such a key is a unique index over ``evalstore_key(id)`` (migration 0036: a B-tree
entry holds at most 2704 bytes, an id up to 4 KiB), which a condition on the id alone cannot use;
:func:`same_id` and :func:`id_in` say the id and its key, so the index finds the row and the id
itself decides. On SQLite the key is the id, and the condition is the id's."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, LargeBinary, and_, literal
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement


class id_key(FunctionElement[bytes]):  # noqa: N801 (an SQL function's name)
    """``evalstore_key(x)`` on PostgreSQL; ``x`` itself elsewhere."""

    type = LargeBinary()
    inherit_cache = True


@compiles(id_key, "postgresql")
def _postgresql(element: id_key, compiler: SQLCompiler, **kw: Any) -> str:
    return f"evalstore_key({compiler.process(element.clauses, **kw)})"


@compiles(id_key)
def _other(element: id_key, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(element.clauses, **kw)


def _as_key(value: Any) -> Any:
    return literal(value) if isinstance(value, str) else value


def same_id(column: Any, value: Any) -> ColumnElement[bool]:
    """``column = value``, found through the id-keyed index (``value``: a string or a column)."""
    return and_(column == value, id_key(column) == id_key(_as_key(value)))


def id_in(column: Any, values: Iterable[str]) -> ColumnElement[bool]:
    """``column IN values``, found through the id-keyed index."""
    values = list(values)
    return and_(column.in_(values), id_key(column).in_([id_key(literal(v)) for v in values]))
