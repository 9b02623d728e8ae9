"""Each tombstone names the key that made its hash (``formsync_erasures.key_id``,
``keyfile.key_id``): ingest checks the tombstones with that key only, and refuses another.

The tombstones kept before are stamped with the id of the key present now. ``Store.migrate``
hands the key file's place over (``config.attributes["key_file"]``); when tombstones exist
and that file is missing (or the place is unknown: the ``alembic`` command run by hand),
the migration refuses in one line naming the file, and nothing changes.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import context, op

from connector.config.keyfile import KeyFileError, key_id, load_key

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    kept = conn.execute(sa.text("SELECT 1 FROM formsync_erasures")).first() is not None
    made_with = _key_id() if kept else None
    op.add_column("formsync_erasures", sa.Column("key_id", sa.String(), nullable=True))
    if made_with is not None:
        conn.execute(sa.text("UPDATE formsync_erasures SET key_id = :k"), {"k": made_with})


def _key_id() -> str:
    """The id of the store's key, which made the tombstones kept so far."""
    place = context.config.attributes.get("key_file")
    if place is None:
        raise KeyFileError("the store keeps erasures and this migration must read the key that made them: run it "
                           "through formsync (any command) or Store.migrate(), which know the key file", "key_file")
    return key_id(load_key(Path(place)))


def downgrade() -> None:
    with op.batch_alter_table("formsync_erasures") as batch:  # SQLite rebuilds the table
        batch.drop_column("key_id")
