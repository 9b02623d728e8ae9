"""Spec "Request status" and "Request delivery status", with the notes' sections 1-3:
requests.cancel and requests.remind, the delivery status machine and the mail outbox,
the event each state change writes, and the time-driven work on the test clock (expiry,
scheduled reminders, test links closing, retention purges)."""

from __future__ import annotations

import re
from typing import Any

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
    events,
    flush,
    get,
    mails,
    now,
    renew_token,
)

EMAIL = {"email": "ada@example.test", "name": "Ada"}
SUMMARY_EXCLUDES = ("answers", "display", "timeline")


async def cancel(sandbox: Any, request_id: str, ws: str = "pro", **params: Any) -> Any:
    return await sandbox.rpc("requests.cancel", {"requestId": request_id, **params}, ws=ws)


async def remind(sandbox: Any, request_id: str, ws: str = "pro") -> Any:
    return await sandbox.rpc("requests.remind", {"requestId": request_id}, ws=ws)


async def set_settings(sandbox: Any, form: str, ws: str = "pro", **settings: Any) -> Any:
    return await sandbox.rpc("formSettings.update", {"formId": sandbox.workspaces[ws].forms[form], **settings},
                             ws=ws)


# -- requests.cancel ---------------------------------------------------------------------------


async def test_cancel_ends_a_pending_request_with_reason_and_canceled_by_api(sandbox):
    rid = await created_id(sandbox, recipient=EMAIL)
    before = await now(sandbox)
    r = await cancel(sandbox, rid, reason="Order withdrawn")
    assert r.status == 200, r.body
    summary = r.data
    assert summary["id"] == rid and summary["status"] == "canceled", "canceled, with one l"
    assert summary["canceledBy"] == "api" and summary["cancelReason"] == "Order withdrawn"
    assert isinstance(summary["canceledAt"], int) and summary["canceledAt"] >= before
    assert not set(SUMMARY_EXCLUDES) & set(summary), "cancel returns the summary"
    rec = await get(sandbox, rid)
    assert rec["status"] == "canceled" and rec["reminderDueAt"] is None
    assert rec["timeline"][-1] == {"id": f"{rid}:canceled", "at": summary["canceledAt"], "type": "canceled",
                                   "canceledBy": "api", "detail": "Order withdrawn"}
    # not pending any more: a second cancel, a reminder and the recipient's submit are refused
    err = (await cancel(sandbox, rid)).expect("CONFLICT", 409, reason="REQUEST_NOT_PENDING", field="requestId")
    assert "canceled" in err["message"]
    (await remind(sandbox, rid)).expect("CONFLICT", 409, reason="REQUEST_NOT_PENDING")
    (await complete(sandbox, rid, CONTACT_ANSWERS)).expect("CONFLICT", 409, reason="REQUEST_NOT_PENDING")
    after = await get(sandbox, rid)
    assert after["cancelReason"] == "Order withdrawn" and after["canceledAt"] == summary["canceledAt"]


async def test_cancel_without_reason_and_on_finished_requests(sandbox):
    rid = await created_id(sandbox)
    r = await cancel(sandbox, rid)
    assert r.data["cancelReason"] is None and r.data["canceledBy"] == "api"
    done = await created_id(sandbox)
    assert (await complete(sandbox, done, CONTACT_ANSWERS)).status == 200
    (await cancel(sandbox, done)).expect("CONFLICT", 409, reason="REQUEST_NOT_PENDING")
    assert (await get(sandbox, done))["status"] == "completed"
    (await cancel(sandbox, "req_unknown")).expect("NOT_FOUND", 404, field="requestId")
    foreign = await created_id(sandbox, ws="business")
    (await cancel(sandbox, foreign)).expect("FORBIDDEN", 403, field="requestId")
    assert (await get(sandbox, foreign, ws="business"))["status"] == "pending"
    long = await created_id(sandbox)
    (await cancel(sandbox, long, reason="x" * 1001)).expect("VALIDATION_ERROR", 400, reason="OUT_OF_RANGE",
                                                            field="reason")
    assert (await get(sandbox, long))["status"] == "pending"


