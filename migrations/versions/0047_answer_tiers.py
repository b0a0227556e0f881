"""An answer task's board letters stored by the worker as evaluations finish, so its page reads
them instead of computing them on a request.

Revision ID: 0047_answer_tiers
Revises: 0046_prepared_pages
Create Date: 2026-12-07 09:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0047_answer_tiers"
down_revision: str | None = "0046_prepared_pages"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "answer_tiers",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("letters", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name="fk_answer_tiers_task_id_tasks", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("key", name="pk_answer_tiers"),
    )
    op.create_index("ix_answer_tiers_task_id", "answer_tiers", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_answer_tiers_task_id", table_name="answer_tiers")
    op.drop_table("answer_tiers")
