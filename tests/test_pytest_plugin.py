"""The pytest plugin's fixtures, used as a user of formsync would use them."""

from __future__ import annotations


async def test_client_fixture_talks_to_the_sandbox_fixture(formsync_client, formsync_sandbox):
    pro = formsync_sandbox.workspace("pro")
    fields = await formsync_client.list_fields(pro["forms"]["Contact"])
    assert fields.published and {f.key for f in fields.items} >= {"name", "email", "topic"}
    created = await formsync_client.create_request(pro["forms"]["Contact"], prefill={"name": "Ada"})
    record = await formsync_sandbox.helper("requests.complete", {"requestId": created.id,
                                                                 "answers": {"email": "ada@example.test"}})
    assert record["status"] == "completed"
    assert (await formsync_client.get_request(created.id)).answers["name"] == "Ada"


async def test_each_test_gets_a_fresh_sandbox(formsync_sandbox):
    mail = await formsync_sandbox.helper("mail.list")
    assert mail["items"] == []
    assert {w["plan"] for w in formsync_sandbox.credentials["workspaces"]} == {"free", "pro", "business"}


async def test_the_typed_helpers_drive_the_sandbox(formsync_client, formsync_sandbox):
    helpers = formsync_sandbox.helpers
    before = await helpers.clock_get()
    moved = await helpers.clock_advance(60_000)
    assert moved.now >= before.now + 60_000 and moved.offsetMs == before.offsetMs + 60_000
    form = formsync_sandbox.workspace("pro")["forms"]["Contact"]
    created = await formsync_client.create_request(form, recipient={"email": "grace@example.test"}, delivery="email")
    await helpers.deliveries_flush()  # does the due time-driven work first: the invitation goes out
    mail = await helpers.mail_list(request_id=created.id)
    assert [m["to"] for m in mail["items"]] == ["grace@example.test"] and mail["items"][0]["from"]
    record = await helpers.requests_complete(created.id, {"name": "Grace", "email": "grace@example.test"})
    assert record["status"] == "completed"
    events = await helpers.events_list(request_id=created.id)
    assert "request.completed" in [e["type"] for e in events["items"]]
    assert (await helpers.deliveries_flush()).attempts == []  # no callback URL, no webhook: nothing to attempt
    assert (await helpers.reset()).reset is True
    assert (await helpers.mail_list())["items"] == []


async def test_a_refused_helper_says_what_was_wrong(formsync_sandbox):
    from formservice.sandbox.client import HelperError

    try:
        await formsync_sandbox.helpers.clock_advance(-1)
    except HelperError as err:
        assert (err.status, err.code, err.details.get("field")) == (400, "VALIDATION_ERROR", "ms")
    else:
        raise AssertionError("a negative advance was accepted")
