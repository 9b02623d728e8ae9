"""The campaign after the send: each request's opened, started and last activity times
and its reminder count (from requests.get / requests.list), and the suppression list.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_COLUMNS = ("opened_at", "started_at", "last_activity_at", "reminders_sent")


def upgrade() -> None:
    for name in _COLUMNS:
        op.add_column("formsync_requests", sa.Column(name, sa.BigInteger(), nullable=True))
    op.create_table(
        "formsync_suppressions",
        sa.Column("email", sa.String(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("email", name="pk_formsync_suppressions"),
    )


def downgrade() -> None:
    op.drop_table("formsync_suppressions")
    with op.batch_alter_table("formsync_requests") as batch:  # SQLite rebuilds the table
        for name in reversed(_COLUMNS):
            batch.drop_column(name)
