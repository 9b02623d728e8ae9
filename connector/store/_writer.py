"""The protocol every database's writer follows, and the statement building they share.

A writer does the store's writes inside one SQLAlchemy transaction, on its DB-API cursor,
with statements of a fixed text per table and column set: no SQL is compiled per call,
the drivers reuse their prepared statements, and rows travel as plain tuples (these
writes are the receiver's hot path). One module per database holds its writer, named
after the technology (``sqlite``, ``postgresql``); a writer class also carries what
differs between databases outside one transaction (how the engine is made, how
migrations are serialised, which errors mean "run the transaction again", the leader
lock, how long reads stream, whether the database exists yet).

A new database is one module: a ``SQLWriter`` subclass filling in the parts marked
below (and overriding any shared statement its SQL writes otherwise), registered by its
SQLAlchemy backend name in ``facade.WRITERS``."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, ClassVar, Protocol

import orjson
from sqlalchemy import JSON, Table, tuple_
from sqlalchemy.engine import Connection, Engine

from ._leader import LeaderLock
from ._mapping import SyncMark
from ._tables import ARRIVAL, ARRIVALS, CURSORS, EVENTS, REQUESTS, SUBMISSIONS


class Writer(Protocol):
    """The writes of one transaction (on ``conn``, so they commit with it)."""

    conn: Connection

    @classmethod
    def create_engine(cls, url: str, *, echo: bool, pre_ping: bool = True) -> Engine:
        """An engine for ``url``, configured for this database; ``pre_ping`` checks a
        pooled connection of a server database before each use."""
        ...

    @classmethod
    def lock_migrations(cls, conn: Connection) -> None:
        """Serialise concurrent ``migrate()`` runs for the rest of ``conn``'s transaction."""
        ...

    @classmethod
    def unlock_migrations(cls, conn: Connection) -> None:
        """Release what ``lock_migrations`` took, where it outlives the transaction."""
        ...

    @classmethod
    def retryable(cls, error: BaseException) -> bool:
        """Whether ``error`` (raised by a write) means the whole transaction may run again."""
        ...

    @classmethod
    def refused(cls, error: BaseException) -> bool:
        """Whether the driver's ``error`` is the database refusing the data (a constraint)
        though the driver does not raise it as an integrity error."""
        ...

    @classmethod
    def session_lock(cls, engine: Engine, name: str) -> LeaderLock | None:
        """A leader lock held by a session of its own, where the database has one; else None."""
        ...

    @classmethod
    def stream_cursor(cls, dbapi_conn: Any, name: str) -> Any:
        """A DB-API cursor for a long read, named ``name`` where that matters."""
        ...

    @classmethod
    def missing(cls, url: str) -> bool:
        """Whether the database ``url`` names does not exist yet (and would be created)."""
        ...

    @classmethod
    def open_problem(cls, url: str) -> str | None:
        """Why the database ``url`` names cannot be opened or created, when that can be
        known without connecting (a file in a missing directory); None otherwise."""
        ...

    @classmethod
    def write_problem(cls, url: str) -> str | None:
        """Why no write can succeed now though the database answers, in a few words
        (``not writable (disk full)``, ``locked by another process``); None when writes
        may go ahead. Quick (a health check): a second or so at most."""
        ...

    def insert_new(self, table: str, rows: Sequence[Mapping[str, Any]]) -> set[str]:
        """Insert the rows (distinct ids) whose id is not stored yet; the ids inserted."""
        ...

    def ranks(self, table: str, cols: Sequence[str], ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """``cols`` of the stored rows among ``ids`` (id -> column -> value), locked for
        the transaction where the database locks rows."""
        ...

    def update(self, table: str, keys: Sequence[str], coalesce: frozenset[str],
               rows: Sequence[Mapping[str, Any]]) -> None:
        """Set ``keys`` (but ``id``) of each row; a ``coalesce`` column only while NULL."""
        ...

    def set_cursor(self, form_id: str, mark: SyncMark, stream: str, now: int) -> None:
        """Move a sync cursor forward to ``mark``; a mark behind the stored one changes nothing."""
        ...

    def take_place(self) -> int:
        """The next place in the store's arrival order, taken in commit order (the
        counter stays locked until the commit): the transaction's last lock."""
        ...

    def stamp_arrival(self, ids: Mapping[str, Sequence[str]]) -> int | None:
        """Give the rows ``ids`` names (table -> ids) the next place in the store's arrival
        order; the place (None when there is no id). The transaction's last write."""
        ...

    def stamp_changed(self, ids: Mapping[str, Sequence[str]]) -> int | None:
        """Give the rows among ``ids`` (table -> ids) whose stored content differs from
        when they last took a place (``content_hash``) the next place in the arrival
        order, keeping their new hash; the place (None when no row changed). A row
        read again unchanged keeps its place. The transaction's last write."""
        ...

    def close(self) -> None:
        """Release the DB-API cursor."""
        ...


_JSON_COLUMNS = {t.name: frozenset(c.name for c in t.c if isinstance(c.type, JSON))
                 for t in (EVENTS, SUBMISSIONS, REQUESTS)}
# Python-side column defaults (SQLAlchemy applied them on insert): an insert that lacks
# one of these NOT NULL columns gets its default.
_DEFAULTS = {t.name: {c.name: getattr(c.default, "arg", None) for c in t.c
                      if c.default is not None and not callable(getattr(c.default, "arg", None))}
             for t in (EVENTS, SUBMISSIONS, REQUESTS)}
_SQL_CACHE: dict[tuple[Any, ...], str] = {}
# What a row's content leaves out: the envelope of the read or event that brought the
# version (poll, sync and events carry different ones: ``updatedAt``, ``editCount``) and
# the store's own bookkeeping. Every other column is the row's content.
_NOT_CONTENT = frozenset({"id", "updated_at", "edit_count", "source", "last_event_id", "observed_at", "stored_at",
                          "arrival", "content_hash", "gone_at", "last_reminded_at"})
CONTENT_COLUMNS = {t.name: tuple(c.name for c in t.c if c.name not in _NOT_CONTENT) for t in (SUBMISSIONS, REQUESTS)}


# Types orjson would write in its own way (a datetime as ISO text, a dataclass as an
# object, a subclass of str/int/dict/list as its base) go to json.dumps instead, as before.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


def json_text(value: Any) -> str:
    """``value`` as JSON text: orjson's compact UTF-8 where it means the same as
    ``json.dumps(value)``, and ``json.dumps(value)`` itself wherever orjson would write
    something else or refuse: a non-finite float (orjson writes null, json.dumps NaN),
    an integer beyond 64 bits, a key that is not a string, a lone surrogate, a type
    orjson has its own way with. Either text parses back to the same value."""
    try:
        out = orjson.dumps(value, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value)
    if b"null" in out and _non_finite(value):
        return json.dumps(value)
    return out.decode()


def _non_finite(value: Any) -> bool:
    """Whether a float NaN or infinity is anywhere in ``value`` (iterative: no input
    exhausts the stack)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is float:
            if not math.isfinite(item):
                return True
        elif type(item) is dict:
            stack.extend(item.values())
        elif type(item) is list or type(item) is tuple:
            stack.extend(item)
    return False


def content_hash(table: str, values: Sequence[Any]) -> str:
    """The hash of a stored row's ``CONTENT_COLUMNS`` of ``table`` (``values`` in that
    order, as the database's driver reads them back; a JSON column as text or as its
    object): equal for equal content on one database, whatever JSON key order or
    spacing the database keeps."""
    js = _JSON_COLUMNS[table]
    plain = [json.loads(v) if c in js and isinstance(v, str | bytes) else v
             for c, v in zip(CONTENT_COLUMNS[table], values, strict=True)]
    try:
        text = orjson.dumps(plain, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError:
        text = json.dumps(plain, sort_keys=True, default=str).encode()
    return hashlib.blake2b(text, digest_size=16).hexdigest()


def by_keys(rows: Sequence[Mapping[str, Any]]) -> Iterator[tuple[tuple[str, ...], list[Mapping[str, Any]]]]:
    """Rows grouped by their set of columns (one statement shape per set)."""
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(sorted(r)), []).append(r)
    yield from groups.items()


def quote(col: str, char: str = '"') -> str:
    """A quoted column name ("metadata" is one; quoting every column keeps statements uniform)."""
    return f"{char}{col}{char}"


class SQLWriter:
    """What the writers share: statement texts built once per writer class and shape,
    JSON serialised once per distinct object in the transaction (the request and
    submission rows of an event share their answers and display), and row parameters.
    A database's writer subclasses it and fills in the parts marked below."""

    placeholder: ClassVar[str] = "?"
    quote_char: ClassVar[str] = '"'  # MySQL quotes names with backticks

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        # Any: the writers call their driver's own cursor methods (psycopg's pipelined executemany, COPY).
        self.cur: Any = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        self._json: dict[int, tuple[Any, str]] = {}

    @classmethod
    def lock_migrations(cls, conn: Connection) -> None:
        """Nothing to do where the migration's own transaction already serialises them."""

    @classmethod
    def unlock_migrations(cls, conn: Connection) -> None:
        """Release what ``lock_migrations`` took, where it outlives the transaction."""

    @classmethod
    def refused(cls, error: BaseException) -> bool:
        """The driver's own error classes say it."""
        return False

    @classmethod
    def retryable(cls, error: BaseException) -> bool:
        """No error is retried unless the database's writer says so."""
        return False

    @classmethod
    def session_lock(cls, engine: Engine, name: str) -> LeaderLock | None:
        """No session lock unless the database's writer has one (then a lease is used)."""
        return None

    @classmethod
    def stream_cursor(cls, dbapi_conn: Any, name: str) -> Any:
        """A plain cursor, unless the database's writer streams otherwise."""
        return dbapi_conn.cursor()

    @classmethod
    def missing(cls, url: str) -> bool:
        """A server database is never taken as missing."""
        return False

    @classmethod
    def open_problem(cls, url: str) -> str | None:
        """A server database's problems show when connecting."""
        return None

    @classmethod
    def write_problem(cls, url: str) -> str | None:
        """A server database's disk is its server's: its refusals show as errors."""
        return None

    def close(self) -> None:
        """Release the DB-API cursor."""
        self.cur.close()

    # -- shared building blocks ---------------------------------------------------------

    def sql(self, key: tuple[Any, ...], build: Callable[[], str]) -> str:
        """The statement text for ``key`` in this writer's dialect, built once."""
        key = (type(self), *key)
        text = _SQL_CACHE.get(key)
        if text is None:
            text = _SQL_CACHE[key] = build()
        return text

    def json(self, value: Any) -> str | None:
        """``value`` as JSON text, serialised once per object; None is SQL NULL."""
        if value is None:  # none_as_null: SQL NULL, not the JSON text 'null'
            return None
        hit = self._json.get(id(value))
        if hit is None or hit[0] is not value:
            hit = self._json[id(value)] = (value, json_text(value))
        return hit[1]

    def params(self, table: str, cols: Sequence[str], row: Mapping[str, Any]) -> tuple[Any, ...]:
        """The parameters of ``row`` for ``cols``: JSON serialised, defaults filled in."""
        js, defaults = _JSON_COLUMNS[table], _DEFAULTS[table]
        # A JSON column is in ``cols`` only when the row carries it; a default column may not be.
        return tuple([self.json(row[c]) if c in js else row[c] if c in row else defaults[c] for c in cols])

    def quote(self, col: str) -> str:
        """``col`` quoted in this database's way."""
        return quote(col, self.quote_char)

    def marks(self, n: int) -> str:
        """``n`` placeholders, comma separated."""
        return ", ".join([self.placeholder] * n)

    # -- the parts a database fills in --------------------------------------------------

    def ids_param(self, ids: Sequence[str]) -> Any:
        """``ids`` as one parameter for ``in_ids``: one statement shape for any count."""
        raise NotImplementedError

    def in_ids(self, col: str) -> str:
        """A condition: ``col`` is among the ids of one ``ids_param`` parameter."""
        raise NotImplementedError

    def insert_statement(self, table: str, cols: Sequence[str]) -> str:
        """An insert of one row into ``table`` that skips a row whose id is stored."""
        return (f"INSERT INTO {table} ({', '.join(self.quote(c) for c in cols)}) "
                f"VALUES ({self.marks(len(cols))}) ON CONFLICT (id) DO NOTHING")

    def run_inserts(self, sql: str, rows: Sequence[Mapping[str, Any]], params: list[tuple[Any, ...]]) -> set[str]:
        """Run ``insert_statement`` once per row; the ids inserted."""
        raise NotImplementedError

    def upsert(self, table: Table) -> Any:
        """The dialect's ``INSERT … ON CONFLICT`` construct for ``table``."""
        raise NotImplementedError

    def lock_clause(self) -> str:
        """What ends a ``ranks`` read to lock the rows it reads ('' where nothing locks)."""
        return ""

    # -- the writes -----------------------------------------------------------------

    def insert_new(self, table: str, rows: Sequence[Mapping[str, Any]]) -> set[str]:
        """Insert the rows (distinct ids) whose id is not stored yet; the ids inserted."""
        inserted: set[str] = set()
        for keys, group in by_keys(rows):
            cols = tuple(sorted({*keys, *(c for c in _DEFAULTS[table] if c not in keys)}))
            sql = self.sql(("insert", table, cols), partial(self.insert_statement, table, cols))
            inserted |= self.run_inserts(sql, group, [self.params(table, cols, r) for r in group])
        return inserted

    def ranks(self, table: str, cols: Sequence[str], ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """``cols`` of the stored rows among ``ids``, locked where the database locks
        rows (in id order: one lock order for every writer)."""
        read = ("id", *cols)
        sql = self.sql(("ranks", table), lambda: (
            f"SELECT {', '.join(read)} FROM {table} WHERE {self.in_ids('id')}{self.lock_clause()}"))
        self.cur.execute(sql, (self.ids_param(ids),))
        return {r[0]: dict(zip(read, r, strict=True)) for r in self.cur.fetchall()}

    def update(self, table: str, keys: Sequence[str], coalesce: frozenset[str],
               rows: Sequence[Mapping[str, Any]]) -> None:
        """Set ``keys`` (but ``id``) of each row; a ``coalesce`` column only while NULL."""
        cols = tuple(k for k in keys if k != "id")
        if not cols:
            return
        p = self.placeholder

        def build() -> str:
            q = self.quote
            sets = ", ".join(f"{q(c)} = COALESCE({q(c)}, {p})" if c in coalesce else f"{q(c)} = {p}" for c in cols)
            return f"UPDATE {table} SET {sets} WHERE id = {p}"

        sql = self.sql(("update", table, cols, coalesce & set(cols)), build)
        self.cur.executemany(sql, [(*self.params(table, cols, r), r["id"]) for r in rows])

    def take_place(self) -> int:
        """The next place in the arrival order. The counter's row stays locked until the
        commit, so places are taken in commit order: call it last, when every other lock
        of the transaction is held (no lock is waited for while holding it, so it never
        deadlocks)."""
        p, q, counter = self.placeholder, self.quote, ARRIVALS.name
        self.cur.execute(self.sql(("arrival-take",), lambda: (
            f"UPDATE {counter} SET {q('last_place')} = {q('last_place')} + 1 WHERE name = {p}")), (ARRIVAL,))
        self.cur.execute(self.sql(("arrival-read",), lambda: (
            f"SELECT {q('last_place')} FROM {counter} WHERE name = {p}")), (ARRIVAL,))
        return int(self.cur.fetchone()[0])

    def stamp_arrival(self, ids: Mapping[str, Sequence[str]]) -> int | None:
        """Give the rows ``ids`` names the next place in the arrival order (``take_place``:
        the transaction's last write)."""
        todo = {t: sorted(set(v)) for t, v in ids.items() if v}
        if not todo:
            return None
        p, q = self.placeholder, self.quote
        place = self.take_place()
        for table, some in todo.items():
            sql = self.sql(("arrival-set", table), lambda t=table: (  # type: ignore[misc]
                f"UPDATE {t} SET {q('arrival')} = {p} WHERE {self.in_ids('id')}"))
            self.cur.execute(sql, (place, self.ids_param(some)))
        return place

    def stamp_changed(self, ids: Mapping[str, Sequence[str]]) -> int | None:
        """Give the rows among ``ids`` whose content hash changed the next place in the
        arrival order, with their new hash (``take_place``: the transaction's last write)."""
        p, q = self.placeholder, self.quote
        changed: dict[str, list[tuple[str, str]]] = {}
        for table, some in ids.items():
            if not some:
                continue
            cols = CONTENT_COLUMNS[table]
            sql = self.sql(("content-read", table), lambda t=table, c=cols: (  # type: ignore[misc]
                f"SELECT id, {q('content_hash')}, {', '.join(q(x) for x in c)} FROM {t} WHERE {self.in_ids('id')}"))
            self.cur.execute(sql, (self.ids_param(sorted(set(some))),))
            for row in self.cur.fetchall():
                digest = content_hash(table, row[2:])
                if digest != row[1]:
                    changed.setdefault(table, []).append((digest, row[0]))
        if not changed:
            return None
        place = self.take_place()
        for table, rows in changed.items():
            sql = self.sql(("content-set", table), lambda t=table: (  # type: ignore[misc]
                f"UPDATE {t} SET {q('content_hash')} = {p}, {q('arrival')} = {p} WHERE id = {p}"))
            self.cur.executemany(sql, [(digest, place, rid) for digest, rid in sorted(rows, key=lambda r: r[1])])
        return place

    def set_cursor(self, form_id: str, mark: SyncMark, stream: str, now: int) -> None:
        """Move a sync cursor forward to ``mark``; a mark behind the stored one changes nothing."""
        ins = self.upsert(CURSORS).values(form_id=form_id, stream=stream, last_created_at=mark.created_at,
                                   last_id=mark.submission_id, updated_at=now)
        self.conn.execute(ins.on_conflict_do_update(
            index_elements=["form_id", "stream"],
            set_={"last_created_at": ins.excluded.last_created_at, "last_id": ins.excluded.last_id,
                  "updated_at": ins.excluded.updated_at},
            where=tuple_(CURSORS.c.last_created_at, CURSORS.c.last_id)
            < tuple_(ins.excluded.last_created_at, ins.excluded.last_id),
        ))
