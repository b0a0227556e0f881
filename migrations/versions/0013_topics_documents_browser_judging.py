"""Judging in the browser: topic statements, documents' text, a pool's grades, and the time and
note of each judgment

New tables ``topic_sets``/``topics`` and ``collections``/``documents``; ``pools`` gain the names of
the topic set and collection their assessors read, the grades' labels, and the share of each
topic a second assessor judges blind (with its seed); ``pool_judgments`` gain ``seconds`` (time
spent) and ``note``. Nothing stored before changes meaning.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-24 11:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "topic_sets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_topic_sets")),
        sa.UniqueConstraint("name", name=op.f("uq_topic_sets_name")),
    )
    op.create_table(
        "topics",
        sa.Column("topic_set_id", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("narrative", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["topic_set_id"], ["topic_sets.id"], name=op.f("fk_topics_topic_set_id_topic_sets"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("topic_set_id", "topic", name=op.f("pk_topics")),
    )
    op.create_table(
        "collections",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_collections")),
        sa.UniqueConstraint("name", name=op.f("uq_collections_name")),
    )
    op.create_table(
        "documents",
        sa.Column("collection_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("doc", sa.String(length=400), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("collection_id", "doc", name=op.f("pk_documents")),
        sqlite_with_rowid=False,
    )
    # names, not foreign keys: re-importing a topic set (--replace) keeps the pools that name it,
    # and SQLite could not add a named foreign key to pools in place
    op.add_column("pools", sa.Column("topic_set", sa.String(length=200), nullable=True))
    op.add_column("pools", sa.Column("collection", sa.String(length=200), nullable=True))
    op.add_column("pools", sa.Column("grades", sa.JSON(), nullable=True))
    op.add_column("pools", sa.Column("double_share", sa.Float(precision=53), nullable=True))
    op.add_column("pools", sa.Column("double_seed", sa.BigInteger(), nullable=True))
    op.add_column("pool_judgments", sa.Column("seconds", sa.Float(precision=53), nullable=True))
    op.add_column("pool_judgments", sa.Column("note", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("pool_judgments", "note")
    op.drop_column("pool_judgments", "seconds")
    op.drop_column("pools", "double_seed")
    op.drop_column("pools", "double_share")
    op.drop_column("pools", "grades")
    op.drop_column("pools", "collection")
    op.drop_column("pools", "topic_set")
    op.drop_table("documents")
    op.drop_table("collections")
    op.drop_table("topics")
    op.drop_table("topic_sets")