async def test_the_link_of_a_request_takes_no_answers_while_its_form_is_unpublished(sandbox):
    rid = await created_id(sandbox)
    form_id = sandbox.pro.forms["Contact"]
    assert (await sandbox.rpc("forms.unpublish", {"formId": form_id})).status == 200
    err = (await complete(sandbox, rid, CONTACT_ANSWERS)).expect("CONFLICT", 409, reason="FORM_NOT_PUBLISHED",
                                                                 field="requestId")
    assert "publish" in err["message"]
    assert (await get(sandbox, rid))["status"] == "pending"
    assert (await sandbox.rpc("forms.publish", {"formId": form_id})).status == 200
    assert (await complete(sandbox, rid, CONTACT_ANSWERS)).status == 200


# -- requests.remind ---------------------------------------------------------------------------


async def test_remind_needs_pro(sandbox):
    rid = await created_id(sandbox, ws="free", recipient=EMAIL)
    (await remind(sandbox, rid, ws="free")).expect("UPGRADE_REQUIRED", 402, feature="reminders")
    assert await mails(sandbox, ws="free") == []
    assert (await get(sandbox, rid, ws="free"))["remindersSent"] == 0


async def test_remind_needs_a_recipient_email(sandbox):
    rid = await created_id(sandbox, recipient={"name": "No Mail"})
    err = (await remind(sandbox, rid)).expect("VALIDATION_ERROR", 400, reason="RECIPIENT_EMAIL_REQUIRED")
    assert "RECIPIENT_EMAIL_REQUIRED" in err["message"]
    assert await mails(sandbox) == []


async def test_remind_emails_even_with_delivery_none_once_per_10_minutes(sandbox):
    rid = await created_id(sandbox, recipient=EMAIL, delivery="none")
    r = await remind(sandbox, rid)
    assert r.status == 200, r.body
    assert r.data["remindersSent"] == 1 and r.data["status"] == "pending"
    assert not set(SUMMARY_EXCLUDES) & set(r.data)
    [mail] = await mails(sandbox, requestId=rid)
    assert mail["kind"] == "reminder" and mail["to"] == EMAIL["email"] and mail["status"] == "sent"
    assert r.data["url"] in mail["body"]
    # a second one within 10 minutes: REMINDER_TOO_SOON, 409, with the wait
    t = await now(sandbox)
    again = await remind(sandbox, rid)
    err = again.expect("CONFLICT", 409, reason="REMINDER_TOO_SOON", field="requestId")
    wait = again.details["retryAfterMs"]
    assert 10 * MINUTE_MS - (t - mail["createdAt"]) - 2000 <= wait <= 10 * MINUTE_MS, wait
    assert "10 minutes" in err["message"]
    assert len(await mails(sandbox, requestId=rid)) == 1 and (await get(sandbox, rid))["remindersSent"] == 1
    await advance(sandbox, wait)
    r = await remind(sandbox, rid)
    assert r.status == 200 and r.data["remindersSent"] == 2
    rec = await get(sandbox, rid)
    reminders = [e for e in rec["timeline"] if e["type"] == "reminder"]
    assert [e["id"] for e in reminders] == [f"{rid}:reminder"] * 2
    assert all(e["deliveryStatus"] == "sent" for e in reminders)
    assert rec["deliveryStatus"] == "not_requested", "a reminder is no invitation"


async def test_at_most_8_reminders_per_request(sandbox):
    rid = await created_id(sandbox, recipient=EMAIL)
    for i in range(8):
        r = await remind(sandbox, rid)
        assert r.status == 200 and r.data["remindersSent"] == i + 1, r.body
        await advance(sandbox, 10 * MINUTE_MS)
    err = (await remind(sandbox, rid)).expect("CONFLICT", 409, reason="REMINDER_LIMIT_REACHED", field="requestId")
    assert "8" in err["message"]
    assert len(await mails(sandbox, requestId=rid)) == 8


async def test_remind_refuses_test_requests(sandbox):
    rid = await created_id(sandbox, recipient=EMAIL, test=True)
    (await remind(sandbox, rid)).expect("VALIDATION_ERROR", 400, reason="TEST_REQUEST")
    assert await mails(sandbox) == []


# -- delivery status ------------------------------------------------------------------------------


