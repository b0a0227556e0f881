"""A judge's cost ledger: the tokens each label's calls used (in and out), beside the attempts and
seconds kept already, so that a judge's tokens, money and time can be summed and a run estimated
and held to a budget.

Revision ID: 0029_judge_costs
Revises: 0025_run_judged_ranks
Create Date: 2026-12-06 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029_judge_costs"
down_revision: str | None = "0025_run_judged_ranks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("judge_labels") as batch:
        batch.add_column(sa.Column("input_tokens", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("output_tokens", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("judge_labels") as batch:
        batch.drop_column("output_tokens")
        batch.drop_column("input_tokens")
