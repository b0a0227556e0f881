"""Invites and password-reset links an admin makes in the browser: single-use, expiring, kept as
the SHA-256 of their secret; and accounts asked for at /sign-up, waiting for an admin's approval.

Revision ID: 0039_account_links
Revises: 0038_answer_tasks
Create Date: 2026-12-06 10:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0039_account_links"
down_revision: str | None = "0038_answer_tasks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "account_links",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=True),
        sa.Column("team", sa.String(length=200), nullable=True),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("created_by", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("used_by", sa.String(length=200), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("kind IN ('invite', 'reset')", name=op.f("ck_account_links_kind")),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_account_links_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_account_links")),
    )
    op.create_index(op.f("ix_account_links_user_id"), "account_links", ["user_id"], unique=False)
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("requested_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("requested_at")
    op.drop_index(op.f("ix_account_links_user_id"), table_name="account_links")
    op.drop_table("account_links")
