"""Spec "Requests" (requests.create, every param and rule; requests.get, list and sample)
with the notes' sections 1, 2, 5 and 8: the request record, prefill shapes, the plan
gates, idempotency, test requests, documents, the monthly allowance and the create limit."""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

import pytest

from formservice.domain.base import METHODS
from formservice.ids import new_id
from formservice.tables import Document, StoredFile
from formservice.tables import Workspace as WorkspaceRow

from .requests_support import (
    CONTACT_ANSWERS,
    DAY_MS,
    HOUR_MS,
    ID_RE,
    ISO_MS_Z,
    MINUTE_MS,
    advance,
    complete,
    create,
    created_id,
    flush,
    get,
    listed,
    mails,
    now,
    renew_token,
    set_workspace,
)

MB = 1024 * 1024
CREATE_RESULT_KEYS = {"id", "status", "url", "deliveryStatus", "externalId", "deduplicated", "createdAt",
                      "expiresAt"}
# the notes' table of the request record (section 2)
RECORD_KEYS = {
    "id", "workspaceId", "formId", "formSnapshotId", "submissionId", "status", "outcome", "createdVia", "isTest",
    "recipient", "language", "externalId", "metadata", "context", "prefill", "readonlyKeys", "documents",
    "delivery", "deliveryStatus", "hasCallback", "callbackFailedAt", "expiresAt", "createdAt", "updatedAt",
    "openedAt", "startedAt", "lastActivityAt", "completedAt", "expiredAt", "canceledAt", "dataPurgedAt",
    "reminderDueAt", "canceledBy", "cancelReason", "reminderStep", "remindersSent", "url", "answers", "display",
    "timeline",
}
EPOCH_MS_FIELDS = ("expiresAt", "createdAt", "updatedAt")


async def request_count(sandbox: Any, ws: str = "pro", **filters: Any) -> int:
    """How many requests the workspace lists (paging through every page)."""
    total, cursor = 0, None
    while True:
        params = {**filters, "limit": 100, **({"cursor": cursor} if cursor else {})}
        page = await listed(sandbox, ws=ws, **params)
        total += len(page["items"])
        cursor = page["nextCursor"]
        if cursor is None:
            return total


async def prefillable_keys(sandbox: Any, form: str, ws: str = "pro") -> list[str]:
    r = await sandbox.rpc("fields.list", {"formId": sandbox.workspaces[ws].forms[form]}, ws=ws)
    assert r.status == 200, r.body
    return sorted(f["key"] for f in r.data["items"] if f["prefillable"])


# -- requests.create: the result ------------------------------------------------------------


async def test_create_returns_the_eight_fields_and_reads_echo_metadata_and_external_id(sandbox):
    before = await now(sandbox)
    r = await create(sandbox, recipient={"email": "ada@example.test", "name": "Ada"}, externalId="crm-7",
                     metadata={"runId": "r1", "nested": {"n": 1}})
    after = await now(sandbox)
    assert r.status == 200, r.body
    c = r.data
    assert set(c) == CREATE_RESULT_KEYS
    assert re.fullmatch(f"req_{ID_RE}", c["id"])
    assert c["status"] == "pending"
    assert c["deliveryStatus"] == "not_requested"
    assert c["externalId"] == "crm-7"
    assert c["deduplicated"] is False
    assert before <= c["createdAt"] <= after
    assert c["expiresAt"] == c["createdAt"] + 30 * DAY_MS, "expiresAt defaults to 30 days after creation"
    assert re.fullmatch(re.escape(sandbox.base_url) + f"/r/rq_{ID_RE}", c["url"])

    rec = await get(sandbox, c["id"])
    assert rec["externalId"] == "crm-7" and rec["metadata"] == {"runId": "r1", "nested": {"n": 1}}
    assert rec["url"] == c["url"] and rec["createdAt"] == c["createdAt"] and rec["expiresAt"] == c["expiresAt"]
    assert rec["recipient"] == {"email": "ada@example.test", "name": "Ada"}
    [item] = (await listed(sandbox, formId=sandbox.pro.forms["Contact"]))["items"]
    assert item["id"] == c["id"] and item["externalId"] == "crm-7" and item["metadata"] == rec["metadata"]


async def test_get_returns_every_field_of_the_record_with_the_timeline_oldest_first(sandbox):
    rid = await created_id(sandbox, recipient={"email": "ada@example.test"})
    rec = await get(sandbox, rid)
    assert set(rec) == RECORD_KEYS
    form_id = sandbox.pro.forms["Contact"]
    assert rec["workspaceId"] == sandbox.pro.id and rec["formId"] == form_id
    assert re.fullmatch(f"snap_{ID_RE}", rec["formSnapshotId"])
    assert rec["submissionId"] is None and rec["answers"] is None and rec["display"] is None
    assert rec["createdVia"] == "api" and rec["isTest"] is False and rec["outcome"] is None
    assert rec["recipient"] == {"email": "ada@example.test", "name": None}
    assert rec["language"] == "en"
    assert rec["context"] == {} and rec["prefill"] == {} and rec["readonlyKeys"] == [] and rec["documents"] == []
    assert rec["delivery"] == "none" and rec["hasCallback"] is False and rec["callbackFailedAt"] is None
    for name in ("openedAt", "startedAt", "lastActivityAt", "completedAt", "expiredAt", "canceledAt",
                 "dataPurgedAt", "reminderDueAt", "canceledBy", "cancelReason", "externalId", "metadata"):
        assert rec[name] is None, name
    assert rec["reminderStep"] == 0 and rec["remindersSent"] == 0
    for name in EPOCH_MS_FIELDS:
        assert isinstance(rec[name], int) and rec[name] > 1_600_000_000_000, "request methods answer epoch ms"
    assert rec["timeline"] == [{"id": f"{rid}:created", "at": rec["createdAt"], "type": "created"}]

    assert (await complete(sandbox, rid, CONTACT_ANSWERS)).status == 200
    done = await get(sandbox, rid)
    assert [e["type"] for e in done["timeline"]] == ["created", "completed"]
    assert [e["id"] for e in done["timeline"]] == [f"{rid}:created", f"{rid}:completed"]
    ats = [e["at"] for e in done["timeline"]]
    assert ats == sorted(ats) and ats[-1] == done["completedAt"]
    assert done["status"] == "completed" and done["answers"]["topic"] == "sales"
    assert done["display"]["topic"] == "Sales"
    assert re.fullmatch(f"sub_{ID_RE}", done["submissionId"])


