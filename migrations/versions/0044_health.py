"""Collection-health reports ready before anyone asks: each task's report, stored by the worker
after evaluations finish and keyed by what decides it; the health page reads it.

Revision ID: 0044_health
Revises: 0043_item_keys
Create Date: 2026-12-06 13:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0044_health"
down_revision: str | None = "0043_item_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "health_reports",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("report", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name="fk_health_reports_task_id_tasks", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("key", name="pk_health_reports"),
    )
    op.create_index("ix_health_reports_task_id", "health_reports", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_health_reports_task_id", table_name="health_reports")
    op.drop_table("health_reports")
