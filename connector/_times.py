"""Time conversions between the wire and the Python API: every timestamp the models give
is an aware UTC ``datetime``, whatever the wire sent (epoch ms in the request methods,
``YYYY-MM-DD HH:MM:SS`` in ``submissions.list``, ISO 8601 in events). Pure functions,
the one place that reads and writes those forms."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, overload

SERVICE_FORMAT = "%Y-%m-%d %H:%M:%S"  # submissions.list's naive strings, in UTC
_NOT_A_TIME = "expected a time: epoch ms, 'YYYY-MM-DD HH:MM:SS' (UTC) or ISO 8601"


@overload
def utc(value: int | float | str | datetime) -> datetime: ...
@overload
def utc(value: Any) -> datetime | None: ...
def utc(value: Any) -> datetime | None:
    """An aware UTC ``datetime`` from what the wire sends: epoch ms (int), a ``datetime``,
    or a string (the service's ``YYYY-MM-DD HH:MM:SS``, or ISO 8601 with ``Z``, an offset
    or none); a time without a zone is UTC. None stays None. Raises ``ValueError`` for
    anything else."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return _EPOCH + timedelta(milliseconds=value)  # exact for integers, unlike a float of seconds
        except OverflowError:
            raise ValueError("a time out of range: epoch ms of the years 1 to 9999 expected") from None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(_NOT_A_TIME) from None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    raise ValueError(_NOT_A_TIME)


@overload
def to_ms(when: datetime) -> int: ...
@overload
def to_ms(when: datetime | None) -> int | None: ...
def to_ms(when: datetime | None) -> int | None:
    """Epoch ms of ``when`` (a time without a zone is UTC); None stays None."""
    if when is None:
        return None
    aware = when.replace(tzinfo=UTC) if when.tzinfo is None else when
    return (aware - _EPOCH) // _ONE_MS


@overload
def to_service(when: datetime) -> str: ...
@overload
def to_service(when: datetime | None) -> str | None: ...
def to_service(when: datetime | None) -> str | None:
    """``when`` as the service's ``YYYY-MM-DD HH:MM:SS`` UTC string; None stays None."""
    moment = utc(when)
    return None if moment is None else moment.strftime(SERVICE_FORMAT)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
