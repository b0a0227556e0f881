"""per-query results: one PostgreSQL partition per evaluation, no foreign key

A 7M-row run evaluated with all_trec stores ~700k per-query values. Into one indexed table with
a foreign key that took 3.5-9 s (every row updated the primary-key b-tree and fired the
foreign-key trigger). Now, as run_rows, PostgreSQL keeps each evaluation's values in a partition
of their own with no index: the service COPYs them into a fresh table and attaches it, and
drops it when the evaluation goes. SQLite keeps its clustered primary key; both lose the
foreign key, and the services delete an evaluation's values with it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21 06:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = "evaluation_id, measure, query_id, value, text_value"


def _columns() -> list[sa.Column]:
    return [
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("query_id", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Float(precision=53), nullable=True),
        sa.Column("text_value", sa.Text(), nullable=True),
    ]


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        with op.batch_alter_table("query_results", table_kwargs={"sqlite_with_rowid": False}) as batch_op:
            batch_op.drop_constraint("fk_query_results_evaluation_id_evaluations", type_="foreignkey")
        return
    op.rename_table("query_results", "query_results_0004")
    op.create_table("query_results", *_columns(), postgresql_partition_by="LIST (evaluation_id)")
    # partition names as evalstore.db.repositories.results_partition gives them
    for (evaluation_id,) in op.get_bind().execute(sa.text("SELECT DISTINCT evaluation_id FROM query_results_0004")):
        partition = f"query_results_e{int(evaluation_id)}"
        op.execute(f"CREATE TABLE {partition} PARTITION OF query_results FOR VALUES IN ({int(evaluation_id)})")
        op.execute(
            f"INSERT INTO {partition} ({COLUMNS}) SELECT {COLUMNS} FROM query_results_0004 "
            f"WHERE evaluation_id = {int(evaluation_id)}"
        )
    op.drop_table("query_results_0004")


def downgrade() -> None:
    foreign_key = sa.ForeignKeyConstraint(
        ["evaluation_id"], ["evaluations.id"], name="fk_query_results_evaluation_id_evaluations", ondelete="CASCADE"
    )
    if op.get_bind().dialect.name != "postgresql":
        with op.batch_alter_table("query_results", table_kwargs={"sqlite_with_rowid": False}) as batch_op:
            batch_op.create_foreign_key(
                "fk_query_results_evaluation_id_evaluations",
                "evaluations",
                ["evaluation_id"],
                ["id"],
                ondelete="CASCADE",
            )
        return
    op.rename_table("query_results", "query_results_0005")
    op.create_table(
        "query_results",
        *_columns(),
        foreign_key,
        sa.PrimaryKeyConstraint("evaluation_id", "measure", "query_id", name="pk_query_results"),
    )
    op.execute(
        f"INSERT INTO query_results ({COLUMNS}) SELECT {COLUMNS} FROM query_results_0005 "
        "WHERE evaluation_id IN (SELECT id FROM evaluations)"
    )
    op.drop_table("query_results_0005")  # and its partitions with it
