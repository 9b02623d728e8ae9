"""Share links (spec: Form lifecycle, Form settings > Access / After submit / Reminders;
notes sections 3 and 7) and what respondents do through them (the sandbox helper
``shareLinks.submit``), over loopback against the seeded sandbox: the link methods, the
password gate, drafts, submits, edits and their limits, redirects, the abandoned-draft
event and respondent reminders."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from formservice.tables import Form, Submission

from .test_webhooks import CONTACT, Receiver, delivered_to, events_of, flush, signature_valid

MISSING_FORM = "form_0000000000000000000000"
LINK_KEYS = {"id", "formId", "url", "name", "revoked", "revokedAt", "createdAt"}
HOUR = 3_600_000
DAY = 24 * HOUR


# -- helpers ---------------------------------------------------------------------------


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A real HTTP server on a loopback port that records the deliveries it gets."""
    async with Receiver() as r:
        yield r


async def create_link(sb, ws: str = "pro", form: str = "Contact", **params: Any) -> dict[str, Any]:
    r = await sb.rpc("shareLinks.create", {"formId": sb.workspaces[ws].forms[form], **params}, ws=ws)
    assert r.status == 200, r.body
    return r.data


async def links(sb, ws: str = "pro", form: str = "Contact") -> list[dict[str, Any]]:
    r = await sb.rpc("shareLinks.list", {"formId": sb.workspaces[ws].forms[form]}, ws=ws)
    assert r.status == 200 and r.data["hasMore"] is False
    return r.data["items"]


async def submit(sb, url: str, answers: dict[str, Any], ws: str = "pro", **extra: Any):
    return await sb.helper("shareLinks.submit", {"url": url, "answers": answers, **extra}, ws=ws)


async def submitted(sb, url: str, answers: dict[str, Any], ws: str = "pro", **extra: Any) -> dict[str, Any]:
    r = await submit(sb, url, answers, ws=ws, **extra)
    assert r.status == 200, r.body
    return r.data


async def settings(sb, ws: str = "pro", form: str = "Contact", **fields: Any) -> None:
    r = await sb.rpc("formSettings.update", {"formId": sb.workspaces[ws].forms[form], **fields}, ws=ws)
    assert r.status == 200, r.body


def write_settings(sb, form_id: str, **fields: Any) -> None:
    """Settings a plan would refuse through formSettings.update (a downgraded workspace
    keeps what it saved on a higher plan)."""
    with sb.service.session() as s:
        form = s.get(Form, form_id)
        form.settings = {**(form.settings or {}), **fields}
        s.add(form)
        s.commit()


async def submissions(sb, ws: str = "pro", form: str = "Contact") -> list[dict[str, Any]]:
    r = await sb.rpc("submissions.list", {"formId": sb.workspaces[ws].forms[form], "limit": 100}, ws=ws)
    assert r.status == 200
    return r.data["items"]


async def question_ids(sb, ws: str = "pro", form: str = "Contact") -> dict[str, str]:
    """Question title -> block id of a seeded form."""
    detail = (await sb.rpc("forms.get", {"formId": sb.workspaces[ws].forms[form]}, ws=ws)).data
    return {q["title"]: q["id"] for q in detail["questions"]}


def edit_token(result: dict[str, Any]) -> str:
    return parse_qs(urlsplit(result["editUrl"]).query)["edit"][0]


async def advance(sb, ms: int) -> None:
    assert (await sb.helper("clock.advance", {"ms": ms})).status == 200


async def mails(sb, to: str, ws: str = "pro") -> list[dict[str, Any]]:
    items = (await sb.helper("mail.list", {"to": to}, ws=ws)).data["items"]
    return [m for m in items if m["kind"] == "respondent-reminder"]


# -- shareLinks.create / list / update -------------------------------------------------------


