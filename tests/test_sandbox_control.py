"""The sandbox never locks its user out: its helpers (``/api/sandbox``) keep answering a
seeded token after any clock advance, across a restart, and mint fresh API tokens that
work on ``/api/v1``; and helpers that make a submission emit what the real path emits."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Sandbox, start_sandbox

DAY_MS = 24 * 3600 * 1000


async def _control_works(sb: Sandbox) -> None:
    """clock.get and tokens.create answer the seeded token; the fresh token is live on
    /api/v1 while the seeded one, past its lifetime, is refused there."""
    assert (await sb.helper("clock.get")).status == 200
    fresh = await sb.helper("tokens.create", {"name": f"fresh-{sb.base_url[-5:]}"})
    assert fresh.status == 200, fresh.body
    ok = await sb.rpc("forms.list", {"workspaceId": sb.pro.id}, token=fresh.data["token"])
    assert ok.status == 200, ok.body
    (await sb.rpc("me.get")).expect("UNAUTHORIZED", 401, reason="TOKEN_EXPIRED")


async def test_helpers_outlive_every_token_and_a_restart(tmp_path: Path) -> None:
    server, sb = await start_sandbox(tmp_path / "sb")
    try:
        assert (await sb.helper("clock.advance", {"ms": 30 * DAY_MS})).status == 200
        await _control_works(sb)
        assert (await sb.helper("clock.advance", {"ms": 400 * DAY_MS})).status == 200
        await _control_works(sb)
    finally:
        await sb.http.close()
        await server.stop()

    server, sb = await start_sandbox(tmp_path / "sb")  # the same data dir: the clock stays moved
    try:
        now = (await sb.helper("clock.get")).data
        assert now["offsetMs"] >= 430 * DAY_MS, now
        await _control_works(sb)
        assert (await sb.helper("reset")).status == 200
        assert (await sb.rpc("me.get")).status == 200, "reset brings the clock, and the seeded token, back"
    finally:
        await sb.http.close()
        await server.stop()


async def test_a_deleted_token_is_still_refused_by_the_helpers(sandbox: Sandbox) -> None:
    made = (await sandbox.helper("tokens.create", {"name": "short-lived"})).data
    assert (await sandbox.helper("tokens.delete", {"tokenId": made["id"]})).status == 200
    (await sandbox.helper("clock.get", token=made["token"])).expect("UNAUTHORIZED", 401, reason="INVALID_TOKEN")


async def test_submissions_create_delivers_submission_completed_like_a_share_link(sandbox: Sandbox) -> None:
    form = sandbox.pro.forms["Contact"]
    sub = await sandbox.rpc("webhooks.create", {"formId": form, "targetUrl": "http://127.0.0.1:9/hook",
                                                "provider": "zapier"})
    assert sub.status == 200, sub.body
    answers = {"name": "Ada", "email": "ada@example.test"}
    made = await sandbox.helper("submissions.create", {"formId": form, "answers": answers})
    assert made.status == 200, made.body
    draft = await sandbox.helper("submissions.create", {"formId": form, "answers": {"name": "Bo"}, "completed": False})
    assert draft.status == 200, draft.body
    events = (await sandbox.helper("events.list", {"type": "submission.completed"})).data["items"]
    assert [e["submissionId"] for e in events] == [made.data["id"]], "one event, none for the draft"
    [delivery] = events[0]["deliveries"]
    assert delivery["subscriptionId"] == sub.data["subscriptionId"] and delivery["targetUrl"].endswith("/hook")
    assert events[0]["payload"]["data"]["answers"]["name"] == "Ada"
