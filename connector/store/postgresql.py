"""The PostgreSQL writer (psycopg 3): id lists travel as one array parameter, inserts of
a group go in one pipelined round trip, and the rows a merge
reads are locked in id order. A deadlock or serialization failure runs the transaction
again; concurrent migrations are serialised by an advisory lock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.engine import Connection, Engine
from sqlmodel import create_engine

from .writer import SQLWriter

MIGRATION_LOCK = 7410117  # the advisory lock key of Store.migrate
_RETRY_STATES = ("40P01", "40001")  # deadlock detected, serialization failure


class PostgreSQLWriter(SQLWriter):
    """Writes on PostgreSQL."""

    placeholder = "%s"
    insert = staticmethod(pg_dialect.insert)

    @classmethod
    def create_engine(cls, url: str, *, echo: bool) -> Engine:
        """A PostgreSQL engine that checks a pooled connection before use."""
        return create_engine(url, echo=echo, pool_pre_ping=True)

    @classmethod
    def lock_migrations(cls, conn: Connection) -> None:
        """Concurrent first starts would race to create the tables: one waits for the other."""
        conn.execute(text(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})"))

    @classmethod
    def retryable(cls, error: BaseException) -> bool:
        """A deadlock or serialization failure: the transaction may run again."""
        return getattr(getattr(error, "orig", None), "sqlstate", None) in _RETRY_STATES

    def ids_param(self, ids: Sequence[str]) -> Any:
        return list(ids)

    def in_ids(self, col: str) -> str:
        return f"{col} = ANY(%s)"

    def lock_clause(self) -> str:
        return " ORDER BY id FOR UPDATE"

    def run_inserts(self, sql: str, rows: Sequence[Mapping[str, Any]], params: list[tuple[Any, ...]]) -> set[str]:
        # One round trip for the group (pipeline); one result set per row.
        inserted: set[str] = set()
        self.cur.executemany(sql + " RETURNING id", params, returning=True)
        while True:
            got = self.cur.fetchone()
            if got is not None:
                inserted.add(got[0])
            if not self.cur.nextset():
                break
        return inserted
