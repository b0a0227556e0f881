"""PostgreSQL: the keys made of ids read from files (topic ids, docnos) are indexed by a digest of
each long id, so a key stores whatever the readers accept. A B-tree entry holds at most 2704 bytes
and the readers take ids of up to 4 KiB (evalstore.io.limits.MAX_FIELD_BYTES): a 4 KiB docno that
does not compress was refused there, where SQLite stored it.

Each such primary key or unique constraint becomes a unique index over ``evalstore_key(id)``: the
id's own bytes up to 256 of them (as short ids are, so their index is as before), else a marker
byte and the id's SHA-256 (a collision would need two ids with one SHA-256). Lookups name the same
expression beside the id (evalstore.db.keys). SQLite has no such bound: nothing changes there.

Revision ID: 0040_hashed_keys
Revises: 0039_account_links
Create Date: 2026-12-06 10:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0040_hashed_keys"
down_revision: str | None = "0039_account_links"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# convert_to is only STABLE (it looks the encoding up), but the database's encoding never changes,
# so the same text always gives the same bytes: IMMUTABLE is true, and lets an index use it
KEY_FUNCTION = r"""
CREATE FUNCTION evalstore_key(text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT CASE WHEN octet_length($1) <= 256 THEN convert_to($1, 'UTF8')
                  ELSE '\x01'::bytea || sha256(convert_to($1, 'UTF8')) END $$
"""

# table -> (the old constraint, whether it is the primary key, its columns; ids marked with *)
KEYS: dict[str, tuple[str, bool, tuple[str, ...]]] = {
    "judgments": (
        "uq_judgments_qrels_id_topic_doc_iteration_subgroup",
        False,
        ("qrels_id", "*topic", "*doc", "*iteration", "*subgroup"),
    ),
    "pool_entries": ("pk_pool_entries", True, ("pool_id", "*topic", "*doc")),
    "pool_judgments": ("pk_pool_judgments", True, ("pool_id", "*topic", "*doc", "assessor")),
    "documents": ("pk_documents", True, ("collection_id", "*doc")),
    "run_topics": ("pk_run_topics", True, ("run_id", "*topic")),
    "topics": ("pk_topics", True, ("topic_set_id", "*topic")),
    "judge_labels": (
        "uq_judge_labels_judge_id_config_hash_pool_id_topic_doc",
        False,
        ("judge_id", "config_hash", "pool_id", "*topic", "*doc"),
    ),
    "judge_repeats": (
        "uq_judge_repeats_judge_id_config_hash_pool_id_topic_doc_repeat",
        False,
        ("judge_id", "config_hash", "pool_id", "*topic", "*doc", "repeat"),
    ),
}
# the run-to-judgments join's covering index (0009), over the ids themselves: its work is done by
# the unique key's index on PostgreSQL (and by each run's docno-hash index, repositories.index_run)
JUDGMENTS_JOIN_INDEX = ("ix_judgments_qrels_id_topic_doc_relevance", ("qrels_id", "topic", "doc", "relevance"))


def key_index(table: str) -> str:
    return f"uq_{table}_key"


def _expression(column: str) -> str:
    return f"evalstore_key({column[1:]})" if column.startswith("*") else f'"{column}"'


def upgrade() -> None:
    # judge_repeats was made after 0027 widened the ids, with the old widths (a docno of over 400
    # characters was refused by PostgreSQL when a judge was asked again)
    with op.batch_alter_table("judge_repeats") as batch:
        batch.alter_column("topic", type_=sa.Text(), existing_type=sa.String(200), existing_nullable=False)
        batch.alter_column("doc", type_=sa.Text(), existing_type=sa.String(400), existing_nullable=False)
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(KEY_FUNCTION)
    op.drop_index(JUDGMENTS_JOIN_INDEX[0], table_name="judgments")
    for table, (constraint, _, columns) in KEYS.items():
        op.drop_constraint(constraint, table)
        op.execute(f"CREATE UNIQUE INDEX {key_index(table)} ON {table} ({', '.join(map(_expression, columns))})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        _narrow_judge_repeats()
        return
    for table, (constraint, primary, columns) in KEYS.items():
        op.drop_index(key_index(table), table_name=table)
        plain = [c.lstrip("*") for c in columns]
        if primary:
            op.create_primary_key(constraint, table, plain)
        else:
            op.create_unique_constraint(constraint, table, plain)
    op.create_index(JUDGMENTS_JOIN_INDEX[0], "judgments", list(JUDGMENTS_JOIN_INDEX[1]))
    op.execute("DROP FUNCTION evalstore_key(text)")
    _narrow_judge_repeats()


def _narrow_judge_repeats() -> None:
    with op.batch_alter_table("judge_repeats") as batch:
        batch.alter_column("topic", type_=sa.String(200), existing_type=sa.Text(), existing_nullable=False)
        batch.alter_column("doc", type_=sa.String(400), existing_type=sa.Text(), existing_nullable=False)