async def test_delivery_none_stays_not_requested(sandbox):
    c = (await create(sandbox, recipient=EMAIL)).data
    assert c["deliveryStatus"] == "not_requested"
    await flush(sandbox)
    assert (await get(sandbox, c["id"]))["deliveryStatus"] == "not_requested"
    assert await mails(sandbox) == []


async def test_email_delivery_is_queued_at_create_and_sent_after_hand_off(sandbox):
    c = (await create(sandbox, "Approval", recipient=EMAIL, delivery="email")).data
    assert c["deliveryStatus"] == "queued"
    await flush(sandbox)
    rec = await get(sandbox, c["id"])
    assert rec["deliveryStatus"] == "sent"
    [mail] = await mails(sandbox)
    assert mail["kind"] == "invitation" and mail["to"] == EMAIL["email"] and mail["requestId"] == c["id"]
    assert "Approval" in mail["subject"] and c["url"] in mail["body"]
    assert [(e["type"], e.get("deliveryStatus")) for e in rec["timeline"]] == [
        ("created", None), ("invitation", "queued"), ("invitation", "sent")]
    await flush(sandbox)
    assert len(await mails(sandbox)) == 1, "an invitation goes out once"


async def test_the_background_worker_hands_off_invitations_by_itself(sandbox):
    import asyncio

    c = (await create(sandbox, recipient=EMAIL, delivery="email")).data
    for _ in range(50):
        if (await get(sandbox, c["id"]))["deliveryStatus"] == "sent":
            break
        await asyncio.sleep(0.1)
    assert (await get(sandbox, c["id"]))["deliveryStatus"] == "sent"


async def test_recipients_at_bounce_test_bounce(sandbox):
    c = (await create(sandbox, recipient={"email": "gone@bounce.test"}, delivery="email")).data
    assert c["deliveryStatus"] == "queued"
    await flush(sandbox)
    rec = await get(sandbox, c["id"])
    assert rec["deliveryStatus"] == "bounced"
    assert [e.get("deliveryStatus") for e in rec["timeline"] if e["type"] == "invitation"] == [
        "queued", "sent", "bounced"]
    [mail] = await mails(sandbox)
    assert mail["status"] == "bounced"


async def test_a_failed_hand_off_ends_queued_in_failed(sandbox):
    c = (await create(sandbox, recipient={"email": "nobody@fail.test"}, delivery="email")).data
    assert c["deliveryStatus"] == "queued"
    await flush(sandbox)
    rec = await get(sandbox, c["id"])
    assert rec["deliveryStatus"] == "failed", "queued -> failed, never sent"
    assert [e.get("deliveryStatus") for e in rec["timeline"] if e["type"] == "invitation"] == ["queued", "failed"]
    [mail] = await mails(sandbox)
    assert mail["status"] == "failed"


async def test_invitation_uses_the_forms_verified_sender_domain(sandbox):
    got = await sandbox.rpc("formSettings.get", {"formId": sandbox.business.forms["Contact"]}, ws="business")
    assert got.status == 200, got.body
    domains = got.data["availableEmailDomains"]
    domain_id = domains[0]["id"] if isinstance(domains[0], dict) else domains[0]
    assert (await set_settings(sandbox, "Contact", ws="business", emailDomainId=domain_id)).status == 200
    await create(sandbox, ws="business", recipient=EMAIL, delivery="email")
    await flush(sandbox, ws="business")
    [mail] = await mails(sandbox, ws="business")
    assert mail["from"].endswith("@mail.business.example.test")


# -- events ---------------------------------------------------------------------------------------


