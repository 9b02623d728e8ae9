"""Client-side pacing: a sliding-window log per limit, so no 60-second window ever holds
more sends than the service admits. (A leaky bucket lets almost twice the limit through
after an idle spell; a log of send times cannot.)

Which time a send is logged at: the service counts a call when it arrives, somewhere
between the moment the client sends it and the moment the answer comes back. A send
admitted through :meth:`Pacer.slot` is logged at the time its answer came back (and
counted as "now" while it is in flight), so the next send that depends on it can never
reach the service less than a window after it did, whatever the latency. That needs no
margin for latency, so the pacer runs at the limit itself; ``margin`` covers only the
clocks' granularity."""

from __future__ import annotations

import asyncio
import hashlib
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[object]]
# Clock granularity and skew between this process and the service (both count durations).
DEFAULT_MARGIN = 0.02


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


class Send:
    """One logged send: its time, and whether it is still in flight (then it counts as
    sent "now", since its answer, and so its arrival, may still be to come)."""

    __slots__ = ("at", "open")

    def __init__(self, at: float, open: bool = False) -> None:
        self.at = at
        self.open = open

    def settle(self, at: float) -> None:
        """The answer came back at ``at``: the service counted the send no later."""
        self.at = max(self.at, at)
        self.open = False


class Window:
    """The send log of one limit. ``margin`` widens the window a little (clock
    granularity between here and the service)."""

    def __init__(self, limit: int, seconds: float = 60.0, margin: float = DEFAULT_MARGIN) -> None:
        if limit < 1:
            raise ValueError(f"limit must be 1 or more, not {limit}")
        if seconds <= 0:
            raise ValueError(f"a window must be longer than 0 s, not {seconds}")
        self.limit = limit
        self.seconds = seconds
        self.margin = margin
        self.sends: deque[Send] = deque()

    @property
    def span(self) -> float:
        return self.seconds + self.margin

    def times(self, now: float) -> list[float]:
        """The logged times still in the window, ascending (a send in flight counts as ``now``)."""
        while self.sends and not self.sends[0].open and self.sends[0].at <= now - self.span:
            self.sends.popleft()
        # Settling moves a send later, so the log is only nearly sorted (a cheap sort).
        return sorted(now if e.open else e.at for e in self.sends if e.open or e.at > now - self.span)

    def wait(self, now: float) -> float:
        return wait_before_send(self.times(now), now, self.limit, self.span)

    def record(self, at: float, open: bool = False) -> Send:
        entry = Send(at, open)
        self.sends.append(entry)
        return entry


class Pacer:
    """Admits sends for one token: every call against ``calls``; creates also against
    ``creates``. Shared by every task that uses the same token (see :func:`shared_pacer`).
    A send waits only for the windows it counts against: a plain call is never held up
    behind a create that waits for the creates window."""

    def __init__(self, calls_per_minute: int = 120, creates_per_minute: int = 60, *, window: float = 60.0,
                 margin: float = DEFAULT_MARGIN, clock: Clock = time.monotonic,
                 sleep: Sleep = asyncio.sleep) -> None:
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

    async def _admit(self, create: bool, open: bool) -> tuple[float, list[Send]]:
        waited = 0.0
        while True:
            # Checking and recording happen with no await between them, so two tasks of
            # one event loop can never both take the last place in a window.
            now = self._clock()
            wait = self.calls.wait(now)
            if create:
                wait = max(wait, self.creates.wait(now))
            if wait <= 0:
                entries = [self.calls.record(now, open)]
                if create:
                    entries.append(self.creates.record(now, open))
                return waited, entries
            await self._sleep(wait)
            waited += wait

    async def acquire(self, create: bool = False) -> float:
        """Wait until a send fits every window it counts against, record it at the time
        of admission, and return the seconds waited. The send must reach the service at
        once: use :meth:`slot` when the time to its arrival is not negligible."""
        waited, _ = await self._admit(create, open=False)
        return waited

    @asynccontextmanager
    async def slot(self, create: bool = False) -> AsyncIterator[float]:
        """Wait until a send fits every window it counts against and yield the seconds
        waited; send inside the block. The send is logged as in flight until the block
        ends, then at the time it ended (when the answer came back), so latency can
        never make the service's window see one send more than the limit."""
        waited, entries = await self._admit(create, open=True)
        try:
            yield waited
        finally:
            now = self._clock()
            for entry in entries:
                entry.settle(now)

    def configure(self, calls_per_minute: int | None = None, creates_per_minute: int | None = None,
                  window: float | None = None) -> None:
        """Change the limits (and the window's length, for a service whose window is not
        60 s); sends already logged keep counting against the new ones."""
        if window is not None and window <= 0:
            raise ValueError(f"a window must be longer than 0 s, not {window}")
        for value in (calls_per_minute, creates_per_minute):
            if value is not None and value < 1:
                raise ValueError(f"a per-minute limit must be 1 or more, not {value}")
        for win, value in ((self.calls, calls_per_minute), (self.creates, creates_per_minute)):
            if value is not None:
                win.limit = value
            if window is not None:
                win.seconds = window


def token_key(token: str) -> str:
    """A short hash that identifies a token (to share its pacer) without revealing it."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


# Per event loop (tasks of one loop share a pacer safely), per (service, token).
_PACERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], Pacer]] = (
    weakref.WeakKeyDictionary())


def shared_pacer(base_url: str, token_key: str, calls_per_minute: int | None = None,
                 creates_per_minute: int | None = None, *, window: float | None = None,
                 clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> Pacer:
    """The one Pacer for a (service, token) pair in this event loop, so separate clients
    of one token share its budget. ``token_key`` identifies the token without being it
    (a hash). The first client creates the pacer (with its ``clock`` and ``sleep``, and
    120 calls / 60 creates per 60 s for what it leaves unset); a later client changes
    only the limits it sets."""
    pacers = _PACERS.setdefault(asyncio.get_running_loop(), {})
    key = (base_url, token_key)
    pacer = pacers.get(key)
    if pacer is None:
        pacer = pacers[key] = Pacer(calls_per_minute or 120, creates_per_minute or 60, window=window or 60.0,
                                    clock=clock, sleep=sleep)
    else:
        pacer.configure(calls_per_minute, creates_per_minute, window)
    return pacer
