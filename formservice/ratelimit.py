"""Sliding-window rate limits. The decision is a pure function of the send times."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence


def retry_after_ms(sends: Sequence[int], now: int, limit: int, window_ms: int) -> int:
    """0 when a call at ``now`` fits the window (fewer than ``limit`` sends in the last
    ``window_ms``); otherwise the milliseconds until the send that blocks it leaves the
    window. ``sends`` are ascending epoch ms."""
    recent = [t for t in sends if t > now - window_ms]
    if len(recent) < limit:
        return 0
    return recent[len(recent) - limit] + window_ms - now


class SlidingWindow:
    """Per-key send logs. ``try_acquire`` admits and records a call, or returns how long
    to wait; a refused call is not recorded, so a throttled client is not punished twice."""

    def __init__(self, limit: int, window_ms: int) -> None:
        self.limit = limit
        self.window_ms = window_ms
        self._logs: dict[str, deque[int]] = {}

    def _log(self, key: str, now: int) -> deque[int]:
        log = self._logs.setdefault(key, deque())
        while log and log[0] <= now - self.window_ms:
            log.popleft()
        return log

    def check(self, key: str, now: int) -> int:
        return retry_after_ms(self._log(key, now), now, self.limit, self.window_ms)

    def record(self, key: str, now: int) -> None:
        self._log(key, now).append(now)

    def try_acquire(self, key: str, now: int) -> int:
        wait = self.check(key, now)
        if wait == 0:
            self.record(key, now)
        return wait

    def count(self, key: str, now: int) -> int:
        return len(self._log(key, now))

    def reset(self) -> None:
        self._logs.clear()

    def state(self) -> dict[str, list[int]]:
        """The send times kept per key (what :meth:`load` puts back)."""
        return {key: list(log) for key, log in self._logs.items() if log}

    def load(self, state: dict[str, list[int]]) -> None:
        """Replace the send logs with ``state`` (from :meth:`state`)."""
        self._logs = {key: deque(sorted(int(t) for t in times)) for key, times in state.items()}
