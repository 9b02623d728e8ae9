"""Client-side pacing: a sliding-window log per limit, so no 60-second window ever holds
more sends than the service admits. (A leaky bucket lets almost twice the limit through
after an idle spell; a log of send times cannot.)"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass


def wait_before_send(sends: Sequence[float], now: float, limit: int, window: float) -> float:
    """Seconds to wait from ``now`` so that one more send keeps every window of length
    ``window`` at ``limit`` sends or fewer. ``sends`` are ascending times; 0 means send now."""
    recent = [t for t in sends if t > now - window]
    if len(recent) < limit:
        return 0.0
    return max(0.0, recent[len(recent) - limit] + window - now)


@dataclass
class Window:
    limit: int
    seconds: float = 60.0
    margin: float = 0.25  # latency slack, so the server's window never sees limit + 1

    def __post_init__(self) -> None:
        self.sends: deque[float] = deque()

    def wait(self, now: float) -> float:
        span = self.seconds + self.margin
        while self.sends and self.sends[0] <= now - span:
            self.sends.popleft()
        return wait_before_send(self.sends, now, self.limit, span)


class Pacer:
    """Admits sends for one token: every call against ``calls``; creates also against
    ``creates``. Shared by every task that uses the same token (see :func:`shared_pacer`)."""

    def __init__(self, calls_per_minute: int = 120, creates_per_minute: int = 60, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> None:
        self.calls = Window(calls_per_minute)
        self.creates = Window(creates_per_minute)
        self._clock = clock
        self._sleep = sleep
        self._lock = asyncio.Lock()

    async def acquire(self, create: bool = False) -> float:
        """Wait until a send fits every window, record it, and return the time waited."""
        waited = 0.0
        async with self._lock:
            while True:
                now = self._clock()
                wait = self.calls.wait(now)
                if create:
                    wait = max(wait, self.creates.wait(now))
                if wait <= 0:
                    self.calls.sends.append(now)
                    if create:
                        self.creates.sends.append(now)
                    return waited
                await self._sleep(wait)
                waited += wait

    def configure(self, calls_per_minute: int | None = None, creates_per_minute: int | None = None) -> None:
        if calls_per_minute is not None:
            self.calls.limit = calls_per_minute
        if creates_per_minute is not None:
            self.creates.limit = creates_per_minute


# Per event loop (an asyncio.Lock belongs to one loop), per (service, token).
_PACERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], Pacer]] = (
    weakref.WeakKeyDictionary())


def shared_pacer(base_url: str, token_fingerprint: str, calls_per_minute: int, creates_per_minute: int) -> Pacer:
    """The one Pacer for a (service, token) pair in this event loop, so separate clients
    of one token share its budget. Limits follow the latest configuration."""
    pacers = _PACERS.setdefault(asyncio.get_running_loop(), {})
    key = (base_url, token_fingerprint)
    pacer = pacers.get(key)
    if pacer is None:
        pacer = pacers[key] = Pacer(calls_per_minute, creates_per_minute)
    else:
        pacer.configure(calls_per_minute, creates_per_minute)
    return pacer