# -- form, prefill, readonly, context --------------------------------------------------------


async def test_create_needs_a_published_form_of_the_workspace(sandbox):
    r = await create(sandbox, "Draft survey")
    err = r.expect("VALIDATION_ERROR", 400, reason="FORM_NOT_PUBLISHED", field="formId")
    assert "FORM_NOT_PUBLISHED" in err["message"]
    (await sandbox.rpc("requests.create", {"formId": "form_doesnotexist0000000000"})).expect(
        "NOT_FOUND", 404, field="formId")
    (await sandbox.rpc("requests.create", {"formId": sandbox.free.forms["Contact"]})).expect(
        "FORBIDDEN", 403, field="formId")
    (await sandbox.rpc("requests.create", {})).expect("VALIDATION_ERROR", 400, reason="REQUIRED", field="formId")
    assert await request_count(sandbox, includeTest=True) == 0, "a refused create stores nothing"


async def test_prefill_takes_each_field_in_its_own_shape(sandbox):
    prefill = {
        "full_name": "Ada Lovelace", "email": "ada@example.test", "quantity": 3, "unit_price": 2.5,
        "start_date": "2026-01-15", "start_time": "09:30", "satisfaction": 4, "likelihood": 9,
        "newsletter": True, "country": "fr", "plan": "premium", "topics": ["billing", "sales"],
        "priorities": ["speed", "price", "quality"], "avatar": "cat",
        "service_quality": {"speed": "great", "friendliness": "ok"},
        "line_items": [{"item": "Widget", "amount": 2}, {"item": "Gadget"}],
    }
    rid = await created_id(sandbox, "Everything", prefill=prefill)
    assert (await get(sandbox, rid))["prefill"] == prefill


BAD_PREFILL = [
    # (key, value, expected details beyond field/reason)
    ("plan", "Premium", {"validValues": ["basic", "premium"]}),  # a label, not the option key
    ("country", "Germany", {"validValues": ["de", "fr", "us"]}),
    ("topics", "billing", {"expectedType": "array"}),  # multi-choice takes an array
    ("topics", ["billing", "Support"], {"validValues": ["billing", "support", "sales"]}),
    ("service_quality", {"speed": "Great"}, {"validValues": ["poor", "ok", "great"]}),  # row -> column key
    ("service_quality", {"tone": "ok"}, {"validValues": ["speed", "friendliness"]}),
    ("service_quality", ["speed"], {"expectedType": "object"}),
    ("line_items", {"item": "Widget"}, {"expectedType": "array"}),  # a list of instances
    ("line_items", [{"colour": "red"}], {"validValues": ["item", "amount"]}),
    ("start_date", "15/01/2026", {"expectedType": "string"}),
    ("start_date", "2026-02-30", {"expectedType": "string"}),
    ("quantity", "3", {"expectedType": "number"}),  # number: a JSON number
    ("newsletter", "yes", {"expectedType": "boolean"}),  # switch: a JSON boolean
    ("email", "not-an-email", {"expectedType": "string"}),
]


@pytest.mark.parametrize(("key", "value", "details"), BAD_PREFILL, ids=[f"{k}={v!r}" for k, v, _ in BAD_PREFILL])
async def test_prefill_value_in_the_wrong_shape_is_named(sandbox, key, value, details):
    r = await create(sandbox, "Everything", prefill={"full_name": "Ada", key: value})
    err = r.expect("VALIDATION_ERROR", 400, reason="INVALID_PREFILL_VALUE", field=f"prefill.{key}", **details)
    assert err["message"].startswith("INVALID_PREFILL_VALUE")
    assert await request_count(sandbox) == 0


async def test_a_label_instead_of_the_option_key_says_which_key_it_is(sandbox):
    r = await create(sandbox, "Everything", prefill={"plan": "Basic"})
    err = r.expect("VALIDATION_ERROR", 400, reason="INVALID_PREFILL_VALUE", field="prefill.plan")
    assert "option key" in err["message"] and "basic" in err["message"]


NOT_PREFILLABLE = ["attachment", "signature", "deposit", "meeting", "contract_docs", "total", "crm_id"]


async def test_fields_that_cannot_be_prefilled_are_refused(sandbox):
    valid = await prefillable_keys(sandbox, "Everything")
    assert not set(NOT_PREFILLABLE) & set(valid)
    values = {"attachment": [{"name": "a.pdf", "size": 1}], "signature": [{"name": "s.png", "size": 1}],
              "deposit": {"status": "paid", "amount": 40}, "meeting": {"status": "confirmed"},
              "contract_docs": [], "total": 10, "crm_id": "C-1"}
    for key in NOT_PREFILLABLE:
        r = await create(sandbox, "Everything", prefill={key: values[key]})
        err = r.expect("VALIDATION_ERROR", 400, reason="FIELD_NOT_PREFILLABLE", field=f"prefill.{key}",
                       validKeys=valid)
        if key == "crm_id":
            assert "context" in err["message"], "a hidden field's value goes in context"
    assert await request_count(sandbox) == 0


