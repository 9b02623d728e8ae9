"""One response, one submission row, on SQLite, PostgreSQL and MariaDB: the store-level
rule of ``connector.store._responses`` with the records and items the service sends (a
request record with and without ``submissionId``, ``submissions.list`` items with and
without ``requestId``, a completion event)."""

from __future__ import annotations

from typing import Any

from sqlmodel import select

from connector.models import Event
from connector.store import Store
from connector.store._responses import provisional_id
from connector.store._tables import RequestRow, SubmissionRow

FORM = "form_routes"
SAME = {"ok": "yes"}  # two respondents giving the same answer


def completed(rid: str, answers: dict[str, Any], submission: str | None = None) -> dict[str, Any]:
    rec: dict[str, Any] = {"id": rid, "status": "completed", "answers": answers, "display": {},
                           "createdAt": 1_700_000_000_000}
    if submission is not None:
        rec["submissionId"] = submission
    return rec


def item(sid: str, answers: dict[str, Any], request: str | None = None) -> dict[str, Any]:
    it: dict[str, Any] = {"id": sid, "submittedAt": "2023-11-14 22:13:30", "createdAt": "2023-11-14 22:13:00",
                          "isCompleted": True, "answers": answers, "display": {}}
    if request is not None:
        it["requestId"] = request
    return it


def seed(store: Store, *ids: str) -> None:
    """Pending requests of FORM, as outreach stores them."""
    store.upsert_requests([{"id": i, "status": "pending", "formId": FORM, "createdAt": 1_700_000_000_000}
                           for i in ids])


def submissions(store: Store) -> dict[str, str | None]:
    with store.database.reader() as s:
        return {r.id: r.request_id for r in s.exec(select(SubmissionRow))}


def links(store: Store) -> dict[str, str | None]:
    with store.database.reader() as s:
        return {r.id: r.submission_id for r in s.exec(select(RequestRow))}


def test_a_record_naming_no_submission_is_provisional_until_sync_names_it(store: Store) -> None:
    seed(store, "req_a", "req_b")
    store.upsert_requests([completed("req_a", SAME), completed("req_b", SAME)])
    assert submissions(store) == {provisional_id("req_a"): "req_a", provisional_id("req_b"): "req_b"}
    with store.database.reader() as s:  # the answers are stored once, on the submission row
        assert all(r.answers is None for r in s.exec(select(RequestRow)))
    # submissions.list of the smallest dialect names no request: matched by form and answers, one each
    store.upsert_submissions([item("sub_1", SAME), item("sub_2", SAME)], FORM)
    subs = submissions(store)
    assert set(subs) == {"sub_1", "sub_2"} and sorted(v or "" for v in subs.values()) == ["req_a", "req_b"]
    assert sorted(links(store).values(), key=str) == ["sub_1", "sub_2"]
    # a re-read of the same items changes nothing, and a later poll adds nothing
    store.upsert_submissions([item("sub_1", SAME), item("sub_2", SAME)], FORM)
    store.upsert_requests([completed("req_a", SAME), completed("req_b", SAME)])
    assert submissions(store) == subs


def test_a_record_naming_no_submission_claims_the_stored_one_with_its_answers(store: Store) -> None:
    seed(store, "req_a")
    store.upsert_submissions([item("sub_other", {"ok": "no"}), item("sub_1", SAME)], FORM)
    store.upsert_requests([completed("req_a", SAME)])
    assert submissions(store) == {"sub_other": None, "sub_1": "req_a"}
    assert links(store) == {"req_a": "sub_1"}


def test_the_service_named_submission_replaces_the_provisional_row(store: Store) -> None:
    seed(store, "req_a", "req_b")
    store.upsert_requests([completed("req_a", SAME), completed("req_b", {"ok": "no"})])
    # sync naming the request; then a record naming the submission
    store.upsert_submissions([item("sub_1", SAME, request="req_a")], FORM)
    store.upsert_requests([completed("req_b", {"ok": "no"}, submission="sub_2")])
    assert submissions(store) == {"sub_1": "req_a", "sub_2": "req_b"}
    assert links(store) == {"req_a": "sub_1", "req_b": "sub_2"}


def test_a_completion_event_after_a_poll_makes_no_second_row(store: Store) -> None:
    seed(store, "req_a")
    store.upsert_requests([completed("req_a", SAME)])
    event = Event.model_validate({
        "id": "evt_1", "type": "request.completed", "createdAt": "2023-11-14T22:13:31Z",
        "data": {"form": {"id": FORM, "name": "Routes"}, "request": {"id": "req_a", "status": "completed"},
                 "submission": {"id": "sub_1", "submittedAt": "2023-11-14T22:13:30.250Z", "editCount": 0},
                 "answers": SAME, "display": {}}})
    store.store_events([event], source="callback")
    assert submissions(store) == {"sub_1": "req_a"}
    assert links(store) == {"req_a": "sub_1"}
    # and the full record read afterwards (it names the submission) merges into that row
    store.upsert_requests([completed("req_a", SAME, submission="sub_1")])
    assert submissions(store) == {"sub_1": "req_a"}


def test_a_record_of_an_unknown_form_keeps_its_answers_on_the_request(store: Store) -> None:
    store.upsert_requests([completed("req_x", SAME)])
    assert submissions(store) == {}
    with store.database.reader() as s:
        row = s.get(RequestRow, "req_x")
        assert row is not None and row.answers == SAME
