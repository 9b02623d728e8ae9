"""When the service purged a request's answers (``dataPurgedAt`` of ``requests.get``),
kept on the request's row so that ``formsync purge`` removes what the service purged on
its own clock (``formsync_requests.data_purged_at``).

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("formsync_requests") as batch:
        batch.add_column(sa.Column("data_purged_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("formsync_requests") as batch:
        batch.drop_column("data_purged_at")