async def test_unknown_prefill_key_names_the_key_and_the_valid_ones(sandbox):
    r = await create(sandbox, "Contact", prefill={"name": "Ada", "phone": "123"})
    r.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_FIELD_KEY", field="prefill.phone",
             validKeys=["email", "message", "name", "topic"])


async def test_readonly_keys_must_all_be_prefilled_and_keep_their_value(sandbox):
    r = await create(sandbox, prefill={"name": "Ada"}, readonly=["name", "email"])
    r.expect("VALIDATION_ERROR", 400, reason="READONLY_NOT_PREFILLED", field="readonly.1", validKeys=["name"])
    r = await create(sandbox, prefill={"name": "Ada"}, readonly=["nickname"])
    r.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_FIELD_KEY", field="readonly.0")
    rid = await created_id(sandbox, prefill={"name": "Ada", "email": "ada@example.test"}, readonly=["name"])
    rec = await get(sandbox, rid)
    assert rec["readonlyKeys"] == ["name"]
    assert rec["prefill"] == {"name": "Ada", "email": "ada@example.test"}
    # the recipient cannot change a readonly answer; the prefill fills it in
    bad = await complete(sandbox, rid, {"name": "Eve", "topic": "other"})
    bad.expect("VALIDATION_ERROR", 400, reason="READONLY_FIELD", field="answers.name")
    assert (await get(sandbox, rid))["status"] == "pending"
    assert (await complete(sandbox, rid, {"topic": "other"})).status == 200
    assert (await get(sandbox, rid))["answers"]["name"] == "Ada"


async def test_context_takes_hidden_field_keys_only(sandbox):
    r = await create(sandbox, context={"name": "Ada"})
    r.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_FIELD_KEY", field="context.name", validKeys=["source"])
    r = await create(sandbox, context={"source": 42})
    r.expect("VALIDATION_ERROR", 400, reason="INVALID_TYPE", field="context.source", expectedType="string")
    rid = await created_id(sandbox, context={"source": "newsletter"})
    assert (await get(sandbox, rid))["context"] == {"source": "newsletter"}
    # the recipient cannot answer a hidden field; its value comes back among the answers
    bad = await complete(sandbox, rid, {**CONTACT_ANSWERS, "source": "typed"})
    bad.expect("VALIDATION_ERROR", 400, reason="FIELD_NOT_ANSWERABLE", field="answers.source")
    assert (await complete(sandbox, rid, CONTACT_ANSWERS)).status == 200
    assert (await get(sandbox, rid))["answers"]["source"] == "newsletter"


async def test_metadata_must_be_an_object(sandbox):
    r = await create(sandbox, metadata=["a"])
    r.expect("VALIDATION_ERROR", 400, reason="INVALID_TYPE", field="metadata", expectedType="object")
    r = await create(sandbox, externalId=42)
    r.expect("VALIDATION_ERROR", 400, reason="INVALID_TYPE", field="externalId", expectedType="string")


# -- delivery ----------------------------------------------------------------------------------


async def test_delivery_is_none_or_email_and_email_needs_a_recipient_email(sandbox):
    r = await create(sandbox, delivery="sms", recipient={"email": "a@example.test"})
    r.expect("VALIDATION_ERROR", 400, reason="INVALID_VALUE", field="delivery", validValues=["none", "email"])
    r = await create(sandbox, delivery="email", recipient={"name": "No Mail"})
    r.expect("VALIDATION_ERROR", 400, reason="RECIPIENT_EMAIL_REQUIRED", field="recipient.email")
    r = await create(sandbox, delivery="email", recipient={"email": "not an address"})
    r.expect("VALIDATION_ERROR", 400, reason="INVALID_EMAIL", field="recipient.email")
    c = (await create(sandbox, delivery="email", recipient={"email": "a@example.test"})).data
    assert c["deliveryStatus"] == "queued"
    assert (await get(sandbox, c["id"]))["delivery"] == "email"


async def test_free_workspace_has_ten_email_invitations_then_upgrade_required(sandbox):
    for i in range(10):
        r = await create(sandbox, ws="free", delivery="email", recipient={"email": f"r{i}@example.test"})
        assert r.status == 200, (i, r.body)
    r = await create(sandbox, ws="free", delivery="email", recipient={"email": "r10@example.test"})
    r.expect("UPGRADE_REQUIRED", 402, reason="FREE_INVITATIONS_USED")
    assert await request_count(sandbox, ws="free") == 10
    # the url can still be delivered by the caller, and test requests are never emailed
    assert (await create(sandbox, ws="free", delivery="none", recipient={"email": "x@example.test"})).status == 200
    t = await create(sandbox, ws="free", delivery="email", test=True, recipient={"email": "x@example.test"})
    assert t.status == 200 and t.data["deliveryStatus"] == "not_requested"
    await flush(sandbox, ws="free")
    assert len([m for m in await mails(sandbox, ws="free") if m["kind"] == "invitation"]) == 10


async def test_pro_workspace_invitations_are_unlimited(sandbox):
    for i in range(12):
        r = await create(sandbox, delivery="email", recipient={"email": f"r{i}@example.test"})
        assert r.status == 200 and r.data["deliveryStatus"] == "queued", (i, r.body)


# -- expiresAt, callbackUrl --------------------------------------------------------------------


