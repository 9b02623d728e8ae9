"""The sandbox's dialects (formservice/dialect.py): ``minimal`` answers only the fields
and error parts the spec shows; ``full`` everything. Also what any dialect sends: a 429
carries ``Retry-After``, and a submission's ``language`` is BCP-47 whether it came from a
request or a share link."""

from __future__ import annotations

import math
from typing import Any

from formservice.dialect import DETAILS, FORM, FORM_DETAIL, QUESTION, REQUEST, SETTINGS


async def minimal(sb: Any) -> None:
    assert (await sb.helper("dialect.set", {"dialect": "minimal"})).data == {"dialect": "minimal"}


async def test_minimal_results_carry_only_the_spec_fields(sandbox):
    form = sandbox.pro.forms["Contact"]
    full_settings = (await sandbox.rpc("formSettings.get", {"formId": form})).data["settings"]
    await minimal(sandbox)
    listed = (await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id})).data
    detail = (await sandbox.rpc("forms.get", {"formId": form})).data
    settings = (await sandbox.rpc("formSettings.get", {"formId": form})).data["settings"]
    created = (await sandbox.rpc("requests.create", {"formId": form, "recipient": {"email": "a@example.test"}})).data
    record = (await sandbox.rpc("requests.get", {"requestId": created["id"]})).data
    assert listed["items"] and all(set(i) <= set(FORM) for i in listed["items"])
    assert set(detail) <= set(FORM_DETAIL) and all(set(q) <= set(QUESTION) for q in detail["questions"])
    assert "hasPassword" in full_settings and set(settings) == set(full_settings) & set(SETTINGS)
    assert set(created) == {"id", "status", "url", "deliveryStatus", "externalId", "deduplicated", "createdAt",
                            "expiresAt"}
    assert set(record) <= set(REQUEST) and "recipient" not in record and "formId" not in record
    canceled = (await sandbox.rpc("requests.cancel", {"requestId": created["id"]})).data
    assert canceled["canceledBy"] == "api" and canceled["formId"] == form, "a notes-only method keeps its fields"


async def test_minimal_errors_keep_spec_details_and_put_other_reasons_in_the_message(sandbox):
    form = sandbox.pro.forms["Contact"]
    full = await sandbox.rpc("requests.create", {"formId": form, "prefill": {"topic": "Sales"}})
    await minimal(sandbox)
    short = await sandbox.rpc("requests.create", {"formId": form, "prefill": {"topic": "Sales"}})
    reason = full.details["reason"]
    assert reason not in {"UNKNOWN_FIELD_KEY", "MONTHLY_ALLOWANCE_REACHED", "FREE_INVITATIONS_USED",
                          "DOCUMENT_NOT_UPLOADED"}
    short.expect("VALIDATION_ERROR", 400, field=full.details["field"])
    assert "reason" not in short.details and set(short.details) <= DETAILS
    said = full.error["message"]
    assert short.error["message"] == (said if said.startswith(f"{reason}: ") else f"{reason}: {said}")
    assert short.error["message"].count(reason) == 1, "the reason is named once"
    unknown = await sandbox.rpc("requests.create", {"formId": form, "prefill": {"nope": 1}})
    unknown.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_FIELD_KEY", field="prefill.nope")


async def test_minimal_names_a_reason_once_when_the_message_leads_with_it(sandbox):
    """replayCallback on a pending request: the full message already leads with
    REQUEST_NOT_TERMINAL, so the minimal one is the same text, not the reason twice."""
    form = sandbox.pro.forms["Contact"]
    created = (await sandbox.rpc("requests.create", {"formId": form, "callbackUrl": "http://127.0.0.1:9/cb"})).data
    full = await sandbox.rpc("requests.replayCallback", {"requestId": created["id"]})
    full.expect("CONFLICT", 409, reason="REQUEST_NOT_TERMINAL")
    await minimal(sandbox)
    short = await sandbox.rpc("requests.replayCallback", {"requestId": created["id"]})
    short.expect("CONFLICT", 409)
    assert "reason" not in short.details
    assert short.error["message"] == full.error["message"]
    assert short.error["message"].count("REQUEST_NOT_TERMINAL") == 1, short.error["message"]


async def test_dialect_set_switches_back_and_refuses_other_names(sandbox):
    await minimal(sandbox)
    assert (await sandbox.helper("dialect.set", {"dialect": "full"})).data == {"dialect": "full"}
    record = (await sandbox.rpc("forms.get", {"formId": sandbox.pro.forms["Contact"]})).data
    assert "hasContent" in record and (await sandbox.rpc("formSettings.get", {
        "formId": sandbox.pro.forms["Contact"]})).data["settings"].get("hasPassword") is not None
    (await sandbox.helper("dialect.set", {"dialect": "tiny"})).expect("VALIDATION_ERROR", 400)


async def test_429_carries_retry_after_in_whole_seconds_rounded_up(sandbox):
    await sandbox.helper("limits.set", {"callsPerMinute": 1})
    assert (await sandbox.rpc("me.get")).ok
    reply = await sandbox.rpc("me.get")
    wait_ms = reply.expect("RATE_LIMITED", 429)["details"]["retryAfterMs"]
    assert reply.headers["Retry-After"] == str(math.ceil(wait_ms / 1000))
    await sandbox.helper("limits.set", {"failedAuth": 1})
    (await sandbox.rpc("me.get", token="fb_" + "q" * 32)).expect("UNAUTHORIZED", 401)
    bad = await sandbox.rpc("me.get", token="fb_" + "q" * 32)
    bad_wait = bad.expect("RATE_LIMITED", 429)["details"]["retryAfterMs"]
    assert bad.headers["Retry-After"] == str(math.ceil(bad_wait / 1000))


async def test_submission_language_is_bcp47_from_a_request_and_from_a_share_link(sandbox):
    form = sandbox.pro.forms["Contact"]
    answers = {"name": "Ada", "email": "ada@example.test", "topic": "sales"}
    req = (await sandbox.rpc("requests.create", {"formId": form})).data  # no language given
    assert (await sandbox.helper("requests.complete", {"requestId": req["id"], "answers": answers})).ok
    url = (await sandbox.rpc("shareLinks.create", {"formId": form})).data["url"]
    assert (await sandbox.helper("shareLinks.submit", {"url": url, "answers": answers})).ok
    events = (await sandbox.helper("events.list", {"formId": form})).data["items"]
    languages = {e["type"]: e["payload"]["data"]["submission"]["language"] for e in events
                 if e["type"] in ("request.completed", "submission.completed")}
    assert languages == {"request.completed": "en", "submission.completed": "en"}
