"""run topics: each run's number of documents per topic, kept at registration

Evaluating a stored run then reads only its judged documents (joined with the qrels in the
database, with their stored trec_eval rank) and these counts; counting them with a GROUP BY over
a 7M-row run at each evaluation cost ~1 s of a 2-core machine. Existing runs are counted here.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-21 06:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_topics",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("retrieved", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_topics_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "topic", name=op.f("pk_run_topics")),
    )
    op.execute(
        "INSERT INTO run_topics (run_id, topic, retrieved) "
        "SELECT run_id, topic, count(*) FROM run_rows GROUP BY run_id, topic"
    )


def downgrade() -> None:
    op.drop_table("run_topics")
