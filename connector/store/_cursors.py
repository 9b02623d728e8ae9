"""The incremental exports' cursors (``store.export_cursors``): per name, table and form,
the last place of the store's arrival order an export (or a load) under that name wrote.
The rows "stored since the last export under NAME" are those placed after it: exact even
for a row stored late, since places are taken in commit order (``Writer.stamp_arrival``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, Update, bindparam, delete, insert, select, update

from ._database import Database
from ._mapping import now_ms
from ._tables import EXPORT_CURSORS

ALL_FORMS = ""  # the form of a cursor over every form


@dataclass(frozen=True)
class CursorMark:
    """Where an incremental export stopped: the last arrival place of its rows
    (``arrival``), how many rows its file held, the run's number under the name and the
    format its files are in (None for a load's cursor, and for cursors stored before
    formats were kept)."""

    name: str
    table: str
    form_id: str
    arrival: int
    rows: int
    run: int
    format: str | None = None


_c = EXPORT_CURSORS.c
# One cursor moved (``ExportCursors.advance``): its key as ``k_*``, its new values as ``v_*``.
_MOVE = update(EXPORT_CURSORS).where(_c.name == bindparam("k_name"), _c.table_name == bindparam("k_table"),
                                     _c.form_id == bindparam("k_form")).values(
    {col: bindparam(f"v_{col}") for col in ("arrival", "row_count", "run", "updated_at", "format")})


class ExportCursors:
    """The export cursors repository (``store.export_cursors``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, name: str, table: str, form_id: str | None) -> CursorMark | None:
        """The cursor of ``name`` for one table and form (None: every form); None before
        the first export under that name (``store.exports.since_cursor`` reads it in an
        export's snapshot)."""
        with self._db.reader() as s:
            row = s.connection().execute(cursor_query(name, table, form_id)).first()
            return None if row is None else cursor_mark(row)

    def list(self, name: str | None = None) -> list[CursorMark]:
        """Every cursor (of ``name`` only, when given), by name, table and form."""
        with self._db.reader() as s:
            rows = s.connection().execute(CURSORS) if name is None else s.connection().execute(CURSORS_OF, {"name": name})
            return [cursor_mark(r) for r in rows]

    def advance(self, marks: Sequence[CursorMark], now: int | None = None) -> None:
        """Store ``marks`` (after their files are complete), all in one transaction;
        ``now`` (epoch ms) is when, by default the current time."""
        if not marks:
            return
        now = now if now is not None else now_ms()
        # Core statements on one connection, the update made once: an incremental export
        # of a few rows pays for this transaction, so no ORM unit of work is set up for it.
        with self._db.engine.begin() as conn:
            for m in marks:
                values = {"arrival": m.arrival, "row_count": m.rows, "run": m.run, "updated_at": now,
                          "format": m.format}
                changed: Any = conn.execute(_MOVE, {"k_name": m.name, "k_table": m.table, "k_form": m.form_id,
                                                    **{f"v_{k}": v for k, v in values.items()}})
                if changed.rowcount == 0:
                    conn.execute(insert(EXPORT_CURSORS).values(name=m.name, table_name=m.table, form_id=m.form_id,
                                                               **values))

    def reset(self, name: str) -> int:
        """Forget every cursor of ``name``: its next export writes every row again. How many were forgotten."""
        with self._db.session() as s:
            result: Any = s.execute(delete(EXPORT_CURSORS).where(EXPORT_CURSORS.c.name == name))
            return int(result.rowcount)

    def rewind_form(self, form_id: str) -> int:
        """Send every row of ``form_id`` again (``rewind_statement``). How many cursors
        were rewound."""
        with self._db.session() as s:
            result: Any = s.execute(rewind_statement(form_id))
            return int(result.rowcount)


def rewind_statement(form_id: str) -> Update:
    """Each cursor of ``form_id`` back to the start, under every name: for a form whose
    table changed (a column held back appears), so the next incremental export and load
    carry its rows again with the new column's values."""
    return update(EXPORT_CURSORS).where(EXPORT_CURSORS.c.form_id == form_id).values(arrival=-1)


def cursor_query(name: str, table: str, form_id: str | None) -> Select[Any]:
    """The cursor row of ``name`` for one table and form (None: every form), as ``cursor_mark`` reads it."""
    c = EXPORT_CURSORS.c
    return _cursor_columns().where(c.name == name, c.table_name == table, c.form_id == (form_id or ALL_FORMS))


def _cursor_columns() -> Select[Any]:
    c = EXPORT_CURSORS.c
    return select(c.name, c.table_name, c.form_id, c.arrival, c.row_count, c.run, c.format)


# Every cursor (of the name bound as ``name``), as ``cursor_mark`` reads them: Core, built
# once (an incremental export of a few rows reads them; the ORM's loading, and building the
# statement, cost more than the read).
CURSORS = _cursor_columns().order_by(EXPORT_CURSORS.c.name, EXPORT_CURSORS.c.table_name, EXPORT_CURSORS.c.form_id)
CURSORS_OF = _cursor_columns().where(EXPORT_CURSORS.c.name == bindparam("name")).order_by(
    EXPORT_CURSORS.c.table_name, EXPORT_CURSORS.c.form_id)


def cursor_mark(row: Any) -> CursorMark:
    """A cursor row (``ExportCursor``, or a row of ``cursor_query``) as a ``CursorMark``."""
    return CursorMark(row.name, row.table_name, row.form_id, row.arrival, row.row_count, row.run, row.format)
