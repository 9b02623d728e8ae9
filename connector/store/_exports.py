"""What exports read: submissions, long-form answers and requests, in batches of plain
DB-API row tuples streamed from one read-only transaction (a server-side cursor where
the database has one). Long-form answers are not stored: they are derived from each
submission's answers and display (``answer_tuples``) as the batches are read.

The statements are compiled by SQLAlchemy and run on the session's own DB-API
connection: at a million rows, SQLAlchemy's ``Row`` objects and its row-by-row buffer of
a streamed result cost more than the read itself. So a JSON column may come back as its
text (see ``json_value``); the parameters are plain numbers and text, which need no
binding conversion."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import BindParameter, Select, Text, and_, bindparam, cast, exists, func, or_, select
from sqlalchemy.engine import Connection

from ._cursors import ALL_FORMS, CURSORS_OF, CursorMark, ExportCursors, cursor_mark
from ._database import Database, in_lists
from ._mapping import answer_count, answer_tuples
from ._sqlite import READ_OPTION
from ._tables import ARCHIVED, DELETIONS, EXPORT_CURSORS, REQUESTS, SUBMISSIONS

Batch = Sequence[tuple[Any, ...]]
REMOVALS = "deletions"  # an incremental export's cursor of the deletion log, beside its tables'
REMOVED_KINDS = ("submission", "request")  # the removals an incremental export hands on


@dataclass(frozen=True)
class ExportFilter:
    """Which rows an export reads: of one form, submitted (requests: created) at or
    after ``since_ms``, placed after ``after`` in the store's arrival order, answers of
    the ``fields`` only, requests of one ``status``; the submissions the service no
    longer has (``gone_at``) only with ``include_gone``."""

    form_id: str | None = None
    since_ms: int | None = None
    fields: tuple[str, ...] | None = None
    status: str | None = None
    after: int | None = None
    include_gone: bool = False


def json_value(value: Any) -> Any:
    """A JSON column's value from a batch row: SQLite gives the text, drivers that parse
    JSON give the object."""
    return json.loads(value) if isinstance(value, str | bytes) else value


class ExportReads:
    """The export reads repository (``store.exports``)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._cursors = ExportCursors(db)
        self._pinned = threading.local()  # the connection of this thread's snapshot, while one is open

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Until the block ends, every read of this repository in this thread comes from
        one read transaction, begun on entering: it sees every row committed before
        then and none committed after, whatever is written meanwhile (a snapshot:
        REPEATABLE READ on PostgreSQL and MySQL/MariaDB, one read transaction on SQLite).
        An export made inside one is consistent across its reads and tables."""
        if getattr(self._pinned, "conn", None) is not None:  # already inside one
            yield
            return
        options: dict[str, Any] = {READ_OPTION: True}  # no write lock on SQLite
        if self._db.engine.dialect.name != "sqlite":
            options["isolation_level"] = "REPEATABLE READ"
        # A connection, not an ORM session: an incremental export of a few rows pays for
        # what its snapshot sets up. Closing it ends the read transaction.
        with self._db.engine.execution_options(**options).connect() as conn:
            # The snapshot is taken at the transaction's first read of a table, here.
            conn.execute(_FIRST_READ).all()
            self._pinned.conn = conn
            try:
                yield
            finally:
                self._pinned.conn = None

    def wide_rows(self, f: ExportFilter, *, display: bool, batch_rows: int) -> Iterator[Batch]:
        """Submission rows ``(id, form_id, request_id, external_id, submitted_at,
        updated_at, respondent_email, language, is_completed, edit_count, stored_at,
        answers[, display])`` in submission order, the request's external id joined, each
        document as its stored JSON text (NULL as None): the submission's own columns of
        ``schema.OWN`` in its order, then the documents its field columns come from; with
        ``include_gone``, ``gone_at`` last."""
        t, r = SUBMISSIONS.c, REQUESTS.c
        columns = select(t.id, t.form_id, t.request_id, r.external_id, t.submitted_at, t.updated_at,
                         t.respondent_email, t.language, t.is_completed, t.edit_count, t.stored_at,
                         *self._documents(display), *([t.gone_at] if f.include_gone else []))
        stmt = _submissions_of(columns.select_from(SUBMISSIONS.outerjoin(REQUESTS, r.id == t.request_id)), f)
        return self._batches(stmt.order_by(t.submitted_at, t.id), batch_rows)

    def _documents(self, display: bool = True) -> list[Any]:
        """The answers (and display) columns, read as their stored text."""
        t = SUBMISSIONS.c
        documents: list[Any] = [t.answers, t.display] if display else [t.answers]
        if self._db.engine.dialect.name == "postgresql":
            # psycopg decodes a json column; its text is the stored text (json, not jsonb)
            documents = [cast(d, Text) for d in documents]
        return documents

    def answers(self, f: ExportFilter, *, batch_rows: int) -> Iterator[Batch]:
        """The long table's rows ``(submission_id, form_id, field_key, instance, row_key,
        member_key, value, display_text)`` (``long_rows``) in submission order, each
        submission's in key order. Submissions make about 16 rows each: they are read
        ``batch_rows // 16`` at a time, so a batch stays near ``batch_rows`` rows."""
        wanted = None if f.fields is None else frozenset(f.fields)
        for part in self._batches(self._answer_sources(f), max(1, batch_rows // 16)):
            if rows := long_rows(part, wanted):
                yield rows

    def answer_documents(self, f: ExportFilter, *, batch_rows: int) -> Iterator[Batch]:
        """The submission rows ``answers`` derives its rows from, ``batch_rows`` at a time:
        ``(id, form_id, answers, display)`` in submission order, each document as its
        stored JSON text (NULL as None); with ``include_gone``, ``gone_at`` after them."""
        stmt = self._answer_sources(f, as_text=True)
        return self._batches(stmt.add_columns(SUBMISSIONS.c.gone_at) if f.include_gone else stmt, batch_rows)

    def count_answers(self, f: ExportFilter) -> int:
        """How many answer rows ``answers`` yields: counted from the answers alone (the
        display is not read, no row is made)."""
        wanted = None if f.fields is None else frozenset(f.fields)
        t = SUBMISSIONS.c
        stmt = _submissions_of(select(t.answers), f)
        return sum(answer_count(json_value(r[0]), wanted) for part in self._batches(stmt, 5000) for r in part)

    def count_submissions(self, f: ExportFilter) -> int:
        """How many submission rows ``wide_rows`` yields."""
        return int(self._scalar(_submissions_of(select(func.count()).select_from(SUBMISSIONS), f)))

    def count_requests(self, f: ExportFilter) -> int:
        """How many request rows ``requests`` yields."""
        return int(self._scalar(_requests_of(select(func.count()).select_from(REQUESTS), f)))

    def form_name(self, form_id: str) -> str | None:
        """The name of ``form_id`` its newest stored submission carries; None when none does."""
        t = SUBMISSIONS.c
        stmt = (select(t.form_name).where(t.form_id == form_id, t.form_name.is_not(None))
                .order_by(t.arrival.desc()).limit(1))
        with self._db.reader() as s:
            return s.execute(stmt).scalar_one_or_none()

    def last_arrival(self, f: ExportFilter, table: str) -> int | None:
        """The last arrival place among the rows ``f`` selects of ``table`` (``wide`` and
        ``long`` read submissions; ``requests``); None when there is none. Inside a
        ``snapshot``, read in it: the place of the last row the snapshot's reads give."""
        value = self._scalar(_last_place(f, table))
        return None if value is None else int(value)

    def since_cursor(self, name: str, table: str, f: ExportFilter) -> tuple[CursorMark | None, int | None]:
        """The cursor of ``name`` for ``table`` and ``f``'s form (``store.export_cursors.get``)
        and the ``last_arrival`` of the rows ``f`` selects placed after it, read in this
        thread's snapshot while one is open; with a cursor, in one statement (an
        incremental export of a few rows pays for each)."""
        shape, values = _bound(f)
        row = self._first(_since_statement(table, shape),
                          {**values, "c_name": name, "c_table": table, "c_form": f.form_id or ALL_FORMS})
        if row is None:
            return None, self.last_arrival(f, table)
        return cursor_mark(row), None if row[-1] is None else int(row[-1])

    def last_removal(self, after: int, form_id: str | None) -> int | None:
        """The last place of the removals logged past ``after`` (``removals``' rows, and
        those of rows since back in the store) of ``form_id`` (None: every form); None
        when there is none. One indexed max, read in this thread's snapshot: an
        incremental export of a few rows pays for it on every run."""
        last = self._scalar(_last_removal_statement(form_id is not None), {"after": after, "form_id": form_id})
        return None if last is None else int(last)

    def cursors(self, name: str) -> list[CursorMark]:
        """Every cursor of ``name`` (``store.export_cursors.list``), read in this thread's
        snapshot while one is open."""
        pinned: Connection | None = getattr(self._pinned, "conn", None)
        if pinned is not None:
            return [cursor_mark(r) for r in pinned.execute(CURSORS_OF, {"name": name})]
        return self._cursors.list(name)

    def removals(self, after: int, form_id: str | None, *, batch_rows: int) -> Iterator[Batch]:
        """The submissions and requests removed from the store (purged, reconciled, erased:
        the deletion log) placed after ``after``, of ``form_id`` (None: every form), as
        ``(id, kind, form_id, removed_at)`` in the order removed; a row the store holds
        again (a reconciled submission whose form was restored) is left out."""
        d, t, r = DELETIONS.c, SUBMISSIONS.c, REQUESTS.c
        back = or_(and_(d.kind == "submission", exists().where(t.id == d.item_id, t.gone_at.is_(None))),
                   and_(d.kind == "request", exists().where(r.id == d.item_id)))
        stmt = _removed_of(select(d.item_id, d.kind, d.form_id, d.deleted_at), after, form_id).where(~back)
        return self._batches(stmt.order_by(d.arrival, d.id), batch_rows)

    def names_past(self, submission_ids: Sequence[str], *, files_only: bool = True) -> list[str]:
        """The incremental export names (``export --since-last``) whose cursor of a table
        of submissions (``wide``, ``long``) is past the arrival place of one of
        ``submission_ids``: the names that had already written one of them to a file
        (the erase receipt lists them). ``files_only``: not the loads' cursors (which
        have no format). Sorted; empty when none is."""
        c, t = EXPORT_CURSORS.c, SUBMISSIONS.c
        found: set[str] = set()
        with self._db.reader() as s:
            for some in in_lists(sorted(set(submission_ids))):
                wrote = exists().where(t.id.in_(list(some)), t.arrival <= c.arrival,
                                       or_(c.form_id == "", c.form_id == t.form_id))
                stmt = select(c.name).distinct().where(c.table_name.in_(("wide", "long")), wrote)
                if files_only:
                    stmt = stmt.where(c.format.is_not(None))
                found.update(s.connection().execute(stmt).scalars())
        return sorted(found)

    def _scalar(self, stmt: Select[Any], params: dict[str, Any] | None = None) -> Any:
        """``stmt``'s one value, read in this thread's snapshot while one is open."""
        row = self._first(stmt, params)
        return None if row is None else row[0]

    def _first(self, stmt: Select[Any], params: dict[str, Any] | None = None) -> Any:
        """``stmt``'s first row (None when there is none) with its bound ``params``, read in
        this thread's snapshot while one is open. On a connection, not the ORM: an
        incremental export of a few rows makes these reads, and the ORM's own execution
        costs more than they do."""
        pinned: Connection | None = getattr(self._pinned, "conn", None)
        if pinned is not None:
            return pinned.execute(stmt, params).first()
        with self._db.reader() as s:
            return s.connection().execute(stmt, params).first()

    # The archived-files reads run beside a snapshot, on a connection of their own: they
    # come while a streamed read holds the snapshot's (MySQL's cannot run two at once).

    def any_archived(self, form_id: str | None) -> bool:
        """Whether ``formsync files`` archived any file of ``form_id`` (None: of any form)."""
        a = ARCHIVED.c
        some = select(a.idx) if form_id is None else select(a.idx).where(a.form_id == form_id)
        with self._db.reader() as s:
            return bool(s.connection().execute(select(some.exists())).scalar())

    def archived(self, ids: Sequence[str], fields: Sequence[str]) -> dict[tuple[str, str, int, str, int], tuple[str, str]]:
        """Where the files of ``fields`` (top-level file fields, and groups with file
        members) of submissions ``ids`` are archived: ``(submission, field, instance,
        member, index) -> (url, location)``, keyed as ``formsync_archived_files`` is."""
        a = ARCHIVED.c
        out: dict[tuple[str, str, int, str, int], tuple[str, str]] = {}
        with self._db.reader() as s:
            for some in in_lists(ids):
                stmt = select(a.submission_id, a.field_key, a.instance, a.member, a.idx, a.url, a.location).where(
                    a.submission_id.in_(list(some)), a.field_key.in_(list(fields)))
                out.update({(sid, key, inst, member, idx): (url, where)
                            for sid, key, inst, member, idx, url, where in s.connection().execute(stmt)})
        return out

    def requests(self, f: ExportFilter, columns: Sequence[str], *, batch_rows: int) -> Iterator[Batch]:
        """Request rows ``(id, *columns, metadata)`` in creation order."""
        r = REQUESTS.c
        stmt = _requests_of(select(r.id, *[r[c] for c in columns], r.metadata), f)
        return self._batches(stmt.order_by(r.created_at, r.id), batch_rows)

    def _answer_sources(self, f: ExportFilter, *, as_text: bool = False) -> Select[Any]:
        t = SUBMISSIONS.c
        documents: list[Any] = self._documents() if as_text else [t.answers, t.display]
        return _submissions_of(select(t.id, t.form_id, *documents), f).order_by(t.submitted_at, t.id)

    def _batches(self, stmt: Select[Any], batch_rows: int) -> Iterator[Batch]:
        pinned: Connection | None = getattr(self._pinned, "conn", None)
        if pinned is not None:
            yield from self._read(pinned, stmt, batch_rows)
            return
        with self._db.reader() as s:
            yield from self._read(s.connection(), stmt, batch_rows)

    def _read(self, conn: Connection, stmt: Select[Any], batch_rows: int) -> Iterator[Batch]:
        """``stmt``'s rows in batches, read in the connection's transaction."""
        compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
        params: Any = (tuple(compiled.params[k] for k in compiled.positiontup or ())
                       if compiled.positional else compiled.params)
        cursor = self._db.writer.stream_cursor(conn.connection.dbapi_connection, f"formsync_export_{id(stmt):x}")
        try:
            cursor.execute(str(compiled), params)
            while rows := cursor.fetchmany(batch_rows):
                yield rows
                del rows  # the reader has it: memory holds one batch, not two, while the next is read
        finally:
            cursor.close()


# The statements an incremental export runs on every run, built once, their values bound
# at each run: building a statement and finding its compiled form cost more than the
# indexed reads themselves, which a run of a few rows pays for.
_FIRST_READ = select(SUBMISSIONS.c.id).limit(1)


def _bound(f: ExportFilter) -> tuple[ExportFilter, dict[str, Any]]:
    """``f``'s shape (which of the filters its statements use are set, their values
    replaced by stand-ins: the key of its statement) and those values, by parameter name."""
    values = {k: v for k, v in (("form_id", f.form_id), ("since_ms", f.since_ms), ("status", f.status),
                                ("after", f.after)) if v is not None}
    shape = ExportFilter(form_id=None if f.form_id is None else "", since_ms=None if f.since_ms is None else 0,
                         status=None if f.status is None else "", after=None if f.after is None else 0,
                         include_gone=f.include_gone)
    return shape, values


def _param(name: str, value: object) -> Any:
    """The bind parameter ``name`` where a shape has a value, else None."""
    return None if value is None else bindparam(name)


@lru_cache(maxsize=64)
def _since_statement(table: str, shape: ExportFilter) -> Select[Any]:
    """``ExportReads.since_cursor``'s statement for a filter of ``shape`` (``_bound``): the
    cursor row (``c_name``, ``c_table``, ``c_form``) and the last place past it."""
    f = ExportFilter(form_id=_param("form_id", shape.form_id), since_ms=_param("since_ms", shape.since_ms),
                     status=_param("status", shape.status), after=_param("after", shape.after),
                     include_gone=shape.include_gone)
    last = _last_place(f, table).where(_arrival(table) > EXPORT_CURSORS.c.arrival).scalar_subquery()
    c = EXPORT_CURSORS.c
    return (select(c.name, c.table_name, c.form_id, c.arrival, c.row_count, c.run, c.format, last)
            .where(c.name == bindparam("c_name"), c.table_name == bindparam("c_table"),
                   c.form_id == bindparam("c_form")))


@lru_cache(maxsize=4)
def _last_removal_statement(of_form: bool) -> Select[Any]:
    """``ExportReads.last_removal``'s statement: the removals past ``after`` (of ``form_id``)."""
    return _removed_of(select(func.max(DELETIONS.c.arrival)), bindparam("after"),
                       bindparam("form_id") if of_form else None)


def _arrival(table: str) -> Any:
    """The arrival place column of an export's ``table`` (``wide`` and ``long`` read submissions)."""
    return REQUESTS.c.arrival if table == "requests" else SUBMISSIONS.c.arrival


def _last_place(f: ExportFilter, table: str) -> Select[Any]:
    """The last arrival place among the rows ``f`` selects of ``table``."""
    of = _requests_of if table == "requests" else _submissions_of
    return of(select(func.max(_arrival(table))), f)


def _submissions_of(stmt: Select[Any], f: ExportFilter) -> Select[Any]:
    """``stmt`` narrowed to the submissions ``f`` selects (its form, submitted since, placed
    after, still on the service unless ``include_gone``)."""
    t = SUBMISSIONS.c
    if not f.include_gone:
        stmt = stmt.where(t.gone_at.is_(None))
    if f.form_id is not None:
        stmt = stmt.where(t.form_id == f.form_id)
    if f.after is not None:
        stmt = stmt.where(t.arrival > f.after)
    return stmt if f.since_ms is None else stmt.where(t.submitted_at >= f.since_ms)


def _removed_of(stmt: Select[Any], after: int | BindParameter[int], form_id: str | BindParameter[str] | None,
                ) -> Select[Any]:
    """``stmt`` narrowed to the logged removals an incremental export hands on: of
    submissions and requests, placed after ``after``, of ``form_id`` when given."""
    d = DELETIONS.c
    stmt = stmt.where(d.arrival > after, d.kind.in_(REMOVED_KINDS))
    return stmt if form_id is None else stmt.where(d.form_id == form_id)


def _requests_of(stmt: Select[Any], f: ExportFilter) -> Select[Any]:
    """``stmt`` narrowed to the requests ``f`` selects (its form, status, created since, placed after)."""
    r = REQUESTS.c
    if f.form_id is not None:
        stmt = stmt.where(r.form_id == f.form_id)
    if f.after is not None:
        stmt = stmt.where(r.arrival > f.after)
    if f.status is not None:
        stmt = stmt.where(r.status == f.status)
    return stmt if f.since_ms is None else stmt.where(r.created_at >= f.since_ms)


def _long_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return row[1:5]  # field_key, instance, row_key, member_key


def long_rows(part: Batch, wanted: frozenset[str] | None) -> list[tuple[Any, ...]]:
    """The long table's rows (``answers``'s shape) of submission rows ``(id, form_id,
    answers, display)``, each submission's in key order; only ``wanted`` fields when
    given. A row's value is plain text (a text answer as it is, anything else as its
    JSON text); no instance, row key or member key is None."""
    out: list[tuple[Any, ...]] = []
    for sid, form, answers, display in part:
        rows = answer_tuples(sid, json_value(answers), json_value(display))
        if wanted is not None:
            rows = [r for r in rows if r[1] in wanted]
        rows.sort(key=_long_key)
        out += [(sid, form, key, None if instance < 0 else instance, row_key or None, member_key or None,
                 json.loads(value) if value.startswith('"') else value, shown)
                for _, key, instance, row_key, member_key, value, shown in rows]
    return out
