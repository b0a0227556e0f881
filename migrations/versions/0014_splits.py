"""Splits: topic (or item) splits for estimating a system's quality, stored with their seed

``splits`` names a split of a qrels set's topics or a label set's items by one method (holdout,
repeated subsampling, k-fold, leave-one-out, bootstrap), with its parameters and seed;
``split_members`` holds each fold's train and test units (a bootstrap's train units with their
multiplicity); ``fold_results`` each fold's mean over its test topics of an evaluation's values
(``evaluate --splits``).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-24 11:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "splits",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("source_kind", sa.String(length=20), nullable=False),
        sa.Column("source", sa.String(length=200), nullable=False),
        sa.Column("method", sa.String(length=20), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=True),
        sa.Column("folds", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("source_kind IN ('qrels', 'labels')", name=op.f("ck_splits_source_kind")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_splits")),
        sa.UniqueConstraint("name", name=op.f("uq_splits_name")),
    )
    op.create_table(
        "split_members",
        sa.Column("split_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("fold", sa.Integer(), nullable=False),
        sa.Column("part", sa.String(length=5), nullable=False),
        sa.Column("unit", sa.String(length=400), nullable=False),
        sa.Column("weight", sa.Integer(), nullable=False),
        sa.CheckConstraint("part IN ('train', 'test')", name=op.f("ck_split_members_part")),
        sa.PrimaryKeyConstraint("split_id", "fold", "part", "unit", name=op.f("pk_split_members")),
        sqlite_with_rowid=False,
    )

    op.create_table(
        "fold_results",
        sa.Column("split_id", sa.Integer(), nullable=False),
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("fold", sa.Integer(), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Float(precision=53), nullable=True),
        sa.ForeignKeyConstraint(
            ["split_id"], ["splits.id"], name=op.f("fk_fold_results_split_id_splits"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["evaluation_id"],
            ["evaluations.id"],
            name=op.f("fk_fold_results_evaluation_id_evaluations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("split_id", "evaluation_id", "fold", "measure", name=op.f("pk_fold_results")),
    )


def downgrade() -> None:
    op.drop_table("fold_results")
    op.drop_table("split_members")
    op.drop_table("splits")
