"""run rows carry their trec_eval-order rank; pool entries lose their foreign key

Pools read only each run's top k documents per topic: with the rank stored, PostgreSQL filters
25M rows to 2.5M in the scan instead of sending every row to Python to be sorted. A pool's
entries (a million for a 100-run depth-100 pool) are written by COPY, which the foreign key's
per-row trigger made 2.5x slower; the service deletes a pool's entries with the pool, as it does
a run's rows.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21 05:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # SQLite adds a NOT NULL column only with a default; every insert supplies the real rank.
    op.add_column("run_rows", sa.Column("trec_rank", sa.Integer(), server_default="0", nullable=False))
    # trec_eval order: score descending, then docno descending in byte order ("C" collation on
    # PostgreSQL; SQLite's default BINARY collation compares bytes).
    doc_order = 'doc COLLATE "C" DESC' if op.get_context().dialect.name == "postgresql" else "doc DESC"
    op.execute(
        "UPDATE run_rows SET trec_rank = ranked.trec_rank FROM ("
        "SELECT run_id, position, row_number() OVER (PARTITION BY run_id, topic "
        f"ORDER BY score DESC, {doc_order}) AS trec_rank FROM run_rows) AS ranked "
        "WHERE run_rows.run_id = ranked.run_id AND run_rows.position = ranked.position"
    )

    with op.batch_alter_table("pool_entries", table_kwargs={"sqlite_with_rowid": False}) as batch_op:
        batch_op.drop_constraint("fk_pool_entries_pool_id_pools", type_="foreignkey")


def downgrade() -> None:
    with op.batch_alter_table("pool_entries", table_kwargs={"sqlite_with_rowid": False}) as batch_op:
        batch_op.create_foreign_key("fk_pool_entries_pool_id_pools", "pools", ["pool_id"], ["id"], ondelete="CASCADE")
    # native DROP COLUMN on both databases (SQLite >= 3.35); a batch rebuild would lose WITHOUT ROWID
    op.execute("ALTER TABLE run_rows DROP COLUMN trec_rank")
