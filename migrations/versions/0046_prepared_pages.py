"""Pages that only read: each stored board's letters findable by what a page asks for (their slot:
the qrels as they are, the measure, the topics' scope), so a page whose board is ahead of what a
worker stored shows the newest letters of its slot instead of computing them; and each task's
per-topic medians on its measures (a run's page sets the run against them), stored by the worker.

Revision ID: 0046_prepared_pages
Revises: 0045_compare_pairs
Create Date: 2026-12-06 19:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0046_prepared_pages"
down_revision: str | None = "0045_compare_pairs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("board_tiers") as batch:
        batch.add_column(sa.Column("slot", sa.String(length=64), nullable=True))
        batch.create_index("ix_board_tiers_slot", ["slot"])
    op.create_table(
        "topic_medians",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("slot", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("runs", sa.JSON(), nullable=False),
        sa.Column("topics", sa.JSON(), nullable=False),
        sa.Column("medians", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name="fk_topic_medians_task_id_tasks", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("key", name="pk_topic_medians"),
    )
    op.create_index("ix_topic_medians_slot", "topic_medians", ["slot"])
    op.create_index("ix_topic_medians_task_id", "topic_medians", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_topic_medians_task_id", table_name="topic_medians")
    op.drop_index("ix_topic_medians_slot", table_name="topic_medians")
    op.drop_table("topic_medians")
    with op.batch_alter_table("board_tiers") as batch:
        batch.drop_index("ix_board_tiers_slot")
        batch.drop_column("slot")
