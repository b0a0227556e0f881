"""The HTTP service: users and their tokens, shared tasks and their submissions, pool assessors,
and an audit log

New tables only; nothing stored before is touched. ``users`` hold a role and, for participants, a
team; passwords and tokens are kept as argon2 hashes (``api_tokens`` holds browser sessions too).
A ``task`` evaluates the runs ``submissions`` bring against its qrels, hidden until released if it
says so. ``pool_assignments`` name the assessors of a pool; ``audit_log`` keeps who did what.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-24 08:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _at(name: str, nullable: bool = True) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), nullable=False),
        _at("at", nullable=False),
        sa.Column("user_name", sa.String(length=200), nullable=True),
        sa.Column("action", sa.String(length=100), nullable=False),
        sa.Column("target", sa.String(length=400), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_at"), "audit_log", ["at"])
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("team", sa.String(length=200), nullable=True),
        sa.Column("password_hash", sa.String(length=200), nullable=True),
        _at("created_at", nullable=False),
        _at("disabled_at"),
        sa.CheckConstraint(
            "role IN ('admin', 'organiser', 'participant', 'assessor', 'viewer')", name=op.f("ck_users_role")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("name", name=op.f("uq_users_name")),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("purpose", sa.String(length=20), nullable=False),
        sa.Column("secret_hash", sa.String(length=200), nullable=False),
        _at("created_at", nullable=False),
        _at("expires_at"),
        _at("revoked_at"),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_api_tokens_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
    )
    op.create_index(op.f("ix_api_tokens_user_id"), "api_tokens", ["user_id"])
    op.create_table(
        "pool_assignments",
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["pool_id"], ["pools.id"], name=op.f("fk_pool_assignments_pool_id_pools"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_pool_assignments_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("pool_id", "user_id", name=op.f("pk_pool_assignments")),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("qrels_id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=True),
        sa.Column("hidden", sa.Boolean(), nullable=False),
        _at("released_at"),
        _at("opens_at"),
        _at("closes_at"),
        sa.Column("max_runs_per_team", sa.Integer(), nullable=True),
        sa.Column("measures", sa.JSON(), nullable=False),
        _at("created_at", nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], name=op.f("fk_tasks_owner_id_users"), ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["qrels_id"], ["qrels_sets.id"], name=op.f("fk_tasks_qrels_id_qrels_sets")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tasks")),
        sa.UniqueConstraint("name", name=op.f("uq_tasks_name")),
    )
    op.create_index(op.f("ix_tasks_owner_id"), "tasks", ["owner_id"])
    op.create_index(op.f("ix_tasks_qrels_id"), "tasks", ["qrels_id"])
    op.create_table(
        "submissions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("team", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("evaluation_id", sa.Integer(), nullable=True),
        sa.Column("run_type", sa.String(length=20), nullable=False),
        sa.Column("judging_precedence", sa.Integer(), nullable=True),
        _at("created_at", nullable=False),
        sa.ForeignKeyConstraint(
            ["evaluation_id"],
            ["evaluations.id"],
            name=op.f("fk_submissions_evaluation_id_evaluations"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_submissions_run_id_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_submissions_task_id_tasks"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_submissions_user_id_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_submissions")),
        sa.UniqueConstraint("run_id", name=op.f("uq_submissions_run_id")),
    )
    op.create_index(op.f("ix_submissions_task_id"), "submissions", ["task_id"])


def downgrade() -> None:
    for table in ("submissions", "tasks", "pool_assignments", "api_tokens", "users", "audit_log"):
        op.drop_table(table)  # their indexes go with them
