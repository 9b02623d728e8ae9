"""The SQLite writer, and how the store's SQLite engine is set up: WAL journal,
``synchronous=FULL``, a busy timeout, foreign keys on, and every write transaction
taking the write lock at its start (reads do not, so long exports never hold up the
receiver)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Table, event
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection, Engine, make_url
from sqlmodel import create_engine

from .writer import SQLWriter

SQLITE_BUSY_TIMEOUT_MS = 30_000
READ_OPTION = "formsync_read"  # execution option of a read-only connection (see Store.reader)


class SQLiteWriter(SQLWriter):
    """Writes on SQLite: id lists travel as one JSON parameter (``json_each``), and an
    insert reports itself by its row count."""

    placeholder = "?"

    @classmethod
    def create_engine(cls, url: str, *, echo: bool) -> Engine:
        """A SQLite engine shared by threads, with the pragmas and transaction starts above."""
        engine = create_engine(url, echo=echo,
                               connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        event.listen(engine, "connect", _on_connect)
        event.listen(engine, "begin", _on_begin)
        return engine

    @classmethod
    def missing(cls, url: str) -> bool:
        """A SQLite file not created yet."""
        u = make_url(url)
        return bool(u.database) and not Path(u.database or "").exists()

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

    @classmethod
    def long_answers(cls, *, form: bool, since: bool, fields: bool) -> str:
        """The long-answer rows by ``json_each`` (see ``Writer.long_answers``): text,
        integers, booleans, nulls, plain decimals, matrices and lists of text or integers
        in SQL; the rest (groups, files, other objects, a display that is not text, a
        submission holding a NUL character) left to Python."""
        where = [w for w, on in (("form_id = :form_id", form), ("submitted_at >= :since_ms", since)) if on]
        return (_LONG_SQL.replace("{where}", " AND ".join(where) or "1")
                .replace("{fields}", "a.key IN (SELECT value FROM json_each(:fields))" if fields else "1"))

    @classmethod
    def fields_param(cls, fields: Sequence[str]) -> Any:
        """The field keys as one JSON array (read by ``json_each``)."""
        return json.dumps(list(fields))


def _seg(text: str, sep: str, n: str, i: str) -> str:
    # Part i (0-based) of text split on sep, when that makes exactly n parts: the text,
    # JSON-quoted, becomes a JSON array by turning each separator into '","' (a quoted
    # text never holds an escaped comma, space or slash, so the split is Python's).
    inner = f"substr(json_quote({text}), 2, length(json_quote({text})) - 2)"
    arr = f"""('["' || replace({inner}, '{sep}', '","') || '"]')"""
    return f"(CASE WHEN {n} = 1 THEN {text} WHEN json_array_length({arr}) = {n} THEN {arr} ->> {i} END)"


def _plain_real(t: str, v: str) -> str:
    # A real is done in SQL where SQLite's text of it is Python's repr: no exponent, reads
    # back as the same number, not zero (-0.0), below 1e15 (so an integral one casts exactly).
    return (f"({t} = 'real' AND instr(CAST({v} AS TEXT), 'e') = 0 AND CAST(CAST({v} AS TEXT) AS REAL) = {v} "
            f"AND {v} <> 0 AND abs({v}) < 1e15)")


_SCALAR_JSON = ("CASE WHEN t = 'text' THEN json_quote(v) WHEN t IN ('integer', 'real') THEN CAST(v AS TEXT) "
                "ELSE t END")
_SCALAR_TEXT = ("CASE t WHEN 'true' THEN 'Yes' WHEN 'false' THEN 'No' "
                "WHEN 'real' THEN CASE WHEN v = CAST(v AS INTEGER) THEN CAST(CAST(v AS INTEGER) AS TEXT) "
                "ELSE CAST(v AS TEXT) END ELSE CAST(v AS TEXT) END")
# A display the SQL uses: none, null, or text.
_SHOWN_OK = """(dj IS NULL OR dj = 'null' OR dj LIKE '"%')"""
_TEXTS = "NOT EXISTS (SELECT 1 FROM json_each(v) z WHERE z.type <> 'text')"
_TEXTS_OR_INTS = ("NOT EXISTS (SELECT 1 FROM json_each(v) z WHERE NOT (z.type = 'text' "
                  "OR z.type = 'integer' AND typeof(z.value) = 'integer'))")
_KIND = f"""CASE
      WHEN nul > 0 OR instr(k, '"') > 0 THEN 'd'
      WHEN {_SHOWN_OK} AND (t IN ('text', 'true', 'false', 'null') OR t = 'integer' AND typeof(v) = 'integer'
                             OR {_plain_real("t", "v")}) THEN 's'
      WHEN t = 'object' AND v <> '{{}}' AND {_TEXTS} THEN 'm'
      WHEN t = 'array' AND v <> '[]' AND {_SHOWN_OK} AND {_TEXTS_OR_INTS} THEN 'l'
      ELSE 'p' END"""
# Kinds: 's' one scalar row, 'm' a matrix's rows, 'l' a list of text or integers; left to
# Python: 'p' (the value's JSON text from the document, so a number's text is exact, and
# the display's) and 'd' (the whole documents: a key holding '"', which a SQLite path
# cannot name, or a submission holding NUL, where json_each cuts a text short). The
# inner queries are not flattened (LIMIT -1): each expression is computed once a field.
_LONG_SQL = f"""SELECT sid AS submission_id, form AS form_id, k AS field_key,
  CASE WHEN kind IN ('p', 'd') THEN NULL ELSE -1 END AS instance,
  CASE kind WHEN 'p' THEN NULL WHEN 'd' THEN '*' ELSE coalesce(x.key, '') END AS row_key,
  CASE WHEN kind IN ('p', 'd') THEN NULL ELSE '' END AS member_key,
  CASE kind WHEN 's' THEN {_SCALAR_JSON}
            WHEN 'm' THEN json_quote(x.value)
            WHEN 'l' THEN (SELECT '[' || group_concat(json_quote(z.value), ', ') || ']' FROM json_each(v) z)
            WHEN 'p' THEN (SELECT answers FROM formsync_submissions WHERE id = sid) -> fk
            ELSE (SELECT answers FROM formsync_submissions WHERE id = sid) END AS value_json,
  CASE kind WHEN 's' THEN coalesce(shown, {_SCALAR_TEXT})
            WHEN 'm' THEN coalesce({_seg("shown", ", ", "(SELECT count(*) FROM json_each(v))",
                                         "(SELECT count(*) FROM json_each(v) z WHERE z.id < x.id)")}, x.value)
            WHEN 'l' THEN coalesce(shown, (SELECT group_concat(z.value, ', ') FROM json_each(v) z))
            WHEN 'p' THEN dj
            ELSE (SELECT display FROM formsync_submissions WHERE id = sid) END AS display_text
FROM (
  SELECT *, CASE WHEN dj LIKE '"%' THEN dj ->> '$' END AS shown, {_KIND} AS kind
  FROM (
    SELECT s.at, s.sid, s.form, s.nul, a.key AS k, a.fullkey AS fk, a.type AS t, a.value AS v,
           s.display -> a.fullkey AS dj
    FROM (SELECT submitted_at AS at, id AS sid, form_id AS form, answers, display,
                 instr(answers, '\\u0000') + instr(display, '\\u0000') AS nul
          FROM formsync_submissions WHERE {{where}} LIMIT -1) s, json_each(s.answers) a
    WHERE {{fields}} LIMIT -1
  ) LIMIT -1
) LEFT JOIN json_each(CASE kind WHEN 'm' THEN v END) x
ORDER BY at, sid, k, x.key"""


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
