"""A server database's connections carry the network bounds of connector/store/network.py
(a link where packets go nowhere fails a statement in seconds, not a quarter of an hour),
unless the URL sets its own."""

from __future__ import annotations

import socket

import pytest

from connector.store import Store
from connector.store.network import CONNECT_TIMEOUT_S, KEEPALIVE_IDLE_S, UNACKNOWLEDGED_S


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
