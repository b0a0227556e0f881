"""Leaderboards ready before anyone asks: each evaluation's measure summaries (mean and bootstrap
interval, over all topics or a task's public or private ones) and boards' significance letters,
stored by the worker.

Revision ID: 0042_stored_boards
Revises: 0041_console_setup
Create Date: 2026-12-06 10:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0042_stored_boards"
down_revision: str | None = "0041_console_setup"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "measure_summaries",
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("topics", sa.Integer(), nullable=False),
        sa.Column("mean", sa.Float(precision=53), nullable=True),
        sa.Column("ci_low", sa.Float(precision=53), nullable=True),
        sa.Column("ci_high", sa.Float(precision=53), nullable=True),
        sa.ForeignKeyConstraint(
            ["evaluation_id"],
            ["evaluations.id"],
            name="fk_measure_summaries_evaluation_id_evaluations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("evaluation_id", "scope", "measure", name="pk_measure_summaries"),
    )
    op.create_table(
        "board_tiers",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("qrels_id", sa.Integer(), nullable=False),
        sa.Column("letters", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["qrels_id"], ["qrels_sets.id"], name="fk_board_tiers_qrels_id_qrels_sets", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("key", name="pk_board_tiers"),
    )
    op.create_index("ix_board_tiers_qrels_id", "board_tiers", ["qrels_id"])


def downgrade() -> None:
    op.drop_index("ix_board_tiers_qrels_id", table_name="board_tiers")
    op.drop_table("board_tiers")
    op.drop_table("measure_summaries")
