"""The service's clock: wall time plus a test offset that `clock.advance` moves forward.

Everything time-driven (expiry, rate windows, token lifetimes, delivery retries) reads
this clock, so a test can jump a day ahead without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Self, TypeVar, overload

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


@overload
def from_ms(value: int | datetime) -> datetime: ...
@overload
def from_ms(value: int | datetime | None) -> datetime | None: ...
def from_ms(value: int | datetime | None) -> datetime | None:
    """Epoch ms as an aware UTC datetime (a datetime is returned in UTC; naive is UTC;
    None stays None)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected epoch ms, got {value!r}")
    return _EPOCH + timedelta(milliseconds=value)


def to_ms(when: datetime) -> int:
    """An aware (or naive UTC) datetime as epoch ms."""
    aware = when.replace(tzinfo=UTC) if when.tzinfo is None else when
    return (aware - _EPOCH) // _ONE_MS


_Ms = TypeVar("_Ms", int, int | None)


class MsOf(Generic[_Ms]):
    """The epoch-ms integer of a datetime attribute of a result: ``created_at_ms`` reads
    ``created_at`` (None when it is None); ``MsOf[int]`` for a time never None."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._field = name.removesuffix("_ms")

    @overload
    def __get__(self, obj: None, owner: type) -> Self: ...
    @overload
    def __get__(self, obj: object, owner: type) -> _Ms: ...
    def __get__(self, obj: object | None, owner: type) -> Self | _Ms:
        if obj is None:
            return self
        moment: Any = getattr(obj, self._field)
        return None if moment is None else to_ms(moment)  # type: ignore[return-value]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
