"""A judge's cost ledger: the tokens each label's calls used (in and out), beside the attempts and
seconds kept already, so that a judge's tokens, money and time can be summed and a run estimated
and held to a budget; and the repeats of a label (``judges run --repeats K``), each stored, for
the judge's self-consistency.

Revision ID: 0029_judge_costs
Revises: 0027_wide_ids
Create Date: 2026-12-06 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029_judge_costs"
down_revision: str | None = "0027_wide_ids"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("judge_labels") as batch:
        batch.add_column(sa.Column("input_tokens", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("output_tokens", sa.Integer(), nullable=True))
    op.create_table(
        "judge_repeats",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("judge_id", sa.Integer(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("doc", sa.String(length=400), nullable=False),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("relevance", sa.SmallInteger(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("raw_output", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("seconds", sa.Float(precision=53), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["judge_id"], ["judges.id"], name=op.f("fk_judge_repeats_judge_id_judges"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["pool_id"], ["pools.id"], name=op.f("fk_judge_repeats_pool_id_pools"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_repeats")),
        sa.UniqueConstraint(
            "judge_id",
            "config_hash",
            "pool_id",
            "topic",
            "doc",
            "repeat",
            name=op.f("uq_judge_repeats_judge_id_config_hash_pool_id_topic_doc_repeat"),
        ),
    )
    op.create_index(op.f("ix_judge_repeats_judge_id"), "judge_repeats", ["judge_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_judge_repeats_judge_id"), table_name="judge_repeats")
    op.drop_table("judge_repeats")
    with op.batch_alter_table("judge_labels") as batch:
        batch.drop_column("output_tokens")
        batch.drop_column("input_tokens")
