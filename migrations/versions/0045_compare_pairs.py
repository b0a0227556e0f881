"""Comparison pages ready before anyone asks: a task's paired tests on each measure, for every pair
of its runs, stored by the worker after evaluations finish; the compare page reads them.

Revision ID: 0045_compare_pairs
Revises: 0044_health
Create Date: 2026-12-06 16:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0045_compare_pairs"
down_revision: str | None = "0044_health"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pair_tests",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("slot", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("test", sa.String(length=32), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=True),
        sa.Column("runs", sa.JSON(), nullable=False),
        sa.Column("topics", sa.String(length=64), nullable=False),
        sa.Column("stats", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name="fk_pair_tests_task_id_tasks", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("key", name="pk_pair_tests"),
    )
    op.create_index("ix_pair_tests_slot", "pair_tests", ["slot"])
    op.create_index("ix_pair_tests_task_id", "pair_tests", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_pair_tests_task_id", table_name="pair_tests")
    op.drop_index("ix_pair_tests_slot", table_name="pair_tests")
    op.drop_table("pair_tests")
