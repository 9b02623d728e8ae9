"""Databases for the store tests, made ready without running every migration again for
each test: hundreds of tests need a store at the newest schema, and none of them is about
getting there. The migrations themselves are tested by tests/connector/test_store_migration.py
(on empty databases), the template below is made by ``Store.migrate()``, and every
``formsync`` command a test runs still migrates its own store.

- ``migrated(url)`` brings a new, empty database to the newest schema: on SQLite a copy
  of a store migrated once per test run; on MariaDB / MySQL the tables of such a store
  made again from their ``SHOW CREATE TABLE``, with the rows the migrations wrote; on
  PostgreSQL the migrations run.
- ``reset(url, migrated=...)`` readies a server database that tests take turns on (the
  module's PostgreSQL database, the run's MariaDB database): empty, or as a new migrated
  store. A migrated one whose schema is still exactly the template's (its views aside,
  which are dropped) has its rows deleted and the migrations' rows and counters put back,
  which costs milliseconds where the DDL costs a second on a busy machine; any other
  schema is dropped and made again."""

from __future__ import annotations

import atexit
import functools
import re
import secrets
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pymysql
from sqlalchemy.engine import make_url

from connector.store import Store


def migrated(url: str | Path) -> None:
    """Bring the empty database at ``url`` (a URL, or a SQLite file's path) to the newest schema."""
    url = f"sqlite:///{url}" if isinstance(url, Path) else url
    backend = make_url(url).get_backend_name()
    if backend == "sqlite":
        _copy_sqlite(url)
    elif backend == "mysql":
        _copy_mysql(url)
    else:
        with Store(url) as store:
            store.migrate()


def migrated_store(url: str | Path, **options: Any) -> Store:
    """``Store(url, **options)`` on the database at ``url``, brought to the newest schema."""
    migrated(url)
    return Store(url, **options)


def reset(url: str, *, migrated: bool) -> None:
    """Ready the PostgreSQL or MariaDB database at ``url`` for the next test: empty (no
    table, view or sequence of its own), or as ``Store(url).migrate()`` leaves a new one."""
    backend = make_url(url).get_backend_name()
    if backend == "postgresql":
        _reset_postgresql(url, migrated)
    elif backend == "mysql":
        _reset_mysql(url, migrated)
    else:
        raise ValueError(f"reset() readies a server database, not {backend}")


def _server(url: str) -> str:
    """The URL of ``url``'s server, without its database: the key of its template."""
    return make_url(url).set(database="").render_as_string(hide_password=False)


# -- SQLite ----------------------------------------------------------------------------------------


@functools.cache
def _sqlite_template() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="formsync-migrated-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "store.db"
    with Store(f"sqlite:///{path}") as store:
        store.migrate()
    # Closed, the store has no write-ahead log left: the one file is the whole database.
    assert not path.with_name(path.name + "-wal").exists(), "the migrated template kept its WAL file"
    return path


def _copy_sqlite(url: str) -> None:
    target = Path(make_url(url).database or "")
    assert str(target) and not target.exists(), f"migrated() makes a new SQLite file, and {target} exists"
    shutil.copyfile(_sqlite_template(), target)


# -- PostgreSQL ------------------------------------------------------------------------------------

# What makes the public schema the migrations' schema: its relations with their columns,
# the indexes, constraints, sequences, triggers, functions and types of its own.
_PG_SHAPE = (
    """SELECT c.relname, c.relkind::text, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
              pg_get_expr(d.adbin, d.adrelid), a.attidentity::text, a.attgenerated::text
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
       LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
       WHERE n.nspname = 'public' ORDER BY 1, a.attnum""",
    """SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' ORDER BY 1""",
    """SELECT c.relname, co.conname, pg_get_constraintdef(co.oid) FROM pg_constraint co
       JOIN pg_class c ON c.oid = co.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = 'public' ORDER BY 1, 2""",
    """SELECT c.relname, s.seqtypid::regtype::text, s.seqstart, s.seqincrement, s.seqmax, s.seqmin, s.seqcycle
       FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = 'public' ORDER BY 1""",
    """SELECT t.tgname, c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND NOT t.tgisinternal ORDER BY 1, 2""",
    """SELECT p.proname, pg_get_function_identity_arguments(p.oid) FROM pg_proc p
       JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' ORDER BY 1, 2""",
    """SELECT t.typname, t.typtype::text FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
       WHERE n.nspname = 'public' AND t.typrelid = 0 AND t.typelem = 0 ORDER BY 1""",
)


@dataclass(frozen=True)
class _PGTemplate:
    shape: tuple[tuple[Any, ...], ...]
    tables: tuple[str, ...]  # children before the tables their foreign keys name
    rows: tuple[tuple[str, tuple[str, ...], tuple[tuple[Any, ...], ...]], ...]  # (table, columns, rows) written
    sequences: tuple[tuple[str, int, bool], ...]  # (sequence, last_value, is_called)


def _pg_connect(url: str) -> psycopg.Connection[Any]:
    u = make_url(url)
    return psycopg.connect(host=u.host or "127.0.0.1", port=u.port or 5432, user=u.username or "postgres",
                           password=u.password or None, dbname=u.database or "postgres", connect_timeout=5)


