"""A person's data erased, and what left the store: the tombstones of ``formsync erase``
(keyed hashes of the erased addresses, external ids and submission, request and event ids,
``formsync_erasures``) and the deletion log every removal writes (``formsync_deletions``),
which a load reads as hard deletes; and when ``formsync sync --reconcile`` noticed that the
service no longer has a stored submission (``formsync_submissions.gone_at``).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "formsync_erasures",
        sa.Column("hash", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("erased_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("hash", name="pk_formsync_erasures"),
    )
    op.create_table(
        "formsync_deletions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("item_id", sa.String(), nullable=False),
        sa.Column("form_id", sa.String(), nullable=True),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("deleted_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_formsync_deletions"),
    )
    op.create_index("ix_formsync_deletions_item_id", "formsync_deletions", ["item_id"])
    op.add_column("formsync_submissions", sa.Column("gone_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("formsync_submissions") as batch:  # SQLite rebuilds the table
        batch.drop_column("gone_at")
    op.drop_index("ix_formsync_deletions_item_id", table_name="formsync_deletions")
    op.drop_table("formsync_deletions")
    op.drop_table("formsync_erasures")
