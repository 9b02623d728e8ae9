"""The events set aside: correctly signed, but holding what no database can store as an
event (``formsync_dead_letters``; the body kept zlib-compressed, as bytes).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "formsync_dead_letters",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("event_id", sa.String(), nullable=False),
        sa.Column("type", sa.String(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("code", sa.String(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("field", sa.Text(), nullable=True),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.Column("set_aside_at", sa.BigInteger(), nullable=False),
        sa.Column("body_zlib", sa.LargeBinary(2**24 - 1), nullable=False),  # a MEDIUMBLOB on MySQL/MariaDB
        sa.PrimaryKeyConstraint("id", name="pk_formsync_dead_letters"),
    )
    op.create_index("ix_formsync_dead_letters_event_id", "formsync_dead_letters", ["event_id"])


def downgrade() -> None:
    op.drop_index("ix_formsync_dead_letters_event_id", table_name="formsync_dead_letters")
    op.drop_table("formsync_dead_letters")
