"""LLM judges beside human assessors, and qrels versions (issue 39)

New tables: ``judges`` (an OpenAI-compatible endpoint, model, prompt and parameters; never a key),
``judge_labels`` (each label a judge gave a pooled document, with its provenance, or unrateable
with the reason), ``judge_probes`` (robustness probes) and ``qrels_versions`` (immutable,
content-hashed versions of a named qrels lineage, with pool, sources and parent). Nothing stored
before changes meaning.

Revision ID: 0020_judges
Revises: 0019_research
Create Date: 2026-11-26 13:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020_judges"
down_revision: str | None = "0019_research"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Double = sa.Float(precision=53)


def upgrade() -> None:
    op.create_table(
        "judges",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("endpoint", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=400), nullable=False),
        sa.Column("api_key_env", sa.String(length=200), nullable=True),
        sa.Column("prompt_name", sa.String(length=400), nullable=False),
        sa.Column("prompt_template", sa.Text(), nullable=False),
        sa.Column("prompt_hash", sa.String(length=64), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judges")),
        sa.UniqueConstraint("name", name=op.f("uq_judges_name")),
    )
    op.create_table(
        "judge_labels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("judge_id", sa.Integer(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("doc", sa.String(length=400), nullable=False),
        sa.Column("relevance", sa.SmallInteger(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("raw_output", sa.Text(), nullable=True),
        sa.Column("explanation", sa.Text(), nullable=True),
        sa.Column("provenance", sa.JSON(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("seconds", Double, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["judge_id"], ["judges.id"], name=op.f("fk_judge_labels_judge_id_judges"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["pool_id"], ["pools.id"], name=op.f("fk_judge_labels_pool_id_pools"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_labels")),
        sa.UniqueConstraint(
            "judge_id",
            "config_hash",
            "pool_id",
            "topic",
            "doc",
            name=op.f("uq_judge_labels_judge_id_config_hash_pool_id_topic_doc"),
        ),
    )
    op.create_index(op.f("ix_judge_labels_judge_id"), "judge_labels", ["judge_id"])
    op.create_index(op.f("ix_judge_labels_pool_id"), "judge_labels", ["pool_id"])
    op.create_table(
        "judge_probes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("judge_id", sa.Integer(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("collection", sa.String(length=200), nullable=False),
        sa.Column("qrels", sa.String(length=200), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["judge_id"], ["judges.id"], name=op.f("fk_judge_probes_judge_id_judges"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_probes")),
    )
    op.create_index(op.f("ix_judge_probes_judge_id"), "judge_probes", ["judge_id"])
    op.create_table(
        "qrels_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("qrels_id", sa.Integer(), nullable=False),
        sa.Column("pool_name", sa.String(length=200), nullable=False),
        sa.Column("sources", sa.JSON(), nullable=False),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["qrels_id"], ["qrels_sets.id"], name=op.f("fk_qrels_versions_qrels_id_qrels_sets"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["qrels_versions.id"],
            name=op.f("fk_qrels_versions_parent_id_qrels_versions"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_qrels_versions")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_qrels_versions_name_version")),
        sa.UniqueConstraint("qrels_id", name=op.f("uq_qrels_versions_qrels_id")),
    )
    op.create_index(op.f("ix_qrels_versions_name"), "qrels_versions", ["name"])


def downgrade() -> None:
    op.drop_table("qrels_versions")
    op.drop_table("judge_probes")
    op.drop_table("judge_labels")
    op.drop_table("judges")
