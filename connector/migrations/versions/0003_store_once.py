"""Each event stored once: the raw body kept zlib-compressed (``body_zlib``) without its
parsed copy (``payload``); a completion's answers and display kept on the submission row
only (a request row keeps them only where no linked submission holds the same); the
long-form answer rows derived from the submission's JSON when read instead of stored
(``formsync_answers`` dropped); ``edit_count`` widened to 64 bits.

Rows are rewritten in chunks with portable statements (batch mode where SQLite must copy
a table), so the same steps run on SQLite, PostgreSQL and MySQL/MariaDB.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_CHUNK = 1000
_JSON = sa.JSON(none_as_null=True)
_BLOB = sa.LargeBinary(2**24 - 1)  # a MEDIUMBLOB on MySQL/MariaDB, where a BLOB stops at 64 KiB
_events = sa.table("formsync_events", sa.column("id", sa.String()), sa.column("body", sa.Text()),
                   sa.column("payload", _JSON), sa.column("body_zlib", _BLOB))
_requests = sa.table("formsync_requests", sa.column("id", sa.String()), sa.column("submission_id", sa.String()),
                     sa.column("answers", _JSON), sa.column("display", _JSON))
_submissions = sa.table("formsync_submissions", sa.column("id", sa.String()), sa.column("answers", _JSON),
                        sa.column("display", _JSON))
_ANSWER_COLUMNS = ("submission_id", "field_key", "instance", "row_key", "member_key", "value_json", "display_text")


def _chunks(select: sa.Select[Any], key: sa.ColumnElement[Any]) -> Iterator[Sequence[Any]]:
    """The rows of ``select`` in chunks, by ``key`` order (keyset paging: each chunk is
    one short read, whatever the table's size, and rows rewritten meanwhile stay put)."""
    conn, last = op.get_bind(), None
    while True:
        stmt = select.order_by(key).limit(_CHUNK)
        rows = conn.execute(stmt if last is None else stmt.where(key > last)).all()
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def _same(a: Any, b: Any) -> bool:
    # JSON read back may be text (SQLite) or parsed (PostgreSQL): compare the parsed values.
    return bool(_parsed(a) == _parsed(b))


def upgrade() -> None:
    conn = op.get_bind()
    with op.batch_alter_table("formsync_events") as batch:
        batch.add_column(sa.Column("body_zlib", _BLOB, nullable=True))
    for rows in _chunks(sa.select(_events.c.id, _events.c.body), _events.c.id):
        conn.execute(_events.update().where(_events.c.id == sa.bindparam("b_id"))
                     .values(body_zlib=sa.bindparam("b_zlib")),
                     [{"b_id": r[0], "b_zlib": zlib.compress(r[1].encode("utf-8", "surrogateescape"), 1)}
                      for r in rows])
    with op.batch_alter_table("formsync_events") as batch:
        batch.drop_column("payload")
        batch.drop_column("body")
        batch.alter_column("body_zlib", existing_type=_BLOB, nullable=False)

    # A request's answers that its linked submission holds as well are kept there only.
    r, s = _requests.c, _submissions.c
    linked = (sa.select(r.id, r.answers, r.display, s.answers, s.display)
              .select_from(_requests.join(_submissions, s.id == r.submission_id))
              .where(r.answers.is_not(None)))
    for rows in _chunks(linked, r.id):
        same = [{"b_id": row[0]} for row in rows if _same(row[1], row[3]) and _same(row[2], row[4])]
        if same:
            conn.execute(_requests.update().where(r.id == sa.bindparam("b_id")).values(answers=None, display=None),
                         same)

    op.drop_table("formsync_answers")
    with op.batch_alter_table("formsync_submissions") as batch:
        batch.alter_column("edit_count", existing_type=sa.Integer(), type_=sa.BigInteger(),
                           existing_nullable=False)


def downgrade() -> None:
    from connector.store._mapping import answer_tuples

    conn = op.get_bind()
    with op.batch_alter_table("formsync_submissions") as batch:
        batch.alter_column("edit_count", existing_type=sa.BigInteger(), type_=sa.Integer(),
                           existing_nullable=False)
    answers = op.create_table(
        "formsync_answers",
        sa.Column("submission_id", sa.String(), nullable=False),
        sa.Column("field_key", sa.String(), nullable=False),
        sa.Column("instance", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("row_key", sa.String(), nullable=False),
        sa.Column("member_key", sa.String(), nullable=False),
        sa.Column("value_json", sa.Text(), nullable=False),
        sa.Column("display_text", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("submission_id", "field_key", "instance", "row_key", "member_key",
                                name="pk_formsync_answers"),
    )
    s, r = _submissions.c, _requests.c
    for rows in _chunks(sa.select(s.id, s.answers, s.display), s.id):
        long = [dict(zip(_ANSWER_COLUMNS, t, strict=True)) for row in rows
                for t in answer_tuples(row[0], _parsed(row[1]), _parsed(row[2]))]
        if long:
            conn.execute(sa.insert(answers), long)
    orphaned = (sa.select(r.id, s.answers, s.display)
                .select_from(_requests.join(_submissions, s.id == r.submission_id)).where(r.answers.is_(None)))
    for rows in _chunks(orphaned, r.id):
        conn.execute(_requests.update().where(r.id == sa.bindparam("b_id"))
                     .values(answers=sa.bindparam("b_answers"), display=sa.bindparam("b_display")),
                     [{"b_id": row[0], "b_answers": _parsed(row[1]), "b_display": _parsed(row[2])} for row in rows])

    with op.batch_alter_table("formsync_events") as batch:
        batch.add_column(sa.Column("body", sa.Text(), nullable=True))
        batch.add_column(sa.Column("payload", _JSON, nullable=True))
    for rows in _chunks(sa.select(_events.c.id, _events.c.body_zlib), _events.c.id):
        params = []
        for row in rows:
            body = zlib.decompress(row[1]).decode("utf-8", "surrogateescape")
            try:
                payload = json.loads(body)
            except ValueError:
                payload = None
            params.append({"b_id": row[0], "b_body": body, "b_payload": payload})
        conn.execute(_events.update().where(_events.c.id == sa.bindparam("b_id"))
                     .values(body=sa.bindparam("b_body"), payload=sa.bindparam("b_payload")), params)
    with op.batch_alter_table("formsync_events") as batch:
        batch.drop_column("body_zlib")
        batch.alter_column("body", existing_type=sa.Text(), nullable=False)


def _parsed(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
