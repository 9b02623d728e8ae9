"""The service's time: what "now" is for the service's state (a request's idle time, a
close date, the reminder spacing). Every answer of the service carries it in its ``Date``
header (the sandbox sets that header from its test clock), so a client learns the
service's clock from each answer and keeps its offset from this machine's clock; before
any answer, one ``HEAD`` of the API address asks for it (no API call, no rate budget).
The header has whole seconds: the time said is at most about a second behind the
service's, never ahead of it. Only where the service is known to be the sandbox (on this
machine, answering its ``clock.get`` helper) is its test clock read to the millisecond,
so a test that moves the clock and acts at once sees exactly the time it set."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

import aiohttp

SANDBOX_PATH = "/api/sandbox"  # the sandbox's test helpers (clock.get), never on the hosted service


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
        """Learn the service's time from an answer's ``Date`` header (ignored when absent,
        and when it agrees with the time known, which may be finer than its seconds)."""
        said = date_ms(header)
        known = self.known_now()
        if said is not None and (known is None or not said <= known < said + _AGREE_MS):
            self.offset_ms = said - int(self._local() * 1000)

    def set_now(self, now_ms: int) -> None:
        """The service's exact time now (the sandbox's ``clock.get``)."""
        self.offset_ms = now_ms - int(self._local() * 1000)

    def known_now(self) -> int | None:
        """The service's time now (epoch ms), or None before any answer said it."""
        return None if self.offset_ms is None else int(self._local() * 1000) + self.offset_ms

    async def now(self, session: aiohttp.ClientSession, base_url: str, token: str | None = None) -> int:
        """The service's time now (epoch ms): a sandbox's test clock (with ``token``, see
        ``sandbox_now``), else from the answers seen, else from the ``Date`` of one ``HEAD
        {base_url}/api/v1``. Raises ``aiohttp.ClientError`` or ``OSError`` when the service
        cannot be reached, ``ValueError`` when it sends no date."""
        exact = await sandbox_now(session, base_url, token) if token else None
        if exact is not None:
            self.set_now(exact)
            return exact
        known = self.known_now()
        if known is not None:
            return known
        async with session.head(f"{base_url.rstrip('/')}/api/v1", allow_redirects=False) as resp:
            self.observe(resp.headers.get("Date"))
        known = self.known_now()
        if known is None:
            raise ValueError(f"the service at {base_url} sent no Date header, so its time is unknown")
        return known


_AGREE_MS = 2000  # a Date within its second (and a round trip) of the time known agrees with it


def on_this_machine(base_url: str) -> bool:
    """Whether ``base_url`` names a loopback address (where a sandbox may run)."""
    host = urlsplit(base_url).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def sandbox_now(session: aiohttp.ClientSession, base_url: str, token: str) -> int | None:
    """The test clock (epoch ms) of the sandbox at ``base_url``, from its ``clock.get``
    helper; None when the service is not on this machine or does not answer as a
    sandbox (the hosted service is never asked)."""
    if not on_this_machine(base_url):
        return None
    try:
        async with session.post(f"{base_url.rstrip('/')}{SANDBOX_PATH}", json={"method": "clock.get", "params": {}},
                                headers={"Authorization": f"Bearer {token}"}, allow_redirects=False) as resp:
            body = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
        return None
    data = body.get("data") if isinstance(body, dict) and body.get("ok") is True else None
    now = data.get("now") if isinstance(data, dict) else None
    return now if isinstance(now, int) and not isinstance(now, bool) else None


async def service_now(base_url: str, *, seconds: float = 30.0) -> int:
    """The service's time now (epoch ms), asked of the service at ``base_url`` (no token
    needed); the same errors as ``ServiceClock.now``."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds)) as session:
        return await ServiceClock().now(session, base_url)
