"""Judges' suggestions on the judging page (issue 39): pools.suggest_judge names the judge whose
label and explanation the pool's assessors see beside each document (None: none, the default, so
human labels stay independent); pool_judgments.suggested and suggested_by record the suggestion an
assessor was shown when they judged (None: none was shown), so that agreement with it is reported
apart. Chained after 0022_hostile2, the head of main when main was merged into this branch.

Revision ID: 0024_judges2
Revises: 0023_split
Create Date: 2026-11-26 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024_judges2"
down_revision: str | None = "0023_split"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("pools") as batch:
        batch.add_column(sa.Column("suggest_judge", sa.String(length=200), nullable=True))
    with op.batch_alter_table("pool_judgments") as batch:
        batch.add_column(sa.Column("suggested", sa.SmallInteger(), nullable=True))
        batch.add_column(sa.Column("suggested_by", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pool_judgments") as batch:
        batch.drop_column("suggested_by")
        batch.drop_column("suggested")
    with op.batch_alter_table("pools") as batch:
        batch.drop_column("suggest_judge")
