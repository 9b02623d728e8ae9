"""Database fixtures of the connector tests.

``db_url`` runs a test three times: on a SQLite file in ``tmp_path``, on the PostgreSQL
server at 127.0.0.1:5432 (user ``postgres``) and on the MariaDB (or MySQL) server at
127.0.0.1:3306 (user ``root``, no password). For PostgreSQL each test module gets a
fresh database, ``formsync_t_<random>``, dropped at the end; for MariaDB the run has one
database, dropped at its end; each test starts on it empty, or (a test that uses
``migrated_db_url``) as a new store migrated to the newest schema (tests/stores.py makes
either in milliseconds). ``mysql_database`` is a fresh MariaDB database for one test.
Without a reachable server those runs are skipped, or fail when ``CI`` or
``FORMSYNC_CI`` is set (CI must never pass by skipping)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pymysql
import pytest

from connector.store import Store
from tests.stores import migrated, migrated_store, mysql_shared_database, reset

PG_HOST = os.environ.get("FORMSYNC_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("FORMSYNC_PG_PORT", "5432"))
PG_USER = os.environ.get("FORMSYNC_PG_USER", "postgres")
MY_HOST = os.environ.get("FORMSYNC_MYSQL_HOST", "127.0.0.1")
MY_PORT = int(os.environ.get("FORMSYNC_MYSQL_PORT", "3306"))
MY_USER = os.environ.get("FORMSYNC_MYSQL_USER", "root")


def pg_connect(dbname: str) -> psycopg.Connection:
    return psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=dbname, autocommit=True,
                           connect_timeout=5)


def my_connect(dbname: str | None = None) -> pymysql.connections.Connection:  # type: ignore[type-arg]
    return pymysql.connect(host=MY_HOST, port=MY_PORT, user=MY_USER, database=dbname, autocommit=True,
                           connect_timeout=5)


def pg_unavailable(reason: str) -> None:
    server_unavailable(reason, "PostgreSQL")


def server_unavailable(reason: str, server: str) -> None:
    if os.environ.get("CI") or os.environ.get("FORMSYNC_CI"):
        pytest.fail(f"{server} is required in CI: {reason}")
    pytest.skip(f"no {server} server: {reason}")


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for one test module; its SQLAlchemy URL."""
    try:
        admin = pg_connect("postgres")
    except psycopg.OperationalError as e:
        pg_unavailable(f"cannot connect to {PG_USER}@{PG_HOST}:{PG_PORT}: {str(e).strip()}")
    name = f"formsync_t_{secrets.token_hex(6)}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        with pg_connect("postgres") as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def mysql_database() -> Iterator[str]:
    """A fresh MariaDB / MySQL database for one test; its SQLAlchemy URL."""
    try:
        admin = my_connect()
    except pymysql.err.OperationalError as e:
        server_unavailable(f"cannot connect to {MY_USER}@{MY_HOST}:{MY_PORT}: {e.args[-1]}", "MariaDB")
    name = f"formsync_t_{secrets.token_hex(6)}"
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    admin.close()
    try:
        yield f"mysql+pymysql://{MY_USER}@{MY_HOST}:{MY_PORT}/{name}"
    finally:
        admin = my_connect()
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    """A migrated store on a SQLite file of the test's own."""
    s = migrated_store(f"sqlite:///{tmp_path / 'rx.db'}")
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database of the test's own: a SQLite file, the module's PostgreSQL database or the
    run's MariaDB database. Empty, or at the newest schema when the test uses
    ``migrated_db_url``."""
    want_migrated = "migrated_db_url" in request.fixturenames
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
        if want_migrated:
            migrated(url)
        return url
    url = mysql_shared_url() if request.param == "mysql" else str(request.getfixturevalue("pg_database"))
    reset(url, migrated=want_migrated)
    return url


@pytest.fixture
def migrated_db_url(db_url: str) -> str:
    """``db_url`` as ``Store(db_url).migrate()`` leaves a new database: the schema the
    store fixtures need."""
    return db_url


def mysql_shared_url() -> str:
    """The MariaDB database the run's ``db_url`` tests take turns on."""
    try:
        my_connect().close()
    except pymysql.err.OperationalError as e:
        server_unavailable(f"cannot connect to {MY_USER}@{MY_HOST}:{MY_PORT}: {e.args[-1]}", "MariaDB")
    return mysql_shared_database(f"mysql+pymysql://{MY_USER}@{MY_HOST}:{MY_PORT}/")


@pytest.fixture
def store(migrated_db_url: str) -> Iterator[Store]:
    """A migrated store on ``db_url`` (each database), closed afterwards."""
    s = Store(migrated_db_url)
    try:
        yield s
    finally:
        s.close()


# -- the hosted service (``live`` tests) ---------------------------------------------------------

LIVE_BASE_URL = "FORMSYNC_LIVE_BASE_URL"
LIVE_TOKEN = "FORMSYNC_LIVE_TOKEN"


@dataclass(frozen=True)
class Target:
    """A service a ``live`` test talks to: the sandbox of this run, or the hosted service."""

    name: str
    base_url: str
    token: str = field(repr=False)


def live_target() -> Target:
    """The hosted service named by FORMSYNC_LIVE_BASE_URL and FORMSYNC_LIVE_TOKEN; the
    test is skipped when neither is set, and fails when only one is."""
    base_url, token = os.environ.get(LIVE_BASE_URL, ""), os.environ.get(LIVE_TOKEN, "")
    if not base_url and not token:
        pytest.skip(f"hosted-service run skipped: set {LIVE_BASE_URL} and {LIVE_TOKEN} to run it "
                    f"(the sandbox run of this test is not skipped)")
    if not base_url or not token:
        missing = LIVE_TOKEN if base_url else LIVE_BASE_URL
        pytest.fail(f"{missing} is not set: a live run needs both {LIVE_BASE_URL} and {LIVE_TOKEN}")
    return Target("live", base_url.rstrip("/"), token)


@pytest.fixture(params=["sandbox", "live"])
def target(request: pytest.FixtureRequest) -> Target:
    """Runs a test on the sandbox (always) and on the hosted service (when configured)."""
    if request.param == "live":
        return live_target()
    sandbox = request.getfixturevalue("sandbox")
    return Target("sandbox", sandbox.base_url, sandbox.pro.token)
