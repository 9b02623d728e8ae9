"""A server database's connections carry the network bounds of connector/store/_network.py
(a link where packets go nowhere fails a statement in seconds, not a quarter of an hour),
unless the URL sets its own."""

from __future__ import annotations

import socket
import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from connector.store import Store
from connector.store._network import CONNECT_TIMEOUT_S, KEEPALIVE_IDLE_S, UNACKNOWLEDGED_S, bounded_sessions


def test_postgresql_connections_have_the_bounds_unless_the_url_sets_them(pg_database: str) -> None:
    for url, user_timeout in ((pg_database, UNACKNOWLEDGED_S * 1000), (pg_database + "?tcp_user_timeout=1234", 1234)):
        store = Store(url)
        try:
            conn = store.database.engine.raw_connection()
            try:
                params = conn.driver_connection.info.get_parameters()  # type: ignore[union-attr]
            finally:
                conn.close()
        finally:
            store.close()
        assert params["tcp_user_timeout"] == str(user_timeout)
        assert params["connect_timeout"] == str(CONNECT_TIMEOUT_S)
        assert params["keepalives_idle"] == str(KEEPALIVE_IDLE_S)


@pytest.mark.skipif(not hasattr(socket, "TCP_USER_TIMEOUT"), reason="TCP_USER_TIMEOUT is Linux's")
def test_mysql_connections_have_the_bounds(mysql_database: str) -> None:
    store = Store(mysql_database)
    try:
        conn = store.database.engine.raw_connection()
        try:
            sock = conn.driver_connection._sock  # type: ignore[union-attr]
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == UNACKNOWLEDGED_S * 1000
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == KEEPALIVE_IDLE_S
            assert conn.driver_connection.connect_timeout == CONNECT_TIMEOUT_S  # type: ignore[union-attr]
        finally:
            conn.close()
    finally:
        store.close()


def test_the_store_process_sessions_are_bounded_on_the_server(pg_database: str) -> None:
    """A session left inside a transaction (its client gone) is ended by the server, so
    the row locks it held no longer stop another session writing the same id."""
    assert bounded_sessions("sqlite:///x.db", 1.0) == "sqlite:///x.db"
    assert bounded_sessions(pg_database + "?options=-c%20work_mem%3D4MB", 1.0).endswith("work_mem%3D4MB")
    store = Store(bounded_sessions(pg_database, 1.0))
    other = Store(bounded_sessions(pg_database, 3.0))  # waits 2 s for a lock at most: a failure, not a hang
    try:
        with store.database.engine.connect() as conn:
            assert conn.execute(text("SHOW idle_in_transaction_session_timeout")).scalar() == "1s"
            assert conn.execute(text("SHOW statement_timeout")).scalar() == "666ms"
            assert conn.execute(text("SHOW lock_timeout")).scalar() == "666ms"
            conn.execute(text("CREATE TABLE IF NOT EXISTS bounded_t (id text PRIMARY KEY)"))
            conn.commit()
            conn.execute(text("INSERT INTO bounded_t VALUES ('held')"))  # and the client goes quiet
            time.sleep(1.5)
            started = time.monotonic()
            with other.database.engine.begin() as writer:
                writer.execute(text("INSERT INTO bounded_t VALUES ('held') ON CONFLICT (id) DO NOTHING"))
            assert time.monotonic() - started < 1.0, "the abandoned transaction's lock was released"
            with pytest.raises(DBAPIError):
                conn.execute(text("SELECT 1"))  # its session was ended by the server
    finally:
        store.close()
        other.close()
