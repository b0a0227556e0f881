"""Pairwise preferences of LLM judges (``judges prefer``): for a topic, which of two runs' rankings
or answers a judge prefers, asked in both orders, with the provenance and cost of every call.

Revision ID: 0037_judge_preferences
Revises: 0036_nugget_assessing
Create Date: 2026-12-06 10:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0037_judge_preferences"
down_revision: str | None = "0036_nugget_assessing"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "judge_preferences",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("judge_id", sa.Integer(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("first", sa.String(length=200), nullable=False),
        sa.Column("second", sa.String(length=200), nullable=False),
        sa.Column("prompt_hash", sa.String(length=64), nullable=False),
        sa.Column("preferred", sa.SmallInteger(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("raw_output", sa.Text(), nullable=True),
        sa.Column("explanation", sa.Text(), nullable=True),
        sa.Column("provenance", sa.JSON(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("seconds", sa.Float(precision=53), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["judge_id"], ["judges.id"], name=op.f("fk_judge_preferences_judge_id_judges"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_preferences")),
        sa.UniqueConstraint(
            "judge_id",
            "config_hash",
            "kind",
            "depth",
            "topic",
            "first",
            "second",
            name=op.f("uq_judge_preferences_pair"),
        ),
    )
    op.create_index(op.f("ix_judge_preferences_judge_id"), "judge_preferences", ["judge_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_judge_preferences_judge_id"), table_name="judge_preferences")
    op.drop_table("judge_preferences")
