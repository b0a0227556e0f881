"""Standardisations: stored per-topic statistics and z-scores (``evalstore standardize``)

``standardisations`` names one standardisation of a qrels set's runs over some measures;
``standardisation_statistics`` holds each topic's mean and standard deviation per measure (the
content of trec_eval's ``-Z`` file); ``standardised_values`` each run's z-score per topic.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-24 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "standardisations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("qrels", sa.String(length=200), nullable=False),
        sa.Column("measures", sa.JSON(), nullable=False),
        sa.Column("runs", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_standardisations")),
        sa.UniqueConstraint("name", name=op.f("uq_standardisations_name")),
    )
    op.create_table(
        "standardisation_statistics",
        sa.Column("standardisation_id", sa.Integer(), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("mean", sa.Float(precision=53), nullable=False),
        sa.Column("stddev", sa.Float(precision=53), nullable=False),
        sa.ForeignKeyConstraint(
            ["standardisation_id"],
            ["standardisations.id"],
            name=op.f("fk_standardisation_statistics_standardisation_id_standardisations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("standardisation_id", "measure", "topic", name=op.f("pk_standardisation_statistics")),
    )
    op.create_table(
        "standardised_values",
        sa.Column("standardisation_id", sa.Integer(), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("run", sa.String(length=200), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("z", sa.Float(precision=53), nullable=False),
        sa.ForeignKeyConstraint(
            ["standardisation_id"],
            ["standardisations.id"],
            name=op.f("fk_standardised_values_standardisation_id_standardisations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("standardisation_id", "measure", "run", "topic", name=op.f("pk_standardised_values")),
    )


def downgrade() -> None:
    op.drop_table("standardised_values")
    op.drop_table("standardisation_statistics")
    op.drop_table("standardisations")
