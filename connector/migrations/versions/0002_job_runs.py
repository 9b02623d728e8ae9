"""Scheduled operation: one row per job run, and the scheduler lease (SQLite).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "formsync_job_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("scheduled_at", sa.BigInteger(), nullable=True),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("finished_at", sa.BigInteger(), nullable=True),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_formsync_job_runs"),
        sa.CheckConstraint("outcome IN ('running', 'ok', 'error', 'stopped')", name="ck_formsync_job_runs_outcome"),
    )
    op.create_index("ix_formsync_job_runs_job_id", "formsync_job_runs", ["job_id"])

    op.create_table(
        "formsync_scheduler_lease",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("holder", sa.String(), nullable=False),
        sa.Column("acquired_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_formsync_scheduler_lease"),
    )


def downgrade() -> None:
    op.drop_table("formsync_scheduler_lease")
    op.drop_index("ix_formsync_job_runs_job_id", table_name="formsync_job_runs")
    op.drop_table("formsync_job_runs")
