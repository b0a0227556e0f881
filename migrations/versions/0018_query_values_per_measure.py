"""per-query values: one row per measure, its values side by side

``query_results`` held one row per (evaluation, measure, query): an all_trec evaluation of a
7M-row run wrote ~700k rows, 0.35-0.5 s of COPY where computing them took ~0.1 s, and the
worker's MLflow logging, run alongside, competed with PostgreSQL's backend for the same two
cores. Now ``evaluation_queries`` keeps an evaluation's queries once, in order, and
``query_values`` one row per measure: its numbers as float64 (little-endian bytes, in that
order) or, for relstring-like measures, its texts. The values move both ways unchanged; a
query a measure had no value for (none such is written) reads back as NaN or "".

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-25 00:45:00
"""

from collections.abc import Sequence

import numpy as np
import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EVALUATION_QUERIES = sa.table(
    "evaluation_queries", sa.column("evaluation_id", sa.Integer), sa.column("query_ids", sa.JSON)
)
QUERY_VALUES = sa.table(
    "query_values",
    sa.column("evaluation_id", sa.Integer),
    sa.column("measure", sa.String),
    sa.column("numbers", sa.LargeBinary),
    sa.column("texts", sa.JSON),
)
QUERY_RESULTS = sa.table(
    "query_results",
    sa.column("evaluation_id", sa.Integer),
    sa.column("measure", sa.String),
    sa.column("query_id", sa.String),
    sa.column("value", sa.Float),
    sa.column("text_value", sa.Text),
)


def upgrade() -> None:
    op.create_table(
        "evaluation_queries",
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("query_ids", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["evaluation_id"],
            ["evaluations.id"],
            name=op.f("fk_evaluation_queries_evaluation_id_evaluations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("evaluation_id", name=op.f("pk_evaluation_queries")),
    )
    op.create_table(
        "query_values",
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("numbers", sa.LargeBinary(), nullable=True),
        sa.Column("texts", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["evaluation_id"],
            ["evaluations.id"],
            name=op.f("fk_query_values_evaluation_id_evaluations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("evaluation_id", "measure", name=op.f("pk_query_values")),
    )
    bind = op.get_bind()
    evaluations = (
        bind.execute(
            sa.text(
                "SELECT DISTINCT evaluation_id FROM query_results WHERE evaluation_id IN (SELECT id FROM evaluations)"
            )
        )
        .scalars()
        .all()
    )
    for evaluation_id in evaluations:
        rows = bind.execute(
            sa.select(
                QUERY_RESULTS.c.measure, QUERY_RESULTS.c.query_id, QUERY_RESULTS.c.value, QUERY_RESULTS.c.text_value
            ).where(QUERY_RESULTS.c.evaluation_id == evaluation_id)
        ).all()
        query_ids = sorted({query_id for _, query_id, _, _ in rows})
        place = {query_id: i for i, query_id in enumerate(query_ids)}
        numbers: dict[str, np.ndarray] = {}
        texts: dict[str, list[str]] = {}
        for measure, query_id, value, text_value in rows:
            if text_value is not None:
                texts.setdefault(measure, [""] * len(query_ids))[place[query_id]] = text_value
            else:
                column = numbers.setdefault(measure, np.full(len(query_ids), np.nan))
                column[place[query_id]] = np.nan if value is None else value
        bind.execute(sa.insert(EVALUATION_QUERIES), [{"evaluation_id": evaluation_id, "query_ids": query_ids}])
        values = [
            {"evaluation_id": evaluation_id, "measure": m, "numbers": v.astype("<f8").tobytes(), "texts": None}
            for m, v in numbers.items()
            if m not in texts
        ]
        values += [
            {"evaluation_id": evaluation_id, "measure": m, "numbers": None, "texts": t} for m, t in texts.items()
        ]
        if values:
            bind.execute(sa.insert(QUERY_VALUES), values)
    op.drop_table("query_results")  # and, on PostgreSQL, its partitions with it


def downgrade() -> None:
    """Back to 0005's shape: on PostgreSQL a partition per evaluation, with no index; on SQLite
    one table clustered on its primary key."""
    columns = [
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("query_id", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Float(precision=53), nullable=True),
        sa.Column("text_value", sa.Text(), nullable=True),
    ]
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    if postgres:
        op.create_table("query_results", *columns, postgresql_partition_by="LIST (evaluation_id)")
    else:
        op.create_table(
            "query_results",
            *columns,
            sa.PrimaryKeyConstraint("evaluation_id", "measure", "query_id", name="pk_query_results"),
            sqlite_with_rowid=False,
        )
    for evaluation_id, query_ids in bind.execute(
        sa.select(EVALUATION_QUERIES.c.evaluation_id, EVALUATION_QUERIES.c.query_ids)
    ).all():
        if postgres:  # named as evalstore.db.repositories named them up to 0017
            op.execute(
                f"CREATE TABLE query_results_e{int(evaluation_id)} PARTITION OF query_results "
                f"FOR VALUES IN ({int(evaluation_id)})"
            )
        rows = [
            {
                "evaluation_id": evaluation_id,
                "measure": measure,
                "query_id": query_id,
                "value": None if texts is not None else float(value),
                "text_value": texts[i] if texts is not None else None,
            }
            for measure, numbers, texts in bind.execute(
                sa.select(QUERY_VALUES.c.measure, QUERY_VALUES.c.numbers, QUERY_VALUES.c.texts).where(
                    QUERY_VALUES.c.evaluation_id == evaluation_id
                )
            ).all()
            for i, (query_id, value) in enumerate(
                zip(
                    query_ids,
                    np.frombuffer(numbers, dtype="<f8").tolist() if numbers is not None else [None] * len(query_ids),
                    strict=True,
                )
            )
        ]
        if rows:
            bind.execute(sa.insert(QUERY_RESULTS), rows)
    op.drop_table("query_values")
    op.drop_table("evaluation_queries")
