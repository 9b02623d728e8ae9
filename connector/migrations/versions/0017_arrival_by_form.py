"""The arrival order read per form: an index on ``(form_id, arrival)`` for submissions
and requests, in place of the one on ``form_id`` alone (its first column serves the
same lookups). An incremental export of one form (``--since-last`` with ``--form``,
every wide table), its last place and the form's newest name are then read from the
new rows only; on ``form_id`` alone they read every row of the form.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_TABLES = ("formsync_submissions", "formsync_requests")


def upgrade() -> None:
    for table in _TABLES:
        op.create_index(f"ix_{table}_form_id_arrival", table, ["form_id", "arrival"])
        op.drop_index(f"ix_{table}_form_id", table_name=table)


def downgrade() -> None:
    for table in reversed(_TABLES):
        op.create_index(f"ix_{table}_form_id", table, ["form_id"])
        op.drop_index(f"ix_{table}_form_id_arrival", table_name=table)
