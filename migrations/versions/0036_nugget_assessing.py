"""Answers assessed in the browser: a nugget bank's organiser (who edits it), its assessors, the
segments' collection and the share of each topic's answers assessed twice; each nugget's
provenance (the judge that drafted it, the person who edited or reviewed it); the time a person
spent on an assignment or a citation's support.

Revision ID: 0036_nugget_assessing
Revises: 0035_nugget_judges
Create Date: 2026-12-06 10:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0036_nugget_assessing"
down_revision: str | None = "0035_nugget_judges"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nugget_banks") as batch:
        batch.add_column(sa.Column("organiser_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("collection", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("double_share", sa.Float(precision=53), nullable=True))
        batch.add_column(sa.Column("double_seed", sa.BigInteger(), nullable=True))
        batch.create_foreign_key(
            batch.f("fk_nugget_banks_organiser_id_users"), "users", ["organiser_id"], ["id"], ondelete="SET NULL"
        )
    op.create_table(
        "nugget_bank_assessors",
        sa.Column("bank_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["bank_id"],
            ["nugget_banks.id"],
            name=op.f("fk_nugget_bank_assessors_bank_id_nugget_banks"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_nugget_bank_assessors_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("bank_id", "user_id", name=op.f("pk_nugget_bank_assessors")),
    )
    with op.batch_alter_table("nuggets") as batch:
        batch.add_column(sa.Column("drafted_by", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("edited_by", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("reviewed_by", sa.String(length=200), nullable=True))
    # a draft's nuggets were all drafted by its judge
    op.execute(
        "UPDATE nuggets SET drafted_by = (SELECT drafted_by FROM nugget_banks WHERE nugget_banks.id = nuggets.bank_id)"
    )
    with op.batch_alter_table("nugget_assignments") as batch:
        batch.add_column(sa.Column("seconds", sa.Float(precision=53), nullable=True))
    with op.batch_alter_table("citation_supports") as batch:
        batch.add_column(sa.Column("seconds", sa.Float(precision=53), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("citation_supports") as batch:
        batch.drop_column("seconds")
    with op.batch_alter_table("nugget_assignments") as batch:
        batch.drop_column("seconds")
    with op.batch_alter_table("nuggets") as batch:
        batch.drop_column("reviewed_by")
        batch.drop_column("edited_by")
        batch.drop_column("drafted_by")
    op.drop_table("nugget_bank_assessors")
    with op.batch_alter_table("nugget_banks") as batch:
        batch.drop_constraint(batch.f("fk_nugget_banks_organiser_id_users"), type_="foreignkey")
        batch.drop_column("double_seed")
        batch.drop_column("double_share")
        batch.drop_column("collection")
        batch.drop_column("organiser_id")