async def test_create_returns_a_public_url(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    link = await create_link(sandbox)
    assert set(link) == LINK_KEYS
    assert link["formId"] == form_id and link["revoked"] is False and link["revokedAt"] is None
    assert link["name"] is None and re.fullmatch(r"shl_[0-9A-Za-z]{22}", link["id"])
    m = re.fullmatch(re.escape(sandbox.base_url) + r"/f/([0-9A-Za-z]{22})", link["url"])
    assert m, link["url"]
    named = await create_link(sandbox, name="Newsletter footer")
    assert named["name"] == "Newsletter footer" and named["url"] != link["url"]  # a random token each


async def test_create_refuses_unpublished_trashed_unknown_and_foreign_forms(sandbox):
    r = await sandbox.rpc("shareLinks.create", {"formId": sandbox.pro.forms["Draft survey"]})
    r.expect("VALIDATION_ERROR", 400, field="formId", reason="FORM_NOT_PUBLISHED")
    form_id = sandbox.pro.forms["Approval"]
    assert (await sandbox.rpc("forms.delete", {"formId": form_id})).status == 200
    (await sandbox.rpc("shareLinks.create", {"formId": form_id})).expect("NOT_FOUND", 404, reason="FORM_TRASHED")
    (await sandbox.rpc("shareLinks.create", {"formId": MISSING_FORM})).expect("NOT_FOUND", 404, field="formId")
    (await sandbox.rpc("shareLinks.create", {"formId": sandbox.free.forms["Contact"]})).expect(
        "FORBIDDEN", 403, reason="FOREIGN_WORKSPACE")
    for name, reason in (("   ", "INVALID_VALUE"), ("x" * 256, "OUT_OF_RANGE")):
        r = await sandbox.rpc("shareLinks.create", {"formId": sandbox.pro.forms["Contact"], "name": name})
        r.expect("VALIDATION_ERROR", 400, field="name", reason=reason)
    assert await links(sandbox, form="Draft survey") == [] and await links(sandbox) == []
    assert await links(sandbox, form="Approval") == []


async def test_list_includes_revoked_links_newest_first(sandbox):
    first = await create_link(sandbox, name="first")
    second = await create_link(sandbox, name="second")
    await create_link(sandbox, form="Approval")
    r = await sandbox.rpc("shareLinks.update", {"shareLinkId": first["id"], "revoked": True})
    assert r.status == 200 and r.data["revoked"] is True and r.data["revokedAt"] is not None
    items = await links(sandbox)
    assert [i["id"] for i in items] == [second["id"], first["id"]]
    assert [i["revoked"] for i in items] == [False, True]
    (await sandbox.rpc("shareLinks.list", {"formId": MISSING_FORM})).expect("NOT_FOUND", 404)
    (await sandbox.rpc("shareLinks.list", {"formId": sandbox.pro.forms["Contact"]}, ws="free")).expect(
        "FORBIDDEN", 403)


async def test_update_renames_and_revokes_for_good(sandbox):
    link = await create_link(sandbox, name="old")
    r = await sandbox.rpc("shareLinks.update", {"shareLinkId": link["id"], "name": "new"})
    assert r.status == 200 and r.data == {**link, "name": "new"}
    r = await sandbox.rpc("shareLinks.update", {"shareLinkId": link["id"], "name": None})
    assert r.data["name"] is None
    r = await sandbox.rpc("shareLinks.update", {"shareLinkId": link["id"], "revoked": False})
    assert r.status == 200 and r.data["revoked"] is False  # not revoked yet: nothing to undo
    revoked = (await sandbox.rpc("shareLinks.update", {"shareLinkId": link["id"], "revoked": True})).data
    assert revoked["revoked"] is True
    again = (await sandbox.rpc("shareLinks.update", {"shareLinkId": link["id"], "revoked": True})).data
    assert again["revokedAt"] == revoked["revokedAt"]  # the first revocation keeps its date
    r = await sandbox.rpc("shareLinks.update", {"shareLinkId": link["id"], "revoked": False, "name": "back"})
    err = r.expect("CONFLICT", 409, field="revoked", reason="SHARE_LINK_REVOKED")
    assert "permanent" in err["message"] and "shareLinks.create" in err["message"]
    [item] = await links(sandbox)
    assert item["revoked"] is True and item["name"] is None  # the refused call changed nothing


async def test_update_refusals(sandbox):
    link = await create_link(sandbox)
    (await sandbox.rpc("shareLinks.update", {"shareLinkId": link["id"]})).expect(
        "VALIDATION_ERROR", 400, reason="NOTHING_TO_UPDATE", validKeys=["name", "revoked"])
    (await sandbox.rpc("shareLinks.update", {"shareLinkId": link["id"], "revoked": None})).expect(
        "VALIDATION_ERROR", 400, field="revoked", reason="INVALID_TYPE")
    (await sandbox.rpc("shareLinks.update", {"shareLinkId": link["id"], "name": ""})).expect(
        "VALIDATION_ERROR", 400, field="name")
    (await sandbox.rpc("shareLinks.update", {"shareLinkId": "shl_0000000000000000000000", "name": "x"})).expect(
        "NOT_FOUND", 404, field="shareLinkId")
    (await sandbox.rpc("shareLinks.update", {"shareLinkId": link["id"], "revoked": True}, ws="free")).expect(
        "FORBIDDEN", 403, reason="FOREIGN_WORKSPACE")
    assert (await links(sandbox))[0]["revoked"] is False


# -- link states ------------------------------------------------------------------------------------


async def test_revoked_link_refuses_and_stores_nothing(sandbox):
    link = await create_link(sandbox)
    await sandbox.rpc("shareLinks.update", {"shareLinkId": link["id"], "revoked": True})
    before = await submissions(sandbox)
    (await submit(sandbox, link["url"], CONTACT)).expect("CONFLICT", 409, reason="SHARE_LINK_REVOKED")
    (await submit(sandbox, link["url"], {}, completed=False)).expect("CONFLICT", 409, reason="SHARE_LINK_REVOKED")
    assert await submissions(sandbox) == before


async def test_unknown_link_url(sandbox):
    base = sandbox.base_url
    for url in (f"{base}/f/doesNotExist123", f"{base}/r/rq_abc", "nonsense"):
        (await submit(sandbox, url, CONTACT)).expect("NOT_FOUND", 404, field="url")


async def test_trashed_form_link_refuses_and_stays_revoked_after_restore(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    link = await create_link(sandbox)
    await submitted(sandbox, link["url"], CONTACT)
    assert (await sandbox.rpc("forms.delete", {"formId": form_id})).data["revokedShareLinks"] == 1
    (await submit(sandbox, link["url"], CONTACT)).expect("CONFLICT", 409, reason="FORM_TRASHED")
    [trashed] = await links(sandbox)
    assert trashed["revoked"] is True
    assert (await sandbox.rpc("forms.restore", {"formId": form_id})).status == 200
    [restored] = await links(sandbox)
    assert restored["revoked"] is True and restored["revokedAt"] == trashed["revokedAt"]
    (await submit(sandbox, link["url"], CONTACT)).expect("CONFLICT", 409, reason="SHARE_LINK_REVOKED")
    r = await sandbox.rpc("shareLinks.update", {"shareLinkId": link["id"], "revoked": False})
    r.expect("CONFLICT", 409, reason="SHARE_LINK_REVOKED")
    fresh = await create_link(sandbox)  # new links after a restore
    assert (await submitted(sandbox, fresh["url"], CONTACT))["isCompleted"] is True


async def test_unpublished_form_link_refuses_until_republished(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    link = await create_link(sandbox)
    await sandbox.rpc("forms.unpublish", {"formId": form_id})
    (await submit(sandbox, link["url"], CONTACT)).expect("CONFLICT", 409, reason="FORM_NOT_PUBLISHED")
    assert (await links(sandbox))[0]["revoked"] is False
    await sandbox.rpc("forms.publish", {"formId": form_id})
    assert (await submitted(sandbox, link["url"], CONTACT))["isCompleted"] is True


# -- drafts and submits ------------------------------------------------------------------------------


async def test_submit_stores_a_completed_public_response(sandbox):
    link = await create_link(sandbox)
    before = len(await submissions(sandbox))
    sent = await submitted(sandbox, link["url"], CONTACT)
    assert sent["isCompleted"] is True and sent["editCount"] == 0
    assert "editUrl" not in sent and "redirectUrl" not in sent  # editing off, no redirect by default
    items = await submissions(sandbox)
    assert len(items) == before + 1 and items[0]["id"] == sent["submissionId"]
    assert items[0]["answers"] == CONTACT and items[0]["respondentEmail"] == "ada@example.test"
    with sandbox.service.session() as s:
        sub = s.get(Submission, sent["submissionId"])
        assert sub.share_link_id == link["id"] and sub.edit_token is None


async def test_draft_then_submit(sandbox):
    link = await create_link(sandbox)
    draft = await submitted(sandbox, link["url"], {"name": "Grace"}, completed=False)
    assert draft["isCompleted"] is False
    more = await submitted(sandbox, link["url"], {"topic": "support"}, completed=False,
                           submissionId=draft["submissionId"])
    assert more["submissionId"] == draft["submissionId"]
    # the submit checks required questions over everything saved so far
    r = await submit(sandbox, link["url"], {}, submissionId=draft["submissionId"])
    r.expect("VALIDATION_ERROR", 400, field="answers.email", reason="REQUIRED")
    sent = await submitted(sandbox, link["url"], {"email": "grace@example.test", "topic": None},
                           submissionId=draft["submissionId"])
    assert sent["submissionId"] == draft["submissionId"] and sent["isCompleted"] is True
    [item] = [i for i in await submissions(sandbox) if i["id"] == draft["submissionId"]]
    assert item["answers"] == {"name": "Grace", "email": "grace@example.test"}  # null cleared the topic
    assert item["isCompleted"] is True and item["submittedAt"] is not None
    r = await submit(sandbox, link["url"], {"name": "Again"}, completed=False, submissionId=draft["submissionId"])
    r.expect("CONFLICT", 409, field="submissionId", reason="SUBMISSION_COMPLETED")


async def test_submit_refusals_store_nothing(sandbox):
    link = await create_link(sandbox)
    before = await submissions(sandbox)
    (await submit(sandbox, link["url"], {"name": "X"})).expect("VALIDATION_ERROR", 400, field="answers.email",
                                                               reason="REQUIRED")
    (await submit(sandbox, link["url"], {**CONTACT, "nope": 1})).expect(
        "VALIDATION_ERROR", 400, field="answers.nope", reason="UNKNOWN_FIELD_KEY")
    (await submit(sandbox, link["url"], {**CONTACT, "topic": "Sales"})).expect(
        "VALIDATION_ERROR", 400, field="answers.topic")
    (await submit(sandbox, link["url"], {"name": "X"}, completed=False,
                  submissionId="sub_0000000000000000000000")).expect("NOT_FOUND", 404, field="submissionId")
    assert await submissions(sandbox) == before
    assert await events_of(sandbox, type="submission.completed") == []


async def test_submission_limit_per_respondent(sandbox):
    await settings(sandbox, maxSubmissionsPerRespondent=2)
    link = await create_link(sandbox)
    # the seed's Contact form already holds one response from ada@example.test
    await submitted(sandbox, link["url"], CONTACT)
    before = await submissions(sandbox)
    r = await submit(sandbox, link["url"], {**CONTACT, "email": "ADA@example.test"})
    err = r.expect("CONFLICT", 409, field="answers.email", reason="SUBMISSION_LIMIT_REACHED")
    assert "ada@example.test" in err["message"].lower() and "(2)" in err["message"]
    # a draft is not a response yet, but its submit is
    draft = await submitted(sandbox, link["url"], CONTACT, completed=False)
    (await submit(sandbox, link["url"], {}, submissionId=draft["submissionId"])).expect(
        "CONFLICT", 409, reason="SUBMISSION_LIMIT_REACHED")
    after = await submissions(sandbox)
    assert len(after) == len(before) + 1 and after[0]["isCompleted"] is False  # only the draft was added
    assert (await submitted(sandbox, link["url"], {**CONTACT, "email": "bob@example.test"}))["isCompleted"]
    await settings(sandbox, maxSubmissionsPerRespondent=0)  # 0 = unlimited
    assert (await submitted(sandbox, link["url"], CONTACT))["isCompleted"]


# -- the password gate -----------------------------------------------------------------------------------


async def test_password_gate(sandbox):
    link = await create_link(sandbox)
    await settings(sandbox, password="open sesame")
    before = await submissions(sandbox)
    (await submit(sandbox, link["url"], CONTACT)).expect("FORBIDDEN", 403, field="password",
                                                         reason="PASSWORD_REQUIRED")
    (await submit(sandbox, link["url"], CONTACT, password="Open sesame")).expect(
        "FORBIDDEN", 403, reason="PASSWORD_INCORRECT")
    (await submit(sandbox, link["url"], {}, completed=False, password="nope")).expect(
        "FORBIDDEN", 403, reason="PASSWORD_INCORRECT")
    assert await submissions(sandbox) == before
    assert (await submitted(sandbox, link["url"], CONTACT, password="open sesame"))["isCompleted"] is True
    await settings(sandbox, password=None)  # null clears the gate
    assert (await submitted(sandbox, link["url"], CONTACT))["isCompleted"] is True


# -- redirect ------------------------------------------------------------------------------------------


async def test_redirect_url_with_query_params(sandbox):
    ids = await question_ids(sandbox)
    await settings(sandbox, redirectUrl="https://example.com/thanks?src=form",
                   redirectQueryParams=[{"paramName": "who", "fieldId": ids["Name"]},
                                        {"paramName": "t", "fieldId": ids["Topic"]},
                                        {"paramName": "msg", "fieldId": ids["Message"]}])
    link = await create_link(sandbox)
    sent = await submitted(sandbox, link["url"], {"name": "Ada L&L", "email": "a@example.test", "topic": "sales"})
    # an unanswered question adds no parameter; a choice adds its option key
    assert sent["redirectUrl"] == "https://example.com/thanks?src=form&who=Ada+L%26L&t=sales"
    draft = await submitted(sandbox, link["url"], {"name": "Later"}, completed=False)
    assert "redirectUrl" not in draft
    await settings(sandbox, redirectQueryParams=[])
    plain = await submitted(sandbox, link["url"], CONTACT)
    assert plain["redirectUrl"] == "https://example.com/thanks?src=form"


# -- edits after submit -------------------------------------------------------------------------------------


async def test_edit_after_submit_keeps_submitted_at(sandbox):
    await settings(sandbox, editAfterSubmit=True)
    link = await create_link(sandbox)
    sent = await submitted(sandbox, link["url"], CONTACT)
    assert sent["editUrl"].startswith(link["url"] + "?edit=")
    [original] = [i for i in await submissions(sandbox) if i["id"] == sent["submissionId"]]
    await advance(sandbox, HOUR)
    edited = await submitted(sandbox, link["url"], {"message": "Changed my mind"}, editToken=edit_token(sent))
    assert edited["submissionId"] == sent["submissionId"] and edited["editCount"] == 1
    assert edited["isCompleted"] is True
    [item] = [i for i in await submissions(sandbox) if i["id"] == sent["submissionId"]]
    assert item["submittedAt"] == original["submittedAt"] and item["updatedAt"] > original["submittedAt"]
    assert item["editCount"] == 1
    assert item["answers"] == {**CONTACT, "message": "Changed my mind"}
    # an edit must still pass the submit's checks, and then stores nothing
    r = await submit(sandbox, link["url"], {"email": None}, editToken=edit_token(sent))
    r.expect("VALIDATION_ERROR", 400, field="answers.email", reason="REQUIRED")
    (await submit(sandbox, link["url"], {"message": "x"}, completed=False, editToken=edit_token(sent))).expect(
        "VALIDATION_ERROR", 400, field="completed", reason="EDIT_NOT_A_DRAFT")
    (await submit(sandbox, link["url"], {"message": "x"}, editToken="not-a-token")).expect(
        "NOT_FOUND", 404, field="editToken", reason="UNKNOWN_EDIT_TOKEN")
    [after] = [i for i in await submissions(sandbox) if i["id"] == sent["submissionId"]]
    assert after == item
    assert len(await events_of(sandbox, type="submission.updated")) == 1


async def test_edits_not_allowed(sandbox):
    link = await create_link(sandbox)
    sent = await submitted(sandbox, link["url"], CONTACT)
    assert "editUrl" not in sent  # no token without editAfterSubmit
    await settings(sandbox, editAfterSubmit=True)
    allowed = await submitted(sandbox, link["url"], {**CONTACT, "email": "b@example.test"})
    await settings(sandbox, editAfterSubmit=False)
    r = await submit(sandbox, link["url"], {"message": "x"}, editToken=edit_token(allowed))
    err = r.expect("CONFLICT", 409, reason="EDITS_NOT_ALLOWED")
    assert "editAfterSubmit" in err["message"]
    [item] = [i for i in await submissions(sandbox) if i["id"] == allowed["submissionId"]]
    assert item["editCount"] == 0 and "message" not in item["answers"]


@pytest.mark.parametrize(("ws", "max_edits", "allowed"), [("free", 0, 3), ("free", 2, 2), ("pro", 1, 1),
                                                           ("pro", 3, 3), ("pro", 0, 6), ("business", 0, 6)])
async def test_max_edits(sandbox, ws, max_edits, allowed):
    """maxEdits 0 is 3 on Free and unlimited on Pro and Business (6 edits stand for it)."""
    await settings(sandbox, ws=ws, editAfterSubmit=True, maxEdits=max_edits)
    link = await create_link(sandbox, ws=ws)
    token = edit_token(await submitted(sandbox, link["url"], CONTACT, ws=ws))
    for n in range(1, allowed + 1):
        r = await submitted(sandbox, link["url"], {"message": f"edit {n}"}, ws=ws, editToken=token)
        assert r["editCount"] == n
    r = await submit(sandbox, link["url"], {"message": "one more"}, ws=ws, editToken=token)
    if max_edits == 0 and ws != "free":
        assert r.status == 200 and r.data["editCount"] == allowed + 1
        return
    err = r.expect("CONFLICT", 409, field="editToken", reason="EDIT_LIMIT_REACHED")
    assert f"({allowed})" in err["message"]
    [item] = [i for i in await submissions(sandbox, ws=ws) if i["editCount"] == allowed]
    assert item["answers"]["message"] == f"edit {allowed}"


# -- the abandoned-draft event -------------------------------------------------------------------------------


async def test_abandoned_draft_fires_once_per_subscription_after_its_window(sandbox, receiver):
    url = (await create_link(sandbox))["url"]
    form_id = sandbox.pro.forms["Contact"]

    async def sub(name: str, **params: Any) -> str:
        r = await sandbox.rpc("webhooks.create", {"formId": form_id, "targetUrl": receiver.url(name),
                                                  "provider": "n8n", **params})
        return r.data["subscriptionId"]

    half_day = await sub("12h", eventType="submission_abandoned", idleWindow="12h", signingSecret="s" * 40)
    day = await sub("1d", eventType="submission_abandoned", idleWindow="1d")
    await sub("created")
    draft = await submitted(sandbox, url, {"name": "Idle", "email": "idle@example.test"}, completed=False)
    await submitted(sandbox, url, CONTACT)  # a sent response is never abandoned
    await advance(sandbox, 11 * HOUR)
    assert await events_of(sandbox, type="submission.abandoned") == []
    await advance(sandbox, HOUR + 60_000)
    [first] = await events_of(sandbox, type="submission.abandoned")
    assert first["submissionId"] == draft["submissionId"] and delivered_to(first) == {half_day}
    await flush(sandbox)
    [hit] = await receiver.wait("12h", 1)
    assert signature_valid(hit, "s" * 40)
    data = hit.json["data"]
    assert hit.json["type"] == "submission.abandoned" and "request" not in data
    assert data["submission"]["id"] == draft["submissionId"] and data["submission"]["submittedAt"] is None
    assert data["answers"] == {"name": "Idle", "email": "idle@example.test"}
    await advance(sandbox, HOUR)
    assert len(await events_of(sandbox, type="submission.abandoned")) == 1  # once per subscription
    await advance(sandbox, 12 * HOUR)
    events = await events_of(sandbox, type="submission.abandoned")
    assert len(events) == 2 and delivered_to(events[1]) == {day}
    await flush(sandbox)
    [hit] = await receiver.wait("1d", 1)
    assert signature_valid(hit, sandbox.pro.signing_secret)
    await advance(sandbox, 7 * DAY)
    await asyncio.sleep(0.3)  # the worker's own ticks add nothing either
    assert len(await events_of(sandbox, type="submission.abandoned")) == 2
    assert len(receiver.at("12h")) == 1 and len(receiver.at("1d")) == 1 and len(receiver.at("created")) == 1


async def test_saving_a_draft_restarts_its_idle_window(sandbox):
    url = (await create_link(sandbox))["url"]
    await sandbox.rpc("webhooks.create", {"formId": sandbox.pro.forms["Contact"], "provider": "zapier",
                                          "targetUrl": "https://hooks.example.com/a",
                                          "eventType": "submission_abandoned", "idleWindow": "12h"})
    draft = await submitted(sandbox, url, {"name": "Busy"}, completed=False)
    await advance(sandbox, 10 * HOUR)
    await submitted(sandbox, url, {"topic": "other"}, completed=False, submissionId=draft["submissionId"])
    await advance(sandbox, 10 * HOUR)
    assert await events_of(sandbox, type="submission.abandoned") == []
    await advance(sandbox, 3 * HOUR)
    assert len(await events_of(sandbox, type="submission.abandoned")) == 1


async def test_abandoned_needs_partial_tracking(sandbox):
    url = (await create_link(sandbox))["url"]
    await sandbox.rpc("webhooks.create", {"formId": sandbox.pro.forms["Contact"], "provider": "zapier",
                                          "targetUrl": "https://hooks.example.com/a",
                                          "eventType": "submission_abandoned", "idleWindow": "12h"})
    assert (await sandbox.helper("workspace.update", {"partialTracking": False})).status == 200
    await submitted(sandbox, url, {"name": "Quiet"}, completed=False)
    await advance(sandbox, DAY)
    assert await events_of(sandbox, type="submission.abandoned") == []
    await sandbox.helper("workspace.update", {"partialTracking": True})
    await advance(sandbox, 1000)
    assert len(await events_of(sandbox, type="submission.abandoned")) == 1


# -- respondent reminders for abandoned drafts ----------------------------------------------------------------


async def test_respondent_reminders_follow_the_steps(sandbox):
    await settings(sandbox, respondentReminderEnabled=True, reminderSteps=["1d", "3d"])
    link = await create_link(sandbox)
    who = "late@example.test"
    draft = await submitted(sandbox, link["url"], {"name": "Late", "email": who}, completed=False)
    await submitted(sandbox, link["url"], {"name": "No address"}, completed=False)  # nobody to remind
    await submitted(sandbox, link["url"], {**CONTACT, "email": "done@example.test"})  # sent: never reminded
    await advance(sandbox, DAY - 60_000)
    assert await mails(sandbox, who) == []
    await advance(sandbox, 2 * 60_000)
    [first] = await mails(sandbox, who)
    assert first["status"] == "sent" and first["submissionId"] == draft["submissionId"]
    assert "Contact" in first["subject"] and link["url"] in first["body"]
    await advance(sandbox, 2 * DAY)
    assert len(await mails(sandbox, who)) == 2
    await advance(sandbox, 10 * DAY)
    await asyncio.sleep(0.3)
    assert len(await mails(sandbox, who)) == 2  # one per step
    assert await mails(sandbox, "done@example.test") == []
    items = (await sandbox.helper("mail.list")).data["items"]
    assert [m["to"] for m in items if m["kind"] == "respondent-reminder"] == [who, who]


async def test_steps_due_together_send_one_reminder(sandbox):
    await settings(sandbox, respondentReminderEnabled=True, reminderSteps=["1d", "3d", "1w"],
                   respondentReminderSubject="Finish {{formName}}, {{name}}")
    link = await create_link(sandbox)
    await submitted(sandbox, link["url"], {"name": "Slow", "email": "slow@example.test"}, completed=False)
    await advance(sandbox, 8 * DAY)
    [only] = await mails(sandbox, "slow@example.test")
    assert only["subject"] == "Finish Contact, Slow"
    await asyncio.sleep(0.3)
    assert len(await mails(sandbox, "slow@example.test")) == 1


async def test_no_respondent_reminders_on_free_or_when_switched_off(sandbox):
    # Free: reminders are Pro, even when the settings were saved on a higher plan
    write_settings(sandbox, sandbox.free.forms["Contact"], respondentReminderEnabled=True, reminderSteps=["1d"])
    free_url = (await create_link(sandbox, ws="free"))["url"]
    await submitted(sandbox, free_url, {"name": "F", "email": "free@example.test"}, ws="free", completed=False)
    # Pro with steps but respondentReminderEnabled off
    await settings(sandbox, reminderSteps=["1d"])
    url = (await create_link(sandbox))["url"]
    await submitted(sandbox, url, {"name": "P", "email": "pro@example.test"}, completed=False)
    await advance(sandbox, 2 * DAY)
    assert await mails(sandbox, "free@example.test", ws="free") == []
    assert await mails(sandbox, "pro@example.test") == []


async def test_reminder_required_field_ids_and_revoked_links(sandbox):
    ids = await question_ids(sandbox)
    await settings(sandbox, respondentReminderEnabled=True, reminderSteps=["1d"],
                   respondentReminderRequiredFieldIds=[ids["Message"]])
    link = await create_link(sandbox)
    await submitted(sandbox, link["url"], {"name": "A", "email": "a@example.test", "message": "hi"},
                    completed=False)  # a listed question is answered: no reminder
    await submitted(sandbox, link["url"], {"name": "B", "email": "b@example.test"}, completed=False)
    gone = await create_link(sandbox)
    await submitted(sandbox, gone["url"], {"name": "C", "email": "c@example.test"}, completed=False)
    await sandbox.rpc("shareLinks.update", {"shareLinkId": gone["id"], "revoked": True})
    await advance(sandbox, 2 * DAY)
    assert await mails(sandbox, "a@example.test") == []
    assert len(await mails(sandbox, "b@example.test")) == 1
    assert await mails(sandbox, "c@example.test") == []  # its link no longer opens
