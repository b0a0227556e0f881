"""Generated answers (TREC RAG): answer runs with their sentences, citations and references,
nugget banks, nugget assignments and citation-support labels (each with who made it), and
evaluations of an answer run on a nugget bank.

An evaluation now evaluates a run on qrels, a prediction set, or an answer run on a nugget bank:
``evaluations`` gains ``answer_run_id`` and ``nugget_bank_id`` and its ``inputs`` check a third
case. On SQLite the check is rewritten in the schema rather than by copying the table (a batch
"move and copy"): dropping the old ``evaluations`` with foreign keys on would cascade to every
stored value (``aggregate_results``, ``query_values``, ...). Rewriting the schema text is SQLite's
documented way to change a CHECK constraint (https://sqlite.org/lang_altertable.html, section 7).

Revision ID: 0026_answers
Revises: 0025_run_judged_ranks
Create Date: 2026-12-06 07:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026_answers"
down_revision: str | None = "0025_run_judged_ranks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_INPUTS = (
    "(run_id IS NOT NULL AND qrels_id IS NOT NULL AND prediction_set_id IS NULL) OR "
    "(run_id IS NULL AND qrels_id IS NULL AND prediction_set_id IS NOT NULL)"
)
NEW_INPUTS = (
    "(run_id IS NOT NULL AND qrels_id IS NOT NULL AND prediction_set_id IS NULL "
    "AND answer_run_id IS NULL AND nugget_bank_id IS NULL) OR "
    "(run_id IS NULL AND qrels_id IS NULL AND prediction_set_id IS NOT NULL "
    "AND answer_run_id IS NULL AND nugget_bank_id IS NULL) OR "
    "(run_id IS NULL AND qrels_id IS NULL AND prediction_set_id IS NULL "
    "AND answer_run_id IS NOT NULL AND nugget_bank_id IS NOT NULL)"
)


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def _answer_run_key(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["answer_run_id"], ["answer_runs.id"], name=op.f(f"fk_{table}_answer_run_id_answer_runs"), ondelete="CASCADE"
    )


def _text_in_rows(table: str, key: str, extra: list[sa.Column]) -> None:
    op.create_table(
        table,
        sa.Column("answer_run_id", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        *extra,
        _answer_run_key(table),
        sa.PrimaryKeyConstraint("answer_run_id", "topic", *key, name=op.f(f"pk_{table}")),
    )


def upgrade() -> None:
    op.create_table(
        "answer_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("team", sa.String(length=200), nullable=True),
        sa.Column("layout", sa.String(length=20), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("topic_count", sa.Integer(), nullable=False),
        sa.Column("ranking_run_id", sa.Integer(), nullable=True),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["ranking_run_id"], ["runs.id"], name=op.f("fk_answer_runs_ranking_run_id_runs"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_answer_runs")),
        sa.UniqueConstraint("name", name=op.f("uq_answer_runs_name")),
    )
    op.create_index(op.f("ix_answer_runs_ranking_run_id"), "answer_runs", ["ranking_run_id"], unique=False)
    _text_in_rows(
        "answers",
        [],
        [sa.Column("topic_text", sa.Text(), nullable=True), sa.Column("response_length", sa.Integer(), nullable=True)],
    )
    _text_in_rows(
        "answer_references",
        ["position"],
        [
            sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
            sa.Column("segment", sa.String(length=400), nullable=False),
        ],
    )
    _text_in_rows(
        "answer_sentences",
        ["position"],
        [
            sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
            sa.Column("text", sa.Text(), nullable=False),
        ],
    )
    _text_in_rows(
        "answer_citations",
        ["sentence", "position"],
        [
            sa.Column("sentence", sa.Integer(), autoincrement=False, nullable=False),
            sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
            sa.Column("reference", sa.Integer(), nullable=False),
            sa.Column("score", sa.Float(precision=53), nullable=True),
        ],
    )
    op.create_table(
        "nugget_banks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("topic_count", sa.Integer(), nullable=False),
        sa.Column("nugget_count", sa.Integer(), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nugget_banks")),
        sa.UniqueConstraint("name", name=op.f("uq_nugget_banks_name")),
    )
    op.create_table(
        "nugget_topics",
        sa.Column("bank_id", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("query", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["bank_id"], ["nugget_banks.id"], name=op.f("fk_nugget_topics_bank_id_nugget_banks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("bank_id", "topic", name=op.f("pk_nugget_topics")),
    )
    op.create_table(
        "nuggets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("bank_id", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("importance", sa.String(length=10), nullable=False),
        sa.CheckConstraint("importance IN ('vital', 'okay')", name=op.f("ck_nuggets_importance")),
        sa.ForeignKeyConstraint(
            ["bank_id"], ["nugget_banks.id"], name=op.f("fk_nuggets_bank_id_nugget_banks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nuggets")),
        sa.UniqueConstraint("bank_id", "topic", "position", name=op.f("uq_nuggets_bank_id_topic_position")),
    )
    op.create_table(
        "nugget_assignments",
        sa.Column("nugget_id", sa.Integer(), nullable=False),
        sa.Column("answer_run_id", sa.Integer(), nullable=False),
        sa.Column("assessor", sa.String(length=200), nullable=False),
        sa.Column("label", sa.String(length=20), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("assessed_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "label IN ('support', 'partial_support', 'not_support')", name=op.f("ck_nugget_assignments_label")
        ),
        _answer_run_key("nugget_assignments"),
        sa.ForeignKeyConstraint(
            ["nugget_id"], ["nuggets.id"], name=op.f("fk_nugget_assignments_nugget_id_nuggets"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("nugget_id", "answer_run_id", "assessor", name=op.f("pk_nugget_assignments")),
    )
    op.create_index("ix_nugget_assignments_answer_run_id", "nugget_assignments", ["answer_run_id"], unique=False)
    op.create_table(
        "citation_supports",
        sa.Column("answer_run_id", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=200), nullable=False),
        sa.Column("sentence", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("assessor", sa.String(length=200), nullable=False),
        sa.Column("segment", sa.String(length=400), nullable=False),
        sa.Column("label", sa.SmallInteger(), nullable=False),
        sa.Column("assessed_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("label IN (0, 1, 2)", name=op.f("ck_citation_supports_label")),
        _answer_run_key("citation_supports"),
        sa.PrimaryKeyConstraint("answer_run_id", "topic", "sentence", "assessor", name=op.f("pk_citation_supports")),
    )
    _evaluations_upgrade()


def _evaluations_upgrade() -> None:
    if _sqlite():
        # ADD COLUMN keeps the table (and its children's rows) in place; the foreign keys and
        # the check are then written into the table's schema text, as they would be created
        op.execute("ALTER TABLE evaluations ADD COLUMN answer_run_id INTEGER")
        op.execute("ALTER TABLE evaluations ADD COLUMN nugget_bank_id INTEGER")
        _sqlite_rewrite(
            [
                (f"CHECK ({OLD_INPUTS})", f"CHECK ({NEW_INPUTS})"),
                (_SQLITE_CHECK, f"{_SQLITE_KEYS}, \n\t{_SQLITE_CHECK}"),
            ]
        )
    else:
        op.add_column("evaluations", sa.Column("answer_run_id", sa.Integer(), nullable=True))
        op.add_column("evaluations", sa.Column("nugget_bank_id", sa.Integer(), nullable=True))
        op.create_foreign_key(
            op.f("fk_evaluations_answer_run_id_answer_runs"),
            "evaluations",
            "answer_runs",
            ["answer_run_id"],
            ["id"],
            ondelete="CASCADE",
        )
        op.create_foreign_key(
            op.f("fk_evaluations_nugget_bank_id_nugget_banks"),
            "evaluations",
            "nugget_banks",
            ["nugget_bank_id"],
            ["id"],
            ondelete="CASCADE",
        )
        op.drop_constraint(op.f("ck_evaluations_inputs"), "evaluations", type_="check")
        op.create_check_constraint(op.f("ck_evaluations_inputs"), "evaluations", NEW_INPUTS)
    op.create_index(op.f("ix_evaluations_answer_run_id"), "evaluations", ["answer_run_id"], unique=False)
    op.create_index(op.f("ix_evaluations_nugget_bank_id"), "evaluations", ["nugget_bank_id"], unique=False)
    op.create_index(
        "ix_evaluations_answers_options",
        "evaluations",
        ["answer_run_id", "nugget_bank_id", "options_hash"],
        unique=True,
    )


_SQLITE_CHECK = "CONSTRAINT ck_evaluations_inputs CHECK"
_SQLITE_KEYS = (
    "CONSTRAINT fk_evaluations_answer_run_id_answer_runs FOREIGN KEY(answer_run_id) "
    "REFERENCES answer_runs (id) ON DELETE CASCADE, \n\t"
    "CONSTRAINT fk_evaluations_nugget_bank_id_nugget_banks FOREIGN KEY(nugget_bank_id) "
    "REFERENCES nugget_banks (id) ON DELETE CASCADE"
)


def _sqlite_rewrite(replacements: list[tuple[str, str]]) -> None:
    """Rewrite the schema text of ``evaluations`` (each ``old`` must be in it once)."""
    bind = op.get_bind()
    schema = bind.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'evaluations'"
    ).scalar()
    assert schema is not None
    for old, new in replacements:
        assert schema.count(old) == 1, f"evaluations' schema holds {old!r} once"
        schema = schema.replace(old, new)
    version = bind.exec_driver_sql("PRAGMA schema_version").scalar()
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    bind.exec_driver_sql("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = 'evaluations'", (schema,))
    bind.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
    bind.exec_driver_sql("PRAGMA writable_schema = OFF")


def downgrade() -> None:
    op.execute("DELETE FROM evaluations WHERE answer_run_id IS NOT NULL")
    op.drop_index("ix_evaluations_answers_options", table_name="evaluations")
    op.drop_index(op.f("ix_evaluations_nugget_bank_id"), table_name="evaluations")
    op.drop_index(op.f("ix_evaluations_answer_run_id"), table_name="evaluations")
    if _sqlite():
        _sqlite_rewrite([(f"{_SQLITE_KEYS}, \n\t", ""), (f"CHECK ({NEW_INPUTS})", f"CHECK ({OLD_INPUTS})")])
        op.execute("ALTER TABLE evaluations DROP COLUMN nugget_bank_id")
        op.execute("ALTER TABLE evaluations DROP COLUMN answer_run_id")
    else:
        op.drop_constraint(op.f("ck_evaluations_inputs"), "evaluations", type_="check")
        op.create_check_constraint(op.f("ck_evaluations_inputs"), "evaluations", OLD_INPUTS)
        op.drop_constraint(op.f("fk_evaluations_nugget_bank_id_nugget_banks"), "evaluations", type_="foreignkey")
        op.drop_constraint(op.f("fk_evaluations_answer_run_id_answer_runs"), "evaluations", type_="foreignkey")
        op.drop_column("evaluations", "nugget_bank_id")
        op.drop_column("evaluations", "answer_run_id")
    op.drop_table("citation_supports")
    op.drop_index("ix_nugget_assignments_answer_run_id", table_name="nugget_assignments")
    op.drop_table("nugget_assignments")
    op.drop_table("nuggets")
    op.drop_table("nugget_topics")
    op.drop_table("nugget_banks")
    op.drop_table("answer_citations")
    op.drop_table("answer_sentences")
    op.drop_table("answer_references")
    op.drop_table("answers")
    op.drop_index(op.f("ix_answer_runs_ranking_run_id"), table_name="answer_runs")
    op.drop_table("answer_runs")
