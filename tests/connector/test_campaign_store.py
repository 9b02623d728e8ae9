"""What the store keeps for a campaign, on SQLite, PostgreSQL and MariaDB: the funnel's
columns from request records (newest wins, a losing write only fills them in), a job's
rows with their requests, the rounds, the suppression list and the bounced addresses,
and migration 0006 (campaign) down and up again."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from connector.store import Store
from connector.store._ledger import PendingRow
from connector.store._tables import RequestRow

from .test_store import T0, events, get, poll_record, req_completed, sub_event
from .test_store_migration import _to


def record(rid: str, status: str, updated: int, **extra: Any) -> dict[str, Any]:
    return poll_record(rid, status, updated, **extra)


def test_funnel_columns_newest_wins_and_losers_fill(store: Store) -> None:
    assert store.upsert_requests([record("req_1", "pending", T0 + 1000, deliveryStatus="queued")]) == ["req_1"]
    row = get(store, RequestRow, "req_1")
    assert (row.opened_at, row.started_at, row.reminders_sent) == (None, None, None), "not read yet is NULL"
    store.upsert_requests([record("req_1", "pending", T0 + 5000, openedAt=T0 + 4000, lastActivityAt=T0 + 4000,
                                  remindersSent=1, deliveryStatus="sent")])
    store.upsert_requests([record("req_1", "pending", T0 + 2000, remindersSent=0, openedAt=None)])  # stale
    row = get(store, RequestRow, "req_1")
    assert (row.opened_at, row.last_activity_at, row.reminders_sent, row.delivery_status) == (
        T0 + 4000, T0 + 4000, 1, "sent")
    # The completion event carries no opened or started time; a read of the completed
    # record (same updatedAt: it loses) fills in the started time it knows.
    done = T0 + 9000
    store.store_events(events(req_completed("evt_c", "req_1", "sub_1", done)))
    assert store.upsert_requests([record("req_1", "completed", done, completedAt=done, openedAt=T0 + 4000,
                                         startedAt=T0 + 8000, remindersSent=2)]) == []
    row = get(store, RequestRow, "req_1")
    assert (row.status, row.opened_at, row.started_at, row.reminders_sent) == ("completed", T0 + 4000, T0 + 8000, 1)


def test_campaign_rows_rounds_and_suppression(store: Store) -> None:
    store.ledger.open_job("spring", "form_contact", "/tmp/spring.csv", {})
    store.ledger.record_pending("spring", [PendingRow(f"ext:c-{i}", i + 2, f"h{i}", f"k{i}") for i in range(3)])
    for i in range(2):
        store.ledger.mark_sent("spring", f"ext:c-{i}", f"req_{i}")
    store.upsert_requests([
        record("req_0", "pending", T0 + 1000, recipient={"email": "Ann@Bounce.test", "name": "Ann"},
               deliveryStatus="bounced", remindersSent=3),
        record("req_1", "pending", T0 + 1000, recipient={"email": "bo@example.test", "name": "Bo"},
               deliveryStatus="sent", openedAt=T0 + 500)])
    rows = store.campaign.rows("spring")
    assert [(r.row_number, r.state, r.request_id, r.delivery_status, r.reminders_sent) for r in rows] == [
        (2, "sent", "req_0", "bounced", 3), (3, "sent", "req_1", "sent", None), (4, "pending", None, None, None)]
    assert rows[1].opened_at == T0 + 500 and rows[1].recipient_email == "bo@example.test"

    assert store.campaign.suppress([" Cy@Example.test", "cy@example.test", ""], "opted out") == 1
    assert store.campaign.suppress(["cy@example.test"]) == 0
    assert store.campaign.suppressed() == {"ann@bounce.test": "bounced", "cy@example.test": "listed: opted out"}

    assert store.ledger.record_round("spring", "remind", {"done": 2}, at=T0 + 7000) == T0 + 7000
    store.ledger.record_round("spring", "close", {"done": 1}, at=T0 + 9000)
    assert [(r["kind"], r["at"], r["done"]) for r in store.ledger.rounds("spring")] == [
        ("remind", T0 + 7000, 2), ("close", T0 + 9000, 1)]
    assert store.campaign.jobs() == ["spring"] and store.campaign.job("autumn") is None


def test_migration_0006_down_and_up_keeps_requests(db_url: str) -> None:
    store = Store(db_url)
    try:
        store.migrate()
        store.upsert_requests([record("req_1", "pending", T0 + 1000, openedAt=T0 + 500)])
        _to(store, "0005", down=True)
        columns = {c["name"] for c in sa.inspect(store.database.engine).get_columns("formsync_requests")}
        assert "opened_at" not in columns and "req_1" in _ids(store)
        assert "formsync_suppressions" not in sa.inspect(store.database.engine).get_table_names()
        store.migrate()
        assert _ids(store) == {"req_1"} and get(store, RequestRow, "req_1").opened_at is None
    finally:
        store.close()


def _ids(store: Store) -> set[str]:
    with store.database.engine.connect() as conn:
        return {r[0] for r in conn.execute(sa.text("SELECT id FROM formsync_requests"))}


def test_reminder_times_and_the_skipped_outcome_then_0008_down_and_up(db_url: str) -> None:
    store = Store(db_url)
    try:
        store.migrate()
        store.ledger.open_job("spring", "form_contact", "/tmp/spring.csv", {})
        store.ledger.record_pending("spring", [PendingRow("ext:c-0", 2, "h0", "k0")])
        store.ledger.mark_sent("spring", "ext:c-0", "req_1")
        store.upsert_requests([record("req_1", "pending", T0 + 1000)])
        store.campaign.reminded({"req_1": T0 + 5000})
        store.campaign.reminded({"req_1": T0 + 4000})  # older: left
        store.upsert_requests([record("req_1", "pending", T0 + 6000, remindersSent=1)])  # a poll keeps it
        assert store.campaign.rows("spring")[0].last_reminded_at == T0 + 5000
        run = store.runs.start("r", "remind", scheduled_at=None, pid=1, host="h")
        store.runs.finish(run, "skipped", summary="every request reminded too recently")
        assert store.runs.last("r").outcome == "skipped"
        with pytest.raises(sa.exc.IntegrityError):  # the outcomes are still checked
            store.runs.finish(run, "maybe")
        _to(store, "0006", down=True)
        columns = {c["name"] for c in sa.inspect(store.database.engine).get_columns("formsync_requests")}
        assert "last_reminded_at" not in columns and "req_1" in _ids(store)
        store.migrate()
        assert store.campaign.rows("spring")[0].last_reminded_at is None
        assert store.runs.last("r").outcome == "ok"  # where skipped is unknown, a skipped run reads as ok
    finally:
        store.close()


def test_a_campaign_row_carries_its_cancel_reason_and_the_form_its_stored_name(store: Store) -> None:
    assert store.campaign.form_name("form_contact") is None
    store.store_events(events(sub_event("evt_s", "sub_1")))
    assert store.campaign.form_name("form_contact") == "Contact"
    assert store.campaign.form_name("form_other") is None
    store.ledger.open_job("autumn", "form_contact", "/tmp/autumn.csv", {})
    store.ledger.record_pending("autumn", [PendingRow("ext:a", 2, "h", "k")])
    store.ledger.mark_sent("autumn", "ext:a", "req_a")
    store.upsert_requests([record("req_a", "canceled", T0 + 1000, canceledAt=T0 + 1000,
                                  cancelReason="survey closed")])
    assert [(r.status, r.cancel_reason) for r in store.campaign.rows("autumn")] == [("canceled", "survey closed")]
