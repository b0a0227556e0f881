"""Sample weights and multilabel gold labels

``gold_labels.weight`` holds an item's sample weight (NULL: the set is unweighted), which every
classification measure then uses as scikit-learn's ``sample_weight``; ``label_sets.multilabel``
marks gold labels holding a set of labels per item (kept in ``label`` as ``a|b``, so ``label`` of
gold labels and predictions becomes text: a set can pass 200 characters).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24 13:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # plain ADD COLUMN: a batch copy of label_sets would drop a table prediction_sets refers to
    op.add_column("label_sets", sa.Column("multilabel", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.add_column("label_sets", sa.Column("weighted", sa.Boolean(), server_default=sa.false(), nullable=False))
    with op.batch_alter_table("gold_labels", schema=None) as batch_op:
        batch_op.add_column(sa.Column("weight", sa.Float(precision=53), nullable=True))
        batch_op.alter_column("label", existing_type=sa.String(length=200), type_=sa.Text(), existing_nullable=False)
    with op.batch_alter_table("predictions", schema=None) as batch_op:
        batch_op.alter_column("label", existing_type=sa.String(length=200), type_=sa.Text(), existing_nullable=True)


def downgrade() -> None:
    with op.batch_alter_table("predictions", schema=None) as batch_op:
        batch_op.alter_column("label", existing_type=sa.Text(), type_=sa.String(length=200), existing_nullable=True)
    with op.batch_alter_table("gold_labels", schema=None) as batch_op:
        batch_op.alter_column("label", existing_type=sa.Text(), type_=sa.String(length=200), existing_nullable=False)
        batch_op.drop_column("weight")
    # plain DROP COLUMN (SQLite >= 3.35), for the reason upgrade gives
    op.drop_column("label_sets", "weighted")
    op.drop_column("label_sets", "multilabel")
