"""repro_results: reproducibility and replicability figures beside the evaluations they compare

``evalstore repro`` (Breuer et al., SIGIR 2020) compares an original run with its reproduction
(and, optionally, their baselines): KTU, RBO, RMSE, nRMSE, ER, DeltaRI and t-test p-values, one
row per comparison, keyed by the evaluations the per-topic values came from.

Revision ID: 0019_research
Revises: 0018
Create Date: 2026-11-26 13:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_research"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "repro_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("original_evaluation_id", sa.Integer(), nullable=False),
        sa.Column("reproduced_evaluation_id", sa.Integer(), nullable=False),
        sa.Column("original_baseline_evaluation_id", sa.Integer(), nullable=True),
        sa.Column("reproduced_baseline_evaluation_id", sa.Integer(), nullable=True),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("figures", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["original_evaluation_id"],
            ["evaluations.id"],
            name=op.f("fk_repro_results_original_evaluation_id_evaluations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["reproduced_evaluation_id"],
            ["evaluations.id"],
            name=op.f("fk_repro_results_reproduced_evaluation_id_evaluations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["original_baseline_evaluation_id"],
            ["evaluations.id"],
            name=op.f("fk_repro_results_original_baseline_evaluation_id_evaluations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["reproduced_baseline_evaluation_id"],
            ["evaluations.id"],
            name=op.f("fk_repro_results_reproduced_baseline_evaluation_id_evaluations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_repro_results")),
    )
    op.create_index(op.f("ix_repro_results_original_evaluation_id"), "repro_results", ["original_evaluation_id"])
    op.create_index(op.f("ix_repro_results_reproduced_evaluation_id"), "repro_results", ["reproduced_evaluation_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_repro_results_reproduced_evaluation_id"), table_name="repro_results")
    op.drop_index(op.f("ix_repro_results_original_evaluation_id"), table_name="repro_results")
    op.drop_table("repro_results")
