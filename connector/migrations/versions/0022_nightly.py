"""The format an incremental export's cursor was written in
(``formsync_export_cursors.format``): a second format under one name is refused, naming
the first. Cursors stored before (and the loads', which write no file) have none.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("formsync_export_cursors", sa.Column("format", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("formsync_export_cursors") as batch:  # SQLite rebuilds the table
        batch.drop_column("format")
