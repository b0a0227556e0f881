"""A run's judged ranks against a task's qrels, worked out when the submission is stored (issue 42):
the worker reads one row instead of joining the run's rows with the judgments.

Revision ID: 0025_run_judged_ranks
Revises: 0024_judges2
Create Date: 2026-11-27 20:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025_run_judged_ranks"
down_revision: str | None = "0024_judges2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_judged_ranks",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("qrels_id", sa.Integer(), nullable=False),
        sa.Column("run_hash", sa.String(length=64), nullable=False),
        sa.Column("qrels_hash", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("ranks", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["qrels_id"],
            ["qrels_sets.id"],
            name=op.f("fk_run_judged_ranks_qrels_id_qrels_sets"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_judged_ranks_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "qrels_id", name=op.f("pk_run_judged_ranks")),
    )


def downgrade() -> None:
    op.drop_table("run_judged_ranks")
