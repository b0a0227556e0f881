"""classification and clustering: gold labels, predictions (labels, scores, clusters), results

Row tables (gold_labels, predictions, prediction_scores) have no foreign key, as run_rows: bulk
loads of 10M predictions go in by COPY; the services delete them with their set.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21 05:30:28.949795
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gold_labels",
        sa.Column("label_set_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("item_id", sa.String(length=400), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column("group_id", sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint("label_set_id", "item_id", name=op.f("pk_gold_labels")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "label_sets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("classes", sa.JSON(), nullable=False),
        sa.Column("group_count", sa.Integer(), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_label_sets")),
        sa.UniqueConstraint("name", name=op.f("uq_label_sets_name")),
    )
    op.create_table(
        "prediction_scores",
        sa.Column("prediction_set_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("item_id", sa.String(length=400), nullable=False),
        sa.Column("class_label", sa.String(length=200), nullable=False),
        sa.Column("score", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("prediction_set_id", "item_id", "class_label", name=op.f("pk_prediction_scores")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "predictions",
        sa.Column("prediction_set_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("item_id", sa.String(length=400), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=True),
        sa.Column("score", sa.Float(precision=53), nullable=True),
        sa.Column("group_id", sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint("prediction_set_id", "item_id", name=op.f("pk_predictions")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "prediction_sets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("label_set_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("system", sa.String(length=200), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("has_label", sa.Boolean(), nullable=False),
        sa.Column("has_score", sa.Boolean(), nullable=False),
        sa.Column("score_classes", sa.JSON(), nullable=False),
        sa.Column("probabilities", sa.Boolean(), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["label_set_id"], ["label_sets.id"], name=op.f("fk_prediction_sets_label_set_id_label_sets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_prediction_sets")),
        sa.UniqueConstraint("name", name=op.f("uq_prediction_sets_name")),
    )
    with op.batch_alter_table("prediction_sets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_prediction_sets_label_set_id"), ["label_set_id"], unique=False)

    op.create_table(
        "classification_evaluations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("prediction_set_id", sa.Integer(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("options_hash", sa.String(length=64), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("evalstore_version", sa.String(length=50), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["prediction_set_id"],
            ["prediction_sets.id"],
            name=op.f("fk_classification_evaluations_prediction_set_id_prediction_sets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_classification_evaluations")),
        sa.UniqueConstraint(
            "prediction_set_id",
            "options_hash",
            name=op.f("uq_classification_evaluations_prediction_set_id_options_hash"),
        ),
    )
    op.create_table(
        "classification_aggregates",
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Float(precision=53), nullable=True),
        sa.ForeignKeyConstraint(
            ["evaluation_id"],
            ["classification_evaluations.id"],
            name=op.f("fk_classification_aggregates_evaluation_id_classification_evaluations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("evaluation_id", "measure", name=op.f("pk_classification_aggregates")),
    )
    op.create_table(
        "classification_group_values",
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("group_id", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Float(precision=53), nullable=True),
        sa.ForeignKeyConstraint(
            ["evaluation_id"],
            ["classification_evaluations.id"],
            name=op.f("fk_classification_group_values_evaluation_id_classification_evaluations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("evaluation_id", "measure", "group_id", name=op.f("pk_classification_group_values")),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("classification_group_values")
    op.drop_table("classification_aggregates")
    op.drop_table("classification_evaluations")
    with op.batch_alter_table("prediction_sets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_prediction_sets_label_set_id"))

    op.drop_table("prediction_sets")
    op.drop_table("predictions")
    op.drop_table("prediction_scores")
    op.drop_table("label_sets")
    op.drop_table("gold_labels")
