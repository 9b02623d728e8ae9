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
