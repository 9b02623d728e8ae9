"""Client-side pacing: a sliding-window log per limit, so no 60-second window ever holds
more sends than the service admits. (A leaky bucket lets almost twice the limit through
after an idle spell; a log of send times cannot.)"""

from __future__ import annotations

import asyncio
import hashlib
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[object]]


def wait_before_send(sends: Sequence[float], now: float, limit: int, window: float) -> float:
    """Seconds to wait from ``now`` so that one more send keeps every window of length
    ``window`` at ``limit`` sends or fewer. ``sends`` are ascending times; a send exactly
    ``window`` ago has left the window (the service counts ``(now - window, now]``).
    0 means send now."""
    if limit < 1:
        raise ValueError(f"limit must be 1 or more, not {limit}")
    recent = [t for t in sends if t > now - window]
    if len(recent) < limit:
        return 0.0
    return max(0.0, recent[len(recent) - limit] + window - now)


class Window:
    """The send log of one limit. ``margin`` widens the window a little, so latency
    between admitting a send here and its arrival at the service never lets the
    service's own window see ``limit + 1``."""

    def __init__(self, limit: int, seconds: float = 60.0, margin: float = 0.25) -> None:
        if limit < 1:
            raise ValueError(f"limit must be 1 or more, not {limit}")
        self.limit = limit
        self.seconds = seconds
        self.margin = margin
        self.sends: deque[float] = deque()

    @property
    def span(self) -> float:
        return self.seconds + self.margin

    def wait(self, now: float) -> float:
        while self.sends and self.sends[0] <= now - self.span:
            self.sends.popleft()
        return wait_before_send(self.sends, now, self.limit, self.span)


class Pacer:
    """Admits sends for one token: every call against ``calls``; creates also against
    ``creates``. Shared by every task that uses the same token (see :func:`shared_pacer`).
    A send waits only for the windows it counts against: a plain call is never held up
    behind a create that waits for the creates window."""

    def __init__(self, calls_per_minute: int = 120, creates_per_minute: int = 60, *, window: float = 60.0,
                 margin: float = 0.25, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> None:
        self.calls = Window(calls_per_minute, window, margin)
        self.creates = Window(creates_per_minute, window, margin)
        self._clock = clock
        self._sleep = sleep

    def delay(self, create: bool = False) -> float:
        """Seconds until a send (a create when ``create``) would be admitted, without
        recording one: lets a caller wait for its turn in a way it can interrupt."""
        now = self._clock()
        wait = self.calls.wait(now)
        return max(wait, self.creates.wait(now)) if create else wait

    async def acquire(self, create: bool = False) -> float:
        """Wait until a send fits every window it counts against, record it, and return
        the seconds waited."""
        waited = 0.0
        while True:
            # Checking and recording happen with no await between them, so two tasks of
            # one event loop can never both take the last place in a window.
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
        """Change the limits; sends already logged keep counting against the new ones."""
        for window, value in ((self.calls, calls_per_minute), (self.creates, creates_per_minute)):
            if value is not None:
                if value < 1:
                    raise ValueError(f"a per-minute limit must be 1 or more, not {value}")
                window.limit = value


def token_key(token: str) -> str:
    """A short hash that identifies a token (to share its pacer) without revealing it."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


# Per event loop (tasks of one loop share a pacer safely), per (service, token).
_PACERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], Pacer]] = (
    weakref.WeakKeyDictionary())


def shared_pacer(base_url: str, token_key: str, calls_per_minute: int = 120, creates_per_minute: int = 60, *,
                 clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> Pacer:
    """The one Pacer for a (service, token) pair in this event loop, so separate clients
    of one token share its budget. ``token_key`` identifies the token without being it
    (a hash). The first client creates the pacer (with its ``clock`` and ``sleep``);
    limits follow the latest configuration."""
    pacers = _PACERS.setdefault(asyncio.get_running_loop(), {})
    key = (base_url, token_key)
    pacer = pacers.get(key)
    if pacer is None:
        pacer = pacers[key] = Pacer(calls_per_minute, creates_per_minute, clock=clock, sleep=sleep)
    else:
        pacer.configure(calls_per_minute, creates_per_minute)
    return pacer