async def test_expires_at_defaults_to_30_days_is_at_most_365_and_in_the_future(sandbox):
    t0 = await now(sandbox)
    c = (await create(sandbox, expiresAt=t0 + 365 * DAY_MS)).data
    assert c["expiresAt"] == t0 + 365 * DAY_MS
    c = (await create(sandbox, expiresAt=t0 + 2 * DAY_MS)).data
    assert c["expiresAt"] == t0 + 2 * DAY_MS
    r = await create(sandbox, expiresAt=t0 + 366 * DAY_MS)
    err = r.expect("VALIDATION_ERROR", 400, reason="OUT_OF_RANGE", field="expiresAt")
    assert "365" in err["message"]
    r = await create(sandbox, expiresAt=t0 - 1)
    err = r.expect("VALIDATION_ERROR", 400, reason="OUT_OF_RANGE", field="expiresAt")
    assert "future" in err["message"]
    r = await create(sandbox, expiresAt=str(t0 + DAY_MS))
    r.expect("VALIDATION_ERROR", 400, reason="INVALID_TYPE", field="expiresAt", expectedType="integer")
    assert await request_count(sandbox) == 2


@pytest.mark.parametrize("url", ["https://hooks.example.com/formstep", "http://127.0.0.1:9/cb",
                                 "http://localhost:8080/cb", "http://[::1]:9/cb"])
async def test_callback_url_accepts_https_and_http_to_loopback(sandbox, url):
    rid = await created_id(sandbox, callbackUrl=url)
    rec = await get(sandbox, rid)
    assert rec["hasCallback"] is True
    assert url not in str(rec), "the callback URL itself is never returned"


@pytest.mark.parametrize("url", ["http://hooks.example.com/formstep", "http://10.0.0.1/cb", "ftp://example.com/x",
                                 "hooks.example.com", "https://"])
async def test_callback_url_elsewhere_must_be_https(sandbox, url):
    r = await create(sandbox, callbackUrl=url)
    err = r.expect("VALIDATION_ERROR", 400, field="callbackUrl")
    assert err["message"] == "callbackUrl must be an https URL"
    assert await request_count(sandbox) == 0


# -- idempotencyKey ----------------------------------------------------------------------------


async def test_same_key_and_body_returns_the_original_without_spending_allowance(sandbox):
    await set_workspace(sandbox, monthlyAllowance=1)
    body = {"recipient": {"email": "ada@example.test"}, "externalId": "row-1", "idempotencyKey": "row-1"}
    first = (await create(sandbox, **body)).data
    again = await create(sandbox, **body)
    assert again.status == 200, "a deduplicated call spends no allowance unit, so it passes at the limit"
    assert again.data["id"] == first["id"] and again.data["deduplicated"] is True
    assert {k: v for k, v in again.data.items() if k != "deduplicated"} == \
        {k: v for k, v in first.items() if k != "deduplicated"}
    assert await request_count(sandbox) == 1
    (await create(sandbox, externalId="row-2")).expect("UPGRADE_REQUIRED", 402, reason="MONTHLY_ALLOWANCE_REACHED")


async def test_same_key_with_a_different_body_is_a_conflict(sandbox):
    first = (await create(sandbox, recipient={"email": "ada@example.test"}, idempotencyKey="k-1")).data
    r = await create(sandbox, recipient={"email": "eve@example.test"}, idempotencyKey="k-1")
    err = r.expect("CONFLICT", 409, reason="IDEMPOTENCY_CONFLICT", field="idempotencyKey")
    assert err["message"] == ('Idempotency key "k-1" was already used for a different request. '
                              "Use a new key, or resend the original body.")
    assert await request_count(sandbox) == 1
    assert (await get(sandbox, first["id"]))["recipient"]["email"] == "ada@example.test"


async def test_idempotency_key_is_scoped_to_the_workspace(sandbox):
    a = (await create(sandbox, ws="pro", idempotencyKey="shared")).data
    b = (await create(sandbox, ws="business", idempotencyKey="shared")).data
    assert a["id"] != b["id"] and a["deduplicated"] is False and b["deduplicated"] is False
    assert (await create(sandbox, ws="business", idempotencyKey="shared")).data["id"] == b["id"]


async def test_idempotency_key_expires_after_30_days(sandbox):
    first = (await create(sandbox, idempotencyKey="monthly", expiresAt=await now(sandbox) + 60 * DAY_MS)).data
    await advance(sandbox, 29 * DAY_MS)
    held = (await create(sandbox, idempotencyKey="monthly", expiresAt=first["expiresAt"])).data
    assert held["id"] == first["id"] and held["deduplicated"] is True
    await renew_token(sandbox)
    await advance(sandbox, DAY_MS + 1)
    fresh = (await create(sandbox, idempotencyKey="monthly", expiresAt=first["expiresAt"])).data
    assert fresh["id"] != first["id"] and fresh["deduplicated"] is False
    # the key now names the new request
    assert (await create(sandbox, idempotencyKey="monthly", expiresAt=first["expiresAt"])).data["id"] == fresh["id"]


async def test_two_concurrent_calls_with_one_key_create_one_request(sandbox):
    body = {"recipient": {"email": "ada@example.test"}, "externalId": "race", "idempotencyKey": "race"}
    a, b = await asyncio.gather(create(sandbox, **body), create(sandbox, **body))
    assert a.status == 200 and b.status == 200, (a.body, b.body)
    assert a.data["id"] == b.data["id"]
    assert sorted([a.data["deduplicated"], b.data["deduplicated"]]) == [False, True]
    assert await request_count(sandbox, externalId="race") == 1
    assert await request_count(sandbox) == 1


# -- test requests -------------------------------------------------------------------------------


async def test_test_request_link_closes_within_24_hours(sandbox):
    t0 = await now(sandbox)
    for asked in (None, t0 + 10 * DAY_MS):
        c = (await create(sandbox, test=True, **({"expiresAt": asked} if asked else {}))).data
        assert c["expiresAt"] == c["createdAt"] + 24 * HOUR_MS, "capped at 24 hours"
    c = (await create(sandbox, test=True, expiresAt=t0 + 2 * HOUR_MS)).data
    assert c["expiresAt"] == t0 + 2 * HOUR_MS, "an earlier expiry is kept"


