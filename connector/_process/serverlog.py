"""What an HTTP server of formsync logs for a request its parser refuses (a NUL byte in
a header, a broken request line, a header too long): one warning line with its cause,
instead of aiohttp's ERROR with a traceback per such request.

aiohttp's request handler answers such a request 400 (or 413, 431) itself and logs it
through the ``aiohttp.server`` logger as "Error handling request" with the parser's
exception attached. ``quiet_malformed_requests`` puts a filter on that logger which turns
exactly those records (their exception is an ``HttpProcessingError``) into a warning of
one line; a handler's own unexpected exception keeps its ERROR and traceback."""

from __future__ import annotations

import logging
import re

from aiohttp.http_exceptions import HttpProcessingError

__all__ = ["MalformedRequestFilter", "quiet_malformed_requests"]

SERVER_LOGGER = "aiohttp.server"
_CAUSE_CHARS = 200


class MalformedRequestFilter(logging.Filter):
    """Rewrites a record of a request the HTTP parser refused into one warning line:
    ``malformed request from 127.0.0.1 refused with 400: Invalid header value char``
    (the cause only: never the request's bytes the parser's message quotes)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            cause = _cause(error)
            peer = record.args[0] if isinstance(record.args, tuple) and record.args else "an unknown peer"
            record.msg, record.args = "malformed request from %s refused with %s: %s", (peer, error.code, cause)
            # A warning at most: aiohttp logs a first request that is not HTTP at all at DEBUG.
            record.levelno = min(record.levelno, logging.WARNING)
            record.levelname = logging.getLevelName(record.levelno)
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def _cause(error: HttpProcessingError) -> str:
    """The parser's message without the request's bytes it may quote (a header's value
    could be a secret): its first line, up to a quoted ``b'...'``."""
    first = (error.message.strip().splitlines() or [type(error).__name__])[0]
    return re.split(r":? b['\"]", first, maxsplit=1)[0].rstrip(": ")[:_CAUSE_CHARS]


def quiet_malformed_requests() -> None:
    """Install ``MalformedRequestFilter`` on aiohttp's server logger (once per process)."""
    logger = logging.getLogger(SERVER_LOGGER)
    if not any(isinstance(f, MalformedRequestFilter) for f in logger.filters):
        logger.addFilter(MalformedRequestFilter())
