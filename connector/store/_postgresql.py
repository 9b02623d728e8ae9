"""The PostgreSQL writer (psycopg 3): id lists travel as one array parameter, the rows
of an insert as one array per column in one statement, and the rows a merge
reads are locked in id order. A deadlock or serialization failure runs the transaction
again; concurrent migrations are serialised by an advisory lock, and the scheduler's
leader holds a session advisory lock (``AdvisoryLock``). Long reads stream from a
server-side cursor."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Table, text
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.engine import Connection, Engine, make_url
from sqlmodel import create_engine

from .._process.repeats import RepeatedWarning
from ._network import libpq_params
from ._tables import EVENTS, REQUESTS, SUBMISSIONS
from ._writer import SQLWriter

log = logging.getLogger("formsync.scheduler")
MIGRATION_LOCK = 7410117  # the advisory lock key of Store.migrate
_RETRY_STATES = ("40P01", "40001")  # deadlock detected, serialization failure
_TABLES = {t.name: t for t in (EVENTS, SUBMISSIONS, REQUESTS)}  # those insert_new writes


class PostgreSQLWriter(SQLWriter):
    """Writes on PostgreSQL."""

    placeholder = "%s"

    @classmethod
    def create_engine(cls, url: str, *, echo: bool, pre_ping: bool = True) -> Engine:
        """A PostgreSQL engine that checks a pooled connection before use (``pre_ping``),
        with the network bounds of ``network`` (those the URL does not set)."""
        return create_engine(url, echo=echo, pool_pre_ping=pre_ping,
                             connect_args=libpq_params(make_url(url).query))

    @classmethod
    def lock_migrations(cls, conn: Connection) -> None:
        """Concurrent first starts would race to create the tables: one waits for the other."""
        conn.execute(text(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})"))

    @classmethod
    def retryable(cls, error: BaseException) -> bool:
        """A deadlock or serialization failure: the transaction may run again."""
        return getattr(getattr(error, "orig", None), "sqlstate", None) in _RETRY_STATES

    def upsert(self, table: Table) -> Any:
        return pg_dialect.insert(table)

    @classmethod
    def session_lock(cls, engine: Engine, name: str) -> AdvisoryLock:
        """The scheduler's leader lock: a session advisory lock."""
        return AdvisoryLock(engine, name)

    @classmethod
    def stream_cursor(cls, dbapi_conn: Any, name: str) -> Any:
        """A server-side cursor: a long read arrives in batches, not all at once."""
        return dbapi_conn.cursor(name=name)

    def ids_param(self, ids: Sequence[str]) -> Any:
        return list(ids)

    def in_ids(self, col: str) -> str:
        return f"{col} = ANY(%s)"

    def lock_clause(self) -> str:
        return " ORDER BY id FOR UPDATE"

    def insert_statement(self, table: str, cols: Sequence[str]) -> str:
        """An insert of a whole group: each column arrives as one array (binary), which
        the server unnests into rows; a row whose id is stored is skipped."""
        columns = _TABLES[table].c
        arrays = ", ".join(f"%b::{columns[c].type.compile(dialect=self.conn.dialect)}[]" for c in cols)
        return (f"INSERT INTO {table} ({', '.join(self.quote(c) for c in cols)}) SELECT * FROM unnest({arrays}) "
                "ON CONFLICT (id) DO NOTHING RETURNING id")

    def run_inserts(self, sql: str, rows: Sequence[Mapping[str, Any]], params: list[tuple[Any, ...]]) -> set[str]:
        # One statement and one round trip for the group, whatever its size: far less
        # work on both sides than a statement per row, even pipelined.
        self.cur.execute(sql, [list(column) for column in zip(*params, strict=True)], prepare=True)
        return {r[0] for r in self.cur.fetchall()}


def advisory_key(name: str) -> int:
    """A stable signed 64-bit advisory lock key derived from ``name``."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class AdvisoryLock:
    """A PostgreSQL session advisory lock on a connection of its own (a ``LeaderLock``);
    a subclass sets the statements of another database's session lock."""

    take = "SELECT pg_try_advisory_lock(:k)"  # 1 (true) when taken, without waiting
    give = "SELECT pg_advisory_unlock(:k)"

    def __init__(self, engine: Engine, name: str) -> None:
        self._engine = engine
        self.key: int | str = advisory_key(name)
        self.conn: Connection | None = None
        self._repeats = RepeatedWarning(log)

    def _drop(self) -> None:
        if self.conn is not None:
            try:
                self.conn.invalidate()  # never back to the pool: the session may hold the lock
                self.conn.close()
            except Exception:  # the connection is already broken; nothing more to do
                pass
            self.conn = None

    def try_acquire(self) -> bool:
        """Take the lock if free (or already ours); True when we hold it now."""
        try:
            if self.conn is None:
                self.conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            got = self.conn.execute(text(self.take), {"k": self.key}).scalar() == 1
        except Exception as e:  # the database is unreachable: not the leader, try again later
            self._repeats.warn("cannot reach the database for the scheduler lock: %s", e)
            self._drop()
            return False
        return got

    def still_held(self) -> bool:
        """Whether the session holding the lock is still alive."""
        if self.conn is None:
            return False
        try:
            # The lock lives as long as this session, and only release() unlocks it: a live
            # connection means we still hold it.
            self.conn.execute(text("SELECT 1"))
            return True
        except Exception as e:
            log.warning("lost the database connection holding the scheduler lock: %s", e)
            self._drop()
            return False

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        if self.conn is not None:
            try:
                self.conn.execute(text(self.give), {"k": self.key})
            except Exception:  # closing the session below releases it anyway
                pass
            self._drop()
