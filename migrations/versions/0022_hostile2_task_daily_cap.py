"""tasks.daily_cap: a task's own cap on each team's runs per UTC day (EvalAI's daily limit)

Null: the server's EVALSTORE_RUNS_PER_DAY applies, or none. Set with `evalstore tasks create/update
--daily-cap`, the organiser's console or the API. Chained after 0021_console, the head of main when
this branch began; the integrator re-chains it if needed.

Revision ID: 0022_hostile2
Revises: 0021_console
Create Date: 2026-11-26 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022_hostile2"
down_revision: str | None = "0021_console"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("daily_cap", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("daily_cap")
