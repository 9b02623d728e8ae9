"""``formsync erase`` on every database: one person's rows gone from every table, the
receipt's counts, the deletion log, the tombstones every ingest path checks, and the
suppression that keeps the address out of later campaigns."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest
from sqlalchemy import select

from connector.config.keyfile import KeyFileError
from connector.config.settings import OutreachSettings
from connector.models import Event
from connector.store import ExportFilter, Store
from connector.store._erasure import Person, erasure_hash
from connector.store._ledger import PendingRow
from connector.store._mapping import Unstorable
from connector.store._tables import METADATA, ArchivedFile, SubmissionRow
from pipelines.lifecycle.erase import erase_person
from pipelines.rules.contact import contact_rule

from .test_store import T0, Clock, item, poll_record, req_completed

ADA = "ada@example.com"


@pytest.fixture
def store(migrated_db_url: str, tmp_path: Path) -> Iterator[Store]:
    s = Store(migrated_db_url, clock=Clock(), key_file=tmp_path / "formsync.key")
    try:
        yield s
    finally:
        s.close()


def completed(eid: str, rid: str, sid: str, email: str, ext: str) -> Event:
    ev = req_completed(eid, rid, sid, T0, decision="approve")
    ev["data"]["request"]["recipient"]["email"] = email
    ev["data"]["request"]["externalId"] = ext
    ev["data"]["submission"]["respondentEmail"] = email
    return Event.model_validate(ev)


def fill(store: Store, tmp_path: Path) -> None:
    """Ada in every table formsync keeps, and Bo beside her."""
    store.store_events([completed("evt_a", "req_a", "sub_a", "Ada@Example.com", "ext-a"),
                        completed("evt_b", "req_b", "sub_b", "bo@example.com", "ext-b")], source="callback")
    store.upsert_submissions([item("sub_c", answers={"contact": ADA.upper()}), item("sub_d")], "form_contact")
    body = json.dumps({"id": "evt_dl", "data": {"note": "from ada@example.com \u0000"}}).encode()
    store.set_aside([Unstorable("evt_dl", "request.completed", "webhook", body, 1, "UNSTORABLE_EVENT", "nul")])
    store.ledger.open_job("spring", "form_approval", "sheet.csv", {})
    store.ledger.record_pending("spring", [PendingRow("r1", 2, "h1", "k1"), PendingRow("r2", 3, "h2", "k2")])
    store.ledger.mark_sent("spring", "r1", "req_a")
    store.ledger.mark_sent("spring", "r2", "req_b")
    report = tmp_path / "reports" / "spring-report.csv"
    report.parent.mkdir()
    report.write_text(f"row,column,problem,accepted\n4,email,bounced {ADA},\n5,email,bad,\n")
    (tmp_path / "reports" / "spring-links.csv").write_text(
        f"externalId,email,url\next-a,{ADA},http://x/r/1\next-b,bo@example.com,http://x/r/2\n")
    store.ledger.record_outcome("spring", {"report": str(report)})
    store.campaign.suppress([ADA], "asked")
    run = store.runs.start("remind", "remind", scheduled_at=None, pid=1, host="h")
    store.runs.finish(run, "error", error=f"requests.remind refused for {ADA}", summary="1 refused")
    fs = fsspec.filesystem("memory")
    for sha in ("only_ada", "shared"):
        fs.pipe(f"/erase-test/{sha}", b"bytes")
    store.archive.record([
        _file("sub_a", "photo", "only_ada"), _file("sub_a", "sign", "shared"), _file("sub_b", "sign", "shared")])


def _file(sub: str, key: str, sha: str) -> ArchivedFile:
    return ArchivedFile(submission_id=sub, field_key=key, form_id="form_approval", name="f.png", url="http://x",
                        size=5, sha256=sha, location=f"memory:///erase-test/{sha}", archived_at=T0)


def submission_ids(store: Store) -> set[str]:
    with store.database.engine.connect() as conn:
        return set(conn.execute(select(SubmissionRow.id)).scalars())


def every_text(store: Store) -> str:
    """Every value of every table as text (bodies decompressed), lower-cased."""
    out = []
    with store.database.engine.connect() as conn:
        for t in METADATA.sorted_tables:
            for row in conn.execute(select(t)):
                for v in row:
                    if isinstance(v, bytes):
                        try:
                            v = zlib.decompress(v).decode("utf-8", "replace")
                        except zlib.error:
                            v = v.decode("utf-8", "replace")
                    out.append(json.dumps(v, default=str) if not isinstance(v, str) else v)
    return "\n".join(out).lower()


def test_erase_removes_the_person_everywhere_and_keeps_the_others(store: Store, tmp_path: Path) -> None:
    fill(store, tmp_path)
    dry = erase_person(store, Person(email="ADA@example.com"), dry_run=True)
    counts = {line.where: line.removed for line in dry.lines}
    assert counts == {"formsync_requests": 1, "formsync_submissions": 2, "formsync_events": 1,
                      "formsync_dead_letters": 1, "formsync_outreach_rows": 1, "formsync_suppressions": 1,
                      "formsync_job_runs": 1, "request answers cleared": 0, "formsync_archived_files": 2, "archived file bytes": 1,
                      "report file lines": 2, "dlt load packages": 0, "partial files": 0}
    assert ADA in every_text(store)  # a dry run removes nothing

    receipt = erase_person(store, Person(email="ADA@example.com"))
    assert receipt.matched and not receipt.dry_run
    assert {line.where: line.removed for line in receipt.lines} == counts
    assert ADA not in every_text(store)
    assert submission_ids(store) == {"sub_b", "sub_d"}
    assert [(r.row_key, r.request_id) for r in store.campaign.rows("spring")] == [("r2", "req_b")]
    fs = fsspec.filesystem("memory")
    assert not fs.exists("/erase-test/only_ada") and fs.exists("/erase-test/shared")  # Bo's answer uses it
    assert ADA not in (tmp_path / "reports" / "spring-report.csv").read_text()
    assert "ext-b" in (tmp_path / "reports" / "spring-links.csv").read_text()
    assert "[erased]" in (store.runs.last("remind").error or "")  # type: ignore[union-attr]
    logged = {(d.kind, d.item_id, d.reason) for d in store.deletions.since(0, kinds=("submission", "request"))}
    assert logged == {("submission", "sub_a", "erase"), ("submission", "sub_c", "erase"),
                      ("request", "req_a", "erase")}
    assert [d.item_id for d in store.deletions.since(max(d.arrival for d in store.deletions.since(0)))] == []


def test_an_erased_person_never_comes_back(store: Store, tmp_path: Path) -> None:
    fill(store, tmp_path)
    erase_person(store, Person(email=ADA))
    # The same event again (a callback retry or replay) is a duplicate; a new event about
    # her, a sync page and a poll record are dropped; Bo's still arrive.
    again = store.store_events([completed("evt_a", "req_a", "sub_a", ADA, "ext-a"),
                                completed("evt_a2", "req_a", "sub_a", ADA, "ext-a"),
                                completed("evt_b2", "req_b", "sub_b", "bo@example.com", "ext-b")])
    assert [o.status for o in again] == ["duplicate", "duplicate", "stored"]
    assert store.upsert_submissions([item("sub_a"), item("sub_c"), item("sub_e", respondentEmail=ADA),
                                     item("sub_f")], "form_contact") == ["sub_f"]
    assert store.upsert_requests([poll_record("req_a", "pending", T0),
                                  poll_record("req_g", "pending", T0, recipient={"email": ADA, "name": "A"})]) == []
    assert ADA not in every_text(store)
    # Outreach never sends to her again, though only a keyed hash of the address is kept.
    assert contact_rule(store, OutreachSettings()).blocked.get(ADA) == "erased"
    assert contact_rule(store, OutreachSettings()).blocked.get("bo@example.com") is None
    assert ADA not in list(contact_rule(store, OutreachSettings()).blocked)
    key = store.key()
    with store.database.engine.connect() as conn:
        kept = set(conn.execute(select(METADATA.tables["formsync_erasures"].c.hash)).scalars())
    assert erasure_hash(key, "email", ADA) in kept and erasure_hash(key, "submission", "sub_a") in kept


def test_erase_by_external_id_and_nobody_matched(store: Store, tmp_path: Path) -> None:
    fill(store, tmp_path)
    assert not erase_person(store, Person(email="nobody@example.com")).matched
    assert store.deletions.since(0) == []
    assert contact_rule(store, OutreachSettings()).blocked.get("nobody@example.com") == "erased", "kept out all the same"
    receipt = erase_person(store, Person(external_id="ext-b"))
    assert {line.where: line.removed for line in receipt.lines}["formsync_requests"] == 1
    assert submission_ids(store) == {"sub_a", "sub_c", "sub_d"}
    assert "ext-b" not in (tmp_path / "reports" / "spring-links.csv").read_text()


def test_without_the_key_ingest_stops_rather_than_let_the_person_back(store: Store, tmp_path: Path) -> None:
    fill(store, tmp_path)
    erase_person(store, Person(email=ADA))
    (tmp_path / "formsync.key").unlink()
    other = Store(store.url, key_file=tmp_path / "formsync.key")
    try:
        with pytest.raises(KeyFileError, match="formsync.key"):
            other.store_events([completed("evt_a3", "req_a", "sub_a", ADA, "ext-a")])
        assert ADA not in every_text(store)
    finally:
        other.close()


def test_reconcile_and_purge_on_every_database(store: Store, tmp_path: Path) -> None:
    fill(store, tmp_path)  # sub_a (req_a) and sub_b (req_b) in form_contact by events; sub_c, sub_d by sync
    with store.database.engine.begin() as conn:
        conn.execute(METADATA.tables["formsync_requests"].update().where(
            METADATA.tables["formsync_requests"].c.id == "req_b").values(is_test=True))
    gone, back = store.reconcile("form_contact", {"sub_a", "sub_d"})
    assert (gone, back) == (["sub_c"], []), "sub_b answered a test request: never listed, never gone"
    assert store.exports.count_submissions(ExportFilter(form_id="form_contact")) == 3
    assert store.reconcile("form_contact", {"sub_a", "sub_c", "sub_d"}) == ([], ["sub_c"])
    found = store.remove_submissions({"sub_a": "form_contact"}, reason="purge")
    assert (found.events, found.cleared, found.archived, found.locations) == (
        ["evt_a"], ["req_a"], 2, ["memory:///erase-test/only_ada"])
    assert submission_ids(store) == {"sub_b", "sub_c", "sub_d"}
    assert [(d.item_id, d.reason) for d in store.deletions.since(0)] == [
        ("sub_c", "reconciled"), ("sub_a", "purge")]
