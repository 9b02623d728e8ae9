"""The service's time: what "now" is for the service's state (a request's idle time, a
close date, the reminder spacing). Every answer of the service carries it in its ``Date``
header (the sandbox sets that header from its test clock), so a client learns the
service's clock from each answer and keeps its offset from this machine's clock; before
any answer, one ``HEAD`` of the API address asks for it (no API call, no rate budget).
The header has whole seconds: the time said is at most about a second behind the
service's, never ahead of it."""

from __future__ import annotations

import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime

import aiohttp


def date_ms(header: str | None) -> int | None:
    """An HTTP ``Date`` header (``Sun, 06 Nov 1994 08:49:37 GMT``) in epoch ms; None when
    it is missing or not a date."""
    if not header:
        return None
    try:
        when = parsedate_to_datetime(header)
    except (TypeError, ValueError, IndexError):
        return None
    return int(when.timestamp() * 1000) if when.tzinfo is not None else None


class ServiceClock:
    """The service's clock as its answers tell it: the offset of the last ``Date`` seen
    from this machine's clock (``local``, seconds)."""

    def __init__(self, local: Callable[[], float] = time.time) -> None:
        self._local = local
        self.offset_ms: int | None = None

    def observe(self, header: str | None) -> None:
        """Learn the service's time from an answer's ``Date`` header (ignored when absent)."""
        said = date_ms(header)
        if said is not None:
            self.offset_ms = said - int(self._local() * 1000)

    def known_now(self) -> int | None:
        """The service's time now (epoch ms), or None before any answer said it."""
        return None if self.offset_ms is None else int(self._local() * 1000) + self.offset_ms

    async def now(self, session: aiohttp.ClientSession, base_url: str) -> int:
        """The service's time now (epoch ms): from the answers seen, else from the ``Date``
        of one ``HEAD {base_url}/api/v1``. Raises ``aiohttp.ClientError`` or ``OSError``
        when the service cannot be reached, ``ValueError`` when it sends no date."""
        known = self.known_now()
        if known is not None:
            return known
        async with session.head(f"{base_url.rstrip('/')}/api/v1", allow_redirects=False) as resp:
            self.observe(resp.headers.get("Date"))
        known = self.known_now()
        if known is None:
            raise ValueError(f"the service at {base_url} sent no Date header, so its time is unknown")
        return known


async def service_now(base_url: str, *, seconds: float = 30.0) -> int:
    """The service's time now (epoch ms), asked of the service at ``base_url`` (no token
    needed); the same errors as ``ServiceClock.now``."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds)) as session:
        return await ServiceClock().now(session, base_url)
