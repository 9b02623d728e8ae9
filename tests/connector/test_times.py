"""The time conversions (connector/_times.py) with fixed inputs, and the models' time
attributes built on them: aware UTC datetimes, ``*_ms`` integers, the wire unchanged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from connector._times import to_ms, to_service, utc
from connector.models import Event, RequestRecord, Submission
from formservice.clock import from_ms
from formservice.clock import to_ms as service_to_ms
from formservice.sandbox.models import ClockResult, DeliveryItem

MOMENT = datetime(2026, 3, 4, 5, 6, 7, 123000, tzinfo=UTC)
MOMENT_MS = 1772600767123


@pytest.mark.parametrize(("value", "expected"), [
    (MOMENT_MS, MOMENT),
    (0, datetime(1970, 1, 1, tzinfo=UTC)),
    (-1, datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)),
    ("2026-03-04 05:06:07", MOMENT.replace(microsecond=0)),  # the service's naive string is UTC
    ("2026-03-04T05:06:07.123Z", MOMENT),
    ("2026-03-04T07:06:07.123+02:00", MOMENT),
    ("2026-03-04T00:06:07.123-05:00", MOMENT),
    (datetime(2026, 3, 4, 5, 6, 7, 123000), MOMENT),  # naive: UTC
    (MOMENT.astimezone(timezone(timedelta(hours=9))), MOMENT),
    (None, None),
])
def test_utc_reads_every_wire_form(value: object, expected: datetime | None) -> None:
    got = utc(value)
    assert got == expected
    if got is not None:
        assert got.tzinfo is UTC


@pytest.mark.parametrize("value", ["yesterday", "2026-13-01 00:00:00", True, [1]])
def test_utc_refuses_what_is_no_time(value: object) -> None:
    with pytest.raises(ValueError, match=r"expected a time: epoch ms, 'YYYY-MM-DD HH:MM:SS' \(UTC\) or ISO 8601"):
        utc(value)


def test_utc_refuses_epoch_ms_beyond_what_a_datetime_holds() -> None:
    with pytest.raises(ValueError, match="a time out of range"):
        utc(2**63)


def test_to_ms_and_to_service_write_the_wire_forms() -> None:
    assert to_ms(MOMENT) == MOMENT_MS
    assert to_ms(datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)) == -1  # floors, like epoch ms do
    assert to_ms(MOMENT.replace(tzinfo=None)) == MOMENT_MS
    assert to_ms(None) is None
    assert to_service(MOMENT.astimezone(timezone(timedelta(hours=-3)))) == "2026-03-04 05:06:07"
    assert to_service(None) is None
    assert all(to_ms(utc(ms)) == ms for ms in (0, 1, 999, MOMENT_MS, 4102444800000))


def test_models_give_datetimes_and_keep_the_wire() -> None:
    wire = {"id": "req_1", "status": "pending", "createdAt": MOMENT_MS, "expiresAt": None,
            "timeline": [{"type": "created", "at": MOMENT_MS}]}
    rec = RequestRecord.model_validate(wire)
    assert rec.created_at == MOMENT and rec.created_at_ms == MOMENT_MS
    assert rec.expires_at is None and rec.expires_at_ms is None
    assert rec.timeline is not None and rec.timeline[0].at_ms == MOMENT_MS
    dumped = rec.model_dump(mode="json", exclude_unset=True)
    assert dumped["createdAt"] == MOMENT_MS and dumped["timeline"][0]["at"] == MOMENT_MS

    sub = Submission.model_validate({"id": "s", "isCompleted": True, "createdAt": "2026-03-04 05:06:07",
                                     "submittedAt": "2026-03-04 05:06:07"})
    assert sub.submitted_at == sub.created_at == MOMENT.replace(microsecond=0)
    assert sub.model_dump(mode="json")["createdAt"] == "2026-03-04 05:06:07"

    event = Event.model_validate({"id": "evt_1", "type": "request.completed",
                                  "createdAt": "2026-03-04T07:06:07.123+02:00"})
    assert event.created_at == MOMENT and event.created_at.tzinfo is UTC


def test_the_sandbox_helpers_results_give_datetimes_and_keep_epoch_ms_on_the_wire() -> None:
    assert from_ms(MOMENT_MS) == MOMENT and from_ms(None) is None and service_to_ms(MOMENT) == MOMENT_MS
    assert from_ms(MOMENT.replace(tzinfo=None)) == MOMENT
    with pytest.raises(ValueError, match="expected epoch ms"):
        from_ms("2026-03-04")  # type: ignore[call-overload]
    clock = ClockResult.model_validate({"now": MOMENT_MS, "offsetMs": 5})
    assert (clock.now, clock.now_ms, clock.offset_ms) == (MOMENT, MOMENT_MS, 5)
    assert clock.model_dump(mode="json") == {"now": MOMENT_MS, "offsetMs": 5}
    waiting = DeliveryItem.model_validate({"id": "d", "kind": "callback", "targetUrl": "http://x", "state": "done",
                                           "attemptCount": 1, "nextAttemptAt": None, "subscriptionId": None,
                                           "attempts": []})
    assert waiting.next_attempt_at is None and waiting.next_attempt_at_ms is None
