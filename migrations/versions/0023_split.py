"""tasks: an official measure, and a public/private topic split (Kaggle-style)

official_measure ranks the task's leaderboard; private_topics holds the drawn private topics
(JSON list; NULL: no split), with the fraction and seed they were drawn from. Until the task is
released, participants' leaderboards are over the other (public) topics only.

Revision ID: 0023_split
Revises: 0022_hostile2
Create Date: 2026-11-26 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023_split"
down_revision: str | None = "0022_hostile2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("official_measure", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("private_topics", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("private_fraction", sa.Float(precision=53), nullable=True))
        batch.add_column(sa.Column("split_seed", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("split_seed")
        batch.drop_column("private_fraction")
        batch.drop_column("private_topics")
        batch.drop_column("official_measure")
