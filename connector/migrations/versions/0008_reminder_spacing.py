"""The reminder spacing: each request's last manual reminder time (the service's time of
the ``requests.remind`` formsync made), so a remind run skips, without a call, a request
reminded within the service's 10 minutes; and the job-run outcome ``skipped`` (a run that
had nothing it could do, with the reason in its summary).

Revision ID: 0008
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0006"
branch_labels = None
depends_on = None

_CHECK = "ck_formsync_job_runs_outcome"
_OUTCOMES = "outcome IN ('running', 'ok', 'error', 'stopped'{})"


def _outcomes(*extra: str) -> str:
    return _OUTCOMES.format("".join(f", '{o}'" for o in extra))


def upgrade() -> None:
    op.add_column("formsync_requests", sa.Column("last_reminded_at", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("formsync_job_runs") as batch:  # SQLite rebuilds the table
        batch.drop_constraint(_CHECK, type_="check")
        batch.create_check_constraint(_CHECK, _outcomes("skipped"))


def downgrade() -> None:
    op.execute("UPDATE formsync_job_runs SET outcome = 'ok' WHERE outcome = 'skipped'")
    with op.batch_alter_table("formsync_job_runs") as batch:
        batch.drop_constraint(_CHECK, type_="check")
        batch.create_check_constraint(_CHECK, _outcomes())
    with op.batch_alter_table("formsync_requests") as batch:
        batch.drop_column("last_reminded_at")
