"""The SQLite writer, and how the store's SQLite engine is set up: WAL journal,
``synchronous=FULL``, a busy timeout, foreign keys on, and every write transaction
taking the write lock at its start (reads do not, so long exports never hold up the
receiver)."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Table, event
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection, Engine, make_url
from sqlmodel import create_engine

from ._writer import SQLWriter

SQLITE_BUSY_TIMEOUT_MS = 30_000
FREE_FLOOR_BYTES = 1 << 20  # less free space than this on the store's file system: "disk full"
_LOCK_PROBE_S = 1.0  # how long a health check waits for the write lock
READ_OPTION = "formsync_read"  # execution option of a read-only connection (see Store.reader)


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names (as given, not resolved); None for an in-memory database."""
    u = make_url(url)
    if u.database in (None, "", ":memory:") or u.query.get("mode") == "memory":
        return None
    return Path(u.database or "")


class SQLiteWriter(SQLWriter):
    """Writes on SQLite: id lists travel as one JSON parameter (``json_each``), and an
    insert reports itself by its row count."""

    placeholder = "?"

    @classmethod
    def create_engine(cls, url: str, *, echo: bool, pre_ping: bool = True) -> Engine:
        """A SQLite engine shared by threads, with the pragmas and transaction starts above
        (a file needs no ``pre_ping``)."""
        # A file's pool hands out its newest connection first: a pooled connection parses the
        # whole schema again when first used after another changed it, so connections taken
        # in turn leave the rest idle, not parsing each change (an in-memory database has one).
        lifo = {"pool_use_lifo": True} if sqlite_file(url) is not None else {}
        engine = create_engine(url, echo=echo, **lifo,
                               connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        event.listen(engine, "connect", _on_connect)
        event.listen(engine, "begin", _on_begin)
        return engine

    @classmethod
    def missing(cls, url: str) -> bool:
        """A SQLite file not created yet (an in-memory database never is)."""
        path = sqlite_file(url)
        return path is not None and not path.exists()

    @classmethod
    def open_problem(cls, url: str) -> str | None:
        """A missing or read-only directory, or a directory where the file should be."""
        path = sqlite_file(url)
        if path is None:
            return None
        parent = path.parent if str(path.parent) else Path(".")
        if path.is_dir():
            return f"cannot open the SQLite database {path}: it is a directory"
        if not parent.is_dir():
            return f"cannot open the SQLite database {path}: the directory {parent} does not exist"
        if not path.exists() and not os.access(parent, os.W_OK):
            return f"cannot create the SQLite database {path}: the directory {parent} is not writable"
        return None

    @classmethod
    def write_problem(cls, url: str) -> str | None:
        """A read-only or full file system under the file, or its write lock held by
        another process (for longer than a second)."""
        path = sqlite_file(url)
        if path is None:
            return None
        if (problem := _file_system_problem(path.parent if str(path.parent) else Path("."))) is not None:
            return problem
        if not path.exists():
            return None
        try:
            probe = sqlite3.connect(path, timeout=_LOCK_PROBE_S, isolation_level=None)
            try:
                probe.execute("BEGIN IMMEDIATE")  # the write lock, as every write takes it; released at once
                probe.execute("ROLLBACK")
            finally:
                probe.close()
        except sqlite3.OperationalError as error:
            return "locked by another process" if "locked" in str(error) else f"not writable ({error})"
        return None

    def upsert(self, table: Table) -> Any:
        return sqlite_dialect.insert(table)

    def ids_param(self, ids: Sequence[str]) -> Any:
        return json.dumps(list(ids))

    def in_ids(self, col: str) -> str:
        return f"{col} IN (SELECT value FROM json_each(?))"

    def run_inserts(self, sql: str, rows: Sequence[Mapping[str, Any]], params: list[tuple[Any, ...]]) -> set[str]:
        inserted: set[str] = set()
        for r, p in zip(rows, params, strict=True):
            self.cur.execute(sql, p)
            if self.cur.rowcount == 1:
                inserted.add(r["id"])
        return inserted


def _file_system_problem(directory: Path) -> str | None:
    """A read-only file system, or less than ``FREE_FLOOR_BYTES`` free, under ``directory``."""
    try:
        fs = os.statvfs(directory)
    except OSError as error:
        return f"not writable ({error.strerror or error})"
    if fs.f_flag & os.ST_RDONLY:
        return "not writable (read-only file system)"
    if not os.access(directory, os.W_OK):
        return "not writable (permission denied)"
    if (free := fs.f_bavail * fs.f_frsize) < FREE_FLOOR_BYTES:
        return f"not writable (disk full: {free // 1024} KiB free)"
    return None


def _on_connect(dbapi_conn: Any, _record: Any) -> None:
    # Take transaction control from the sqlite3 module so _on_begin decides how each begins.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _on_begin(conn: Connection) -> None:
    # A write transaction takes the write lock up front: a deferred one that reads first
    # could not upgrade to a writer while another writer holds the lock (SQLITE_BUSY at
    # once, without waiting), which would break concurrent group commits.
    conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get(READ_OPTION) else "BEGIN IMMEDIATE")