async def test_test_request_is_never_emailed_hidden_from_lists_and_counted_nowhere(sandbox):
    await set_workspace(sandbox, monthlyAllowance=1)
    real = (await create(sandbox, recipient={"email": "real@example.test"})).data
    tests = []
    for i in range(3):  # the allowance is spent, test requests still work
        r = await create(sandbox, test=True, delivery="email", recipient={"email": f"t{i}@example.test"})
        assert r.status == 200, r.body
        assert r.data["deliveryStatus"] == "not_requested"
        tests.append(r.data["id"])
    (await create(sandbox)).expect("UPGRADE_REQUIRED", 402, reason="MONTHLY_ALLOWANCE_REACHED")
    await flush(sandbox)
    assert await mails(sandbox) == [], "test requests are never emailed"
    rec = await get(sandbox, tests[0])
    assert rec["isTest"] is True and rec["deliveryStatus"] == "not_requested" and rec["delivery"] == "email"
    assert [i["id"] for i in (await listed(sandbox))["items"]] == [real["id"]]
    with_tests = {i["id"] for i in (await listed(sandbox, includeTest=True))["items"]}
    assert with_tests == {real["id"], *tests}
    # a test request's link opens and completes
    assert (await complete(sandbox, tests[0], CONTACT_ANSWERS)).status == 200


async def test_free_workspace_may_create_ten_test_requests_a_day(sandbox):
    for i in range(10):
        assert (await create(sandbox, ws="free", test=True)).status == 200, i
    t0 = await now(sandbox)
    r = await create(sandbox, ws="free", test=True)
    t1 = await now(sandbox)
    err = r.expect("UPGRADE_REQUIRED", 402, reason="FREE_TEST_REQUESTS_USED")
    wait = r.details["retryAfterMs"]
    assert DAY_MS - t1 % DAY_MS <= wait <= DAY_MS - t0 % DAY_MS, "the count starts again at midnight UTC"
    assert "10" in err["message"]
    assert (await create(sandbox, ws="free")).status == 200, "real requests are not affected"
    await advance(sandbox, wait + 1, ws="free")
    assert (await create(sandbox, ws="free", test=True)).status == 200
    for _ in range(11):  # Pro has no daily cap on tests
        assert (await create(sandbox, test=True)).status == 200


# -- reminders param -----------------------------------------------------------------------------


async def set_form_schedule(sandbox: Any, steps: list[str], form: str = "Contact", ws: str = "pro") -> None:
    """The form's reminder schedule: through formSettings.update when it exists."""
    form_id = sandbox.workspaces[ws].forms[form]
    if "formSettings.update" in METHODS:
        r = await sandbox.rpc("formSettings.update", {"formId": form_id, "reminderSteps": steps}, ws=ws)
        assert r.status == 200, r.body
        return
    from formservice.tables import Form

    with sandbox.service.session() as s:
        row = s.get(Form, form_id)
        row.settings = {**(row.settings or {}), "reminderSteps": steps}
        s.commit()


async def test_reminders_param_empty_list_none_omitted_form_schedule(sandbox):
    await set_form_schedule(sandbox, ["3d"])
    email = {"email": "ada@example.test"}
    own = (await create(sandbox, recipient=email, reminders=["2d", "1d", "48h"])).data
    rec = await get(sandbox, own["id"])
    assert rec["reminderDueAt"] == own["createdAt"] + DAY_MS, "the request's own steps, sorted"
    none = (await create(sandbox, recipient=email, reminders=[])).data
    assert (await get(sandbox, none["id"]))["reminderDueAt"] is None, "[] sends no reminders"
    form = (await create(sandbox, recipient=email)).data
    assert (await get(sandbox, form["id"]))["reminderDueAt"] == form["createdAt"] + 3 * DAY_MS, \
        "omitted: the form's schedule applies, even with delivery none"
    no_email = (await create(sandbox, recipient={"name": "Anon"})).data
    assert (await get(sandbox, no_email["id"]))["reminderDueAt"] is None, "reminders need a recipient email"
    test = (await create(sandbox, recipient=email, test=True)).data
    assert (await get(sandbox, test["id"]))["reminderDueAt"] is None, "test requests are never emailed"


async def test_reminders_param_is_validated_and_needs_pro(sandbox):
    r = await create(sandbox, recipient={"email": "a@example.test"}, reminders=["1d", "2 days"])
    r.expect("VALIDATION_ERROR", 400, reason="INVALID_FORMAT", field="reminders.1")
    r = await create(sandbox, recipient={"email": "a@example.test"}, reminders=["53w"])
    r.expect("VALIDATION_ERROR", 400, reason="OUT_OF_RANGE", field="reminders.0")
    r = await create(sandbox, reminders=["1d", "2d", "3d", "4d", "5d", "6d"])
    r.expect("VALIDATION_ERROR", 400, reason="OUT_OF_RANGE", field="reminders")
    r = await create(sandbox, ws="free", recipient={"email": "a@example.test"}, reminders=["1d"])
    r.expect("UPGRADE_REQUIRED", 402, feature="reminders")
    assert (await create(sandbox, ws="free", reminders=[])).status == 200, "[] is no reminder, so Free may send it"


# -- domainId -------------------------------------------------------------------------------------


