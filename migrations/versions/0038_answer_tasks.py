"""Tasks that take generated answers: a task evaluates either against relevance qrels (runs) or
against a nugget bank's assignments (answer runs), so ``qrels_id`` may be empty and
``nugget_bank_id`` names the bank; exactly one of the two is set. And the answer assessors' calls
in the judges' cost ledger (``judge_answer_calls``: one row per call of ``nuggets assign``,
``support assess`` and ``nuggets create``), with the provenance of a judge's citation-support
label (``citation_supports.source``, naming its call).

Revision ID: 0038_answer_tasks
Revises: 0037_judge_preferences
Create Date: 2026-12-06 10:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0038_answer_tasks"
down_revision: str | None = "0037_judge_preferences"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("nugget_bank_id", sa.Integer(), nullable=True))
        batch.alter_column("qrels_id", existing_type=sa.Integer(), nullable=True)
        batch.create_foreign_key("fk_tasks_nugget_bank_id_nugget_banks", "nugget_banks", ["nugget_bank_id"], ["id"])
        batch.create_index("ix_tasks_nugget_bank_id", ["nugget_bank_id"])
        batch.create_check_constraint("judged_by", "(qrels_id IS NULL) <> (nugget_bank_id IS NULL)")

    op.create_table(
        "judge_answer_calls",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("judge_id", sa.Integer(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("purpose", sa.String(length=40), nullable=False),
        sa.Column("item", sa.Text(), nullable=False),
        sa.Column("labelled", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("seconds", sa.Float(precision=53), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["judge_id"], ["judges.id"], name="fk_judge_answer_calls_judge_id_judges", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_judge_answer_calls"),
    )
    op.create_index("ix_judge_answer_calls_judge_id", "judge_answer_calls", ["judge_id"])
    with op.batch_alter_table("citation_supports") as batch:
        batch.add_column(sa.Column("source", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("citation_supports") as batch:
        batch.drop_column("source")
    op.drop_index("ix_judge_answer_calls_judge_id", table_name="judge_answer_calls")
    op.drop_table("judge_answer_calls")
    op.execute("DELETE FROM tasks WHERE qrels_id IS NULL")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_constraint("judged_by", type_="check")
        batch.drop_index("ix_tasks_nugget_bank_id")
        batch.drop_constraint("fk_tasks_nugget_bank_id_nugget_banks", type_="foreignkey")
        batch.drop_column("nugget_bank_id")
        batch.alter_column("qrels_id", existing_type=sa.Integer(), nullable=False)
