"""The files ``formsync files`` archived (``formsync_archived_files``): one row per file of
a file or signature answer, with the sha256, size and location of its bytes.

Revision ID: 0015
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "formsync_archived_files",
        sa.Column("submission_id", sa.String(), nullable=False),
        sa.Column("field_key", sa.String(), nullable=False),
        sa.Column("instance", sa.Integer(), nullable=False),
        sa.Column("member", sa.String(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("form_id", sa.String(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("archived_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("submission_id", "field_key", "instance", "member", "idx",
                                name="pk_formsync_archived_files"),
    )
    op.create_index("ix_formsync_archived_files_form_id", "formsync_archived_files", ["form_id"])
    op.create_index("ix_formsync_archived_files_sha256", "formsync_archived_files", ["sha256"])


def downgrade() -> None:
    op.drop_index("ix_formsync_archived_files_sha256", table_name="formsync_archived_files")
    op.drop_index("ix_formsync_archived_files_form_id", table_name="formsync_archived_files")
    op.drop_table("formsync_archived_files")