async def test_domain_id_mints_the_link_on_a_custom_domain(sandbox):
    # the caller learns the ids from formSettings.get availableCustomDomains, as the spec's
    # "id from the custom-domain list" asks; the store must agree with what the API shows
    listed = (await sandbox.rpc("formSettings.get", {"formId": sandbox.business.forms["Contact"]},
                                ws="business")).data["availableCustomDomains"]
    with sandbox.service.session() as s:
        stored = s.get(WorkspaceRow, sandbox.business.id).custom_domains
    assert listed == [{"id": d["id"], "domain": d["domain"]} for d in stored] != []
    dom = listed[0]
    pro_listed = (await sandbox.rpc("formSettings.get", {"formId": sandbox.pro.forms["Contact"]})).data
    assert pro_listed["availableCustomDomains"] == [], "a workspace without custom domains lists none"
    c = (await create(sandbox, ws="business", domainId=dom["id"])).data
    assert re.fullmatch(f"https://{re.escape(dom['domain'])}/r/rq_{ID_RE}", c["url"])
    assert (await get(sandbox, c["id"], ws="business"))["url"] == c["url"]
    plain = (await create(sandbox, ws="business")).data
    assert plain["url"].startswith(sandbox.base_url + "/r/rq_"), "omitted: the form's current domain"
    r = await create(sandbox, ws="business", domainId="cdom_unknown")
    r.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_DOMAIN", field="domainId", validValues=[dom["id"]])
    r = await create(sandbox, ws="pro", domainId=dom["id"])
    r.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_DOMAIN", field="domainId", validValues=[])


# -- documents ------------------------------------------------------------------------------------


async def make_document(sandbox: Any, form: str, *, ws: str = "pro", name: str = "Terms.pdf", size: int = 1024,
                        uploaded: bool = True, fill: bytes = b"0") -> str:
    """A document for ``form`` whose bytes are a PDF header padded with ``fill``:
    reserved with documents.create and uploaded by PUT when that method exists (and the
    size is small enough to send), else a stored row with or without its upload."""
    form_id = sandbox.workspaces[ws].forms[form]
    data = b"%PDF-1.4\n" + fill * (size - 9)
    digest = hashlib.sha256(data).hexdigest()
    if "documents.create" in METHODS and size <= MB:
        r = await sandbox.rpc("documents.create", {"formId": form_id, "name": name, "contentType": "application/pdf",
                                                   "size": size, "sha256": digest}, ws=ws)
        assert r.status == 200, r.body
        if uploaded:
            async with sandbox.http.put(r.data["uploadUrl"], data=data,
                                        headers={"Content-Type": "application/pdf"}) as resp:
                assert resp.status == 200, await resp.text()
        return r.data["id"]
    t = await now(sandbox)
    doc = Document(id=new_id("doc"), workspace_id=sandbox.workspaces[ws].id, form_id=form_id, name=name,
                   content_type="application/pdf", size=size, sha256=digest, upload_token=new_id("upl"),
                   upload_expires_at=t + HOUR_MS, uploaded_at=t if uploaded else None, created_at=t)
    with sandbox.service.session() as s:
        if uploaded:  # an upload keeps the bytes, which requests.create checks again
            stored = StoredFile(id=new_id("file"), content_type="application/pdf", data=data, created_at=t)
            s.add(stored)
            doc.file_id = stored.id
        s.add(doc)
        s.commit()
    return doc.id


async def test_documents_are_checked_and_aimed_at_a_documents_block(sandbox):
    doc = await make_document(sandbox, "Two documents", name="Terms.pdf")
    r = await create(sandbox, "Two documents", documents=[{"documentId": "doc_missing0000000000000000"}])
    r.expect("VALIDATION_ERROR", 400, reason="DOCUMENT_NOT_FOUND", field="documents.0.documentId",
             documentId="doc_missing0000000000000000")
    pending = await make_document(sandbox, "Two documents", uploaded=False)
    r = await create(sandbox, "Two documents", documents=[{"documentId": doc, "field": "nda"},
                                                           {"documentId": pending, "field": "annex"}])
    r.expect("VALIDATION_ERROR", 400, reason="DOCUMENT_NOT_UPLOADED", field="documents.1.documentId",
             documentId=pending)
    r = await create(sandbox, "Two documents", documents=[{"documentId": doc}])
    err = r.expect("VALIDATION_ERROR", 400, reason="INVALID_DOCUMENT_TARGET", field="documents",
                   validKeys=["nda", "annex"])
    assert err["message"] == 'This form has 2 Documents blocks; name the target with "field".'
    r = await create(sandbox, "Two documents", documents=[{"documentId": doc, "field": "name"}])
    r.expect("VALIDATION_ERROR", 400, reason="INVALID_DOCUMENT_TARGET", field="documents.0.field",
             validKeys=["nda", "annex"])
    r = await create(sandbox, "Contact", documents=[{"documentId": doc}])
    r.expect("VALIDATION_ERROR", 400, reason="DOCUMENT_NOT_FOUND", field="documents.0.documentId")
    assert await request_count(sandbox) == 0
    rid = await created_id(sandbox, "Two documents",
                           documents=[{"documentId": doc, "field": "annex", "name": "Annex A.pdf"}])
    assert (await get(sandbox, rid))["documents"] == [
        {"field": "annex", "name": "Annex A.pdf", "size": 1024, "contentType": "application/pdf"}]


async def test_a_single_documents_block_is_picked_and_one_upload_serves_many_requests(sandbox):
    doc = await make_document(sandbox, "Approval", name="Offer.pdf", size=2048)
    for _ in range(2):
        rid = await created_id(sandbox, "Approval", documents=[{"documentId": doc}])
        assert (await get(sandbox, rid))["documents"] == [
            {"field": "review_docs", "name": "Offer.pdf", "size": 2048, "contentType": "application/pdf"}]


async def test_a_form_without_documents_block_takes_no_documents(sandbox):
    doc = await make_document(sandbox, "Contact")
    r = await create(sandbox, "Contact", documents=[{"documentId": doc}])
    r.expect("VALIDATION_ERROR", 400, reason="INVALID_DOCUMENT_TARGET", field="documents", validKeys=[])


