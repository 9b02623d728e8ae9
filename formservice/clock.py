"""The service's clock: wall time plus a test offset that `clock.advance` moves forward.

Everything time-driven (expiry, rate windows, token lifetimes, delivery retries) reads
this clock, so a test can jump a day ahead without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import overload

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS


class Clock:
    def __init__(self, offset_ms: int = 0, wall: Callable[[], float] = time.time) -> None:
        self.offset_ms = offset_ms
        self._wall = wall

    def now_ms(self) -> int:
        return int(self._wall() * 1000) + self.offset_ms

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("the clock only moves forward")
        self.offset_ms += ms
        return self.now_ms()


@overload
def iso(ms: int) -> str: ...
@overload
def iso(ms: None) -> None: ...
@overload
def iso(ms: int | None) -> str | None: ...
def iso(ms: int | None) -> str | None:
    """Epoch ms as ISO 8601 with milliseconds and ``Z``, the event timestamp format."""
    if ms is None:
        return None
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


@overload
def sql_ts(ms: int) -> str: ...
@overload
def sql_ts(ms: None) -> None: ...
@overload
def sql_ts(ms: int | None) -> str | None: ...
def sql_ts(ms: int | None) -> str | None:
    """Epoch ms as ``YYYY-MM-DD HH:MM:SS`` (UTC), the submissions.list timestamp format."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
