"""Nugget banks drafted by an LLM judge (``nuggets create``): who drafted a bank, and when a person
accepted it after review; a draft not yet accepted is not used for scoring.

Revision ID: 0035_nugget_judges
Revises: 0029_judge_costs
Create Date: 2026-12-06 08:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0035_nugget_judges"
down_revision: str | None = "0029_judge_costs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nugget_banks") as batch:
        batch.add_column(sa.Column("drafted_by", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nugget_banks") as batch:
        batch.drop_column("accepted_at")
        batch.drop_column("drafted_by")
