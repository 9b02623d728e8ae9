"""The MySQL / MariaDB writer (PyMySQL): id lists travel as one sequence parameter
(expanded by the driver), new rows are the ones whose id a read finds missing (inserted
together by one multi-row INSERT), and the rows a merge reads are locked in id order. A
deadlock, a lock wait timeout, or a duplicate id (another transaction inserted the same
id since the read) runs the transaction again; concurrent migrations are serialised by a
named lock (``GET_LOCK``), and so is the scheduler's leader (``NamedLock``).

MySQL needs a length for every ``VARCHAR``: the schema's unsized strings (``sa.String()``)
are created as ``VARCHAR(191)`` in a primary key (four of them fit InnoDB's 3072-byte key
in utf8mb4), ``TEXT`` for URLs, and ``VARCHAR(255)`` otherwise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pymysql.cursors
from sqlalchemy import LargeBinary, String, Table, event, text
from sqlalchemy.dialects import mysql as mysql_dialect
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.ext.compiler import compiles
from sqlmodel import create_engine

from ._mapping import SyncMark
from ._network import CONNECT_TIMEOUT_S, bound_socket
from ._postgresql import AdvisoryLock
from ._writer import SQLWriter

MIGRATION_LOCK = "formsync-migrate"  # the named lock of Store.migrate
MIGRATION_LOCK_SECONDS = 300
_RETRY_CODES = (1213, 1205, 1062)  # deadlock found, lock wait timeout exceeded, duplicate key
_BLOB_BYTES = {"TINYBLOB": 2**8 - 1, "BLOB": 2**16 - 1, "MEDIUMBLOB": 2**24 - 1, "LONGBLOB": 2**32 - 1}
_REFUSAL_CODES = (4025, 3819)  # CHECK constraint failed (MariaDB, MySQL): PyMySQL raises OperationalError


@compiles(String, "mysql")
def _unsized_string(type_: String, compiler: Any, **kw: Any) -> str:
    if type_.length is not None:
        return str(compiler.visit_string(type_, **kw))
    column = kw.get("type_expression")
    name = str(getattr(column, "name", ""))
    if getattr(column, "primary_key", False):
        return "VARCHAR(191)"
    if name == "url" or name.endswith("_url"):
        return "TEXT"
    return "VARCHAR(255)"


class MySQLWriter(SQLWriter):
    """Writes on MySQL and MariaDB."""

    placeholder = "%s"
    quote_char = "`"

    @classmethod
    def create_engine(cls, url: str, *, echo: bool, pre_ping: bool = True) -> Engine:
        """A MySQL engine in utf8mb4 and UTC that checks a pooled connection before use (``pre_ping``);
        transactions read committed (a merge locks the rows it reads, like PostgreSQL's). Its
        connections have the network bounds of ``network`` (a connect timeout the URL does not set)."""
        connect_args: dict[str, Any] = {"charset": "utf8mb4", "init_command": "SET time_zone = '+00:00'"}
        if "connect_timeout" not in make_url(url).query:
            connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
        engine = create_engine(url, echo=echo, pool_pre_ping=pre_ping, isolation_level="READ COMMITTED",
                               connect_args=connect_args)
        event.listen(engine, "connect", _bound_connection)
        return engine

    @classmethod
    def lock_migrations(cls, conn: Connection) -> None:
        """Concurrent first starts would race to create the tables: one waits for the other."""
        got = conn.execute(text("SELECT GET_LOCK(:n, :t)"), {"n": MIGRATION_LOCK, "t": MIGRATION_LOCK_SECONDS})
        if got.scalar() != 1:
            raise TimeoutError(f"another process held the migration lock for {MIGRATION_LOCK_SECONDS} s")

    @classmethod
    def unlock_migrations(cls, conn: Connection) -> None:
        """A named lock belongs to the session, not the transaction: give it back."""
        conn.execute(text("SELECT RELEASE_LOCK(:n)"), {"n": MIGRATION_LOCK})

    @classmethod
    def retryable(cls, error: BaseException) -> bool:
        """A deadlock or lock wait timeout: the transaction may run again."""
        args: tuple[Any, ...] = getattr(getattr(error, "orig", None), "args", ())
        return bool(args) and args[0] in _RETRY_CODES

    @classmethod
    def session_lock(cls, engine: Engine, name: str) -> NamedLock:
        """The scheduler's leader lock: a named lock (``GET_LOCK``), and so is the scheduler's leader (``NamedLock``)."""
        return NamedLock(engine, name)

    @classmethod
    def stream_cursor(cls, dbapi_conn: Any, name: str) -> Any:
        """An unbuffered cursor: a long read arrives row by row, not all at once."""
        return dbapi_conn.cursor(pymysql.cursors.SSCursor)

    def upsert(self, table: Table) -> Any:
        return mysql_dialect.insert(table)

    @classmethod
    def refused(cls, error: BaseException) -> bool:
        """A CHECK constraint refused a row (PyMySQL files it as an OperationalError)."""
        return bool(error.args) and error.args[0] in _REFUSAL_CODES

    def ids_param(self, ids: Sequence[str]) -> Any:
        return tuple(ids) or ("",)  # the driver writes a sequence as (a, b, …); () is not SQL

    def in_ids(self, col: str) -> str:
        return f"{col} IN %s"

    def lock_clause(self) -> str:
        return " ORDER BY id FOR UPDATE"

    def insert_new(self, table: str, rows: Sequence[Mapping[str, Any]]) -> set[str]:
        """Insert the rows whose id is not stored yet; the ids inserted. MySQL has no
        ``ON CONFLICT DO NOTHING`` that reports which rows it skipped (``INSERT IGNORE``
        would also silence a refused row), so the stored ids are read first: a row
        another transaction inserts meanwhile makes this insert fail with a duplicate
        key, and the transaction runs again (see ``retryable``)."""
        if not rows:
            return set()
        self.cur.execute(f"SELECT id FROM {table} WHERE id IN %s", (self.ids_param([r["id"] for r in rows]),))
        stored = {r[0] for r in self.cur.fetchall()}
        return super().insert_new(table, [r for r in rows if r["id"] not in stored])

    def insert_statement(self, table: str, cols: Sequence[str]) -> str:
        return f"INSERT INTO {table} ({', '.join(self.quote(c) for c in cols)}) VALUES ({self.marks(len(cols))})"

    def run_inserts(self, sql: str, rows: Sequence[Mapping[str, Any]], params: list[tuple[Any, ...]]) -> set[str]:
        self.cur.executemany(sql, params)  # one multi-row INSERT; any refusal fails the transaction
        return {r["id"] for r in rows}

    def set_cursor(self, form_id: str, mark: SyncMark, stream: str, now: int) -> None:
        # MySQL's upsert has no WHERE: insert the row if absent, then move it forward only.
        self.cur.execute(
            "INSERT INTO formsync_sync_cursors (form_id, stream, last_created_at, last_id, updated_at) "
            "VALUES (%s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE form_id = form_id",
            (form_id, stream, mark.created_at, mark.submission_id, now))
        self.cur.execute(
            "UPDATE formsync_sync_cursors SET last_created_at = %s, last_id = %s, updated_at = %s "
            "WHERE form_id = %s AND stream = %s AND (last_created_at, last_id) < (%s, %s)",
            (mark.created_at, mark.submission_id, now, form_id, stream, mark.created_at, mark.submission_id))


def _bound_connection(dbapi_conn: Any, _record: Any) -> None:
    # PyMySQL keeps its socket as ``_sock`` (None for a named pipe or closed connection).
    sock = getattr(dbapi_conn, "_sock", None)
    if sock is not None:
        bound_socket(sock)


class NamedLock(AdvisoryLock):
    """A MySQL / MariaDB named lock (``GET_LOCK``, not waiting) on a connection of its
    own (a ``LeaderLock``): like PostgreSQL's advisory lock, the server frees it when the
    session ends."""

    take = "SELECT GET_LOCK(:k, 0)"
    give = "SELECT RELEASE_LOCK(:k)"

    def __init__(self, engine: Engine, name: str) -> None:
        super().__init__(engine, name)
        self.key = name


def compare_column_type(context: Any, inspected_column: Any, metadata_column: Any, inspected_type: Any,
                        metadata_type: Any) -> bool | None:
    """Alembic's type comparison for the store's schema: on MySQL, an unsized string
    stored with the size (or as the TEXT) MySQL needs, and a sized binary stored as the
    BLOB type that holds its size, are no difference; anything else is left to Alembic
    (None)."""
    if context.dialect.name != "mysql":
        return None
    declared = getattr(metadata_type, "impl", metadata_type)  # sqlmodel's AutoString decorates a String
    if isinstance(inspected_type, String) and isinstance(declared, String) and declared.length is None:
        return False
    holds = _BLOB_BYTES.get(type(inspected_type).__name__)
    if isinstance(declared, LargeBinary) and holds is not None:
        return holds < (declared.length or _BLOB_BYTES["BLOB"])
    return None
