"""The sandbox's fault plan (``faults.set``) on the agent endpoint: ``tools/call`` meets
the same injected faults as ``/api/v1``, each in the agent endpoint's own shape. Rules
name tools (``request_create``) in ``methods``."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.conftest import Reply, Sandbox


async def call_tool(sandbox: Sandbox, name: str, arguments: dict[str, Any]) -> Reply:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    return await sandbox.post("/api/mcp", body, token=sandbox.pro.token,
                              headers={"Accept": "application/json, text/event-stream"})


def tool_body(reply: Reply) -> dict[str, Any]:
    import json

    return dict(json.loads(reply.body["result"]["content"][0]["text"]))


async def set_faults(sandbox: Sandbox, *rules: dict[str, Any]) -> None:
    assert (await sandbox.helper("faults.set", {"seed": 1, "rules": list(rules)})).ok


async def test_an_injected_429_is_a_tool_error_with_retry_after(sandbox: Sandbox) -> None:
    await set_faults(sandbox, {"kind": "rate_limited", "methods": ["workspace_list"], "retryAfterMs": 250})
    reply = await call_tool(sandbox, "workspace_list", {})
    assert reply.status == 200 and reply.body["result"]["isError"] is True
    body = tool_body(reply)
    assert body["code"] == "RATE_LIMITED" and body["details"]["retryAfterMs"] == 250
    # an /api/v1 call is not named by that rule
    assert (await sandbox.rpc("workspaces.list")).ok


@pytest.mark.parametrize("status", [500, 503])
async def test_an_injected_5xx_runs_nothing(sandbox: Sandbox, status: int) -> None:
    form = sandbox.pro.forms["Contact"]
    await set_faults(sandbox, {"kind": "error_5xx", "status": status, "methods": ["request_create"]})
    reply = await call_tool(sandbox, "request_create", {"formId": form, "externalId": f"mcp-{status}"})
    assert reply.status == status
    if status == 500:
        assert reply.body["error"]["code"] == -32603
    await sandbox.helper("faults.clear")
    listed = (await sandbox.rpc("requests.list", {"formId": form, "externalId": f"mcp-{status}"})).data["items"]
    assert listed == []


@pytest.mark.parametrize("kind", ["drop_after_commit", "reset"])
async def test_a_cut_answer_after_commit_then_the_keyed_retry_is_deduplicated(sandbox: Sandbox, kind: str) -> None:
    form = sandbox.pro.forms["Contact"]
    args = {"formId": form, "externalId": f"mcp-{kind}", "idempotencyKey": f"mcp-{kind}"}
    await set_faults(sandbox, {"kind": kind, "methods": ["request_create"], "count": 1})
    with pytest.raises(aiohttp.ClientError):
        await call_tool(sandbox, "request_create", args)
    retried = tool_body(await call_tool(sandbox, "request_create", args))
    assert retried["success"] is True and retried["deduplicated"] is True
    assert (await sandbox.helper("faults.get")).data["injected"][kind] == 1
    listed = (await sandbox.rpc("requests.list", {"formId": form, "externalId": f"mcp-{kind}"})).data["items"]
    assert [r["id"] for r in listed] == [retried["id"]]


async def test_a_rule_may_name_a_tool_but_not_an_unknown_name(sandbox: Sandbox) -> None:
    assert (await sandbox.helper("faults.set", {"rules": [{"kind": "reset", "methods": ["request_create"]}]})).ok
    err = (await sandbox.helper("faults.set", {"rules": [{"kind": "reset", "methods": ["request_craete"]}]})).expect(
        "VALIDATION_ERROR", 400, field="rules.0.methods.0")
    assert "'request_create'" in err["message"]