async def test_a_retry_that_uploads_its_files_again_is_still_deduplicated(sandbox):
    first_upload = await make_document(sandbox, "Approval", name="Offer.pdf")
    second_upload = await make_document(sandbox, "Approval", name="Offer.pdf")
    other_bytes = await make_document(sandbox, "Approval", name="Offer.pdf", fill=b"1")
    assert len({first_upload, second_upload, other_bytes}) == 3
    body = {"externalId": "offer-1", "idempotencyKey": "offer-1"}
    first = (await create(sandbox, "Approval", documents=[{"documentId": first_upload}], **body)).data
    retry = (await create(sandbox, "Approval", documents=[{"documentId": second_upload}], **body)).data
    assert retry["id"] == first["id"] and retry["deduplicated"] is True, "same bytes, block and name"
    named = await create(sandbox, "Approval", documents=[{"documentId": second_upload, "field": "review_docs"}],
                         **body)
    assert named.data["id"] == first["id"], "naming the only Documents block is the same block"
    r = await create(sandbox, "Approval", documents=[{"documentId": other_bytes}], **body)
    r.expect("CONFLICT", 409, reason="IDEMPOTENCY_CONFLICT", field="idempotencyKey")
    r = await create(sandbox, "Approval", documents=[{"documentId": second_upload, "name": "Renamed.pdf"}], **body)
    r.expect("CONFLICT", 409, reason="IDEMPOTENCY_CONFLICT", field="idempotencyKey")
    assert await request_count(sandbox) == 1


async def test_documents_of_a_request_total_at_most_100_mb(sandbox):
    big = [await make_document(sandbox, "Approval", name=f"part{i}.pdf", size=25 * MB) for i in range(5)]
    four = [{"documentId": d} for d in big[:4]]
    assert (await create(sandbox, "Approval", documents=four)).status == 200, "exactly 100 MB passes"
    r = await create(sandbox, "Approval", documents=[{"documentId": d} for d in big])
    err = r.expect("VALIDATION_ERROR", 400, reason="DOCUMENTS_TOO_LARGE", field="documents")
    assert "100 MB" in err["message"]
    assert await request_count(sandbox) == 1


# -- monthly allowance and the create limit ---------------------------------------------------------


async def test_each_real_request_spends_one_unit_of_the_monthly_allowance(sandbox):
    await set_workspace(sandbox, monthlyAllowance=2)
    ids = [await created_id(sandbox) for _ in range(2)]
    r = await create(sandbox)
    err = r.expect("UPGRADE_REQUIRED", 402, reason="MONTHLY_ALLOWANCE_REACHED")
    assert "2" in err["message"]
    assert (await create(sandbox, test=True)).status == 200, "a test request spends nothing"
    # spent whether or not answered: canceling gives nothing back
    assert (await sandbox.rpc("requests.cancel", {"requestId": ids[0]})).status == 200
    (await create(sandbox)).expect("UPGRADE_REQUIRED", 402, reason="MONTHLY_ALLOWANCE_REACHED")
    assert await request_count(sandbox) == 2
    # a new calendar month (UTC) brings a new allowance
    t = await now(sandbox)
    await advance(sandbox, 2 * DAY_MS)
    await renew_token(sandbox)
    await advance(sandbox, 30 * DAY_MS - t % DAY_MS)
    assert (await create(sandbox)).status == 200


async def test_requests_create_has_its_own_limit_of_60_per_minute(sandbox):
    for i in range(60):
        r = await create(sandbox, externalId=f"bulk-{i}")
        assert r.status == 200, (i, r.body)
    r = await create(sandbox, externalId="bulk-60")
    err = r.expect("RATE_LIMITED", 429)
    wait = r.details["retryAfterMs"]
    assert isinstance(wait, int) and 0 < wait <= MINUTE_MS
    assert "60" in err["message"]
    # other methods still pass while creates are throttled
    assert (await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id})).status == 200
    assert (await sandbox.rpc("requests.list", {"workspaceId": sandbox.pro.id})).status == 200
    assert await request_count(sandbox, externalId="bulk-60") == 0
    await advance(sandbox, wait)
    assert (await create(sandbox, externalId="bulk-60")).status == 200


# -- requests.list ---------------------------------------------------------------------------------


async def test_list_needs_a_scope_of_this_workspace(sandbox):
    r = await sandbox.rpc("requests.list", {})
    r.expect("VALIDATION_ERROR", 400, reason="SCOPE_REQUIRED", validKeys=["formId", "workspaceId"])
    (await sandbox.rpc("requests.list", {"workspaceId": sandbox.free.id})).expect(
        "FORBIDDEN", 403, field="workspaceId")
    (await sandbox.rpc("requests.list", {"formId": sandbox.free.forms["Contact"]})).expect(
        "FORBIDDEN", 403, field="formId")
    (await sandbox.rpc("requests.list", {"workspaceId": "ws_nope"})).expect("NOT_FOUND", 404, field="workspaceId")
    (await sandbox.rpc("requests.list", {"workspaceId": sandbox.pro.id, "limit": 101})).expect(
        "VALIDATION_ERROR", 400, reason="OUT_OF_RANGE", field="limit")
    (await sandbox.rpc("requests.list", {"workspaceId": sandbox.pro.id, "status": "cancelled"})).expect(
        "VALIDATION_ERROR", 400, reason="INVALID_VALUE", field="status",
        validValues=["pending", "completed", "expired", "canceled"])


