"""The store's arrival order: each submission and request row's place (``arrival``), the
counter that gives the places in commit order, and the incremental exports' cursors.
Rows stored before this take place 0: the first incremental export writes them.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_TABLES = ("formsync_submissions", "formsync_requests")


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("arrival", sa.BigInteger(), nullable=False, server_default="0"))
        op.create_index(f"ix_{table}_arrival", table, ["arrival"])
    counter = op.create_table(
        "formsync_arrival",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("last_place", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_formsync_arrival"),
    )
    op.bulk_insert(counter, [{"name": "arrival", "last_place": 0}])
    op.create_table(
        "formsync_export_cursors",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("table_name", sa.String(), nullable=False),
        sa.Column("form_id", sa.String(), nullable=False),
        sa.Column("arrival", sa.BigInteger(), nullable=False),
        sa.Column("row_count", sa.BigInteger(), nullable=False),
        sa.Column("run", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", "table_name", "form_id", name="pk_formsync_export_cursors"),
    )


def downgrade() -> None:
    op.drop_table("formsync_export_cursors")
    op.drop_table("formsync_arrival")
    for table in reversed(_TABLES):
        op.drop_index(f"ix_{table}_arrival", table_name=table)
        with op.batch_alter_table(table) as batch:  # SQLite rebuilds the table
            batch.drop_column("arrival")
