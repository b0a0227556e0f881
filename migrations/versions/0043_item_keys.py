"""PostgreSQL: every key over ids read from files takes a digest of a long id, written out in the
index: the keys of classification items, split units and standardised topics join those 0040
made (topics, docnos), and 0040's are made again without its function.

0040 made the keys of judgments, pools, documents, topics, runs' topics and judges' labels unique
indexes over ``evalstore_key(id)``, but left gold labels, predictions, prediction scores, split
members and standardisations indexing their ids themselves: a key there past the 2704 bytes of
a B-tree entry was refused, where SQLite stored it. And PostgreSQL calls a function in an index
expression once a row: COPYing a million gold labels took twice as long with ``evalstore_key()``
(11 s -> 22 s), storing 500,000 pool entries 43% longer.

Each key is now a unique index over its columns with each id as itself when it has at most 256
bytes and as ``sha256:`` and its SHA-256 in hex otherwise, the CASE written in the index (it costs
what the plain key did); only the digest is a function (``convert_to`` is only STABLE, so an
index cannot name it, but the database's encoding never changes: IMMUTABLE is true). Lookups
name the same expression beside the id (evalstore.db.keys). SQLite has no such bound: nothing
changes there.

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

DIGEST_FUNCTION = r"""
CREATE FUNCTION evalstore_long_key(text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT 'sha256:' || encode(sha256(convert_to($1, 'UTF8')), 'hex') $$
"""
# 0040's, to go back to
KEY_FUNCTION = r"""
CREATE FUNCTION evalstore_key(text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT CASE WHEN octet_length($1) <= 256 THEN convert_to($1, 'UTF8')
                  ELSE '\x01'::bytea || sha256(convert_to($1, 'UTF8')) END $$
"""

# table -> its key's columns, ids read from files marked with *: the primary keys made unique
# indexes here, then 0040's keys (each already a unique index uq_<table>_key)
NEW_KEYS: dict[str, tuple[str, ...]] = {
    "gold_labels": ("label_set_id", "*item_id"),
    "predictions": ("prediction_set_id", "*item_id"),
    "prediction_scores": ("prediction_set_id", "*item_id", "*class_label"),
    "split_members": ("split_id", "fold", "part", "*unit"),
    "standardisation_statistics": ("standardisation_id", "measure", "*topic"),
    "standardised_values": ("standardisation_id", "measure", "run", "*topic"),
}
KEYS_0040: dict[str, tuple[str, ...]] = {
    "judgments": ("qrels_id", "*topic", "*doc", "*iteration", "*subgroup"),
    "pool_entries": ("pool_id", "*topic", "*doc"),
    "pool_judgments": ("pool_id", "*topic", "*doc", "assessor"),
    "documents": ("collection_id", "*doc"),
    "run_topics": ("run_id", "*topic"),
    "topics": ("topic_set_id", "*topic"),
    "judge_labels": ("judge_id", "config_hash", "pool_id", "*topic", "*doc"),
    "judge_repeats": ("judge_id", "config_hash", "pool_id", "*topic", "*doc", "repeat"),
}


def key_expression(column: str) -> str:
    """The written-out key of an id column (evalstore.db.keys.id_key says the same in queries)."""
    return f"(CASE WHEN octet_length({column}) <= 256 THEN {column} ELSE evalstore_long_key({column}) END)"


def _index(table: str, columns: tuple[str, ...], key: str) -> str:
    parts = (key.format(c[1:]) if c.startswith("*") else f'"{c}"' for c in columns)
    return f"CREATE UNIQUE INDEX uq_{table}_key ON {table} ({', '.join(parts)})"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(DIGEST_FUNCTION)
    written_out = key_expression("{0}")
    for table, columns in NEW_KEYS.items():
        op.drop_constraint(f"pk_{table}", table)
        op.execute(_index(table, columns, written_out))
    for table, columns in KEYS_0040.items():
        op.drop_index(f"uq_{table}_key", table_name=table)
        op.execute(_index(table, columns, written_out))
    op.execute("DROP FUNCTION evalstore_key(text)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(KEY_FUNCTION)
    for table, columns in KEYS_0040.items():
        op.drop_index(f"uq_{table}_key", table_name=table)
        op.execute(_index(table, columns, "evalstore_key({0})"))
    for table, columns in NEW_KEYS.items():
        op.drop_index(f"uq_{table}_key", table_name=table)
        op.create_primary_key(f"pk_{table}", table, [c.lstrip("*") for c in columns])
    op.execute("DROP FUNCTION evalstore_long_key(text)")