async def test_every_state_change_writes_its_event_at_once(sandbox):
    done = await created_id(sandbox, externalId="e-1", metadata={"k": "v"})
    assert await events(sandbox, requestId=done) == [], "creation is no terminal event"
    assert (await complete(sandbox, done, CONTACT_ANSWERS)).status == 200
    [ev] = await events(sandbox, requestId=done)
    assert ev["type"] == "request.completed" and re.fullmatch(f"evt_{ID_RE}", ev["id"])
    assert ev["payload"]["id"] == ev["id"] and ISO_MS_Z.match(ev["payload"]["createdAt"])
    assert ev["payload"]["data"]["request"]["externalId"] == "e-1"
    assert ev["deliveries"] == [], "no callbackUrl, no subscription: nothing to send"

    gone = await created_id(sandbox)
    assert (await cancel(sandbox, gone, reason="dup")).status == 200
    [ev] = await events(sandbox, requestId=gone)
    assert ev["type"] == "request.canceled"
    assert ev["payload"]["data"]["request"]["cancelReason"] == "dup"

    t = await now(sandbox)
    late = await created_id(sandbox, expiresAt=t + HOUR_MS)
    await advance(sandbox, HOUR_MS)
    [ev] = await events(sandbox, requestId=late)
    assert ev["type"] == "request.expired" and ev["test"] is False
    assert [e["type"] for e in await events(sandbox)] == ["request.completed", "request.canceled",
                                                          "request.expired"]


# -- time-driven work -------------------------------------------------------------------------------


async def test_request_expires_once_expires_at_passes(sandbox):
    t = await now(sandbox)
    c = (await create(sandbox, recipient=EMAIL, expiresAt=t + 2 * HOUR_MS)).data
    await advance(sandbox, 2 * HOUR_MS - 5 * MINUTE_MS)
    assert (await get(sandbox, c["id"]))["status"] == "pending"
    await advance(sandbox, 5 * MINUTE_MS)
    rec = await get(sandbox, c["id"])
    assert rec["status"] == "expired"
    assert c["expiresAt"] <= rec["expiredAt"] <= c["expiresAt"] + MINUTE_MS
    assert rec["timeline"][-1] == {"id": f"{c['id']}:expired", "at": rec["expiredAt"], "type": "expired"}
    assert rec["reminderDueAt"] is None
    (await complete(sandbox, c["id"], CONTACT_ANSWERS)).expect("CONFLICT", 409, reason="REQUEST_NOT_PENDING")
    (await cancel(sandbox, c["id"])).expect("CONFLICT", 409, reason="REQUEST_NOT_PENDING")
    assert [e["type"] for e in await events(sandbox, requestId=c["id"])] == ["request.expired"]


async def test_default_expiry_is_30_days(sandbox):
    c = (await create(sandbox)).data
    await advance(sandbox, 29 * DAY_MS)
    await renew_token(sandbox)
    await advance(sandbox, DAY_MS - MINUTE_MS)
    assert (await get(sandbox, c["id"]))["status"] == "pending"
    await advance(sandbox, MINUTE_MS)
    assert (await get(sandbox, c["id"]))["status"] == "expired"


async def test_scheduled_reminders_follow_the_forms_idle_offsets_in_order(sandbox):
    assert (await set_settings(sandbox, "Contact", reminderSteps=["3d", "1d"])).status == 200
    c = (await create(sandbox, recipient=EMAIL)).data
    rec = await get(sandbox, c["id"])
    assert (rec["reminderStep"], rec["remindersSent"], rec["reminderDueAt"]) == (0, 0, c["createdAt"] + DAY_MS)
    await advance(sandbox, DAY_MS - MINUTE_MS)
    assert await mails(sandbox) == []
    await advance(sandbox, MINUTE_MS)
    rec = await get(sandbox, c["id"])
    assert (rec["reminderStep"], rec["remindersSent"], rec["reminderDueAt"]) == (1, 1, c["createdAt"] + 3 * DAY_MS)
    assert [m["kind"] for m in await mails(sandbox)] == ["reminder"]
    await advance(sandbox, 2 * DAY_MS)
    rec = await get(sandbox, c["id"])
    assert (rec["reminderStep"], rec["remindersSent"], rec["reminderDueAt"]) == (2, 2, None)
    assert [e["detail"] for e in rec["timeline"] if e["type"] == "reminder"] == ["step 1", "step 2"]
    await advance(sandbox, 7 * DAY_MS)
    assert len(await mails(sandbox)) == 2, "the schedule is done"


