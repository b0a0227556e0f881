"""job queue and MLflow logging state

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 03:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("hostname", sa.String(length=200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("jobs_done", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
    )
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("results_version", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("mlflow_error", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("mlflow_attempts", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("mlflow_lease_expires_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_evaluations_mlflow_state", ["mlflow_state"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.drop_index("ix_evaluations_mlflow_state")
        batch_op.drop_column("mlflow_lease_expires_at")
        batch_op.drop_column("mlflow_attempts")
        batch_op.drop_column("mlflow_error")
        batch_op.drop_column("results_version")
    op.drop_table("workers")
