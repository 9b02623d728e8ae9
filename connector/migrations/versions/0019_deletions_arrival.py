"""The deletion log's place in the store's arrival order (``formsync_deletions.arrival``):
a load reads the log past its cursor on it, since places are taken in commit order and
the log's ids are not (two removals committing out of order left one behind a cursor).

The rows logged before keep their order: their place is their id, the counter moves
past the largest, and the loads' cursors of the log (ids until now) keep their meaning.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("formsync_deletions", sa.Column("arrival", sa.BigInteger(), nullable=False, server_default="0"))
    op.create_index("ix_formsync_deletions_arrival", "formsync_deletions", ["arrival"])
    conn = op.get_bind()
    conn.execute(sa.text("UPDATE formsync_deletions SET arrival = id"))
    last = conn.execute(sa.text("SELECT MAX(id) FROM formsync_deletions")).scalar()
    if last is not None:
        conn.execute(sa.text("UPDATE formsync_arrival SET last_place = :last WHERE last_place < :last"),
                     {"last": int(last)})


def downgrade() -> None:
    # The loads' cursors of the log go back to ids: the last id at or before their place.
    op.get_bind().execute(sa.text(
        "UPDATE formsync_export_cursors SET arrival = COALESCE((SELECT MAX(d.id) FROM formsync_deletions d "
        "WHERE d.arrival <= formsync_export_cursors.arrival), 0) WHERE table_name = 'deletions'"))
    op.drop_index("ix_formsync_deletions_arrival", table_name="formsync_deletions")
    with op.batch_alter_table("formsync_deletions") as batch:  # SQLite rebuilds the table
        batch.drop_column("arrival")
