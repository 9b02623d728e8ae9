"""Helpers that make every state a test needs without a browser: a request opened and
started (the funnel's opened and started), a respondent's edit of a sent public-link
submission (``submission.updated`` to the form's subscriptions, as the edit link does),
and ``methods.list`` on ``/api/sandbox``, which an unknown helper's error names."""

from __future__ import annotations

from formservice.sandbox.client import HelperError
from tests.conftest import Sandbox

CONTACT = {"name": "Ada", "email": "ada@example.test", "topic": "sales"}


async def _request(sb: Sandbox) -> str:
    made = await sb.rpc("requests.create", {"formId": sb.pro.forms["Contact"], "recipient": {"email": "a@example.test"}})
    assert made.status == 200, made.body
    return str(made.data["id"])


def _entries(record: dict[str, object], kind: str) -> list[object]:
    timeline = record["timeline"]
    assert isinstance(timeline, list)
    return [e for e in timeline if e.get("type") == kind]


async def test_requests_open_and_start_set_the_funnels_opened_and_started(sandbox: Sandbox) -> None:
    req_id = await _request(sandbox)
    await sandbox.helpers.clock_advance(60_000)
    opened = await sandbox.helpers.requests_open(req_id)
    assert opened.opened_at is not None and opened.started_at is None
    await sandbox.helpers.clock_advance(60_000)
    again = await sandbox.helpers.requests_open(req_id)
    assert again.opened_at == opened.opened_at, "a later open changes nothing"
    started = await sandbox.helpers.requests_start(req_id, {"name": "Ada"})
    assert started.started_at is not None and opened.opened_at is not None and started.started_at > opened.opened_at
    assert started.last_activity_at == started.started_at and started.status == "pending"
    record = (await sandbox.rpc("requests.get", {"requestId": req_id})).data
    assert record["openedAt"] == opened.opened_at_ms and record["startedAt"] == started.started_at_ms
    assert len(_entries(record, "opened")) == 1 and len(_entries(record, "started")) == 1

    fresh = await _request(sandbox)  # started without an open first: the page was opened to start it
    both = await sandbox.helpers.requests_start(fresh)
    assert both.opened_at == both.started_at is not None
    assert [e["type"] for e in both.timeline or []][-2:] == ["opened", "started"]


async def test_requests_open_and_start_refuse_as_a_closed_link_does(sandbox: Sandbox) -> None:
    req_id = await _request(sandbox)
    (await sandbox.helper("requests.start", {"requestId": req_id, "answers": {"email": "not an address"}})).expect(
        "VALIDATION_ERROR", 400, field="answers.email")
    assert (await sandbox.rpc("requests.get", {"requestId": req_id})).data["startedAt"] is None, "nothing stored"
    assert (await sandbox.rpc("requests.cancel", {"requestId": req_id})).status == 200
    for helper in ("requests.open", "requests.start"):
        (await sandbox.helper(helper, {"requestId": req_id})).expect("CONFLICT", 409, reason="REQUEST_NOT_PENDING")
    (await sandbox.helper("requests.open", {"requestId": "req_nope"})).expect("NOT_FOUND", 404)
    other = await sandbox.rpc("requests.create", {"formId": sandbox.workspaces["business"].forms["Contact"]},
                              ws="business")
    (await sandbox.helper("requests.open", {"requestId": other.data["id"]})).expect("FORBIDDEN", 403)


async def test_submissions_update_is_a_respondents_edit_and_emits_submission_updated(sandbox: Sandbox) -> None:
    form = sandbox.pro.forms["Contact"]
    hook = await sandbox.rpc("webhooks.create", {"formId": form, "targetUrl": "http://127.0.0.1:9/updated",
                                                 "provider": "zapier", "eventType": "submission_updated"})
    assert hook.status == 200, hook.body
    made = await sandbox.helpers.submissions_create(form, CONTACT)
    (await sandbox.helper("submissions.update", {"submissionId": made.id, "answers": {"name": "Bo"}})).expect(
        "CONFLICT", 409, reason="EDITS_NOT_ALLOWED", field="submissionId")
    assert (await sandbox.rpc("formSettings.update", {"formId": form, "editAfterSubmit": True,
                                                      "maxEdits": 1})).status == 200
    await sandbox.helpers.clock_advance(3_600_000)
    edited = await sandbox.helpers.submissions_update(made.id, {"name": "Bo"})
    assert edited.edit_count == 1 and edited.updated_at is not None
    assert edited.answers["name"] == "Bo" and edited.answers["email"] == CONTACT["email"], "the rest is kept"
    [listed] = [s for s in (await sandbox.rpc("submissions.list", {"formId": form})).data["items"] if s["id"] == made.id]
    assert listed["editCount"] == 1 and listed["updatedAt"] is not None and listed["answers"]["name"] == "Bo"
    [event] = (await sandbox.helpers.events_list(type="submission.updated")).items
    assert event.submission_id == made.id and [d.subscription_id for d in event.deliveries] == [
        hook.data["subscriptionId"]]
    assert event.payload is not None and event.payload["data"]["submission"]["editCount"] == 1
    with_limit = await sandbox.helper("submissions.update", {"submissionId": made.id, "answers": {"name": "Cy"}})
    with_limit.expect("CONFLICT", 409, reason="EDIT_LIMIT_REACHED")
    assert len((await sandbox.helpers.events_list(type="submission.updated")).items) == 1, "a refusal emits nothing"


