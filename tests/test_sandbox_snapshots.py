"""Snapshots of the sandbox (``snapshot.save`` / ``snapshot.restore`` / ``snapshot.list``):
a restore brings back every helper's view, the clock, the rate windows, pending deliveries,
the mail outbox and the snapshot's tokens and secrets; tokens made since stop working; a
snapshot of another schema version is refused; snapshots outlive a restart."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from sqlmodel import select

from formservice.sandbox.client import HelperError, SandboxHelpers
from formservice.sandbox.runner import SandboxServer
from formservice.tables import Workspace
from tests.conftest import Sandbox, start_sandbox

DAY_MS = 24 * 3600 * 1000
HOOK = "http://127.0.0.1:9/hook"  # nothing listens: an attempt fails and the delivery waits for a retry


async def _views(sb: Sandbox) -> dict[str, Any]:
    """What every helper (and the API's lists) shows of the Pro workspace, times of the
    clock's own reading left out."""
    h, form = sb.helpers, sb.pro.forms["Contact"]
    calls = (await h.calls_list()).model_dump(mode="json")  # first: the list calls below are logged too
    views: dict[str, Any] = {"calls": calls, "clockOffset": (await h.clock_get()).offset_ms,
                             "events": (await h.events_list()).model_dump(mode="json"),
                             "mail": (await h.mail_list()).model_dump(mode="json"),
                             "tokens": (await h.tokens_list()).model_dump(mode="json")}
    for method in ("requests.list", "submissions.list", "webhooks.list"):
        reply = await sb.rpc(method, {"formId": form})
        assert reply.status == 200, reply.body
        views[method] = reply.data
    return views


async def _change_everything(sb: Sandbox, request_id: str, hook_id: str) -> str:
    """Submit, cancel, deliver, advance the clock, rotate the signing secrets, tighten the
    limits and mint a token; the new token's value."""
    h, form = sb.helpers, sb.pro.forms["Contact"]
    await h.submissions_create(form, {"name": "Later", "email": "later@example.test"})
    assert (await sb.rpc("requests.cancel", {"requestId": request_id})).status == 200
    await h.clock_advance(DAY_MS)
    assert (await h.deliveries_flush()).attempts, "the pending webhook delivery is attempted again"
    assert (await sb.rpc("webhooks.delete", {"subscriptionId": hook_id})).status == 200
    with sb.service.session() as s:  # the dashboard's job in the hosted service: a new workspace secret
        s.get(Workspace, sb.pro.id).signing_secret = "whsec_rotated"  # type: ignore[union-attr]
        s.commit()
    await h.limits_set(calls_per_minute=7, window_ms=5_000)
    return (await h.tokens_create("after-save")).token  # type: ignore[return-value]


async def test_restore_brings_back_every_view_and_refuses_later_tokens(sandbox: Sandbox) -> None:
    sb, h, form = sandbox, sandbox.helpers, sandbox.pro.forms["Contact"]
    hook = await sb.rpc("webhooks.create", {"formId": form, "targetUrl": HOOK, "provider": "zapier",
                                            "signingSecret": "s" * 40})
    assert hook.status == 200, hook.body
    req = await sb.rpc("requests.create", {"formId": form, "recipient": {"email": "ada@example.test"},
                                           "delivery": "email"})
    assert req.status == 200, req.body
    await h.submissions_create(form, {"name": "Ada", "email": "ada@example.test"})
    for _ in range(2):  # two failed attempts: the delivery waits 5 minutes for its next one
        await h.deliveries_flush()
        await h.clock_advance(6_000)
    saved = await h.snapshot_save("base")
    assert saved.name == "base" and saved.size_bytes > 0
    runtime = sb.service.runtime_state()
    before = await _views(sb)
    assert before["mail"]["items"] and before["events"]["items"][-1]["deliveries"][0]["state"] == "pending"

    later_token = await _change_everything(sb, req.data["id"], hook.data["subscriptionId"])
    assert await _views(sb) != before

    restored = await h.snapshot_restore("base")
    assert restored.name == "base" and restored.saved_at_ms == saved.saved_at_ms
    assert sb.service.runtime_state() == runtime, "clock offset, limits, rate windows and call log as saved"
    assert await _views(sb) == before
    with sb.service.session() as s:
        secret = s.get(Workspace, sb.pro.id).signing_secret  # type: ignore[union-attr]
    assert secret == sb.pro.signing_secret, "the snapshot's signing secret is back"
    (await sb.rpc("me.get", token=later_token)).expect("UNAUTHORIZED", 401, reason="INVALID_TOKEN")
    assert [i.name for i in (await h.snapshot_list()).items] == ["base"]
    copy = sb.service.data_dir / "snapshots" / "base.db"  # type: ignore[operator]
    assert sb.pro.token.encode() not in copy.read_bytes(), "the copy keeps token hashes, as the store does"


async def test_unknown_names_and_other_schema_versions_are_refused(sandbox: Sandbox) -> None:
    reply = await sandbox.helper("snapshot.restore", {"name": "nope"})
    assert "snapshot.save" in reply.expect("NOT_FOUND", 404, reason="SNAPSHOT_NOT_FOUND", field="name")["message"]
    (await sandbox.helper("snapshot.save", {"name": "../x"})).expect("VALIDATION_ERROR", 400, field="name")
    await sandbox.helpers.snapshot_save("old")
    await sandbox.helpers.clock_advance(DAY_MS)
    path = sandbox.service.data_dir / "snapshots" / "old.db"  # type: ignore[operator]
    with sqlite3.connect(path) as conn:  # as an older sandbox, with one column fewer, would have saved it
        conn.execute("UPDATE meta SET value = 'other' WHERE key = 'snapshot_schema'")
    reply = await sandbox.helper("snapshot.restore", {"name": "old"})
    assert "another version" in reply.expect("CONFLICT", 409, reason="SNAPSHOT_VERSION")["message"]
    assert (await sandbox.helpers.clock_get()).offset_ms == DAY_MS, "a refused restore changes nothing"
    path.write_bytes(b"not a database")
    assert [i.name for i in (await sandbox.helpers.snapshot_list()).items] == ["old"]
    (await sandbox.helper("snapshot.restore", {"name": "old"})).expect("CONFLICT", 409, reason="SNAPSHOT_VERSION")


async def test_snapshots_outlive_a_restart_and_carry_their_credentials(tmp_path: Path) -> None:
    shots, creds_file = tmp_path / "shots", tmp_path / "creds.json"
    async with SandboxServer(tmp_path / "a", snapshot_dir=shots) as first:
        first_token = first.workspace("pro")["token"]
        async with first.helpers() as h:
            await h.submissions_create(first.workspace("pro")["forms"]["Contact"], {"name": "Kept", "email": "kept@example.test"})
            await h.snapshot_save("kept")
    async with SandboxServer(tmp_path / "b", snapshot_dir=shots, credentials_file=creds_file) as second:
        own_token = second.workspace("pro")["token"]
        async with second.helpers() as h:
            assert [i.name for i in (await h.snapshot_list()).items] == ["kept"]
            await h.snapshot_restore("kept")
            try:
                await h.clock_get()
                raise AssertionError("the second sandbox's own token went with its state")
            except HelperError as err:
                assert err.code == "UNAUTHORIZED"
        assert second.workspace("pro")["token"] == first_token
        written = json.loads(creds_file.read_text())
        assert written["workspaces"] == second.credentials["workspaces"] and written["baseUrl"] == second.base_url
        async with second.helpers() as h:
            with second.service.session() as s:  # type: ignore[union-attr]
                assert len(s.exec(select(Workspace)).all()) == 3
            events = await h.events_list(type="submission.completed")
            assert len(events.items) == 1, "the submission made before the save is there"
        async with SandboxHelpers(second.base_url, first_token) as h:
            await h.reset()  # back to the second sandbox's own seed, and its credentials
        assert second.workspace("pro")["token"] == own_token != first_token
        assert json.loads(creds_file.read_text())["workspaces"] == second.credentials["workspaces"]


async def test_a_restart_on_the_same_data_dir_keeps_its_snapshots(tmp_path: Path) -> None:
    server, sb = await start_sandbox(tmp_path / "sb")
    try:
        await sb.helpers.snapshot_save("one")
    finally:
        await sb.http.close()
        await server.stop()
    server, sb = await start_sandbox(tmp_path / "sb")
    try:
        assert [i.name for i in (await sb.helpers.snapshot_list()).items] == ["one"]
        assert (await sb.helpers.snapshot_restore("one")).name == "one"
    finally:
        await sb.http.close()
        await server.stop()
