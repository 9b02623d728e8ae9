"""The PostgreSQL writer (psycopg 3): id lists travel as one array parameter, inserts of
a group go in one pipelined round trip, and the rows a merge
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
from sqlalchemy.engine import Connection, Engine
from sqlmodel import create_engine

from .writer import SQLWriter

log = logging.getLogger("formsync.scheduler")
MIGRATION_LOCK = 7410117  # the advisory lock key of Store.migrate
_RETRY_STATES = ("40P01", "40001")  # deadlock detected, serialization failure


class PostgreSQLWriter(SQLWriter):
    """Writes on PostgreSQL."""

    placeholder = "%s"

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

    @classmethod
    def long_answers(cls, *, form: bool, since: bool, fields: bool) -> str:
        """The long-answer rows by ``json_each`` (see ``Writer.long_answers``): text,
        integers, booleans, nulls, plain decimals, matrices and lists of text or integers
        in SQL; the rest (groups, files, other objects, a display that is not text) left
        to Python. The ``json`` columns keep the stored text, so a number's text is
        Python's own."""
        where = " AND ".join(w for w, on in (("s.form_id = %(form_id)s", form),
                                                        ("s.submitted_at >= %(since_ms)s", since)) if on)
        return _LONG_SQL.replace("{where}", where or "true").replace("{fields}", "a.key = ANY(%(fields)s)" if fields else "true")


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



_INT = "'^-?[0-9]+$'"
_DECIMAL = "'^-?[0-9]+[.][0-9]+$'"  # Python's repr of a float at or above 1e-4 and below 1e16
_STR = "(v #>> '{}')"
_SCALAR_JSON = f"CASE t WHEN 'string' THEN to_json({_STR})::text ELSE v::text END"
_SCALAR_TEXT = (f"CASE t WHEN 'string' THEN {_STR} WHEN 'boolean' THEN CASE v::text WHEN 'true' THEN 'Yes' ELSE 'No' END "
                "WHEN 'number' THEN CASE WHEN v::text ~ '[.]0$' THEN left(v::text, -2) ELSE v::text END END")
_SHOWN_OK = "(dt IS NULL OR dt IN ('string', 'null'))"
# Kinds: 's' one scalar row, 'm' a matrix's rows, 'l' a list of text or integers, 'p' left
# to Python (the value's and the display's JSON text). Nested CASEs: a set-returning
# function must see only the JSON kind it takes.
_KIND = f"""CASE
    WHEN {_SHOWN_OK} AND (t IN ('string', 'boolean', 'null')
                          OR t = 'number' AND (v::text ~ {_INT} OR v::text ~ {_DECIMAL} AND v::text <> '-0.0')) THEN 's'
    WHEN t = 'object' THEN CASE WHEN EXISTS (SELECT 1 FROM json_each(v))
         AND NOT EXISTS (SELECT 1 FROM json_each(v) z WHERE json_typeof(z.value) <> 'string') THEN 'm' ELSE 'p' END
    WHEN t = 'array' AND {_SHOWN_OK} THEN CASE WHEN json_array_length(v) > 0
         AND NOT EXISTS (SELECT 1 FROM json_array_elements(v) z
                         WHERE NOT (json_typeof(z) = 'string' OR json_typeof(z) = 'number' AND z::text ~ {_INT}))
         THEN 'l' ELSE 'p' END
    ELSE 'p' END"""
# A submission whose JSON holds \u0000 (which PostgreSQL cannot make text, so json_each
# refuses the document) comes whole, as one row (row_key '*'), for Python to derive.
_NUL = r"strpos(s.answers::text, '\u0000') + strpos(coalesce(s.display::text, ''), '\u0000')"
_LONG_SQL = f"""SELECT submission_id, form_id, field_key, instance, row_key, member_key, value_json, display_text
FROM (
SELECT sat, sid AS submission_id, form AS form_id, k AS field_key,
  CASE kind WHEN 'p' THEN NULL ELSE -1 END AS instance,
  CASE kind WHEN 'p' THEN NULL ELSE coalesce(x.rk, '') END AS row_key,
  CASE kind WHEN 'p' THEN NULL ELSE '' END AS member_key,
  CASE kind WHEN 's' THEN {_SCALAR_JSON}
            WHEN 'm' THEN to_json(x.c #>> '{{}}')::text
            WHEN 'l' THEN (SELECT '[' || string_agg(CASE json_typeof(z.value) WHEN 'string'
                                                    THEN to_json(z.value #>> '{{}}')::text ELSE z.value::text END,
                                                    ', ' ORDER BY z.i) || ']'
                           FROM json_array_elements(v) WITH ORDINALITY z(value, i))
            ELSE v::text END AS value_json,
  CASE kind WHEN 's' THEN coalesce(shown, {_SCALAR_TEXT})
            WHEN 'm' THEN coalesce(CASE WHEN x.n = 1 THEN shown
                                        WHEN cardinality(string_to_array(shown, ', ')) = x.n
                                        THEN split_part(shown, ', ', x.i::int) END, x.c #>> '{{}}')
            WHEN 'l' THEN coalesce(shown, (SELECT string_agg(z.value #>> '{{}}', ', ' ORDER BY z.i)
                                           FROM json_array_elements(v) WITH ORDINALITY z(value, i)))
            ELSE d::text END AS display_text
FROM (
  SELECT s.submitted_at AS sat, s.id AS sid, s.form_id AS form, a.key AS k, a.value AS v, json_typeof(a.value) AS t,
         s.display -> a.key AS d, json_typeof(s.display -> a.key) AS dt,
         CASE WHEN json_typeof(s.display -> a.key) = 'string' THEN s.display ->> a.key END AS shown
  FROM formsync_submissions s CROSS JOIN LATERAL json_each(s.answers) a
  WHERE {{where}} AND {{fields}} AND {_NUL} = 0
) f
CROSS JOIN LATERAL (SELECT {_KIND} AS kind) c
LEFT JOIN LATERAL (SELECT e.key AS rk, e.value AS c, e.i, count(*) OVER () AS n
                   FROM json_each(CASE WHEN c.kind = 'm' THEN f.v END) WITH ORDINALITY e(key, value, i)) x ON true
UNION ALL
SELECT s.submitted_at, s.id, s.form_id, NULL, NULL, '*', NULL, s.answers::text, s.display::text
FROM formsync_submissions s WHERE {{where}} AND {_NUL} > 0
) u
ORDER BY sat, submission_id, field_key COLLATE "C", row_key COLLATE "C"
"""


def advisory_key(name: str) -> int:
    """A stable signed 64-bit advisory lock key derived from ``name``."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class AdvisoryLock:
    """A PostgreSQL session advisory lock on a connection of its own (a ``LeaderLock``)."""

    def __init__(self, engine: Engine, name: str) -> None:
        self._engine = engine
        self.key = advisory_key(name)
        self.conn: Connection | None = None

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
            got = bool(self.conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": self.key}).scalar())
        except Exception as e:  # the database is unreachable: not the leader, try again later
            log.warning("cannot reach the database for the scheduler lock: %s", e)
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
                self.conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self.key})
            except Exception:  # closing the session below releases it anyway
                pass
            self._drop()
