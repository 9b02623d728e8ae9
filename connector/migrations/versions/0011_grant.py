"""The sign-in of ``formsync login`` (``formsync_oauth_grants``: the registered client and
the sealed token chain) and the first use of each static token by its fingerprint
(``formsync_token_uses``).

Revision ID: 0011
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "formsync_oauth_grants",
        sa.Column("service_url", sa.String(), nullable=False),
        sa.Column("client_id", sa.String(), nullable=False),
        sa.Column("client_secret", sa.LargeBinary(), nullable=True),
        sa.Column("key_id", sa.String(), nullable=False),
        sa.Column("workspace_id", sa.String(), nullable=True),
        sa.Column("scope", sa.Text(), nullable=True),
        sa.Column("access_token", sa.LargeBinary(), nullable=True),
        sa.Column("access_expires_at", sa.BigInteger(), nullable=True),
        sa.Column("refresh_token", sa.LargeBinary(), nullable=True),
        sa.Column("refresh_expires_at", sa.BigInteger(), nullable=True),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("signed_in_at", sa.BigInteger(), nullable=True),
        sa.Column("refreshed_at", sa.BigInteger(), nullable=True),
        sa.Column("failure", sa.Text(), nullable=True),
        sa.Column("failed_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("service_url", name="pk_formsync_oauth_grants"),
    )
    op.create_table(
        "formsync_token_uses",
        sa.Column("fingerprint", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("first_used_at", sa.BigInteger(), nullable=False),
        sa.Column("last_used_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("fingerprint", name="pk_formsync_token_uses"),
    )


def downgrade() -> None:
    op.drop_table("formsync_token_uses")
    op.drop_table("formsync_oauth_grants")
