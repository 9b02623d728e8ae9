"""What exports read: submissions, long-form answers and requests, in batches of plain
DB-API row tuples streamed from one read-only transaction (a server-side cursor where
the database has one). Long-form answers are not stored: the database derives them from
each submission's answers and display (the writer's ``long_answers`` statement), and the
fields its SQL leaves aside (groups, files, unusual values) are derived here with
``answer_tuples``, the rule the statement follows.

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

from sqlalchemy import Select, select

from .database import Database
from .mapping import answer_tuples
from .tables import REQUESTS, SUBMISSIONS

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
        member_key, value_json, display_text)`` in submission order, each submission's
        in key order (``long_rows``' rows), about ``batch_rows`` at a time."""
        statement = self._long_statement(f)
        wanted = None if f.fields is None else frozenset(f.fields)
        if statement is None:  # no statement for this database: every row derived here
            # Submissions make about 16 rows each: a batch stays near ``batch_rows`` rows.
            for part in self._batches(self._answer_sources(f), max(1, batch_rows // 16)):
                if derived := long_rows(part, wanted):
                    yield derived
            return
        for part in self._run(*statement, batch_rows):
            if finished := finish_long(part, wanted):
                yield finished

    def count_answers(self, f: ExportFilter) -> int:
        """How many answer rows ``answers`` yields: the database counts the rows of its
        statement; only the fields it leaves aside are derived to be counted."""
        statement = self._long_statement(f)
        if statement is None:
            return sum(len(rows) for rows in self.answers(f, batch_rows=50_000))
        sql, params = statement
        wanted = None if f.fields is None else frozenset(f.fields)
        counted = (f"SELECT * FROM ({sql}) q WHERE instance IS NULL UNION ALL "
                   f"SELECT NULL, NULL, NULL, count(*), NULL, NULL, NULL, NULL FROM ({sql}) q WHERE instance IS NOT NULL")
        total = 0
        for part in self._run(counted, params, 50_000):
            total += sum(r[3] if r[0] is None else len(finish_long([r], wanted)) for r in part)
        return total

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

    def _answer_sources(self, f: ExportFilter) -> Select[Any]:
        t = SUBMISSIONS.c
        stmt = select(t.id, t.form_id, t.answers, t.display)
        if f.form_id is not None:
            stmt = stmt.where(t.form_id == f.form_id)
        if f.since_ms is not None:
            stmt = stmt.where(t.submitted_at >= f.since_ms)
        return stmt.order_by(t.submitted_at, t.id)

    def _long_statement(self, f: ExportFilter) -> tuple[str, dict[str, Any]] | None:
        writer = self._db.writer
        sql = writer.long_answers(form=f.form_id is not None, since=f.since_ms is not None, fields=f.fields is not None)
        if sql is None:
            return None
        params = {"form_id": f.form_id, "since_ms": f.since_ms,
                  "fields": None if f.fields is None else writer.fields_param(f.fields)}
        return sql, {k: v for k, v in params.items() if v is not None}

    def _batches(self, stmt: Select[Any], batch_rows: int) -> Iterator[Batch]:
        with self._db.reader() as s:
            conn = s.connection()
            compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
            params: Any = (tuple(compiled.params[k] for k in compiled.positiontup or ())
                           if compiled.positional else compiled.params)
            yield from self._stream(conn, str(compiled), params, batch_rows)

    def _run(self, sql: str, params: dict[str, Any], batch_rows: int) -> Iterator[Batch]:
        with self._db.reader() as s:
            yield from self._stream(s.connection(), sql, params, batch_rows)

    def _stream(self, conn: Any, sql: str, params: Any, batch_rows: int) -> Iterator[Batch]:
        cursor = self._db.writer.stream_cursor(conn.connection.dbapi_connection, f"formsync_export_{id(sql):x}")
        try:
            cursor.execute(sql, params)
            while rows := cursor.fetchmany(batch_rows):
                yield rows
        finally:
            cursor.close()


def _long_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return row[1:5]  # field_key, instance, row_key, member_key


def finish_long(part: Batch, wanted: frozenset[str] | None) -> Batch:
    """Rows of a ``long_answers`` statement with each field it left aside (``instance``
    NULL) replaced by its derived rows (of the ``wanted`` fields only, for a whole
    submission)."""
    if all(r[3] is not None for r in part):
        return part
    out: list[tuple[Any, ...]] = []
    for r in part:
        if r[3] is not None:
            out.append(r)
        elif r[2] is None:  # a whole submission
            out += long_rows([(r[0], r[1], r[6], r[7])], wanted)
        else:
            out += _field_rows(r)
    return out


def _field_rows(r: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    sid, form, key = r[0], r[1], r[2]
    value, shown = json.loads(r[6]), None if r[7] is None else json.loads(r[7])
    if r[4] == "*":  # the whole documents
        value, shown = value[key], (shown or {}).get(key)
    rows = answer_tuples(sid, {key: value}, {key: shown})
    rows.sort(key=_long_key)
    return [(sid, form, *t[1:]) for t in rows]


def long_rows(part: Batch, wanted: frozenset[str] | None) -> list[tuple[Any, ...]]:
    """The long-form answer rows (``answers``'s shape) of submission rows ``(id,
    form_id, answers, display)``, each submission's in key order; only ``wanted``
    fields when given."""
    out: list[tuple[Any, ...]] = []
    for sid, form, answers, display in part:
        rows = answer_tuples(sid, json_value(answers), json_value(display))
        if wanted is not None:
            rows = [r for r in rows if r[1] in wanted]
        rows.sort(key=_long_key)
        out += [(sid, form, *r[1:]) for r in rows]
    return out