def _pg_shape(conn: psycopg.Connection[Any]) -> tuple[tuple[Any, ...], ...]:
    return tuple(tuple(row) for query in _PG_SHAPE for row in conn.execute(query).fetchall())


def _pg_tables(conn: psycopg.Connection[Any]) -> tuple[str, ...]:
    """The public schema's tables, each after every table whose foreign key names it."""
    names = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")]
    refs = conn.execute("""SELECT c.relname, p.relname FROM pg_constraint co JOIN pg_class c ON c.oid = co.conrelid
                           JOIN pg_class p ON p.oid = co.confrelid JOIN pg_namespace n ON n.oid = c.relnamespace
                           WHERE co.contype = 'f' AND n.nspname = 'public'""").fetchall()
    return tuple(_children_first(names, refs))


def _children_first(names: Sequence[str], refs: Sequence[tuple[str, str]]) -> list[str]:
    out: list[str] = []
    left = list(names)
    while left:
        ready = [t for t in left if not any(parent == t and child in left and child != t for child, parent in refs)]
        assert ready, f"foreign keys in a cycle among {left}"
        out += ready
        left = [t for t in left if t not in ready]
    return out


@functools.cache
def _pg_template(server: str) -> _PGTemplate:
    """A database on ``server`` migrated once, read, and dropped again."""
    name = f"formsync_t_migrated_{secrets.token_hex(6)}"
    admin = _pg_connect(server)
    admin.autocommit = True
    admin.execute(f'CREATE DATABASE "{name}"')
    url = make_url(server).set(database=name).render_as_string(hide_password=False)
    try:
        with Store(url) as store:
            store.migrate()
        with _pg_connect(url) as conn:
            tables = _pg_tables(conn)
            rows = []
            for table in tables:
                cur = conn.execute(f'SELECT * FROM "{table}"')
                found = tuple(tuple(r) for r in cur.fetchall())
                if found:
                    rows.append((table, tuple(d.name for d in cur.description or ()), found))
            sequences = tuple((seq, *conn.execute(f'SELECT last_value, is_called FROM "{seq}"').fetchone())  # type: ignore[misc]
                              for (seq,) in conn.execute("SELECT sequencename FROM pg_sequences "
                                                         "WHERE schemaname = 'public' ORDER BY 1").fetchall())
            return _PGTemplate(_pg_shape(conn), tables, tuple(rows), sequences)
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def _reset_postgresql(url: str, want_migrated: bool) -> None:
    template = _pg_template(_server(url)) if want_migrated else None
    with _pg_connect(url) as conn:
        for name, kind in conn.execute("SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n "
                                       "ON n.oid = c.relnamespace WHERE n.nspname = 'public' "
                                       "AND c.relkind IN ('v', 'm')").fetchall():
            conn.execute(f'DROP {"MATERIALIZED VIEW" if kind == "m" else "VIEW"} IF EXISTS "{name}" CASCADE')
        shape = _pg_shape(conn)
        if template is not None and shape == template.shape:
            for table in template.tables:
                conn.execute(f'DELETE FROM "{table}"')
            for table, columns, rows in template.rows:
                cols = ", ".join(f'"{c}"' for c in columns)
                conn.cursor().executemany(f'INSERT INTO "{table}" ({cols}) VALUES ({", ".join(["%s"] * len(columns))})',
                                          rows)
            for seq, last_value, is_called in template.sequences:
                conn.execute("SELECT setval(%s, %s, %s)", (f'"{seq}"', last_value, is_called))
            return
        if shape:  # anything else: the schema made again
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")
    if want_migrated:
        with Store(url) as store:
            store.migrate()


# -- MariaDB / MySQL -------------------------------------------------------------------------------

_AUTO_INCREMENT = re.compile(r" AUTO_INCREMENT=\d+")


@dataclass(frozen=True)
class _MySQLTemplate:
    database: str
    ddl: dict[str, str]  # SHOW CREATE TABLE of each table, by name
    filled: tuple[str, ...]  # the tables the migrations wrote rows into

    def shape(self) -> dict[str, str]:
        return {t: _AUTO_INCREMENT.sub("", ddl) for t, ddl in self.ddl.items()}


def _mysql_connect(url: str, database: str | None) -> pymysql.connections.Connection:  # type: ignore[type-arg]
    u = make_url(url)
    return pymysql.connect(host=u.host or "127.0.0.1", port=u.port or 3306, user=u.username or "root",
                           password=u.password or "", database=database, autocommit=True, connect_timeout=5)


def _mysql_ddl(cur: Any, database: str) -> dict[str, str]:
    cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                "AND table_type = 'BASE TABLE'", (database,))
    out = {}
    for (table,) in sorted(cur.fetchall()):
        cur.execute(f"SHOW CREATE TABLE `{database}`.`{table}`")
        out[table] = cur.fetchone()[1]
    return out


