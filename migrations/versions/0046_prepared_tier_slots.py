"""Boards' letters findable by what a page asks for: each stored letters' slot (the qrels as they
are, the measure, the topics' scope), so a page whose board is ahead of what a worker stored shows
the newest letters of its slot instead of computing them.

Revision ID: 0046_prepared_tier_slots
Revises: 0045_compare_pairs
Create Date: 2026-12-06 19:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0046_prepared_tier_slots"
down_revision: str | None = "0045_compare_pairs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("board_tiers") as batch:
        batch.add_column(sa.Column("slot", sa.String(length=64), nullable=True))
        batch.create_index("ix_board_tiers_slot", ["slot"])


def downgrade() -> None:
    with op.batch_alter_table("board_tiers") as batch:
        batch.drop_index("ix_board_tiers_slot")
        batch.drop_column("slot")
