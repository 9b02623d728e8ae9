"""Migrated stores for the tests, made by copying a store migrated once per test run
instead of running every migration again for each test: the fixtures of hundreds of tests
need a store at the newest schema, and none of them is about getting there. The
migrations themselves are tested by tests/connector/test_store_migration.py, and every
``formsync`` command a test runs still migrates its own store.

``migrated(url)`` leaves an empty database as ``Store(url).migrate()`` leaves it: on
SQLite a copy of the migrated file; on MariaDB / MySQL the tables of a migrated database
made again from their ``SHOW CREATE TABLE``, with the rows the migrations wrote; on
PostgreSQL the migrations run (a copy saves little there)."""

from __future__ import annotations

import atexit
import functools
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


# -- MariaDB / MySQL -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _MySQLTemplate:
    database: str
    tables: tuple[str, ...]
    ddl: tuple[str, ...]  # SHOW CREATE TABLE of each table
    filled: tuple[str, ...]  # the tables the migrations wrote rows into


def _mysql_connect(url: str, database: str | None) -> pymysql.connections.Connection:  # type: ignore[type-arg]
    u = make_url(url)
    return pymysql.connect(host=u.host or "127.0.0.1", port=u.port or 3306, user=u.username or "root",
                           password=u.password or "", database=database, autocommit=True, connect_timeout=5)


@functools.cache
def _mysql_template(server: str) -> _MySQLTemplate:
    """A database on the server of ``server`` (a URL) migrated once, dropped at exit."""
    name = f"formsync_t_migrated_{secrets.token_hex(6)}"
    conn = _mysql_connect(server, None)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    atexit.register(_drop_mysql, server, name)
    with Store(make_url(server).set(database=name).render_as_string(hide_password=False)) as store:
        store.migrate()
    with conn.cursor() as cur:
        # Only tables can be made again from SHOW CREATE TABLE: a migration adding a view,
        # trigger or routine must extend this copy (or the store's tests fail here).
        for kind, where in (("views", "table_schema"), ("triggers", "trigger_schema"), ("routines", "routine_schema")):
            cur.execute(f"SELECT COUNT(*) FROM information_schema.{kind} WHERE {where} = %s", (name,))
            assert cur.fetchone()[0] == 0, f"the migrated store holds {kind}: copy them in tests/stores.py"
        cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (name,))
        tables = tuple(sorted(r[0] for r in cur.fetchall()))
        ddl, filled = [], []
        for table in tables:
            cur.execute(f"SHOW CREATE TABLE `{name}`.`{table}`")
            ddl.append(cur.fetchone()[1])
            cur.execute(f"SELECT EXISTS (SELECT 1 FROM `{name}`.`{table}`)")
            if cur.fetchone()[0]:
                filled.append(table)
    conn.close()
    return _MySQLTemplate(name, tables, tuple(ddl), tuple(filled))


def _drop_mysql(server: str, name: str) -> None:
    try:
        conn = _mysql_connect(server, None)
    except pymysql.err.OperationalError:
        return
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    conn.close()


def _copy_mysql(url: str) -> None:
    database = make_url(url).database or ""
    template = _mysql_template(make_url(url).set(database="").render_as_string(hide_password=False))
    conn = _mysql_connect(url, database)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW TABLES")
            assert not cur.fetchall(), f"migrated() fills an empty database, and {database} has tables"
            cur.execute("SET FOREIGN_KEY_CHECKS = 0")  # the tables come in name order, not that of their keys
            for ddl in template.ddl:
                cur.execute(ddl)
            for table in template.filled:
                cur.execute(f"INSERT INTO `{table}` SELECT * FROM `{template.database}`.`{table}`")
            cur.execute("SET FOREIGN_KEY_CHECKS = 1")
    finally:
        conn.close()