def _mysql_others(cur: Any, database: str) -> int:
    """The views, triggers, routines and events in ``database``: none in a migrated store."""
    n = 0
    for kind, where in (("views", "table_schema"), ("triggers", "trigger_schema"), ("routines", "routine_schema"),
                        ("events", "event_schema")):
        cur.execute(f"SELECT COUNT(*) FROM information_schema.{kind} WHERE {where} = %s", (database,))
        n += cur.fetchone()[0]
    return n


@functools.cache
def _mysql_template(server: str) -> _MySQLTemplate:
    """A database on ``server`` migrated once, dropped at exit."""
    name = f"formsync_t_migrated_{secrets.token_hex(6)}"
    conn = _mysql_connect(server, None)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    atexit.register(_drop_mysql, server, name)
    with Store(make_url(server).set(database=name).render_as_string(hide_password=False)) as store:
        store.migrate()
    with conn.cursor() as cur:
        # Only tables are made again from SHOW CREATE TABLE: a migration adding a view,
        # trigger or routine must extend this copy (or the store's tests fail here).
        assert _mysql_others(cur, name) == 0, "the migrated store holds more than tables: copy it in tests/stores.py"
        ddl = _mysql_ddl(cur, name)
        filled = []
        for table in ddl:
            cur.execute(f"SELECT EXISTS (SELECT 1 FROM `{name}`.`{table}`)")
            if cur.fetchone()[0]:
                filled.append(table)
    conn.close()
    return _MySQLTemplate(name, ddl, tuple(filled))


def _drop_mysql(server: str, name: str) -> None:
    try:
        conn = _mysql_connect(server, None)
    except pymysql.err.OperationalError:
        return
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    conn.close()


def _fill_mysql(cur: Any, template: _MySQLTemplate) -> None:
    """The migrations' rows, copied from the template into the current database."""
    for table in template.filled:
        cur.execute(f"INSERT INTO `{table}` SELECT * FROM `{template.database}`.`{table}`")


def _copy_mysql(url: str) -> None:
    database = make_url(url).database or ""
    template = _mysql_template(_server(url))
    conn = _mysql_connect(url, database)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW TABLES")
            assert not cur.fetchall(), f"migrated() fills an empty database, and {database} has tables"
            cur.execute("SET FOREIGN_KEY_CHECKS = 0")  # the tables come in name order, not that of their keys
            for ddl in template.ddl.values():
                cur.execute(ddl)
            _fill_mysql(cur, template)
            cur.execute("SET FOREIGN_KEY_CHECKS = 1")
    finally:
        conn.close()


@functools.cache
def mysql_shared_database(server: str) -> str:
    """The URL of a database on ``server`` (a URL without a database) that the run's tests
    take turns on, each after ``reset``; dropped at exit."""
    name = f"formsync_t_shared_{secrets.token_hex(6)}"
    conn = _mysql_connect(server, None)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    conn.close()
    atexit.register(_drop_mysql, server, name)
    return make_url(server).set(database=name).render_as_string(hide_password=False)


def _reset_mysql(url: str, want_migrated: bool) -> None:
    database = make_url(url).database or ""
    template = _mysql_template(_server(url)) if want_migrated else None
    conn = _mysql_connect(url, database)
    try:
        with conn.cursor() as cur:
            cur.execute("SET FOREIGN_KEY_CHECKS = 0")
            cur.execute("SELECT table_name FROM information_schema.views WHERE table_schema = %s", (database,))
            for (view,) in cur.fetchall():
                cur.execute(f"DROP VIEW IF EXISTS `{view}`")
            ddl = _mysql_ddl(cur, database)
            same = template is not None and _mysql_others(cur, database) == 0 and \
                {t: _AUTO_INCREMENT.sub("", d) for t, d in ddl.items()} == template.shape()
            if template is not None and same:
                for table, made in ddl.items():
                    cur.execute(f"DELETE FROM `{table}`")
                    if made != template.ddl[table]:  # a counter moved on: back to the template's
                        counter = _AUTO_INCREMENT.search(template.ddl[table])
                        cur.execute(f"ALTER TABLE `{table}` AUTO_INCREMENT = "
                                    f"{counter.group(0).split('=')[1] if counter else 1}")
                _fill_mysql(cur, template)
            else:
                _empty_mysql(cur, database, list(ddl))
                if template is not None:
                    for made in template.ddl.values():
                        cur.execute(made)
                    _fill_mysql(cur, template)
            cur.execute("SET FOREIGN_KEY_CHECKS = 1")
    finally:
        conn.close()


def _empty_mysql(cur: Any, database: str, tables: list[str]) -> None:
    if tables:
        cur.execute("DROP TABLE " + ", ".join(f"`{t}`" for t in tables))
    for kind, where, drop in (("triggers", "trigger_schema", "TRIGGER"), ("events", "event_schema", "EVENT")):
        cur.execute(f"SELECT {kind[:-1]}_name FROM information_schema.{kind} WHERE {where} = %s", (database,))
        for (name,) in cur.fetchall():
            cur.execute(f"DROP {drop} IF EXISTS `{name}`")
    cur.execute("SELECT routine_name, routine_type FROM information_schema.routines WHERE routine_schema = %s",
                (database,))
    for name, kind in cur.fetchall():
        cur.execute(f"DROP {kind} IF EXISTS `{name}`")
