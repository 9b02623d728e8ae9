"""What the receiver and the sandbox log for a request aiohttp's parser refuses (a NUL
byte in a header, a broken request line, a header too long): one warning line with its
cause and the peer, never an ERROR with a traceback; sent as raw bytes over a socket."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest

from connector._process.serverlog import SERVER_LOGGER, MalformedRequestFilter
from connector.store import Store
from formservice.sandbox.runner import SandboxServer

from .test_receiver import running

MALFORMED = [
    # (case, raw request, the cause logged)
    ("NUL byte in a header", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Note: a\x00b\r\n\r\n", "Invalid header value char"),
    ("broken request line", b"GET /healthz HTTP/1.1 trailing\r\nHost: x\r\n\r\n", "Bad status line"),
    ("broken version", b"GET /healthz HTTP/9.Z\r\nHost: x\r\n\r\n", "Bad status line"),
    ("header line too long", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 9000 + b"\r\n\r\n",
     "Got more than 8190 bytes when reading"),
]


async def send_raw(port: int, wire: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(wire)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


async def refused_requests(port: int, caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Each malformed request sent once (after a valid one on the same connection would
    be a second request: each goes on a connection of its own); the records logged."""
    caplog.clear()
    for case, wire, _ in MALFORMED:
        answer = await send_raw(port, wire)
        assert answer.startswith(b"HTTP/1.") and answer.split(b" ")[1].startswith(b"4"), (case, answer[:80])
    await asyncio.sleep(0.1)  # the handler logs as it closes the connection
    return [r for r in caplog.records if r.name == SERVER_LOGGER]


def assert_one_warning_line_each(records: list[logging.LogRecord]) -> None:
    assert len(records) == len(MALFORMED), [r.getMessage() for r in records]
    for record, (case, _, cause) in zip(records, MALFORMED, strict=True):
        message = record.getMessage()
        assert record.levelno == logging.WARNING and record.exc_info is None and record.exc_text is None, case
        assert "\n" not in message and message.startswith("malformed request from 127.0.0.1 refused with 4"), message
        assert message.endswith(f": {cause}"), (case, message)  # the cause, never the request's bytes


async def test_the_receiver_logs_a_malformed_request_as_one_warning_line(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    store = Store(f"sqlite:///{tmp_path / 'log.db'}")
    store.migrate()
    try:
        async with running(store, store_process=False) as rx:
            assert_one_warning_line_each(await refused_requests(int(rx.base.rsplit(":", 1)[1]), caplog))
            status, _ = await rx.get("/healthz")
            assert status == 200
    finally:
        store.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "no ERROR for a malformed request"


async def test_the_sandbox_logs_a_malformed_request_as_one_warning_line(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    async with SandboxServer(tmp_path / "sb") as sb:
        assert_one_warning_line_each(await refused_requests(int(sb.base_url.rsplit(":", 1)[1]), caplog))
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "no ERROR for a malformed request"


def test_a_handler_exception_keeps_its_error_and_traceback() -> None:
    """Only the parser's refusals are rewritten: a bug in a handler stays an ERROR with
    its traceback."""
    try:
        raise RuntimeError("a bug")
    except RuntimeError:
        record = logging.LogRecord(SERVER_LOGGER, logging.ERROR, __file__, 1, "Error handling request from %s",
                                   ("127.0.0.1",), sys.exc_info())
    assert MalformedRequestFilter().filter(record)
    assert record.levelno == logging.ERROR and record.exc_info is not None