async def test_a_requests_own_reminders_replace_the_forms_and_stop_at_completion(sandbox):
    assert (await set_settings(sandbox, "Contact", reminderSteps=["1d"])).status == 200
    own = (await create(sandbox, recipient=EMAIL, reminders=["12h", "2d"])).data
    done = (await create(sandbox, recipient={"email": "done@example.test"})).data
    assert (await complete(sandbox, done["id"], CONTACT_ANSWERS)).status == 200
    assert (await get(sandbox, done["id"]))["reminderDueAt"] is None
    await advance(sandbox, 12 * HOUR_MS)
    assert [m["to"] for m in await mails(sandbox)] == [EMAIL["email"]]
    await advance(sandbox, 12 * HOUR_MS)
    assert len(await mails(sandbox)) == 1, "the form's 1d step does not apply to a request with its own"
    await advance(sandbox, DAY_MS)
    rec = await get(sandbox, own["id"])
    assert rec["remindersSent"] == 2 and rec["reminderDueAt"] is None
    assert all(m["to"] == EMAIL["email"] for m in await mails(sandbox)), "nothing for the completed request"


async def test_free_workspace_requests_get_no_scheduled_reminders(sandbox):
    r = await set_settings(sandbox, "Contact", ws="free", reminderSteps=["1d"])
    r.expect("UPGRADE_REQUIRED", 402, feature="reminders")
    c = (await create(sandbox, ws="free", recipient=EMAIL)).data
    assert (await get(sandbox, c["id"], ws="free"))["reminderDueAt"] is None


async def test_test_link_closes_after_24_hours(sandbox):
    c = (await create(sandbox, test=True, expiresAt=await now(sandbox) + 5 * DAY_MS)).data
    await advance(sandbox, 24 * HOUR_MS - MINUTE_MS)
    assert (await get(sandbox, c["id"]))["status"] == "pending"
    await advance(sandbox, MINUTE_MS)
    rec = await get(sandbox, c["id"])
    assert rec["status"] == "expired" and rec["isTest"] is True
    (await complete(sandbox, c["id"], CONTACT_ANSWERS)).expect("CONFLICT", 409, reason="REQUEST_NOT_PENDING")
    [ev] = await events(sandbox, requestId=c["id"])
    assert ev["type"] == "request.expired" and ev["test"] is True and ev["payload"]["test"] is True


async def test_retention_purges_old_submissions_and_the_requests_answers(sandbox):
    form_id = sandbox.business.forms["Contact"]
    assert (await set_settings(sandbox, "Contact", ws="business", submissionRetentionDays=2)).status == 200
    old = await created_id(sandbox, ws="business")
    assert (await complete(sandbox, old, CONTACT_ANSWERS, ws="business")).status == 200
    await advance(sandbox, DAY_MS, ws="business")
    young = await created_id(sandbox, "Contact", ws="business")
    assert (await complete(sandbox, young, {**CONTACT_ANSWERS, "name": "Young"}, ws="business")).status == 200

    async def listed_names() -> list[str]:
        r = await sandbox.rpc("submissions.list", {"formId": form_id, "limit": 100}, ws="business")
        assert r.status == 200, r.body
        return sorted(i["answers"].get("name", "") for i in r.data["items"] if i["isCompleted"])

    assert "Grace" in await listed_names() and "Young" in await listed_names()
    await advance(sandbox, DAY_MS + MINUTE_MS, ws="business")
    names = await listed_names()
    assert names == ["Young"], "completed submissions older than 2 days are gone, seeded ones included"
    rec = await get(sandbox, old, ws="business")
    assert rec["status"] == "completed" and rec["answers"] is None and rec["display"] is None
    assert isinstance(rec["dataPurgedAt"], int) and rec["dataPurgedAt"] >= rec["completedAt"] + 2 * DAY_MS
    kept = await get(sandbox, young, ws="business")
    assert kept["answers"]["name"] == "Young" and kept["dataPurgedAt"] is None


async def test_submission_retention_is_a_business_feature(sandbox):
    r = await set_settings(sandbox, "Contact", ws="pro", submissionRetentionDays=1)
    r.expect("UPGRADE_REQUIRED", 402, feature="submissionRetention")
    rid = await created_id(sandbox)
    assert (await complete(sandbox, rid, CONTACT_ANSWERS)).status == 200
    await advance(sandbox, 3 * DAY_MS)
    assert (await get(sandbox, rid))["answers"] is not None, "without a retention rule answers are kept"
