"""Field lists read from the service only: a field key answered before its form's
``fields.list`` named it is held back (``source`` "answers", ``type`` "pending", or
"unlisted" once a read did not list it), never typed from its values; a field whose type
changed under the same key gets a variant row reading the same answer (``answer_key``);
and one row per form with its last ``fields.list`` read and when a held-back column
appeared, and the name its view was given (``formsync_form_schemas``).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("formsync_form_fields", sa.Column("answer_key", sa.String(), nullable=True))
    # Types learnt from values before this revision are not trusted: held back until read.
    op.execute("UPDATE formsync_form_fields SET type = 'pending' WHERE source = 'answers'")
    op.create_table(
        "formsync_form_schemas",
        sa.Column("form_id", sa.String(), nullable=False),
        sa.Column("snapshot_id", sa.String(), nullable=True),
        sa.Column("read_at", sa.BigInteger(), nullable=True),
        sa.Column("changed_at", sa.BigInteger(), nullable=True),
        sa.Column("view_name", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("form_id", name="pk_formsync_form_schemas"),
    )


def downgrade() -> None:
    op.drop_table("formsync_form_schemas")
    with op.batch_alter_table("formsync_form_fields") as batch:  # SQLite rebuilds the table
        batch.drop_column("answer_key")
