"""How long a connection to a database server may wait on a network that no longer
carries its packets: to connect, with data sent but never acknowledged, and idle with a
peer that stopped answering keepalive probes. Without these bounds, a link where packets
go nowhere holds a statement until the kernel gives up retransmitting (about a quarter of
an hour). None of them ends a slow statement on a server that answers: the server's
kernel acknowledges data and keepalive probes while the statement runs.
``bounded_sessions`` adds the server-side bounds of a process whose transactions are all
short (the receiver's store process)."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import make_url

CONNECT_TIMEOUT_S = 5
UNACKNOWLEDGED_S = 5  # TCP_USER_TIMEOUT: data sent and not acknowledged for this long ends the connection
KEEPALIVE_IDLE_S = 5  # an idle connection's first keepalive probe, then one a second, three unanswered
KEEPALIVE_INTERVAL_S = 1
KEEPALIVE_COUNT = 3


def libpq_params(given: Mapping[str, Any]) -> dict[str, Any]:
    """The libpq connection parameters of these bounds that the URL's query (``given``)
    does not set itself."""
    params: dict[str, Any] = {
        "connect_timeout": CONNECT_TIMEOUT_S, "keepalives": 1, "keepalives_idle": KEEPALIVE_IDLE_S,
        "keepalives_interval": KEEPALIVE_INTERVAL_S, "keepalives_count": KEEPALIVE_COUNT,
        "tcp_user_timeout": UNACKNOWLEDGED_S * 1000,
    }
    return {k: v for k, v in params.items() if k not in given}


def bound_socket(sock: socket.socket) -> None:
    """Set the keepalive and unacknowledged-data bounds on a connected TCP socket (where
    the platform has these options; a Unix socket is left alone)."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE_S), ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_S),
                        ("TCP_KEEPCNT", KEEPALIVE_COUNT), ("TCP_USER_TIMEOUT", UNACKNOWLEDGED_S * 1000)):
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


def bounded_sessions(url: str, within_s: float) -> str:
    """``url`` with server-side bounds on its sessions, for a process whose transactions
    are short and must never be held by a database that stopped answering (the
    receiver's store process): on PostgreSQL a statement or a lock wait ends after two
    thirds of ``within_s``, and a session idle inside a transaction after ``within_s``
    (its client gone mid-transaction, whose row locks would otherwise hold every retry
    of its events until the server's keepalive notices, hours later). Another database's
    URL, or one that sets ``options`` itself, is returned as it is."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql" or "options" in parsed.query:
        return url
    idle_ms = int(within_s * 1000)
    statement_ms = idle_ms * 2 // 3
    options = (f"-c statement_timeout={statement_ms} -c lock_timeout={statement_ms} "
               f"-c idle_in_transaction_session_timeout={idle_ms}")
    return parsed.update_query_dict({"options": options}).render_as_string(hide_password=False)
