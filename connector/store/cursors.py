"""The incremental exports' cursors (``store.export_cursors``): per name, table and form,
the last place of the store's arrival order an export (or a load) under that name wrote.
The rows "stored since the last export under NAME" are those placed after it: exact even
for a row stored late, since places are taken in commit order (``Writer.stamp_arrival``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Update, delete, select, update

from .database import Database
from .mapping import now_ms
from .tables import EXPORT_CURSORS, ExportCursor

ALL_FORMS = ""  # the form of a cursor over every form


@dataclass(frozen=True)
class CursorMark:
    """Where an incremental export stopped: the last arrival place of its rows
    (``arrival``), how many rows its file held and the run's number under the name."""

    name: str
    table: str
    form_id: str
    arrival: int
    rows: int
    run: int


class ExportCursors:
    """The export cursors repository (``store.export_cursors``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, name: str, table: str, form_id: str | None) -> CursorMark | None:
        """The cursor of ``name`` for one table and form (None: every form); None before
        the first export under that name."""
        with self._db.reader() as s:
            row = s.get(ExportCursor, (name, table, form_id or ALL_FORMS))
            return None if row is None else _mark(row)

    def list(self, name: str | None = None) -> list[CursorMark]:
        """Every cursor (of ``name`` only, when given), by name, table and form."""
        stmt = select(ExportCursor).order_by(ExportCursor.name, ExportCursor.table_name, ExportCursor.form_id)
        if name is not None:
            stmt = stmt.where(ExportCursor.name == name)  # type: ignore[arg-type]
        with self._db.reader() as s:
            return [_mark(r) for r in s.execute(stmt).scalars()]

    def advance(self, marks: Sequence[CursorMark], now: int | None = None) -> None:
        """Store ``marks`` (after their files are complete), all in one transaction;
        ``now`` (epoch ms) is when, by default the current time."""
        now = now if now is not None else now_ms()
        with self._db.session() as s:
            for m in marks:
                row = s.get(ExportCursor, (m.name, m.table, m.form_id))
                if row is None:
                    s.add(ExportCursor(name=m.name, table_name=m.table, form_id=m.form_id, arrival=m.arrival,
                                       row_count=m.rows, run=m.run, updated_at=now))
                else:
                    row.arrival, row.row_count, row.run, row.updated_at = m.arrival, m.rows, m.run, now

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


def _mark(row: ExportCursor) -> CursorMark:
    return CursorMark(row.name, row.table_name, row.form_id, row.arrival, row.row_count, row.run)
