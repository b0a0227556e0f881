"""Topic ids, docnos, item ids and the other ids read from files as text of any length: the readers
accept fields of up to 4 KiB (evalstore.io.limits.MAX_FIELD_BYTES; URLs as docnos are that long),
and PostgreSQL refused what its varchar(200) and varchar(400) columns could not hold (a 500).
SQLite never enforced the lengths: there only the declared types change, in place (its schema
text, as SQLite's documentation describes for a change that leaves the stored rows as they are;
rebuilding run_rows would copy every row of every run).

Revision ID: 0027_wide_ids
Revises: 0026_answers
Create Date: 2026-12-06 07:40:00
"""

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027_wide_ids"
down_revision: str | None = "0026_answers"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# table -> {column: (its old length, nullable)}
WIDENED: dict[str, dict[str, tuple[int, bool]]] = {
    "judgments": {"topic": (200, False), "doc": (400, False), "iteration": (50, False), "subgroup": (50, False)},
    "runs": {"tag": (200, True)},
    "run_rows": {"topic": (200, False), "doc": (400, False)},
    "run_topics": {"topic": (200, False)},
    "pool_entries": {"topic": (200, False), "doc": (400, False)},
    "pool_judgments": {"topic": (200, False), "doc": (400, False)},
    "topics": {"topic": (200, False)},
    "documents": {"doc": (400, False)},
    "split_members": {"unit": (400, False)},
    "standardisation_statistics": {"topic": (200, False)},
    "standardised_values": {"topic": (200, False)},
    "gold_labels": {"item_id": (400, False), "group_id": (200, True)},
    "predictions": {"item_id": (400, False), "group_id": (200, True)},
    "prediction_scores": {"item_id": (400, False), "class_label": (200, False)},
    "judge_labels": {"topic": (200, False), "doc": (400, False)},
}


def upgrade() -> None:
    _retype(wide=True)


def downgrade() -> None:
    _retype(wide=False)


def _retype(wide: bool) -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        _retype_sqlite(bind, wide)
        return
    for table, columns in WIDENED.items():
        for column, (length, nullable) in columns.items():
            old, new = (sa.String(length), sa.Text()) if wide else (sa.Text(), sa.String(length))
            # varchar to text needs no rewrite of the rows on PostgreSQL (binary coercible); a
            # partitioned run_rows passes it on to each run's partition
            op.alter_column(table, column, type_=new, existing_type=old, existing_nullable=nullable)


def _retype_sqlite(bind: sa.Connection, wide: bool) -> None:
    """The declared types in SQLite's schema text: VARCHAR(n) and TEXT have the same affinity, so
    the rows on disk are the same under either (SQLite: "ALTER TABLE", making other kinds of
    schema changes)."""
    for table, columns in WIDENED.items():
        sql = bind.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).scalar()
        assert isinstance(sql, str), table
        for column, (length, _) in columns.items():
            old, new = (rf"VARCHAR\({length}\)", "TEXT") if wide else (r"TEXT", f"VARCHAR({length})")
            sql, found = re.subn(rf"""(["`]?\b{column}\b["`]?\s+){old}(?=[\s,)])""", rf"\g<1>{new}", sql, count=1)
            assert found == 1, f"{table}.{column} not found in its schema"
        version = bind.exec_driver_sql("PRAGMA schema_version").scalar()
        bind.exec_driver_sql("PRAGMA writable_schema = ON")
        bind.exec_driver_sql("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = ?", (sql, table))
        bind.exec_driver_sql("PRAGMA writable_schema = OFF")
        bind.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
