"""Where an evaluation's heavy part runs: ``evaluations.backend``

``evaluate --backend duckdb|spark`` hands the part of a job that grows with its inputs (joining a
stored run with its judgments, counting a prediction set's pairs) to DuckDB or Spark. The choice
and its settings (DuckDB's memory limit, Spark's master URL) are the job's, read by whichever
worker claims it; NULL is the local engine. They are not part of the job's options hash: every
backend gives the same numbers, so a finished evaluation is reused whatever computed it.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-24 15:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # plain ADD COLUMN: a batch copy of evaluations would drop a table others refer to
    op.add_column("evaluations", sa.Column("backend", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("evaluations", "backend")  # plain DROP COLUMN (SQLite >= 3.35)
