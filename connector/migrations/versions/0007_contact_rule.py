"""The contact rule: an outreach row may be ``suppressed`` (refused by the rule: a
suppressed, bounced or complained address, or one another row of its job has), kept in
the ledger with why, so every sheet row of a job is in exactly one state.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_TABLE, _CHECK = "formsync_outreach_rows", "ck_formsync_outreach_rows_state"
_BEFORE = ("pending", "sending", "sent", "invalid", "failed", "changed")
_AFTER = (*_BEFORE, "suppressed")


def _states(states: tuple[str, ...]) -> str:
    return "state IN (" + ", ".join(f"'{s}'" for s in states) + ")"


def _replace_check(states: tuple[str, ...]) -> None:
    # SQLite cannot alter a constraint: the batch rebuilds the table.
    with op.batch_alter_table(_TABLE) as batch:
        batch.drop_constraint(_CHECK, type_="check")
        batch.create_check_constraint(_CHECK, _states(states))


def upgrade() -> None:
    _replace_check(_AFTER)


def downgrade() -> None:
    op.execute(f"UPDATE {_TABLE} SET state = 'failed', error = 'suppressed' WHERE state = 'suppressed'")
    _replace_check(_BEFORE)
