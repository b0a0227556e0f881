"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21 02:11:26.387488
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pools",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("strategy", sa.String(length=50), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pools")),
        sa.UniqueConstraint("name", name=op.f("uq_pools_name")),
    )
    op.create_table(
        "qrels_sets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("topic_count", sa.Integer(), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_qrels_sets")),
        sa.UniqueConstraint("name", name=op.f("uq_qrels_sets_name")),
    )
    with op.batch_alter_table("qrels_sets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_qrels_sets_content_hash"), ["content_hash"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("system", sa.String(length=200), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("tag", sa.String(length=200), nullable=True),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("topic_count", sa.Integer(), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("name", name=op.f("uq_runs_name")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_runs_content_hash"), ["content_hash"], unique=False)

    op.create_table(
        "evaluations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("qrels_id", sa.Integer(), nullable=False),
        sa.Column("measures", sa.Text(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("options_hash", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("worker_id", sa.String(length=200), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("evalstore_version", sa.String(length=50), nullable=True),
        sa.Column("run_hash", sa.String(length=64), nullable=True),
        sa.Column("qrels_hash", sa.String(length=64), nullable=True),
        sa.Column("mlflow_state", sa.String(length=20), nullable=False),
        sa.Column("mlflow_run_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["qrels_id"], ["qrels_sets.id"], name=op.f("fk_evaluations_qrels_id_qrels_sets"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_evaluations_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evaluations")),
        sa.UniqueConstraint(
            "run_id", "qrels_id", "options_hash", name=op.f("uq_evaluations_run_id_qrels_id_options_hash")
        ),
    )
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_evaluations_qrels_id"), ["qrels_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_evaluations_run_id"), ["run_id"], unique=False)
        batch_op.create_index("ix_evaluations_state_lease", ["state", "lease_expires_at"], unique=False)

    op.create_table(
        "judgments",
        sa.Column("qrels_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("doc", sa.String(length=400), nullable=False),
        sa.Column("relevance", sa.SmallInteger(), nullable=False),
        sa.Column("iteration", sa.String(length=50), nullable=False),
        sa.Column("assessor", sa.String(length=200), nullable=True),
        sa.ForeignKeyConstraint(
            ["qrels_id"], ["qrels_sets.id"], name=op.f("fk_judgments_qrels_id_qrels_sets"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("qrels_id", "position", name=op.f("pk_judgments")),
        sa.UniqueConstraint("qrels_id", "topic", "doc", name=op.f("uq_judgments_qrels_id_topic_doc")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "pool_entries",
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("doc", sa.String(length=400), nullable=False),
        sa.Column("contributors", sa.JSON(), nullable=False),
        sa.Column("best_rank", sa.Integer(), nullable=False),
        sa.Column("judge_order", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["pool_id"], ["pools.id"], name=op.f("fk_pool_entries_pool_id_pools"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("pool_id", "topic", "doc", name=op.f("pk_pool_entries")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "pool_judgments",
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("doc", sa.String(length=400), nullable=False),
        sa.Column("assessor", sa.String(length=200), nullable=False),
        sa.Column("relevance", sa.SmallInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["pool_id"], ["pools.id"], name=op.f("fk_pool_judgments_pool_id_pools"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("pool_id", "topic", "doc", "assessor", name=op.f("pk_pool_judgments")),
        sqlite_with_rowid=False,
    )
    run_row_columns = [
        sa.Column("run_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("doc", sa.String(length=400), nullable=False),
        sa.Column("score", sa.Float(precision=53), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
    ]
    if op.get_bind().dialect.name == "postgresql":
        # One partition per run, no index, no primary key: see evalstore.db.models.RunRow.
        op.create_table("run_rows", *run_row_columns, postgresql_partition_by="LIST (run_id)")
    else:
        op.create_table(
            "run_rows",
            *run_row_columns,
            sa.PrimaryKeyConstraint("run_id", "position", name=op.f("pk_run_rows")),
            sqlite_with_rowid=False,
        )
    op.create_table(
        "aggregate_results",
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Float(precision=53), nullable=True),
        sa.Column("text_value", sa.Text(), nullable=True),
        sa.Column("query_count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["evaluation_id"],
            ["evaluations.id"],
            name=op.f("fk_aggregate_results_evaluation_id_evaluations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("evaluation_id", "measure", name=op.f("pk_aggregate_results")),
    )
    op.create_table(
        "query_results",
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("query_id", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Float(precision=53), nullable=True),
        sa.Column("text_value", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["evaluation_id"],
            ["evaluations.id"],
            name=op.f("fk_query_results_evaluation_id_evaluations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("evaluation_id", "measure", "query_id", name=op.f("pk_query_results")),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("query_results")
    op.drop_table("aggregate_results")
    op.drop_table("run_rows")
    op.drop_table("pool_judgments")
    op.drop_table("pool_entries")
    op.drop_table("judgments")
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.drop_index("ix_evaluations_state_lease")
        batch_op.drop_index(batch_op.f("ix_evaluations_run_id"))
        batch_op.drop_index(batch_op.f("ix_evaluations_qrels_id"))

    op.drop_table("evaluations")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_content_hash"))

    op.drop_table("runs")
    with op.batch_alter_table("qrels_sets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_qrels_sets_content_hash"))

    op.drop_table("qrels_sets")
    op.drop_table("pools")
