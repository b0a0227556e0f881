"""Qrels of three kinds: relevance judgments, subtopic judgments and preference judgments

``qrels_sets.kind`` says which: ``relevance`` (trec_eval's qrels; every set stored before this
revision), ``subtopics`` (the TREC Web track's ``topic subtopic docno judgment``: the subtopic is
the second column, ``iteration``, so a document is judged once per subtopic) or ``preferences``
(trec_eval's ``-R prefs``: judgment group in ``iteration``, the new ``subgroup`` column, and the
preference ``level``, a number that may have a fraction; ``relevance`` then says relevant (level
above 0) or not). A judgment is unique per (topic, doc, iteration, subgroup) instead of per (topic,
doc), and an index on (qrels, topic, doc, relevance) serves the join of a run with its judgments;
the importer still refuses a relevance qrels that judges a document twice.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24 04:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# On SQLite, qrels_sets is altered in place (ADD/DROP COLUMN), never copied and moved as batch mode
# does: dropping the old copy of a parent table deletes, by ON DELETE CASCADE, every judgment and
# evaluation that refers to it. Its CHECK constraint is therefore PostgreSQL's only (SQLite cannot
# add one in place); the service writes only the three kinds.


def upgrade() -> None:
    op.add_column("qrels_sets", sa.Column("kind", sa.String(length=20), server_default="relevance", nullable=False))
    if op.get_bind().dialect.name == "postgresql":
        op.create_check_constraint(
            op.f("ck_qrels_sets_kind"), "qrels_sets", "kind IN ('relevance', 'subtopics', 'preferences')"
        )
    with op.batch_alter_table("judgments") as batch:  # a child table: copying it deletes nothing
        batch.add_column(sa.Column("subgroup", sa.String(length=50), server_default="0", nullable=False))
        batch.add_column(sa.Column("level", sa.Float(precision=53), nullable=True))
        batch.drop_constraint(op.f("uq_judgments_qrels_id_topic_doc"), type_="unique")
        batch.create_unique_constraint(
            op.f("uq_judgments_qrels_id_topic_doc_iteration_subgroup"),
            ["qrels_id", "topic", "doc", "iteration", "subgroup"],
        )
        # the run-to-judgments join (repositories.judged_ranks) looks judgments up by (qrels, topic,
        # doc): with the wider unique key SQLite's planner would scan a qrels set's judgments per
        # run row instead; covering the relevance, the join reads this index alone
        batch.create_index(op.f("ix_judgments_qrels_id_topic_doc_relevance"), ["qrels_id", "topic", "doc", "relevance"])


def downgrade() -> None:
    bind = op.get_bind()
    kept = bind.execute(sa.text("SELECT name FROM qrels_sets WHERE kind <> 'relevance' ORDER BY name")).scalars().all()
    if kept:
        raise RuntimeError(
            "cannot downgrade below 0009 while qrels of other kinds than relevance are stored: "
            f"{', '.join(kept)}; delete them first ('evalstore qrels delete NAME')"
        )
    with op.batch_alter_table("judgments") as batch:
        batch.drop_index(op.f("ix_judgments_qrels_id_topic_doc_relevance"))
        batch.drop_constraint(op.f("uq_judgments_qrels_id_topic_doc_iteration_subgroup"), type_="unique")
        batch.create_unique_constraint(op.f("uq_judgments_qrels_id_topic_doc"), ["qrels_id", "topic", "doc"])
        batch.drop_column("level")
        batch.drop_column("subgroup")
    if bind.dialect.name == "postgresql":
        op.drop_constraint(op.f("ck_qrels_sets_kind"), "qrels_sets", type_="check")
        op.drop_column("qrels_sets", "kind")
    else:
        op.execute("ALTER TABLE qrels_sets DROP COLUMN kind")  # in place (SQLite 3.35+), see above
