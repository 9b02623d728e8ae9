"""The hash of each submission's and request's content when it last took its place in the
arrival order (``content_hash``): a write that leaves a row's content as it was (a
``sync --full`` of unchanged submissions, a replayed event, a poll) keeps its place, so
the next incremental export and load do not send it again. And when a sync last read a
form's whole ``submissions.list`` (``formsync_form_schemas.full_sync_at``): a sync job
reads it whole again once ``sync.full_every_hours`` have passed.

The rows stored before have no hash: each takes a place once more at its next write.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

_TABLES = ("formsync_submissions", "formsync_requests")
_COLUMN = {"formsync_submissions": "content_hash", "formsync_requests": "content_hash",
           "formsync_form_schemas": "full_sync_at"}


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("content_hash", sa.String(), nullable=True))
    op.add_column("formsync_form_schemas", sa.Column("full_sync_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    for table in (*_TABLES, "formsync_form_schemas"):
        if op.get_bind().dialect.name == "sqlite":
            # Dropped in place (SQLite 3.35+): a batch rebuild would break the forms' views.
            op.execute(f"ALTER TABLE {table} DROP COLUMN {_COLUMN[table]}")
        else:
            op.drop_column(table, _COLUMN[table])