async def test_submissions_update_edits_only_sent_public_submissions(sandbox: Sandbox) -> None:
    form = sandbox.pro.forms["Contact"]
    assert (await sandbox.rpc("formSettings.update", {"formId": form, "editAfterSubmit": True})).status == 200
    draft = await sandbox.helpers.submissions_create(form, {"name": "Ada"}, completed=False)
    (await sandbox.helper("submissions.update", {"submissionId": draft.id, "answers": {}})).expect(
        "CONFLICT", 409, reason="NOT_AN_EDITABLE_SUBMISSION")
    req_id = await _request(sandbox)
    done = await sandbox.helpers.requests_complete(req_id, CONTACT)
    (await sandbox.helper("submissions.update", {"submissionId": done.submission_id, "answers": {}})).expect(
        "CONFLICT", 409, reason="NOT_AN_EDITABLE_SUBMISSION")
    sent = await sandbox.helpers.submissions_create(form, CONTACT)
    (await sandbox.helper("submissions.update", {"submissionId": sent.id, "answers": {"email": "nope"}})).expect(
        "VALIDATION_ERROR", 400)
    (await sandbox.helper("submissions.update", {"submissionId": "sub_nope", "answers": {}})).expect(
        "NOT_FOUND", 404, field="submissionId")


async def test_methods_list_on_the_helpers_endpoint_is_what_an_unknown_helper_names(sandbox: Sandbox) -> None:
    wrong = await sandbox.helper("requests.opne", {"requestId": "x"})
    wrong.expect("METHOD_NOT_FOUND", 404)
    assert "Did you mean requests.open?" in wrong.error["message"] and "methods.list" in wrong.error["message"]
    listed = await sandbox.helpers.methods_list()
    assert {"methods.list", "requests.open", "requests.start", "submissions.update", "clock.advance"} <= set(
        listed.methods)
    assert "forms.list" not in listed.methods, "the API's methods are /api/v1's methods.list"
    assert all(item.summary for item in listed.items)
    try:
        await sandbox.helpers.call("requests.opne")
    except HelperError as e:
        assert e.code == "METHOD_NOT_FOUND"
    else:
        raise AssertionError("an unknown helper is refused")


async def test_submissions_delete_removes_one_submission_and_clears_its_requests_answers(sandbox: Sandbox) -> None:
    form = sandbox.pro.forms["Contact"]
    kept = await sandbox.helpers.submissions_create(form, CONTACT)
    req_id = await _request(sandbox)
    done = await sandbox.helpers.requests_complete(req_id, CONTACT)
    gone = await sandbox.helpers.submissions_delete(done.submission_id)
    assert (gone.id, gone.form_id, gone.request_id) == (done.submission_id, form, req_id)
    listed = {s["id"] for s in (await sandbox.rpc("submissions.list", {"formId": form})).data["items"]}
    assert kept.id in listed and done.submission_id not in listed
    request = (await sandbox.rpc("requests.get", {"requestId": req_id})).data
    assert request["status"] == "completed" and not request.get("answers")
    (await sandbox.helper("submissions.delete", {"submissionId": done.submission_id})).expect(
        "NOT_FOUND", 404, field="submissionId")
    other = sandbox.workspaces["business"].forms["Contact"]
    foreign = await sandbox.helpers_for("business").submissions_create(other, CONTACT)
    (await sandbox.helper("submissions.delete", {"submissionId": foreign.id})).expect("FORBIDDEN", 403)
