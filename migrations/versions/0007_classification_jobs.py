"""classification evaluations join the job queue: one evaluations table for both kinds

A classification or clustering evaluation becomes an ``evaluations`` row with a prediction set
instead of a run and qrels, so it is queued, claimed under a lease, retried, and logged to MLflow
(pending -> logged, ``evalstore mlflow sync``) exactly like a ranking evaluation. Its aggregates
move to ``aggregate_results`` and its per-group values to ``query_results`` (query_id = group),
which also gives them the per-evaluation PostgreSQL partition and COPY path of migration 0005.

Stored classification evaluations are moved with their values (new ids). Before this revision
they were logged to MLflow synchronously when computed, so they arrive as ``logged`` (with no
MLflow run id recorded); evaluate again with --force to log one afresh. Downgrading moves the
finished ones back and drops unfinished classification jobs, which 0006 had no place for.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-21 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INPUTS = (
    "(run_id IS NOT NULL AND qrels_id IS NOT NULL AND prediction_set_id IS NULL) OR "
    "(run_id IS NULL AND qrels_id IS NULL AND prediction_set_id IS NOT NULL)"
)

evaluations = sa.table(
    "evaluations",
    sa.column("id", sa.Integer),
    sa.column("prediction_set_id", sa.Integer),
    sa.column("measures", sa.Text),
    sa.column("options", sa.JSON),
    sa.column("options_hash", sa.String),
    sa.column("settings", sa.JSON),
    sa.column("state", sa.String),
    sa.column("attempts", sa.Integer),
    sa.column("max_attempts", sa.Integer),
    sa.column("evalstore_version", sa.String),
    sa.column("results_version", sa.Integer),
    sa.column("mlflow_state", sa.String),
    sa.column("mlflow_attempts", sa.Integer),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("started_at", sa.DateTime(timezone=True)),
    sa.column("finished_at", sa.DateTime(timezone=True)),
)
old_evaluations = sa.table(
    "classification_evaluations",
    sa.column("id", sa.Integer),
    sa.column("prediction_set_id", sa.Integer),
    sa.column("options", sa.JSON),
    sa.column("options_hash", sa.String),
    sa.column("settings", sa.JSON),
    sa.column("evalstore_version", sa.String),
    sa.column("created_at", sa.DateTime(timezone=True)),
)


def _postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.alter_column("run_id", existing_type=sa.Integer(), nullable=True)
        batch_op.alter_column("qrels_id", existing_type=sa.Integer(), nullable=True)
        batch_op.add_column(sa.Column("prediction_set_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("settings", sa.JSON(), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_evaluations_prediction_set_id_prediction_sets"),
            "prediction_sets",
            ["prediction_set_id"],
            ["id"],
            ondelete="CASCADE",
        )
        batch_op.create_unique_constraint(
            batch_op.f("uq_evaluations_prediction_set_id_options_hash"), ["prediction_set_id", "options_hash"]
        )
        batch_op.create_check_constraint(op.f("ck_evaluations_inputs"), INPUTS)
        batch_op.create_index(batch_op.f("ix_evaluations_prediction_set_id"), ["prediction_set_id"], unique=False)

    bind = op.get_bind()
    for old in bind.execute(sa.select(old_evaluations).order_by(old_evaluations.c.id)).mappings().all():
        new_id = bind.execute(
            sa.insert(evaluations)
            .values(
                prediction_set_id=old["prediction_set_id"],
                measures="[]",
                options=old["options"],
                options_hash=old["options_hash"],
                settings=old["settings"],
                state="done",
                attempts=1,
                max_attempts=1,
                evalstore_version=old["evalstore_version"],
                results_version=1,
                mlflow_state="logged",
                mlflow_attempts=1,
                created_at=old["created_at"],
                started_at=old["created_at"],
                finished_at=old["created_at"],
            )
            .returning(evaluations.c.id)
        ).scalar_one()
        ids = {"old": old["id"], "new": new_id}
        groups = bind.execute(
            sa.text("SELECT count(DISTINCT group_id) FROM classification_group_values WHERE evaluation_id = :old"), ids
        ).scalar_one()
        bind.execute(
            sa.text(
                "INSERT INTO aggregate_results (evaluation_id, measure, value, text_value, query_count) "
                "SELECT :new, measure, value, NULL, :groups FROM classification_aggregates "
                "WHERE evaluation_id = :old"
            ),
            {**ids, "groups": groups},
        )
        if _postgres():  # partition named as evalstore.db.repositories.results_partition names it
            op.execute(
                f"CREATE TABLE query_results_e{int(new_id)} PARTITION OF query_results FOR VALUES IN ({int(new_id)})"
            )
        bind.execute(
            sa.text(
                "INSERT INTO query_results (evaluation_id, measure, query_id, value, text_value) "
                "SELECT :new, measure, group_id, value, NULL FROM classification_group_values "
                "WHERE evaluation_id = :old"
            ),
            ids,
        )
    op.drop_table("classification_group_values")
    op.drop_table("classification_aggregates")
    op.drop_table("classification_evaluations")


def downgrade() -> None:
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
    bind = op.get_bind()
    everything = [
        row[0] for row in bind.execute(sa.text("SELECT id FROM evaluations WHERE prediction_set_id IS NOT NULL"))
    ]
    finished = "SELECT id FROM evaluations WHERE prediction_set_id IS NOT NULL AND state = 'done'"
    # the ids carry over: classification_evaluations is empty
    op.execute(
        "INSERT INTO classification_evaluations (id, prediction_set_id, options, options_hash, settings, "
        "evalstore_version, created_at) SELECT id, prediction_set_id, options, options_hash, settings, "
        f"coalesce(evalstore_version, ''), created_at FROM evaluations WHERE id IN ({finished})"
    )
    op.execute(
        "INSERT INTO classification_aggregates (evaluation_id, measure, value) "
        f"SELECT evaluation_id, measure, value FROM aggregate_results WHERE evaluation_id IN ({finished})"
    )
    op.execute(
        "INSERT INTO classification_group_values (evaluation_id, measure, group_id, value) "
        f"SELECT evaluation_id, measure, query_id, value FROM query_results WHERE evaluation_id IN ({finished})"
    )
    if _postgres():
        op.execute(
            "SELECT setval(pg_get_serial_sequence('classification_evaluations', 'id'), "
            "coalesce(max(id), 0) + 1, false) FROM classification_evaluations"
        )
        for evaluation_id in everything:
            op.execute(f"DROP TABLE IF EXISTS query_results_e{int(evaluation_id)}")
    else:
        op.execute(
            "DELETE FROM query_results WHERE evaluation_id IN "
            "(SELECT id FROM evaluations WHERE prediction_set_id IS NOT NULL)"
        )
    op.execute(
        "DELETE FROM aggregate_results WHERE evaluation_id IN "
        "(SELECT id FROM evaluations WHERE prediction_set_id IS NOT NULL)"
    )
    op.execute("DELETE FROM evaluations WHERE prediction_set_id IS NOT NULL")
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_evaluations_prediction_set_id"))
        batch_op.drop_constraint(op.f("ck_evaluations_inputs"), type_="check")
        batch_op.drop_constraint(batch_op.f("uq_evaluations_prediction_set_id_options_hash"), type_="unique")
        batch_op.drop_constraint(batch_op.f("fk_evaluations_prediction_set_id_prediction_sets"), type_="foreignkey")
        batch_op.drop_column("settings")
        batch_op.drop_column("prediction_set_id")
        batch_op.alter_column("qrels_id", existing_type=sa.Integer(), nullable=False)
        batch_op.alter_column("run_id", existing_type=sa.Integer(), nullable=False)
