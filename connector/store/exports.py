"""What exports read: submissions, long-form answers and requests, in batches of plain
DB-API row tuples streamed from one read-only transaction (a server-side cursor where
the database has one).

The statements are compiled by SQLAlchemy and run on the session's own DB-API
connection: at a million rows, SQLAlchemy's ``Row`` objects and its row-by-row buffer of
a streamed result cost more than the read itself. So a JSON column may come back as its
text (see ``json_value``); the parameters are plain numbers and text, which need no
binding conversion."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, func, select

from .database import Database
from .tables import ANSWERS, REQUESTS, SUBMISSIONS

Batch = Sequence[tuple[Any, ...]]


@dataclass(frozen=True)
class ExportFilter:
    """Which rows an export reads: of one form, submitted (requests: created) at or
    after ``since_ms``, answers of the ``fields`` only, requests of one ``status``."""

    form_id: str | None = None
    since_ms: int | None = None
    fields: tuple[str, ...] | None = None
    status: str | None = None


def json_value(value: Any) -> Any:
    """A JSON column's value from a batch row: SQLite gives the text, drivers that parse
    JSON give the object."""
    return json.loads(value) if isinstance(value, str | bytes) else value


class ExportReads:
    """The export reads repository (``store.exports``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def submissions(self, f: ExportFilter, *, display: bool, batch_rows: int) -> Iterator[Batch]:
        """Submission rows ``(id, form_id, request_id, submitted_at, updated_at,
        edit_count, answers[, display])`` in submission order."""
        t = SUBMISSIONS.c
        stmt = select(t.id, t.form_id, t.request_id, t.submitted_at, t.updated_at, t.edit_count, t.answers,
                      *([t.display] if display else []))
        if f.form_id is not None:
            stmt = stmt.where(t.form_id == f.form_id)
        if f.since_ms is not None:
            stmt = stmt.where(t.submitted_at >= f.since_ms)
        return self._batches(stmt.order_by(t.submitted_at, t.id), batch_rows)

    def answers(self, f: ExportFilter, *, batch_rows: int) -> Iterator[Batch]:
        """Answer rows ``(submission_id, form_id, field_key, instance, row_key,
        member_key, value_json, display_text)`` in submission order."""
        a, s = ANSWERS.c, SUBMISSIONS.c
        return self._batches(self._answers(f).order_by(s.submitted_at, a.submission_id, a.field_key, a.instance,
                                                       a.row_key, a.member_key), batch_rows)

    def count_answers(self, f: ExportFilter) -> int:
        """How many answer rows ``answers`` yields."""
        with self._db.reader() as s:
            return int(s.connection().execute(select(func.count()).select_from(self._answers(f).subquery()))
                       .scalar_one())

    def requests(self, f: ExportFilter, columns: Sequence[str], *, batch_rows: int) -> Iterator[Batch]:
        """Request rows ``(id, *columns, metadata)`` in creation order."""
        r = REQUESTS.c
        stmt = select(r.id, *[r[c] for c in columns], r.metadata)
        if f.form_id is not None:
            stmt = stmt.where(r.form_id == f.form_id)
        if f.status is not None:
            stmt = stmt.where(r.status == f.status)
        if f.since_ms is not None:
            stmt = stmt.where(r.created_at >= f.since_ms)
        return self._batches(stmt.order_by(r.created_at, r.id), batch_rows)

    def _answers(self, f: ExportFilter) -> Select[Any]:
        a, s = ANSWERS.c, SUBMISSIONS.c
        stmt = (select(a.submission_id, s.form_id, a.field_key, a.instance, a.row_key, a.member_key, a.value_json,
                       a.display_text).join_from(ANSWERS, SUBMISSIONS, s.id == a.submission_id))
        if f.form_id is not None:
            stmt = stmt.where(s.form_id == f.form_id)
        if f.since_ms is not None:
            stmt = stmt.where(s.submitted_at >= f.since_ms)
        if f.fields is not None:
            stmt = stmt.where(a.field_key.in_(f.fields))
        return stmt

    def _batches(self, stmt: Select[Any], batch_rows: int) -> Iterator[Batch]:
        with self._db.reader() as s:
            conn = s.connection()
            compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
            params: Any = (tuple(compiled.params[k] for k in compiled.positiontup or ())
                           if compiled.positional else compiled.params)
            cursor = self._db.writer.stream_cursor(conn.connection.dbapi_connection, f"formsync_export_{id(stmt):x}")
            try:
                cursor.execute(str(compiled), params)
                while rows := cursor.fetchmany(batch_rows):
                    yield rows
            finally:
                cursor.close()