async def test_list_pages_newest_first_25_by_default_with_summaries(sandbox):
    ids = [await created_id(sandbox, externalId=f"row-{i}") for i in range(27)]
    first = await listed(sandbox)
    assert len(first["items"]) == 25 and first["hasMore"] is True and first["nextCursor"]
    assert all("answers" not in i and "timeline" not in i for i in first["items"]), "summaries only"
    assert set(first["items"][0]) == RECORD_KEYS - {"answers", "display", "timeline"}
    second = await listed(sandbox, cursor=first["nextCursor"])
    assert second["hasMore"] is False and second["nextCursor"] is None
    seen = [i["id"] for i in first["items"] + second["items"]]
    assert seen == list(reversed(ids)), "newest first, no gap, no duplicate"
    small = await listed(sandbox, limit=10)
    assert [i["id"] for i in small["items"]] == list(reversed(ids))[:10]
    # formId scopes to one form
    other = await created_id(sandbox, "Everything", prefill={"full_name": "X"})
    only = await listed(sandbox, formId=sandbox.pro.forms["Everything"])
    assert [i["id"] for i in only["items"]] == [other]


async def test_list_filters_status_outcome_external_id_and_include_test(sandbox):
    approved = await created_id(sandbox, "Approval", externalId="case-1")
    declined = await created_id(sandbox, "Approval", externalId="case-10")
    pending = await created_id(sandbox, "Approval", externalId="case-11")
    canceled = await created_id(sandbox, "Approval")
    test = await created_id(sandbox, "Approval", test=True, externalId="case-1")
    for rid, decision in ((approved, "approve"), (declined, "decline")):
        r = await complete(sandbox, rid, {"reviewer": "Rita", "decision": decision})
        assert r.status == 200, r.body
    assert (await sandbox.rpc("requests.cancel", {"requestId": canceled})).status == 200

    async def ids(**filters: Any) -> set[str]:
        return {i["id"] for i in (await listed(sandbox, **filters))["items"]}

    assert await ids(status="completed") == {approved, declined}
    assert await ids(status="pending") == {pending}
    assert await ids(status="canceled") == {canceled}
    assert await ids(outcome="approve") == {approved}
    assert await ids(outcome="decline", status="pending") == {declined}, "outcome takes precedence over status"
    assert await ids(externalId="case-1") == {approved}, "externalId matches exactly, tests hidden"
    assert await ids(externalId="case-1", includeTest=True) == {approved, test}
    assert await ids(externalId="case") == set()


async def test_outcome_comes_only_from_a_decision_question(sandbox):
    a = await created_id(sandbox, "Approval")
    assert (await get(sandbox, a))["outcome"] is None
    r = await complete(sandbox, a, {"reviewer": "Rita", "decision": "Approve"})
    r.expect("VALIDATION_ERROR", 400, field="answers.decision", validValues=["approve", "changes", "decline"])
    assert (await complete(sandbox, a, {"reviewer": "Rita", "decision": "changes"})).status == 200
    rec = await get(sandbox, a)
    assert rec["outcome"] == "changes" and rec["answers"]["decision"] == "changes"
    assert rec["display"]["decision"] == "Request changes"
    c = await created_id(sandbox, "Contact")
    assert (await complete(sandbox, c, CONTACT_ANSWERS)).status == 200
    assert (await get(sandbox, c))["outcome"] is None, "a form without a decision question has no outcome"


async def test_get_of_an_unknown_or_foreign_request(sandbox):
    (await sandbox.rpc("requests.get", {"requestId": "req_unknown"})).expect("NOT_FOUND", 404, field="requestId")
    rid = await created_id(sandbox, ws="free")
    (await sandbox.rpc("requests.get", {"requestId": rid})).expect("FORBIDDEN", 403, field="requestId")


# -- requests.sample ---------------------------------------------------------------------------------


async def test_sample_gives_each_request_event_with_the_documented_values(sandbox):
    form_id = sandbox.pro.forms["Approval"]
    seen = {}
    for event_type in ("request_completed", "request_expired", "request_canceled"):
        r = await sandbox.rpc("requests.sample", {"formId": form_id, "eventType": event_type})
        assert r.status == 200, r.body
        ev = r.data
        seen[event_type] = ev
        assert ev["id"] == "evt_example000000000000"
        assert ev["type"] == "request." + event_type.split("_")[1]
        assert ev["test"] is True and ev["apiVersion"] == "2026-09-24"
        assert ISO_MS_Z.match(ev["createdAt"]), "events carry ISO 8601 with ms and Z"
        req = ev["data"]["request"]
        assert req["id"] == "req_example000000000000"
        assert req["externalId"] == "run-42" and req["metadata"] == {"runId": "run-42"}
        assert ISO_MS_Z.match(req["createdAt"])
    done = seen["request_completed"]["data"]
    assert set(done) == {"request", "form", "submission", "answers", "display"}
    assert done["request"]["outcome"] == "approve" and ISO_MS_Z.match(done["request"]["completedAt"])
    assert done["submission"]["id"] == "sub_example000000000000"
    assert done["form"]["id"] == form_id and set(done["answers"]) == set(done["display"])
    assert set(seen["request_expired"]["data"]) == {"request"}
    assert ISO_MS_Z.match(seen["request_expired"]["data"]["request"]["expiredAt"])
    canceled = seen["request_canceled"]["data"]
    assert set(canceled) == {"request"} and canceled["request"]["cancelReason"] == "Order withdrawn"
    assert ISO_MS_Z.match(canceled["request"]["canceledAt"])
    events_now = await sandbox.helper("events.list")
    assert events_now.data["items"] == [], "a sample is built, never stored or sent"


async def test_sample_refuses_other_event_types(sandbox):
    for bad in ("submission_created", "request.completed", "request_opened"):
        r = await sandbox.rpc("requests.sample", {"formId": sandbox.pro.forms["Contact"], "eventType": bad})
        err = r.expect("VALIDATION_ERROR", 400, field="eventType")
        assert err["message"] == "eventType must be a request event"
    (await sandbox.rpc("requests.sample", {"formId": "form_nope", "eventType": "request_completed"})).expect(
        "NOT_FOUND", 404, field="formId")
