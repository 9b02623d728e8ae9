"""The outreach ledger's row state machine on SQLite and PostgreSQL: pending -> sending ->
sent, failed and sent again as corrected, changed, a crash between create and record, and
a re-run that sends only the rows still missing."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from connector.store import Store
from connector.store._ledger import ROW_STATES, Claim, OutreachLedger, PendingRow
from connector.store._tables import OUTREACH_STATES, OutreachJob, OutreachRow


@pytest.fixture
def ledger(store: Store) -> OutreachLedger:
    led = store.ledger
    led.open_job("job", "form_1", "sheet.csv", {"delivery": "none"})
    return led


def pend(ledger: OutreachLedger, key: str, number: int, chash: str, ikey: str) -> Claim:
    """Record one row as pending; its claim."""
    return ledger.record_pending("job", [PendingRow(key, number, chash, ikey)])[key]


def row(store: Store, key: str) -> OutreachRow:
    with store.database.reader() as s:
        return s.exec(select(OutreachRow).where(OutreachRow.job_name == "job", OutreachRow.row_key == key)).one()


def test_a_row_goes_pending_then_sending_then_sent(store: Store, ledger: OutreachLedger) -> None:
    before = store.clock()
    assert pend(ledger, "ext:a", 2, "h1", "key-a") == "send"
    rec = row(store, "ext:a")
    assert (rec.state, rec.row_number, rec.content_hash, rec.idempotency_key, rec.attempts) == (
        "pending", 2, "h1", "key-a", 0)
    ledger.mark_sending("job", "ext:a")
    assert (row(store, "ext:a").state, row(store, "ext:a").attempts) == ("sending", 1)
    ledger.mark_sent("job", "ext:a", "req_1")
    rec = row(store, "ext:a")
    assert (rec.state, rec.request_id, rec.error, rec.attempts) == ("sent", "req_1", None, 1)
    assert rec.updated_at >= before
    assert ledger.rows_to_send("job", {"ext:a": "h1"}) == set()
    assert pend(ledger, "ext:a", 2, "h1", "key-a") == "sent"


def test_a_refused_row_is_failed_then_sent_again_as_the_sheet_now_has_it(store: Store,
                                                                          ledger: OutreachLedger) -> None:
    pend(ledger, "ext:a", 2, "h1", "key-a")
    ledger.mark_sending("job", "ext:a")
    ledger.mark_failed("job", "ext:a", "expiresAt is in the past")
    rec = row(store, "ext:a")
    assert (rec.state, rec.request_id, rec.error) == ("failed", None, "expiresAt is in the past")
    assert ledger.rows_to_send("job", {"ext:a": "h1"}) == {"ext:a"}
    assert pend(ledger, "ext:a", 5, "h2", "key-a") == "send"
    rec = row(store, "ext:a")
    assert (rec.state, rec.content_hash, rec.row_number, rec.error) == ("pending", "h2", 5, None)
    ledger.mark_sending("job", "ext:a")
    ledger.mark_sent("job", "ext:a", "req_2")
    assert (row(store, "ext:a").state, row(store, "ext:a").attempts) == ("sent", 2)


def test_a_sent_row_whose_content_changed_is_marked_changed_and_never_sent(store: Store,
                                                                           ledger: OutreachLedger) -> None:
    pend(ledger, "ext:a", 2, "h1", "key-a")
    ledger.mark_sending("job", "ext:a")
    ledger.mark_sent("job", "ext:a", "req_1")
    assert ledger.rows_to_send("job", {"ext:a": "h2"}) == {"ext:a"}
    assert pend(ledger, "ext:a", 7, "h2", "key-a") == "changed"
    rec = row(store, "ext:a")
    assert (rec.state, rec.request_id, rec.content_hash, rec.row_number) == ("changed", "req_1", "h1", 7)
    assert "changed" in (rec.error or "")
    assert pend(ledger, "ext:a", 7, "h2", "key-a") == "changed"


def test_a_row_left_sending_by_a_crash_is_sent_again_with_its_key(store: Store, ledger: OutreachLedger) -> None:
    pend(ledger, "ext:a", 2, "h1", "key-a")
    ledger.mark_sending("job", "ext:a")  # then the process dies: the create may have reached the service
    assert ledger.rows_to_send("job", {"ext:a": "h1"}) == {"ext:a"}
    assert pend(ledger, "ext:a", 2, "h1", "key-a") == "send"
    rec = row(store, "ext:a")
    assert (rec.state, rec.idempotency_key) == ("sending", "key-a")
    ledger.mark_sending("job", "ext:a")
    ledger.mark_sent("job", "ext:a", "req_1")
    assert (row(store, "ext:a").state, row(store, "ext:a").attempts) == ("sent", 2)


def test_a_rerun_sends_only_the_rows_still_missing(store: Store, ledger: OutreachLedger) -> None:
    sheet = {f"ext:{i}": f"h{i}" for i in range(5)}
    for n, (key, chash) in enumerate(sheet.items()):
        pend(ledger, key, n + 2, chash, f"key-{n}")
        if n < 3:
            ledger.mark_sending("job", key)
            ledger.mark_sent("job", key, f"req_{n}")
        elif n == 3:
            ledger.mark_sending("job", key)
    assert ledger.rows_to_send("job", sheet) == {"ext:3", "ext:4"}
    assert ledger.rows_to_send("other-job", sheet) == set(sheet), "each job has its own rows"
    with store.database.reader() as s:
        states = sorted(r.state for r in s.exec(select(OutreachRow)))
    assert states == ["pending", "sending", "sent", "sent", "sent"]


def test_a_run_records_all_its_rows_at_once_and_gets_each_ones_claim(store: Store, ledger: OutreachLedger) -> None:
    pend(ledger, "ext:sent", 2, "h1", "key-1")
    ledger.mark_sending("job", "ext:sent")
    ledger.mark_sent("job", "ext:sent", "req_1")
    pend(ledger, "ext:changed", 3, "h2", "key-2")
    ledger.mark_sending("job", "ext:changed")
    ledger.mark_sent("job", "ext:changed", "req_2")
    claims = ledger.record_pending("job", [PendingRow("ext:sent", 2, "h1", "key-1"),
                                           PendingRow("ext:changed", 3, "h2-new", "key-2"),
                                           PendingRow("ext:new", 4, "h3", "key-3")])
    assert claims == {"ext:sent": "sent", "ext:changed": "changed", "ext:new": "send"}
    assert [row(store, k).state for k in claims] == ["sent", "changed", "pending"]
    assert ledger.record_pending("job", []) == {}


def test_only_written_states_exist_and_the_schema_refuses_others(store: Store, ledger: OutreachLedger) -> None:
    assert set(ROW_STATES) <= set(OUTREACH_STATES) and "invalid" not in ROW_STATES
    pend(ledger, "ext:a", 2, "h1", "key-a")
    with pytest.raises(IntegrityError), store.database.session() as s:
        rec = s.exec(select(OutreachRow)).one()
        rec.state = "lost"
        s.add(rec)
    with pytest.raises(LookupError, match="no row 'ext:b'"):
        ledger.mark_sent("job", "ext:b", "req_1")


def test_a_job_keeps_its_first_record_and_remembers_its_documents(store: Store, ledger: OutreachLedger) -> None:
    ledger.open_job("job", "form_2", "other.csv", {"delivery": "email"})
    with store.database.reader() as s:
        job = s.get(OutreachJob, "job")
        assert job is not None and (job.form_id, job.source_path) == ("form_1", "sheet.csv")
    assert ledger.documents("job") == {}
    ledger.record_documents("job", {"sha-1": "doc_1"})
    assert ledger.documents("job") == {"sha-1": "doc_1"}
    with store.database.reader() as s:
        job = s.get(OutreachJob, "job")
        assert job is not None and job.settings == {"delivery": "none", "documents": {"sha-1": "doc_1"}}
    ledger.record_documents("nope", {"sha-1": "doc_1"})
    assert ledger.documents("nope") == {}


def test_claims_says_what_record_pending_would_decide_and_writes_nothing(store: Store,
                                                                          ledger: OutreachLedger) -> None:
    for key, state in (("ext:sent", "sent"), ("ext:failed", "failed"), ("ext:sending", "sending")):
        pend(ledger, key, 2, "h1", f"key-{key}")
        ledger.mark_sending("job", key)
        if state == "sent":
            ledger.mark_sent("job", key, "req_1")
        elif state == "failed":
            ledger.mark_failed("job", key, "refused")
    sheet = {"ext:sent": "h1", "ext:failed": "h2", "ext:sending": "h1", "ext:new": "h1", "ext:edited": "h1"}
    pend(ledger, "ext:edited", 3, "h0", "key-edited")
    ledger.mark_sending("job", "ext:edited")
    ledger.mark_sent("job", "ext:edited", "req_2")
    with store.database.reader() as s:
        before = sorted((r.row_key, r.state, r.content_hash) for r in s.exec(select(OutreachRow)))
    said = ledger.claims("job", sheet)
    assert said == {"ext:sent": "sent", "ext:failed": "send", "ext:sending": "send", "ext:new": "send",
                    "ext:edited": "changed"}
    with store.database.reader() as s:
        assert sorted((r.row_key, r.state, r.content_hash) for r in s.exec(select(OutreachRow))) == before
    decided = ledger.record_pending("job", [PendingRow(k, 9, h, f"key-{k}") for k, h in sheet.items()])
    assert decided == said


def test_a_row_the_contact_rule_refused_is_kept_suppressed_and_asked_again(store: Store,
                                                                            ledger: OutreachLedger) -> None:
    # On every database, migrated to the head: the schema's check admits "suppressed".
    pend(ledger, "ext:sent", 2, "h1", "key-1")
    ledger.mark_sending("job", "ext:sent")
    ledger.mark_sent("job", "ext:sent", "req_1")
    pend(ledger, "ext:sending", 3, "h2", "key-2")
    ledger.mark_sending("job", "ext:sending")  # a create may have reached the service: left as it is
    rows = [PendingRow("ext:new", 4, "h3", "key-3"), PendingRow("ext:sent", 2, "h1", "key-1"),
            PendingRow("ext:sending", 3, "h2", "key-2")]
    ledger.record_suppressed("job", [(r, f"suppressed (why {r.row_number})") for r in rows])
    assert [(row(store, r.row_key).state, row(store, r.row_key).error) for r in rows] == [
        ("suppressed", "suppressed (why 4)"), ("sent", None), ("sending", None)]
    assert ledger.claims("job", {"ext:new": "h3"}) == {"ext:new": "send"}, "the next run asks the rule again"
    assert pend(ledger, "ext:new", 4, "h3", "key-3") == "send"
    assert (row(store, "ext:new").state, row(store, "ext:new").error) == ("pending", None)
