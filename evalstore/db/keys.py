"""Looking up rows by ids read from files (topic ids, docnos) through their keys' indexes.

On PostgreSQL such a key is a unique index over each id written out as ``CASE WHEN
octet_length(id) <= 256 THEN id ELSE evalstore_long_key(id) END`` (migration 0043: a B-tree entry
holds at most 2704 bytes, an id up to 4 KiB), which a condition on the id alone cannot use;
:func:`same_id` and :func:`id_in` say the id and that expression, so the index finds the row and
the id itself decides. The expression must be the index's, word for word, for the planner to
match them. On SQLite the key is the id, and the condition is the id's."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, Text, and_, literal
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement


class id_key(FunctionElement[str]):  # noqa: N801 (an SQL expression's name)
    """The id's key on PostgreSQL (its bytes up to 256, else ``sha256:`` and its digest); ``x``
    itself elsewhere."""

    type = Text()
    inherit_cache = True


@compiles(id_key, "postgresql")
def _postgresql(element: id_key, compiler: SQLCompiler, **kw: Any) -> str:
    column = compiler.process(element.clauses, **kw)
    return f"(CASE WHEN octet_length({column}) <= 256 THEN {column} ELSE evalstore_long_key({column}) END)"


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
