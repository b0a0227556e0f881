"""The organiser's console: a task's scheduled release (the time the worker releases it at, until
then cancellable), the topics file its participants download, and the organiser who added a judge
from the console (the judges they may run and read there).

Revision ID: 0041_console_setup
Revises: 0040_hashed_keys
Create Date: 2026-12-06 10:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0041_console_setup"
down_revision: str | None = "0040_hashed_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("release_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("topic_set_id", sa.Integer(), nullable=True))
        batch.create_index("ix_tasks_topic_set_id", ["topic_set_id"])
        batch.create_foreign_key(
            "fk_tasks_topic_set_id_topic_sets", "topic_sets", ["topic_set_id"], ["id"], ondelete="SET NULL"
        )
    with op.batch_alter_table("judges") as batch:
        batch.add_column(sa.Column("owner_id", sa.Integer(), nullable=True))
        batch.create_index("ix_judges_owner_id", ["owner_id"])
        batch.create_foreign_key("fk_judges_owner_id_users", "users", ["owner_id"], ["id"], ondelete="SET NULL")


def downgrade() -> None:
    with op.batch_alter_table("judges") as batch:
        batch.drop_constraint("fk_judges_owner_id_users", type_="foreignkey")
        batch.drop_index("ix_judges_owner_id")
        batch.drop_column("owner_id")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_constraint("fk_tasks_topic_set_id_topic_sets", type_="foreignkey")
        batch.drop_index("ix_tasks_topic_set_id")
        batch.drop_column("topic_set_id")
        batch.drop_column("release_at")
