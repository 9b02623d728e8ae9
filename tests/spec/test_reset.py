"""The sandbox's ``reset`` helper: everything made since seeding is gone, the seeded
workspaces, forms and tokens are back as they were, and the clock, limits, call log and
fault plan are a new sandbox's; on a data dir, the seeded state survives a restart."""

from __future__ import annotations

from pathlib import Path

from formservice.service import Service
from tests.conftest import Sandbox, start_sandbox


async def test_reset_wipes_back_to_the_seeded_state(sandbox: Sandbox) -> None:
    form = sandbox.pro.forms["Contact"]
    seeded_forms = (await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id})).data["items"]
    seeded_subs = (await sandbox.rpc("submissions.list", {"formId": form})).data["items"]
    made = (await sandbox.rpc("requests.create", {"formId": form, "idempotencyKey": "k1"})).data
    assert (await sandbox.rpc("forms.create", {"workspaceId": sandbox.pro.id, "name": "Extra"})).ok
    assert (await sandbox.rpc("forms.delete", {"formId": sandbox.pro.forms["Contact"]})).ok
    extra_token = (await sandbox.helper("tokens.create", {"name": "later"})).data["token"]
    assert (await sandbox.helper("clock.advance", {"ms": 86_400_000})).ok
    assert (await sandbox.helper("limits.set", {"callsPerMinute": 3})).ok
    assert (await sandbox.helper("faults.set", {"rules": [{"kind": "latency", "latencyMs": 1}]})).ok

    reply = await sandbox.helper("reset")
    assert reply.data["reset"] is True

    clock = (await sandbox.helper("clock.get")).data
    assert clock["offsetMs"] == 0
    assert (await sandbox.helper("faults.get")).data["plan"] is None
    assert (await sandbox.helper("calls.list")).data["count"] == 0
    # the seeded token works, the later one is gone
    assert (await sandbox.rpc("me.get")).ok
    (await sandbox.rpc("me.get", token=extra_token)).expect("UNAUTHORIZED", 401)
    # the deleted form is back, the new one and the request gone; the seed's submissions stay
    assert (await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id})).data["items"] == seeded_forms
    (await sandbox.rpc("requests.get", {"requestId": made["id"]})).expect("NOT_FOUND", 404)
    assert (await sandbox.rpc("submissions.list", {"formId": form})).data["items"] == seeded_subs
    # the default limits again: more than 3 calls a minute pass
    for _ in range(5):
        assert (await sandbox.rpc("me.get")).ok
    # the same idempotency key creates anew: the first request is gone for good
    again = (await sandbox.rpc("requests.create", {"formId": form, "idempotencyKey": "k1"})).data
    assert again["deduplicated"] is False and again["id"] != made["id"]


async def test_reset_after_a_restart_on_the_same_data_dir(tmp_path: Path) -> None:
    server, sb = await start_sandbox(tmp_path / "sb")
    try:
        assert (await sb.rpc("forms.create", {"workspaceId": sb.pro.id, "name": "Before restart"})).ok
    finally:
        await sb.http.close()
        await server.stop()
    server, sb = await start_sandbox(tmp_path / "sb")
    try:
        names = {f["name"] for f in (await sb.rpc("forms.list", {"workspaceId": sb.pro.id})).data["items"]}
        assert "Before restart" in names
        assert (await sb.helper("reset")).ok
        names = {f["name"] for f in (await sb.rpc("forms.list", {"workspaceId": sb.pro.id})).data["items"]}
        assert "Before restart" not in names and names
    finally:
        await sb.http.close()
        await server.stop()


async def test_reset_without_a_kept_seeded_state_says_why_and_changes_nothing(sandbox: Sandbox) -> None:
    assert sandbox.service.data_dir is not None
    (sandbox.service.data_dir / Service.SEED_COPY).unlink()
    assert (await sandbox.rpc("forms.create", {"workspaceId": sandbox.pro.id, "name": "Kept"})).ok
    err = (await sandbox.helper("reset")).expect("CONFLICT", 409, reason="NO_SEED_STATE")
    assert "--data-dir" in err["message"]
    names = {f["name"] for f in (await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id})).data["items"]}
    assert "Kept" in names
