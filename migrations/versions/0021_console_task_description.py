"""tasks.description: what a task's organiser tells its participants (rules, data, deadlines)

Edited on the organiser's console in the browser (evalstore/web/organisers.py) and shown on the
task's pages. Chained after 0019_research, the head of main when this branch began (two heads
would stop every command); the integrator re-chains it if needed.

Revision ID: 0021_console
Revises: 0020_judges
Create Date: 2026-11-26 14:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021_console"
down_revision: str | None = "0020_judges"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("description", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("description")
