"""PostgreSQL: the keys over the ids of classification items, split units and standardised topics
take a digest of a long id, as 0040's did for topics and docnos: a gold label's, prediction's,
prediction score's, split member's or standardisation's key whose ids passed the 2704 bytes of a
B-tree entry was refused there, where SQLite stored it.

Each primary key becomes a unique index over the same columns, each id as itself when it has at
most 256 bytes and as ``sha256:`` and its SHA-256 in hex otherwise. The expression is written in
the index, not behind a function as 0040's ``evalstore_key()`` is: PostgreSQL calls a function in
an index expression once a row, which doubled the time of COPYing a million gold labels (11 s ->
22 s), where the written-out CASE costs what the plain key did; the digest alone is a function
(``convert_to`` is only STABLE, see 0040). Lookups by these keys read whole sets, so no query
needs to name the expression. SQLite has no such bound: nothing changes there.

Revision ID: 0043_item_keys
Revises: 0042_stored_boards
Create Date: 2026-12-06 13:45:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0043_item_keys"
down_revision: str | None = "0042_stored_boards"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# table -> its primary key's columns; ids read from files marked with *
KEYS: dict[str, tuple[str, ...]] = {
    "gold_labels": ("label_set_id", "*item_id"),
    "predictions": ("prediction_set_id", "*item_id"),
    "prediction_scores": ("prediction_set_id", "*item_id", "*class_label"),
    "split_members": ("split_id", "fold", "part", "*unit"),
    "standardisation_statistics": ("standardisation_id", "measure", "*topic"),
    "standardised_values": ("standardisation_id", "measure", "run", "*topic"),
}


DIGEST_FUNCTION = r"""
CREATE FUNCTION evalstore_long_key(text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT 'sha256:' || encode(sha256(convert_to($1, 'UTF8')), 'hex') $$
"""


def _expression(column: str) -> str:
    if not column.startswith("*"):
        return f'"{column}"'
    name = column[1:]
    return f"(CASE WHEN octet_length({name}) <= 256 THEN {name} ELSE evalstore_long_key({name}) END)"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(DIGEST_FUNCTION)
    for table, columns in KEYS.items():
        op.drop_constraint(f"pk_{table}", table)
        op.execute(f"CREATE UNIQUE INDEX uq_{table}_key ON {table} ({', '.join(map(_expression, columns))})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, columns in KEYS.items():
        op.drop_index(f"uq_{table}_key", table_name=table)
        op.create_primary_key(f"pk_{table}", table, [c.lstrip("*") for c in columns])
    op.execute("DROP FUNCTION evalstore_long_key(text)")
