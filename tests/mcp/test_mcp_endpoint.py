"""Spec "Agent endpoint" and "Authentication" (notes sections 6 and 7): ``POST /api/mcp``
driven with the official ``mcp`` SDK client over loopback against the seeded sandbox
(raw aiohttp POSTs where the HTTP status itself is the point): initialize, the tool
list and catalogs, every tool with valid and with bad input, the shared rate budget,
tokens, the editor's draft versus the published version, guides, resources, prompts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult, TextContent
from sqlmodel import select

from formservice.agent.tools import TOOLS
from formservice.domain.base import METHODS
from formservice.domain.editor_inserts import BY_TOOL
from formservice.mcp import allowed_origin
from formservice.tables import (
    Document,
    Folder,
    Form,
    IdempotencyKey,
    Request,
    ShareLink,
    Submission,
    TranslationEntry,
)

from ..pages.support import fetch

MCP = "/api/mcp"
PROTOCOL = "2025-11-25"
PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
DESTRUCTIVE = {"form_delete", "form_unpublish", "workspaceFolder_delete", "editor_deleteElement",
               "translationLanguage_delete", "request_cancel"}
# The hosted endpoint's README (its newest version): catalogs, guide topics and every tool it names.
CATALOG_NAMES = ["request-lifecycle", "editor-inserts", "editor-actions", "form-lifecycle", "form-appearance",
                 "form-behavior", "form-sharing", "form-translations", "form-data", "workspace-management"]
SKILL_TOPICS = ["requests", "question-types", "logic-rules", "editing-flows", "form-best-practices", "form-themes",
                "form-settings", "analytics", "toon-format"]
README_TOOLS = set("""
fields_list request_create request_get request_list request_cancel request_remind request_replayCallback
document_create form_list form_get form_create form_update form_publish form_unpublish form_delete form_restore
editor_getDocument editor_updateElement editor_deleteElement editor_formatText editor_setLogic editor_testLogic
editor_insertTextQuestion editor_insertContactQuestion editor_insertNumberQuestion editor_insertDateQuestion
editor_insertTimeQuestion editor_insertRadioQuestion editor_insertCheckboxQuestion editor_insertSelectQuestion
editor_insertPictureChoiceQuestion editor_insertSwitchQuestion editor_insertRatingQuestion
editor_insertLinearScaleQuestion editor_insertRankingQuestion editor_insertMatrixQuestion editor_insertFileQuestion
editor_insertSignatureQuestion editor_insertPaymentQuestion editor_insertScheduleAppointmentQuestion
editor_insertDecisionQuestion editor_insertHeader editor_insertParagraph editor_insertImage editor_insertList
editor_insertTable editor_insertRow editor_insertEmbedded editor_insertPageDivider editor_insertDocumentsBlock
editor_insertHiddenField editor_insertCalculatedField editor_insertVariable editor_insertRepeatingGroup
editor_insertLogic formShareLink_list formShareLink_create formShareLink_update formSubmission_list
formAnalytics_get formTheme_get formTheme_set formSettings_get formSettings_update translationLanguage_list
translationDraft_get translationDraft_update translationDraft_publish translationLanguage_delete workspace_list
workspaceFolder_list workspaceFolder_create workspaceFolder_update workspaceFolder_delete load_skill load_tools
""".split())
UNLISTED = {"editor_insertQuestion", "editor_insertContent"}  # older names of ours: callable, not listed
STATE_TABLES = (Form, Folder, Request, ShareLink, TranslationEntry, Document, Submission, IdempotencyKey)


# -- helpers -----------------------------------------------------------------------------


@dataclass
class Agent:
    """A connected, initialized SDK session, with the tools it called successfully."""

    session: ClientSession
    init: Any
    called: set[str] = field(default_factory=set)

    async def result(self, name: str, args: dict[str, Any] | None = None) -> tuple[CallToolResult, dict[str, Any]]:
        r = await self.session.call_tool(name, args if args is not None else {})
        return r, payload(r)

    async def ok(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        r, body = await self.result(name, args)
        assert not r.isError and body["success"] is True, (name, body)
        self.called.add(name)
        return body

    async def refused(self, name: str, args: dict[str, Any], code: str, **details: Any) -> dict[str, Any]:
        """Assert a failure result: code, the given details members, a message and a suggestion."""
        r, body = await self.result(name, args)
        assert r.isError and body["success"] is False, (name, body)
        assert body["code"] == code, (name, body)
        for k, v in details.items():
            assert body["details"].get(k) == v, (name, k, body)
        assert body["error"] and body["suggestion"], body
        return body


def payload(result: CallToolResult) -> dict[str, Any]:
    """The one JSON text item every tool result holds."""
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent), result
    body = json.loads(result.content[0].text)
    assert body["success"] is (not result.isError), body
    return body


@asynccontextmanager
async def connect(sandbox, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(sandbox.base_url + MCP, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                yield session


@asynccontextmanager
async def agent(sandbox, *, ws: str = "pro", token: str | None = None) -> AsyncIterator[Agent]:
    async with connect(sandbox, token or sandbox.workspaces[ws].token) as session:
        init = await session.initialize()
        yield Agent(session, init)


@dataclass
class Raw:
    status: int
    headers: Any
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text)


async def raw(sandbox, message: Any, *, token: str | None = "pro", method: str = "POST",
              headers: dict[str, str] | None = None, data: bytes | None = None) -> Raw:
    """One HTTP exchange with /api/mcp (``token``: a plan name, a token value, or None)."""
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **(headers or {})}
    if token is not None:
        h["Authorization"] = f"Bearer {sandbox.workspaces[token].token if token in sandbox.workspaces else token}"
    body = data if data is not None else (json.dumps(message).encode() if message is not None else None)
    async with sandbox.http.request(method, sandbox.base_url + MCP, data=body, headers=h) as resp:
        return Raw(resp.status, resp.headers, await resp.text())


def initialize_message(version: str = PROTOCOL, msg_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


def call_message(name: str, arguments: dict[str, Any], msg_id: int = 7) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def stored(sandbox) -> dict[str, list[str]]:
    """Every row of the tables a tool can write, as JSON: equal snapshots mean nothing changed."""
    with sandbox.service.session() as s:
        return {t.__name__: sorted(json.dumps(row.model_dump(), sort_keys=True, default=str)
                                   for row in s.exec(select(t)))
                for t in STATE_TABLES}


async def rpc_data(sandbox, method: str, params: dict[str, Any], ws: str = "pro") -> Any:
    r = await sandbox.rpc(method, params, ws=ws)
    assert r.status == 200, r.body
    return r.data


async def upload(sandbox, url: str, data: bytes, content_type: str = "application/pdf") -> None:
    async with sandbox.http.put(url, data=data, headers={"Content-Type": content_type}) as resp:
        assert resp.status == 200, await resp.text()


async def all_schemas(a: Agent) -> dict[str, dict[str, Any]]:
    """Every tool the endpoint offers, as tools/list and load_tools show it."""
    tools = {t.name: t.model_dump(by_alias=True, mode="json", exclude_none=True)
             for t in (await a.session.list_tools()).tools}
    for catalog in CATALOG_NAMES:  # a catalog also shows its unlisted tools
        body = await a.ok("load_tools", {"catalog": catalog})
        tools.update({t["name"]: t for t in body["tools"]})
    return tools


# -- initialize and the HTTP binding ---------------------------------------------------------


async def test_initialize_negotiates_2025_11_25_and_declares_capabilities(sandbox):
    async with connect(sandbox, sandbox.pro.token) as session:
        init = await session.initialize()
        assert init.protocolVersion == PROTOCOL
        assert init.serverInfo.name == "formstep" and init.serverInfo.version
        caps = init.capabilities
        assert caps.tools is not None and caps.prompts is not None and caps.resources is not None
        assert sandbox.pro.id in (init.instructions or "")
        assert await session.send_ping() is not None

    # a version the server supports is echoed; an unknown one gets the latest it speaks
    r = await raw(sandbox, initialize_message("2025-03-26"))
    assert r.status == 200 and r.headers["Content-Type"].startswith("application/json")
    assert r.json["result"]["protocolVersion"] == "2025-03-26" and r.json["id"] == 1
    assert "mcp-session-id" not in {k.lower() for k in r.headers}  # no session
    r = await raw(sandbox, initialize_message("1999-01-01"))
    assert r.json["result"]["protocolVersion"] == PROTOCOL


async def test_http_binding_post_only_json_rpc_202_for_notifications(sandbox):
    r = await raw(sandbox, None, method="GET")
    assert r.status == 405 and r.headers["Allow"] == "POST"
    assert r.json["error"]["code"] == -32600
    r = await raw(sandbox, None, method="DELETE")
    assert r.status == 405

    r = await raw(sandbox, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert r.status == 202 and r.text == ""
    r = await raw(sandbox, {"jsonrpc": "2.0", "id": 3, "result": {}})  # a response: nothing to answer
    assert r.status == 202 and r.text == ""

    r = await raw(sandbox, [initialize_message()])
    assert r.status == 400 and r.json["error"]["code"] == -32600 and "Batches" in r.json["error"]["message"]
    r = await raw(sandbox, None, data=b"{not json")
    assert r.status == 400 and r.json["error"]["code"] == -32700 and r.json["id"] is None
    r = await raw(sandbox, {"jsonrpc": "1.0", "id": 1, "method": "ping"})
    assert r.status == 400 and r.json["error"]["code"] == -32600
    r = await raw(sandbox, None, data=b"{}", headers={"Content-Type": "text/plain"})
    assert r.status == 415

    r = await raw(sandbox, {"jsonrpc": "2.0", "id": 4, "method": "sampling/createMessage", "params": {}})
    assert r.status == 200 and r.json["error"]["code"] == -32601 and r.json["id"] == 4
    r = await raw(sandbox, {"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"protocolVersion": PROTOCOL}})
    assert r.status == 200 and r.json["error"]["code"] == -32602 and "capabilities" in r.json["error"]["message"]
    r = await raw(sandbox, call_message("no_such_tool", {}))
    assert r.json["error"]["code"] == -32602 and "tools/list" in r.json["error"]["message"]
    assert "fields_list" in r.json["error"]["data"]["validValues"]
    r = await raw(sandbox, {"jsonrpc": "2.0", "id": 6, "method": "ping"}, headers={"MCP-Protocol-Version": "1999-01-01"})
    assert r.status == 400 and PROTOCOL in r.json["error"]["message"]
    r = await raw(sandbox, {"jsonrpc": "2.0", "id": 6, "method": "ping"}, headers={"MCP-Protocol-Version": PROTOCOL})
    assert r.status == 200 and r.json == {"jsonrpc": "2.0", "id": 6, "result": {}}


async def test_cross_origin_calls_only_from_the_services_own_sites(sandbox):
    """Notes section 7 (CORS): browsers may call from the service's own sites only; a
    foreign Origin is 403 before the token is even looked at, and changes nothing."""
    ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    r = await raw(sandbox, ping, headers={"Origin": "https://evil.example"})
    assert r.status == 403 and r.json["error"]["code"] == -32600
    assert "https://evil.example" in r.json["error"]["message"]
    before = stored(sandbox)
    r = await raw(sandbox, call_message("form_create", {"workspaceId": sandbox.pro.id, "name": "x"}),
                  headers={"Origin": "http://127.0.0.1:1"})
    assert r.status == 403 and stored(sandbox) == before
    for origin in (sandbox.base_url, "https://formstep.io", "https://app.formstep.io"):
        r = await raw(sandbox, ping, headers={"Origin": origin})
        assert r.status == 200 and r.json["result"] == {}, origin
    assert (await raw(sandbox, ping)).status == 200, "non-browser clients send no Origin"



async def test_any_loopback_spelling_of_its_own_origin_is_its_own_origin(sandbox):
    """Served at 127.0.0.1:PORT, a page at localhost:PORT or [::1]:PORT is the same
    loopback server (the MCP guidance treats them alike); another port, scheme or a name
    that only starts like localhost is still foreign, and changes nothing."""
    port = urlsplit(sandbox.base_url).port
    ping = {"jsonrpc": "2.0", "id": 8, "method": "ping"}
    for origin in (f"http://localhost:{port}", f"http://[::1]:{port}", f"http://127.0.0.1:{port}/",
                   f"http://LOCALHOST:{port}"):
        r = await raw(sandbox, ping, headers={"Origin": origin})
        assert r.status == 200 and r.json["result"] == {}, origin
    before = stored(sandbox)
    for origin in (f"http://localhost:{port + 1}", f"https://localhost:{port}", "http://localhost",
                   f"http://localhost.evil.example:{port}", f"http://127.0.0.1.nip.io:{port}", "null"):
        r = await raw(sandbox, call_message("form_create", {"workspaceId": sandbox.pro.id, "name": "x"}),
                      headers={"Origin": origin})
        assert r.status == 403 and r.json["error"]["code"] == -32600, origin
    assert stored(sandbox) == before


def test_loopback_spellings_count_only_for_a_loopback_server():
    assert allowed_origin("http://localhost:8787", "http://127.0.0.1:8787")
    assert allowed_origin("http://127.0.0.2:8787", "http://[::1]:8787")
    assert allowed_origin("http://localhost", "http://127.0.0.1:80")
    assert not allowed_origin("http://localhost:8787", "http://forms.example.com:8787")
    assert not allowed_origin("http://localhost:8787", "http://192.168.1.5:8787")
    assert not allowed_origin("http://localhost:99999", "http://127.0.0.1:8787")
    assert not allowed_origin("http://localhost:8787/page", "http://127.0.0.1:8787")

# -- authentication ------------------------------------------------------------------------


async def test_missing_or_bad_token_is_401_pointing_at_the_resource_metadata(sandbox):
    metadata = f"{sandbox.base_url}/.well-known/oauth-protected-resource"
    r = await raw(sandbox, initialize_message(msg_id=11), token=None)  # even initialize needs a token
    assert r.status == 401
    assert r.headers["WWW-Authenticate"] == f'Bearer resource_metadata="{metadata}"'
    assert r.json["id"] == 11 and r.json["error"]["data"]["code"] == "UNAUTHORIZED"
    r = await raw(sandbox, call_message("workspace_list", {}), token="fb_" + "x" * 32)
    assert r.status == 401
    challenge = r.headers["WWW-Authenticate"]
    assert challenge.startswith(f'Bearer resource_metadata="{metadata}"') and 'error="invalid_token"' in challenge
    assert r.json["error"]["data"]["details"]["reason"] == "INVALID_TOKEN"
    async with sandbox.http.get(metadata) as resp:
        assert resp.status == 200  # the URL the challenge names resolves

    # the official client sees the 401 as an HTTP error on initialize
    with pytest.raises(BaseException) as info:
        async with connect(sandbox, "fb_" + "y" * 32) as session:
            await session.initialize()
    errors = info.value.exceptions if isinstance(info.value, BaseExceptionGroup) else [info.value]
    assert any(isinstance(e, httpx.HTTPStatusError) and e.response.status_code == 401 for e in errors), errors


async def test_failed_authentications_on_the_agent_endpoint_share_the_per_ip_limit(sandbox):
    """Auth 9 on /api/mcp: failed authentications count per IP together with /api/v1;
    past 30 in 15 minutes a bad token sees 429 RATE_LIMITED (with Retry-After) instead of
    401, while a good token still works."""
    bad = "fb_" + "z" * 32
    for i in range(30):
        if i % 2:
            r = await raw(sandbox, {"jsonrpc": "2.0", "id": i, "method": "ping"}, token=bad)
            assert r.status == 401, i
        else:
            (await sandbox.post("/api/v1", {"method": "me.get"},
                                headers={"Authorization": f"Bearer {bad}"})).expect("UNAUTHORIZED", 401)
    r = await raw(sandbox, {"jsonrpc": "2.0", "id": 99, "method": "ping"}, token=bad)
    assert r.status == 429 and r.json["id"] == 99
    assert r.json["error"]["data"]["code"] == "RATE_LIMITED"
    wait = r.json["error"]["data"]["details"]["retryAfterMs"]
    assert 0 < wait <= 15 * 60 * 1000 and int(r.headers["Retry-After"]) >= wait // 1000
    assert (await raw(sandbox, {"jsonrpc": "2.0", "id": 100, "method": "ping"})).status == 200


async def test_oauth_access_token_is_accepted(sandbox):
    minted = await sandbox.helper("tokens.create", {"kind": "oauth"})
    token = minted.data["token"]
    assert token.startswith("fbo_")
    async with agent(sandbox, token=token) as a:
        assert a.init.protocolVersion == PROTOCOL
        body = await a.ok("workspace_list")
        assert body["items"] == [{"id": sandbox.pro.id, "name": sandbox.pro.name}]
        body = await a.ok("request_list", {"workspaceId": sandbox.pro.id})
        assert body["items"] == [] and body["hasMore"] is False


# -- the tool list and catalogs -------------------------------------------------------------


async def test_tools_list_shows_every_tool_the_readme_names_with_schemas_of_the_method_models(sandbox):
    async with agent(sandbox) as a:
        listed = {t.name: t for t in (await a.session.list_tools()).tools}
        assert set(listed) == README_TOOLS, "tools/list shows exactly the README's tools, as soon as one connects"
        assert len(listed) == len((await a.session.list_tools()).tools), "no name twice"
        mirrored = {"fields_list": "fields.list", "request_create": "requests.create", "form_list": "forms.list",
                    "request_list": "requests.list", "document_create": "documents.create"}
        for tool, method in mirrored.items():
            schema = listed[tool].inputSchema
            model = METHODS[method].params
            assert schema["type"] == "object" and schema["additionalProperties"] is False
            assert set(schema["properties"]) == set(model.model_fields), tool
            assert sorted(schema.get("required", [])) == sorted(n for n, f in model.model_fields.items()
                                                               if f.is_required())
        assert listed["request_cancel"].annotations.destructiveHint is True
        assert listed["fields_list"].annotations.readOnlyHint is True
        assert listed["request_create"].annotations.destructiveHint is False

        tools = await all_schemas(a)
        assert set(tools) == set(TOOLS) == README_TOOLS | UNLISTED
        assert {n for n, t in tools.items() if t.get("annotations", {}).get("destructiveHint")} == DESTRUCTIVE
        assert listed["formShareLink_update"].annotations.destructiveHint is False, "said explicitly"
        for name, tool in listed.items():
            hints = tool.annotations
            assert hints.readOnlyHint is not None, name
            assert hints.readOnlyHint or hints.destructiveHint is not None, name
            assert not (hints.readOnlyHint and hints.destructiveHint), name
        overview = await a.ok("load_tools")
        assert [c["name"] for c in overview["catalogs"]] == CATALOG_NAMES
        assert sorted(n for c in overview["catalogs"] for n in c["tools"]) == sorted(README_TOOLS - {
            "load_tools", "load_skill"})


# -- every tool, valid input ------------------------------------------------------------------


async def test_every_tool_runs_with_valid_input(sandbox):
    ws = sandbox.pro
    contact = ws.forms["Contact"]
    async with agent(sandbox) as a:
        assert (await a.ok("workspace_list"))["items"][0]["id"] == ws.id
        assert "fields_list" in (await a.ok("load_skill", {"topic": "requests"}))["markdown"]
        assert len((await a.ok("load_tools", {"catalog": "editor"}))["tools"]) >= 12
        listed = await a.ok("form_list", {"workspaceId": ws.id, "limit": 100})
        assert contact in [f["id"] for f in listed["items"]]

        # a form of its own, in a folder of its own
        form = (await a.ok("form_create", {"workspaceId": ws.id, "name": "Agent intake"}))["id"]
        folder = await a.ok("workspaceFolder_create", {"workspaceId": ws.id, "name": "Agent work"})
        assert folder["formCount"] == 0
        moved = await a.ok("form_update", {"formId": form, "folderId": folder["id"], "emoji": "🤖"})
        assert moved["folderId"] == folder["id"] and moved["emoji"] == "🤖"
        folders = await a.ok("workspaceFolder_list", {"workspaceId": ws.id})
        assert {"Agent work": 1}.items() <= {f["name"]: f["formCount"] for f in folders["items"]}.items()
        assert (await a.ok("workspaceFolder_update", {"folderId": folder["id"], "name": "Agents"}))["name"] == "Agents"

        # the draft, built with the editor
        heading = (await a.ok("editor_insertContent", {"formId": form, "type": "heading", "title": "Welcome aboard"}))
        name_q = await a.ok("editor_insertQuestion", {"formId": form, "type": "text", "title": "Full name",
                                                      "required": True})
        assert name_q["element"]["key"] == "full_name" and name_q["index"] == 1
        await a.ok("editor_insertQuestion", {"formId": form, "type": "select", "title": "Team",
                                             "options": [{"label": "Sales"}, {"key": "ops", "label": "Operations"}]})
        age = await a.ok("editor_insertQuestion", {"formId": form, "type": "number", "title": "Age"})
        await a.ok("editor_insertDecisionQuestion", {"formId": form, "labels": {"changes": "Needs work"}})
        await a.ok("editor_insertDocumentsBlock", {"formId": form, "title": "Your contract",
                                                   "documents": [{"name": "Handbook.pdf"}]})
        embed = await a.ok("editor_insertEmbedded", {"formId": form, "url": "https://video.example.test/intro",
                                                     "title": "Intro video", "afterElementId": heading["element"]["id"]})
        assert embed["index"] == 1 and "form_publish" in embed["next"]
        bold = await a.ok("editor_formatText", {"formId": form, "elementId": heading["element"]["id"],
                                                "text": "Welcome", "style": "bold"})
        assert bold["element"]["marks"] == [{"start": 0, "end": 7, "style": "bold"}]
        renamed = await a.ok("editor_updateElement", {"formId": form, "elementId": name_q["element"]["id"],
                                                      "title": "Your full name"})
        assert renamed["element"]["title"] == "Your full name" and renamed["element"]["key"] == "full_name"
        rule = await a.ok("editor_insertLogic", {"formId": form, "id": "adult",
                                                 "when": {"field": "age", "op": "gt", "value": 17},
                                                 "then": {"action": "show", "target": embed["element"]["id"]}})
        assert rule["rules"][0]["id"] == "adult"
        tested = await a.ok("editor_testLogic", {"formId": form, "answers": {"age": 30}})
        assert tested["fired"] == ["adult"] and embed["element"]["id"] in tested["visible"]
        rules = await a.ok("editor_setLogic", {"formId": form, "rules": [
            {"id": "minor", "when": {"field": "age", "op": "lt", "value": 18},
             "then": {"action": "hide", "target": embed["element"]["id"]}}]})
        assert [r["id"] for r in rules["rules"]] == ["minor"]
        doc = await a.ok("editor_getDocument", {"formId": form})
        assert [e["type"] for e in doc["elements"]] == ["heading", "embed", "text", "select", "number", "decision",
                                                       "documents"]
        assert doc["logic"][0]["then"]["target"] == embed["element"]["id"] and doc["hasUnpublishedChanges"]
        deleted = await a.ok("editor_deleteElement", {"formId": form, "elementId": embed["element"]["id"]})
        assert deleted["removedRules"] == ["minor"]

        # publish, then the published version shows
        published = await a.ok("form_publish", {"formId": form})
        assert published["isPublished"] is True and published["snapshotId"]
        fields = await a.ok("fields_list", {"formId": form})
        assert [f["key"] for f in fields["items"]] == ["full_name", "team", "age", "decision", "your_contract"]
        got = await a.ok("form_get", {"formId": form})
        assert got["published"] is True and [q["title"] for q in got["questions"]][:1] == ["Your full name"]
        assert age["element"]["key"] == "age"

        # share links
        link = await a.ok("formShareLink_create", {"formId": form, "name": "Website"})
        assert (await a.ok("formShareLink_list", {"formId": form}))["items"][0]["id"] == link["id"]
        assert (await a.ok("formShareLink_update", {"shareLinkId": link["id"], "revoked": True}))["revoked"] is True

        # a document, a request, and the request tools
        reserved = await a.ok("document_create", {"formId": form, "name": "Contract.pdf",
                                                  "contentType": "application/pdf", "size": len(PDF)})
        assert "PUT" in reserved["next"] and reserved["id"] in reserved["next"]
        await upload(sandbox, reserved["uploadUrl"], PDF)
        created = await a.ok("request_create", {
            "formId": form, "recipient": {"name": "Ann", "email": "ann@example.test"},
            "prefill": {"full_name": "Ann Smith", "team": "ops"}, "externalId": "hire-1",
            "documents": [{"documentId": reserved["id"]}]})
        assert created["status"] == "pending" and created["url"]
        assert created["next"].startswith("Share the url with the recipient; call request_get on the order of minutes")
        one = await a.ok("request_get", {"requestId": created["id"]})
        assert one["prefill"] == {"full_name": "Ann Smith", "team": "ops"} and "pending" in one["next"]
        page = await a.ok("request_list", {"formId": form, "externalId": "hire-1"})
        assert [r["id"] for r in page["items"]] == [created["id"]]
        reminded = await a.ok("request_remind", {"requestId": created["id"]})
        assert reminded["remindersSent"] == 1 and "10 minutes" in reminded["next"]
        with_callback = await a.ok("request_create", {"formId": form, "callbackUrl": "http://127.0.0.1:9/callback"})
        canceled = await a.ok("request_cancel", {"requestId": with_callback["id"], "reason": "Filled elsewhere"})
        assert canceled["status"] == "canceled" and canceled["cancelReason"] == "Filled elsewhere"
        replayed = await a.ok("request_replayCallback", {"requestId": with_callback["id"]})
        assert replayed["dispatchId"].startswith("disp_") and replayed["eventId"] in replayed["next"]

        # data
        subs = await a.ok("formSubmission_list", {"formId": contact})
        assert subs["formId"] == contact and len(subs["items"]) == 4
        stats = await a.ok("formAnalytics_get", {"formId": contact})
        assert stats["shareLinks"] == {"views": 4, "starts": 4, "completions": 3}

        # settings and theme
        assert (await a.ok("formSettings_get", {"formId": form}))["isDefault"] is True
        updated = await a.ok("formSettings_update", {"formId": form, "showBranding": False})
        assert updated["showBranding"] is False
        assert (await a.ok("formTheme_get", {"formId": form}))["isDefault"] is True
        themed = await a.ok("formTheme_set", {"formId": form, "colors": {"primary": "#ff6600"}, "font": "Lato"})
        assert themed["colors"]["primary"] == "#ff6600" and themed["font"] == "Lato"

        # translations
        draft = await a.ok("translationDraft_update", {"formId": form, "language": "de",
                                                       "translations": {"field.full_name.title": "Ihr Name"}})
        assert draft["hasDraft"] is True
        seen = await a.ok("translationDraft_get", {"formId": form, "language": "de"})
        item = next(i for i in seen["items"] if i["key"] == "field.full_name.title")
        assert item == {"key": "field.full_name.title", "source": "Your full name", "published": None,
                        "draft": "Ihr Name"}
        assert (await a.ok("translationDraft_publish", {"formId": form, "language": "de"}))["published"] == 1
        langs = await a.ok("translationLanguage_list", {"formId": form})
        assert [(i["language"], i["translated"]) for i in langs["items"]] == [("de", 1)]
        assert (await a.ok("translationLanguage_delete", {"formId": form, "language": "de"}))["entries"] == 1

        # the lifecycle's end
        assert (await a.ok("form_unpublish", {"formId": form}))["isPublished"] is False
        assert (await a.ok("form_delete", {"formId": form}))["isDeleted"] is True
        assert (await a.ok("form_restore", {"formId": form}))["id"] == form
        gone = await a.ok("workspaceFolder_delete", {"folderId": folder["id"]})
        assert gone == {"success": True, "id": folder["id"], "deleted": True, "movedForms": 1}
        assert (await rpc_data(sandbox, "forms.get", {"formId": form}))["folderId"] is None

        # the per-type insert tools are called in test_insert_tools.py
        assert a.called == set(TOOLS) - set(BY_TOOL), sorted(set(TOOLS) - set(BY_TOOL) - a.called)


# -- every tool, bad input --------------------------------------------------------------------


async def test_every_tool_refuses_unknown_keys_and_wrong_types_and_stores_nothing(sandbox):
    await sandbox.helper("limits.set", {"callsPerMinute": 1000})  # some 150 calls follow
    before = stored(sandbox)
    async with agent(sandbox) as a:
        tools = await all_schemas(a)
        for name, tool in sorted(tools.items()):
            props = tool["inputSchema"].get("properties", {})
            body = await a.refused(name, {"bogusKey": 1}, "VALIDATION_ERROR", reason="UNKNOWN_PARAM",
                                   field="bogusKey")
            assert body["details"]["validKeys"] == sorted(props), name
            assert "Remove bogusKey" in body["suggestion"]
            text = [k for k, v in props.items() if v.get("type") == "string"]
            if text:
                body = await a.refused(name, {text[0]: 12345}, "VALIDATION_ERROR", field=text[0])
                assert body["details"]["reason"] in ("INVALID_TYPE", "INVALID_VALUE"), (name, body)
            required = tool["inputSchema"].get("required", [])
            if required:
                body = await a.refused(name, {}, "VALIDATION_ERROR", reason="REQUIRED")
                assert body["details"]["field"] in required
    assert stored(sandbox) == before


async def test_refusals_part_way_store_nothing(sandbox):
    ws = sandbox.pro
    contact = ws.forms["Contact"]
    async with agent(sandbox) as a:
        await a.ok("editor_setLogic", {"formId": contact, "rules": [
            {"id": "r1", "when": {"field": "topic", "op": "equals", "value": "sales"},
             "then": {"action": "hide", "target": "message"}}]})
        before = stored(sandbox)
        # the second rule names a field the form lacks: the first is not stored either
        body = await a.refused("editor_setLogic", {"formId": contact, "rules": [
            {"when": {"field": "email", "op": "contains", "value": "@"}, "then": {"action": "hide", "target": "topic"}},
            {"when": {"field": "budget", "op": "gt", "value": 5}, "then": {"action": "show", "target": "message"}}]},
            "VALIDATION_ERROR", reason="UNKNOWN_FIELD_KEY", field="rules.1.when.field")
        assert "budget" not in body["details"]["validKeys"] and "topic" in body["details"]["validKeys"]
        assert "editor_getDocument" in body["suggestion"]
        await a.refused("editor_setLogic", {"formId": contact, "rules": [
            {"when": {"field": "topic", "op": "gt", "value": 1}, "then": {"action": "hide", "target": "name"}}]},
            "VALIDATION_ERROR", field="rules.0.when.op", validValues=["equals", "notEquals"])
        await a.refused("editor_setLogic", {"formId": contact, "rules": [
            {"when": {"field": "topic", "op": "equals", "value": "Sales"}, "then": {"action": "hide", "target": "name"}}]},
            "VALIDATION_ERROR", field="rules.0.when.value", validValues=["sales", "support", "other"])
        await a.refused("editor_insertLogic", {"formId": contact, "when": {"field": "message", "op": "contains",
                                                                           "value": "x"},
                                               "then": {"action": "jump", "target": "name"}},
                        "VALIDATION_ERROR", reason="INVALID_JUMP", field="then.target")
        await a.refused("editor_insertLogic", {"formId": contact, "id": "r1",
                                               "when": {"field": "topic", "op": "equals", "value": "other"},
                                               "then": {"action": "show", "target": "message"}},
                        "CONFLICT", reason="DUPLICATE_RULE_ID")
        # an incomplete question, a group with a bad member, a duplicate key
        await a.refused("editor_insertQuestion", {"formId": contact, "type": "radio", "title": "Pick"},
                        "VALIDATION_ERROR", reason="REQUIRED", field="options")
        await a.refused("editor_insertQuestion", {"formId": contact, "type": "text", "title": "T", "maxStars": 3},
                        "VALIDATION_ERROR", reason="NOT_APPLICABLE", field="maxStars",
                        validKeys=["title", "key", "description", "required"])
        await a.refused("editor_insertQuestion", {"formId": contact, "type": "group", "title": "People",
                                                  "members": [{"type": "text", "title": "Who"},
                                                              {"type": "documents", "title": "Files"}]},
                        "VALIDATION_ERROR", field="members.1.type")
        body = await a.refused("editor_insertQuestion", {"formId": contact, "type": "email", "title": "Mail",
                                                         "key": "email"}, "CONFLICT", reason="DUPLICATE_FIELD_KEY")
        assert "omit key" in body["suggestion"]
        await a.refused("editor_insertQuestion", {"formId": contact, "type": "calculated", "title": "Sum",
                                                  "formula": "import os"}, "VALIDATION_ERROR",
                        reason="INVALID_FORMULA")
        await a.refused("editor_insertQuestion", {"formId": contact, "type": "scale", "title": "S", "min": 5,
                                                  "max": 5}, "VALIDATION_ERROR", field="min")
        await a.refused("editor_insertEmbedded", {"formId": contact, "url": "javascript:alert(1)"},
                        "VALIDATION_ERROR", field="url", reason="INVALID_FORMAT")
        await a.refused("editor_insertContent", {"formId": contact, "type": "paragraph", "index": 99, "title": "x"},
                        "VALIDATION_ERROR", field="index", reason="OUT_OF_RANGE")
        await a.refused("editor_updateElement", {"formId": contact, "elementId": "name", "key": "full_name"},
                        "CONFLICT", reason="KEY_FROZEN")
        await a.refused("editor_deleteElement", {"formId": contact, "elementId": "blk_missing"},
                        "NOT_FOUND", reason="ELEMENT_NOT_FOUND", field="elementId")
        await a.refused("editor_formatText", {"formId": contact, "elementId": "name", "text": "Nope", "style": "bold"},
                        "VALIDATION_ERROR", reason="TEXT_NOT_FOUND")
        # one unknown text key refuses the whole translation update
        body = await a.refused("translationDraft_update", {"formId": contact, "language": "fr", "translations": {
            "field.name.title": "Nom", "field.nope.title": "?"}}, "VALIDATION_ERROR", reason="UNKNOWN_FIELD_KEY",
            field="translations.field.nope.title")
        assert "field.name.title" in body["details"]["validKeys"] and "translationDraft_get" in body["suggestion"]
        # request tools: an unknown prefill key, an unpublished form
        body = await a.refused("request_create", {"formId": contact, "prefill": {"nmae": "Ann"}}, "VALIDATION_ERROR",
                               reason="UNKNOWN_FIELD_KEY", field="prefill.nmae",
                               validKeys=["email", "message", "name", "topic"])
        assert body["suggestion"].startswith("Call fields_list")
        body = await a.refused("request_create", {"formId": ws.forms["Draft survey"]}, "VALIDATION_ERROR",
                               reason="FORM_NOT_PUBLISHED")
        assert "form_publish" in body["suggestion"]
        await a.refused("workspaceFolder_create", {"workspaceId": ws.id, "name": " archive "}, "CONFLICT",
                        reason="DUPLICATE_NAME", folderId=ws.folder_id)
        await a.refused("formTheme_set", {"formId": contact, "colors": {"primary": "orange"}}, "VALIDATION_ERROR",
                        field="colors.primary")
        await a.refused("form_list", {"workspaceId": sandbox.free.id}, "FORBIDDEN", reason="FOREIGN_WORKSPACE")
        await a.refused("request_get", {"requestId": "req_0000000000000000000000"}, "NOT_FOUND")
        assert stored(sandbox) == before
        doc = await a.ok("editor_getDocument", {"formId": contact})
        assert [r["id"] for r in doc["logic"]] == ["r1"]


# -- rate limits -----------------------------------------------------------------------------


async def test_only_tools_call_spends_the_budget_and_over_it_the_result_is_rate_limited(sandbox):
    r = await sandbox.helper("limits.set", {"callsPerMinute": 3})
    assert r.status == 200, r.body
    async with agent(sandbox) as a:
        for _ in range(4):  # free: listing tools, prompts and resources, and pings
            await a.session.list_tools()
            await a.session.list_prompts()
            await a.session.list_resources()
            await a.session.send_ping()
        for _ in range(3):
            await a.ok("workspace_list")
        body = await a.refused("workspace_list", {}, "RATE_LIMITED")
        wait = body["details"]["retryAfterMs"]
        assert isinstance(wait, int) and 0 < wait <= 60_000
        assert f"Wait {wait} ms" in body["suggestion"]
        assert {t.name for t in (await a.session.list_tools()).tools} == README_TOOLS  # still answers
        assert len((await a.session.list_prompts()).prompts) == 4

    # over the budget the HTTP status is still 200: the failure is in the tool result
    r = await raw(sandbox, call_message("fields_list", {"formId": sandbox.pro.forms["Contact"]}))
    assert r.status == 200
    result = r.json["result"]
    assert result["isError"] is True and len(result["content"]) == 1
    inner = json.loads(result["content"][0]["text"])
    assert inner["success"] is False and inner["code"] == "RATE_LIMITED" and inner["details"]["retryAfterMs"] > 0
    # the budget is the token's, shared with the JSON-RPC endpoint
    (await sandbox.rpc("me.get")).expect("RATE_LIMITED", 429)
    # another token has its own budget
    other = (await sandbox.helper("tokens.create", {"name": "second"})).data["token"]
    r = await raw(sandbox, call_message("workspace_list", {}), token=other)
    assert r.status == 200 and r.json["result"]["isError"] is False

    await sandbox.helper("clock.advance", {"ms": 61_000})
    async with agent(sandbox) as a:
        await a.ok("workspace_list")


async def test_request_create_and_document_create_share_the_create_limit(sandbox):
    await sandbox.helper("limits.set", {"createsPerMinute": 2})
    approval = sandbox.pro.forms["Approval"]
    async with agent(sandbox) as a:
        await a.ok("request_create", {"formId": approval, "test": True})
        await a.ok("document_create", {"formId": approval, "name": "a.pdf", "contentType": "application/pdf",
                                       "size": 10})
        before = stored(sandbox)
        body = await a.refused("request_create", {"formId": approval, "test": True}, "RATE_LIMITED")
        assert "request creations" in body["error"] and body["details"]["retryAfterMs"] > 0
        await a.refused("document_create", {"formId": approval, "name": "b.pdf", "contentType": "application/pdf",
                                            "size": 10}, "RATE_LIMITED")
        assert stored(sandbox) == before
        await a.ok("request_list", {"formId": approval, "includeTest": True})  # other tools still run


# -- the editor's draft and the published version ------------------------------------------------


async def test_editor_changes_show_in_forms_get_and_after_publish_in_fields_list(sandbox):
    contact = sandbox.pro.forms["Contact"]
    async with agent(sandbox) as a:
        inserted = await a.ok("editor_insertQuestion", {"formId": contact, "type": "text", "title": "Company",
                                                        "afterElementId": "email"})
        assert inserted["index"] == 2 and inserted["element"]["key"] == "company"
        draft = await rpc_data(sandbox, "forms.get", {"formId": contact})
        assert [q["title"] for q in draft["questions"]] == ["Name", "Email", "Company", "Topic", "Message", "Source"]
        fields = await rpc_data(sandbox, "fields.list", {"formId": contact})
        assert "company" not in [f["key"] for f in fields["items"]]  # not before publish
        published = await a.ok("form_get", {"formId": contact})
        assert "Company" not in [q["title"] for q in published["questions"]] and published["hasUnpublishedChanges"]
        await a.refused("request_create", {"formId": contact, "prefill": {"company": "Acme"}}, "VALIDATION_ERROR",
                        reason="UNKNOWN_FIELD_KEY")

        await a.ok("form_publish", {"formId": contact})
        fields = await rpc_data(sandbox, "fields.list", {"formId": contact})
        assert [f["key"] for f in fields["items"]] == ["name", "email", "company", "topic", "message", "source"]
        assert (await a.ok("form_get", {"formId": contact}))["hasUnpublishedChanges"] is False
        created = await a.ok("request_create", {"formId": contact, "prefill": {"company": "Acme"}, "test": True})
        assert (await rpc_data(sandbox, "requests.get", {"requestId": created["id"]}))["prefill"] == {"company": "Acme"}

        # an update and a delete reach fields.list after the next publish, and the key stays frozen
        await a.ok("editor_updateElement", {"formId": contact, "elementId": "company", "title": "Company name",
                                            "required": True})
        await a.ok("editor_deleteElement", {"formId": contact, "elementId": "message"})
        await a.ok("form_publish", {"formId": contact})
        fields = {f["key"]: f for f in (await rpc_data(sandbox, "fields.list", {"formId": contact}))["items"]}
        assert list(fields) == ["name", "email", "company", "topic", "source"]
        assert fields["company"]["title"] == "Company name" and fields["company"]["required"] is True


async def test_every_field_type_can_be_inserted_and_published(sandbox):
    empty = sandbox.pro.forms["Empty"]
    specs: dict[str, dict[str, Any]] = {
        "select": {"options": [{"label": "A"}]}, "radio": {"options": [{"label": "A"}, {"label": "B"}]},
        "picture-choice": {"options": [{"label": "Cat"}]}, "checkbox": {"options": [{"label": "X"}]},
        "ranking": {"options": [{"label": "P"}, {"label": "Q"}]},
        "matrix": {"rows": [{"label": "Speed"}], "columns": [{"label": "Bad"}, {"label": "Good"}]},
        "rating": {"maxStars": 7}, "scale": {"min": 1, "max": 5}, "calculated": {"formula": "2 * 21"},
        "group": {"members": [{"type": "text", "title": "Item", "required": True}, {"type": "number", "title": "Qty"}]},
        "documents": {"documents": [{"name": "Terms.pdf"}]},
    }
    async with agent(sandbox) as a:
        from formservice.domain.fieldtypes import FIELD_TYPES

        for t in FIELD_TYPES:
            await a.ok("editor_insertQuestion", {"formId": empty, "type": t, "title": f"Q {t}", **specs.get(t, {})})
        await a.ok("form_publish", {"formId": empty})
    fields = (await rpc_data(sandbox, "fields.list", {"formId": empty}))["items"]
    assert sorted(f["type"] for f in fields) == sorted(FIELD_TYPES)
    by_type = {f["type"]: f for f in fields}
    assert by_type["decision"]["key"] == "decision"
    assert [o["key"] for o in by_type["decision"]["options"]] == ["approve", "changes", "decline"]
    assert by_type["rating"]["maxStars"] == 7 and (by_type["scale"]["min"], by_type["scale"]["max"]) == (1, 5)
    assert [m["key"] for m in by_type["group"]["members"]] == ["item", "qty"]
    assert by_type["documents"]["documents"] == [{"name": "Terms.pdf"}]
    assert by_type["hidden"]["context"] is True and by_type["calculated"]["calculated"] is True


async def test_decision_question_becomes_the_request_outcome(sandbox):
    survey = sandbox.pro.forms["Draft survey"]
    async with agent(sandbox) as a:
        await a.ok("editor_insertDecisionQuestion", {"formId": survey, "index": 0})
        await a.refused("editor_insertDecisionQuestion", {"formId": survey}, "CONFLICT", reason="DECISION_EXISTS")
        await a.refused("editor_insertQuestion", {"formId": survey, "type": "decision", "title": "Again"},
                        "CONFLICT", reason="DECISION_EXISTS")
        await a.ok("form_publish", {"formId": survey})
        keys = [f["key"] for f in (await a.ok("fields_list", {"formId": survey}))["items"]]
        assert keys == ["decision", "what_should_we_build_next", "how_do_you_rate_us"]
        created = await a.ok("request_create", {"formId": survey, "test": True})
        done = await sandbox.helper("requests.complete", {"requestId": created["id"],
                                                          "answers": {"decision": "approve"}})
        assert done.status == 200, done.body
        got = await a.ok("request_get", {"requestId": created["id"]})
        assert got["status"] == "completed" and got["outcome"] == "approve"
        assert "outcome is approve" in got["next"]
        listed = await a.ok("request_list", {"formId": survey, "outcome": "approve", "includeTest": True})
        assert [r["id"] for r in listed["items"]] == [created["id"]]


async def test_logic_rules_evaluate_and_follow_their_elements(sandbox):
    form = sandbox.pro.forms["Everything"]
    async with agent(sandbox) as a:
        await a.ok("editor_setLogic", {"formId": form, "rules": [
            {"id": "premium", "when": {"field": "plan", "op": "equals", "value": "premium"},
             "then": {"action": "show", "target": "deposit"}},
            {"id": "skip", "when": {"field": "newsletter", "op": "equals", "value": False},
             "then": {"action": "jump", "target": "plan"}},
            {"id": "billing", "when": {"field": "topics", "op": "contains", "value": "billing"},
             "then": {"action": "hide", "target": "meeting"}},
            {"id": "big", "when": {"field": "quantity", "op": "gt", "value": 100},
             "then": {"action": "hide", "target": "unit_price"}}]})
        doc = await a.ok("editor_getDocument", {"formId": form})
        ids = {e.get("key") or e["type"]: e["id"] for e in doc["elements"]}
        assert doc["logic"][0]["then"]["target"] == ids["deposit"]  # a key target is stored as the element id

        quiet = await a.ok("editor_testLogic", {"formId": form, "answers": {}})
        assert quiet["fired"] == [] and ids["deposit"] in quiet["hidden"]  # a show rule's target starts hidden
        busy = await a.ok("editor_testLogic", {"formId": form, "answers": {
            "plan": "premium", "newsletter": False, "topics": ["billing"], "quantity": 150}})
        assert busy["fired"] == ["premium", "skip", "billing", "big"]
        assert busy["jumps"] == [{"ruleId": "skip", "from": ids["newsletter"], "to": ids["plan"],
                                  "skipped": [ids["country"]]}]
        assert {ids["deposit"]} <= set(busy["visible"])
        assert {ids["country"], ids["meeting"], ids["unit_price"]} <= set(busy["hidden"])
        # unsaved rules can be tried; answers are checked like a respondent's
        trial = await a.ok("editor_testLogic", {"formId": form, "answers": {"satisfaction": 2}, "rules": [
            {"id": "low", "when": {"field": "satisfaction", "op": "lt", "value": 3},
             "then": {"action": "show", "target": "bio"}}]})
        assert trial["fired"] == ["low"]
        await a.refused("editor_testLogic", {"formId": form, "answers": {"plan": "gold"}}, "VALIDATION_ERROR",
                        field="answers.plan", validValues=["basic", "premium"])
        await a.refused("editor_testLogic", {"formId": form, "answers": {"nope": 1}}, "VALIDATION_ERROR",
                        reason="UNKNOWN_FIELD_KEY", field="answers.nope")
        # renaming a key rewrites the rules that test it; deleting an element drops its rules
        await a.ok("editor_insertQuestion", {"formId": form, "type": "number", "title": "Seats", "key": "seats"})
        await a.ok("editor_insertLogic", {"formId": form, "id": "seats",
                                          "when": {"field": "seats", "op": "gt", "value": 3},
                                          "then": {"action": "show", "target": "bio"}})
        await a.ok("editor_updateElement", {"formId": form, "elementId": "seats", "key": "seat_count"})
        doc = await a.ok("editor_getDocument", {"formId": form})
        assert next(r for r in doc["logic"] if r["id"] == "seats")["when"]["field"] == "seat_count"
        gone = await a.ok("editor_deleteElement", {"formId": form, "elementId": "plan"})
        assert gone["removedRules"] == ["premium", "skip"]
        cleared = await a.ok("editor_setLogic", {"formId": form, "rules": []})
        assert cleared["rules"] == []


# -- other catalogs ------------------------------------------------------------------------------


async def test_documents_need_their_upload_before_request_create(sandbox):
    approval = sandbox.pro.forms["Approval"]
    async with agent(sandbox) as a:
        doc = await a.ok("document_create", {"formId": approval, "name": "Quote.pdf",
                                             "contentType": "application/pdf", "size": len(PDF)})
        assert {"id", "name", "contentType", "size", "uploadUrl", "expiresAt"} <= set(doc)
        before = stored(sandbox)
        body = await a.refused("request_create", {"formId": approval, "documents": [{"documentId": doc["id"]}]},
                               "VALIDATION_ERROR", reason="DOCUMENT_NOT_UPLOADED", documentId=doc["id"])
        assert "PUT" in body["suggestion"]
        assert stored(sandbox) == before
        await a.refused("document_create", {"formId": approval, "name": "x.exe", "contentType": "application/x-exe",
                                            "size": 3}, "VALIDATION_ERROR", reason="DOCUMENT_TYPE_NOT_ALLOWED")
        await upload(sandbox, doc["uploadUrl"], PDF)
        created = await a.ok("request_create", {"formId": approval, "documents": [{"documentId": doc["id"]}]})
        got = await a.ok("request_get", {"requestId": created["id"]})
        assert got["documents"] == [{"field": "review_docs", "name": "Quote.pdf", "size": len(PDF),
                                     "contentType": "application/pdf"}]
    # the recipient page lists the uploaded document and serves its bytes
    page = await fetch(sandbox.http, created["url"])
    assert page.status == 200 and "Quote.pdf" in page.text
    links = [u for u in page.doc.links if "/api/storage/" in u]
    assert len(links) == 1
    async with sandbox.http.get(links[0]) as resp:
        assert resp.status == 200 and await resp.read() == PDF


async def test_folder_tools_and_methods(sandbox):
    ws = sandbox.pro
    async with agent(sandbox) as a:
        folder = await a.ok("workspaceFolder_create", {"workspaceId": ws.id, "name": "Q3 surveys"})
        await a.refused("workspaceFolder_create", {"workspaceId": ws.id, "name": "q3 SURVEYS"}, "CONFLICT",
                        reason="DUPLICATE_NAME", folderId=folder["id"])
        await a.refused("workspaceFolder_update", {"folderId": folder["id"], "name": "Archive"}, "CONFLICT",
                        reason="DUPLICATE_NAME")
        await a.refused("workspaceFolder_create", {"workspaceId": ws.id, "name": "   "}, "VALIDATION_ERROR",
                        field="name")
        same = await a.ok("workspaceFolder_update", {"folderId": folder["id"], "name": "Q3 surveys"})
        assert same["noChange"] is True
    # the same domain functions answer on /api/v1
    made = await rpc_data(sandbox, "forms.create", {"workspaceId": ws.id, "name": "In Q3", "folderId": folder["id"]})
    listed = await rpc_data(sandbox, "folders.list", {"workspaceId": ws.id})
    assert {f["name"]: f["formCount"] for f in listed["items"]} == {"Archive": 0, "Q3 surveys": 1}
    (await sandbox.rpc("folders.create", {"workspaceId": ws.id, "name": "archive"})).expect(
        "CONFLICT", 409, reason="DUPLICATE_NAME")
    (await sandbox.rpc("folders.delete", {"folderId": folder["id"]}, ws="free")).expect("FORBIDDEN", 403)
    deleted = await rpc_data(sandbox, "folders.delete", {"folderId": folder["id"]})
    assert deleted == {"id": folder["id"], "deleted": True, "movedForms": 1}
    assert (await rpc_data(sandbox, "forms.get", {"formId": made["id"]}))["folderId"] is None
    (await sandbox.rpc("folders.update", {"folderId": folder["id"], "name": "x"})).expect("NOT_FOUND", 404)


async def test_theme_tools(sandbox):
    contact = sandbox.pro.forms["Contact"]
    async with agent(sandbox) as a:
        default = await a.ok("formTheme_get", {"formId": contact})
        assert default["isDefault"] is True and default["font"] == "Inter"
        set_ = await a.ok("formTheme_set", {"formId": contact, "colors": {"background": "#000", "text": "#fafafa"}})
        assert set_["colors"]["background"] == "#000" and set_["colors"]["primary"] == default["colors"]["primary"]
        await a.refused("formTheme_set", {"formId": contact, "font": "Comic Sans"}, "VALIDATION_ERROR", field="font")
        await a.refused("formTheme_set", {"formId": contact, "font": None}, "VALIDATION_ERROR", field="font")
        await a.refused("formTheme_set", {"formId": contact, "reset": True, "font": "Lato"}, "VALIDATION_ERROR",
                        reason="CONFLICTING_VALUES")
        await a.refused("formTheme_set", {"formId": contact}, "VALIDATION_ERROR", reason="NOTHING_TO_UPDATE")
        reverted = await a.ok("formTheme_set", {"formId": contact, "colors": {"background": None}})
        assert reverted["colors"]["background"] == default["colors"]["background"] and not reverted["isDefault"]
        assert (await a.ok("formTheme_set", {"formId": contact, "reset": True}))["isDefault"] is True


async def test_analytics_counts_both_channels_and_needs_pro(sandbox):
    async with agent(sandbox, ws="free") as a:
        await a.refused("formAnalytics_get", {"formId": sandbox.free.forms["Contact"]}, "UPGRADE_REQUIRED",
                        feature="analytics")
    contact = sandbox.pro.forms["Contact"]
    async with agent(sandbox) as a:
        real = await a.ok("request_create", {"formId": contact})
        await a.ok("request_create", {"formId": contact})
        test = await a.ok("request_create", {"formId": contact, "test": True})
        answers = {"name": "Ann", "email": "ann@example.test"}
        for rid in (real["id"], test["id"]):
            assert (await sandbox.helper("requests.complete", {"requestId": rid, "answers": answers})).status == 200
        stats = await a.ok("formAnalytics_get", {"formId": contact})
    assert stats["requests"] == {"views": 1, "starts": 1, "completions": 1}  # the test request counts nowhere
    assert stats["shareLinks"] == {"views": 4, "starts": 4, "completions": 3}
    assert (stats["views"], stats["completions"], stats["requestsCreated"]) == (5, 4, 2)
    assert stats["completionRate"] == 0.8


async def test_translation_drafts_reach_readers_only_when_published(sandbox):
    contact = sandbox.pro.forms["Contact"]
    async with agent(sandbox) as a:
        await a.ok("translationDraft_update", {"formId": contact, "language": "fr-fr", "translations": {
            "field.topic.option.sales": "Ventes", "field.name.title": "Nom"}})
        entries = await rpc_data(sandbox, "translations.listEntries", {"formId": contact, "language": "fr-FR"})
        assert all(e["translation"] is None for e in entries["items"])  # drafts are not published translations
        subs = await rpc_data(sandbox, "submissions.list", {"formId": contact, "translationLanguage": "fr-FR"})
        assert "Ventes" not in json.dumps(subs)
        published = await a.ok("translationDraft_publish", {"formId": contact, "language": "fr-FR"})
        assert (published["language"], published["published"]) == ("fr-FR", 2)
        entries = {e["key"]: e["translation"] for e in
                   (await rpc_data(sandbox, "translations.listEntries", {"formId": contact, "language": "fr-FR",
                                                                         "limit": 100}))["items"]}
        assert entries["field.name.title"] == "Nom" and entries["field.topic.option.sales"] == "Ventes"
        subs = await rpc_data(sandbox, "submissions.list", {"formId": contact, "translationLanguage": "fr-FR"})
        grace = next(i for i in subs["items"] if i["answers"].get("name") == "Grace Hopper")
        assert grace["translation"]["display"]["topic"] == "Ventes"
        # a null draft removes a published translation on the next publish
        view = await a.ok("translationDraft_update", {"formId": contact, "language": "fr-FR",
                                                      "translations": {"field.name.title": None}})
        assert next(i for i in view["items"] if i["key"] == "field.name.title")["removeOnPublish"] is True
        again = await a.ok("translationDraft_publish", {"formId": contact, "language": "fr-FR"})
        assert (again["published"], again["removed"]) == (0, 1)
        nothing = await a.ok("translationDraft_publish", {"formId": contact, "language": "fr-FR"})
        assert nothing["noChange"] is True
        langs = await a.ok("translationLanguage_list", {"formId": contact})
        assert langs["sourceLanguage"] == "en"
        assert [(i["language"], i["translated"], i["drafted"]) for i in langs["items"]] == [("fr-FR", 1, 0)]
        await a.refused("translationDraft_update", {"formId": contact, "language": "en", "translations": {
            "field.name.title": "Name"}}, "VALIDATION_ERROR", reason="SAME_AS_SOURCE")
        await a.refused("translationDraft_get", {"formId": contact, "language": "not a tag"}, "VALIDATION_ERROR",
                        reason="INVALID_FORMAT")
        await a.refused("translationLanguage_delete", {"formId": contact, "language": "it"}, "NOT_FOUND",
                        reason="UNKNOWN_LANGUAGE", validValues=["fr-FR"])
        await a.ok("translationLanguage_delete", {"formId": contact, "language": "fr-FR"})
        assert (await a.ok("translationLanguage_list", {"formId": contact}))["items"] == []
    subs = await rpc_data(sandbox, "submissions.list", {"formId": contact, "translationLanguage": "fr-FR"})
    assert "Ventes" not in json.dumps(subs)


async def test_share_link_tools(sandbox):
    async with agent(sandbox) as a:
        body = await a.refused("formShareLink_create", {"formId": sandbox.pro.forms["Draft survey"]},
                               "VALIDATION_ERROR", reason="FORM_NOT_PUBLISHED")
        assert "form_publish" in body["suggestion"]
        link = await a.ok("formShareLink_create", {"formId": sandbox.pro.forms["Contact"]})
        await a.ok("formShareLink_update", {"shareLinkId": link["id"], "revoked": True})
        await a.refused("formShareLink_update", {"shareLinkId": link["id"], "revoked": False}, "CONFLICT",
                        reason="SHARE_LINK_REVOKED")
        listed = await a.ok("formShareLink_list", {"formId": sandbox.pro.forms["Contact"]})
        assert [(i["id"], i["revoked"]) for i in listed["items"]] == [(link["id"], True)]


# -- guides, resources, prompts ---------------------------------------------------------------


async def test_load_tools_load_skill_resources_and_prompts(sandbox):
    async with agent(sandbox) as a:
        await a.refused("load_tools", {"catalog": "everything"}, "VALIDATION_ERROR", reason="INVALID_VALUE",
                        validValues=CATALOG_NAMES)
        # the older catalog names still answer, with the tools they held (unlisted ones too)
        editor = await a.ok("load_tools", {"catalog": "editor"})
        names = [t["name"] for t in editor["tools"]]
        assert {"editor_getDocument", "editor_insertQuestion", "editor_testLogic", "editor_formatText",
                "editor_insertRatingQuestion"} <= set(names)
        assert all(t["inputSchema"]["type"] == "object" for t in editor["tools"])
        assert [t["name"] for t in (await a.ok("load_tools", {"catalog": "settings"}))["tools"]] == [
            "formSettings_get", "formSettings_update", "formTheme_get", "formTheme_set"]
        # a revealed tool is callable right away, and so is any tool at any time (no session)
        doc = await a.ok("editor_getDocument", {"formId": sandbox.pro.forms["Announcement"]})
        assert [e["type"] for e in doc["elements"]] == ["heading", "paragraph"]

        resources = (await a.session.list_resources()).resources
        uris = [f"skill://{t}" for t in SKILL_TOPICS + CATALOG_NAMES]
        assert [str(r.uri) for r in resources] == uris, "every guide and catalog is a resource"
        assert all(r.mimeType == "text/markdown" for r in resources)
        for topic in SKILL_TOPICS + ["documents", "share-links"]:  # the last two: ours, loadable, unlisted
            skill = await a.ok("load_skill", {"topic": topic})
            read = await a.session.read_resource(f"skill://{topic}")
            assert read.contents[0].text == skill["markdown"] and skill["uri"] == f"skill://{topic}"
            assert skill["markdown"].startswith("# ") and len(skill["markdown"]) > 400
        for catalog in CATALOG_NAMES:
            body = await a.ok("load_tools", {"catalog": catalog})
            text = (await a.session.read_resource(f"skill://{catalog}")).contents[0].text
            assert body["uri"] == f"skill://{catalog}" and body["notes"] in text
            assert all(f"`{t['name']}`" in text for t in body["tools"] if t["name"] not in UNLISTED)
        with pytest.raises(McpError) as err:
            await a.session.read_resource("skill://nope")
        assert err.value.error.code == -32002
        await a.refused("load_skill", {"topic": "nope"}, "VALIDATION_ERROR", validValues=SKILL_TOPICS)
        schema = next(t for t in (await a.session.list_tools()).tools if t.name == "load_skill").inputSchema
        assert schema["properties"]["topic"]["enum"] == SKILL_TOPICS

        prompts = (await a.session.list_prompts()).prompts
        assert [p.name for p in prompts] == ["identity", "capabilities", "data_tools", "editor_tools"]
        identity = (await a.session.get_prompt("identity")).messages[0].content.text
        assert sandbox.pro.id in identity and "Pro plan" in identity
        capabilities = (await a.session.get_prompt("capabilities")).messages[0].content.text
        assert all(c in capabilities for c in CATALOG_NAMES) and "retryAfterMs" in capabilities
        assert "fields_list" in (await a.session.get_prompt("data_tools")).messages[0].content.text
        assert "editor_setLogic" in (await a.session.get_prompt("editor_tools")).messages[0].content.text
        with pytest.raises(McpError):
            await a.session.get_prompt("nope")


async def test_request_language_must_be_published_and_the_page_opens_in_it(sandbox):
    """Notes section 2: ``language`` names a published translation; the recipient page
    opens in it (question titles and option labels), untranslated texts stay as authored."""
    contact = sandbox.pro.forms["Contact"]
    async with agent(sandbox) as a:
        await a.ok("translationDraft_update", {"formId": contact, "language": "de", "translations": {
            "field.name.title": "Ihr Name", "field.topic.option.sales": "Vertrieb"}})
        before = stored(sandbox)
        # a draft is not a published translation yet
        await a.refused("request_create", {"formId": contact, "language": "de"}, "VALIDATION_ERROR",
                        reason="UNKNOWN_LANGUAGE", field="language", validValues=["en"])
        assert stored(sandbox) == before, "a refused create stores nothing"
        await a.ok("translationDraft_publish", {"formId": contact, "language": "de"})
        await a.refused("request_create", {"formId": contact, "language": "fr"}, "VALIDATION_ERROR",
                        reason="UNKNOWN_LANGUAGE", validValues=["en", "de"])
        await a.refused("request_create", {"formId": contact, "language": "not a tag"}, "VALIDATION_ERROR",
                        field="language")
        made = await a.ok("request_create", {"formId": contact, "language": "DE"})
        english = await a.ok("request_create", {"formId": contact, "language": "en"})
        assert (await a.ok("request_get", {"requestId": made["id"]}))["language"] == "de", "stored canonical"
    page = await fetch(sandbox.http, made["url"])
    assert page.status == 200 and '<html lang="de">' in page.text
    doc = page.doc
    assert doc.labels["f-name"].startswith("Ihr Name")
    assert "Vertrieb" in page.text and "Support" in page.text, "untranslated labels stay as authored"
    plain = await fetch(sandbox.http, english["url"])
    assert "Ihr Name" not in plain.text and "Vertrieb" not in plain.text


async def test_the_invitation_and_reminder_are_written_in_the_requests_language(sandbox):
    """Notes section 2: with ``language`` the invitation is written in it (and so are the
    reminders); a request without one is written in the form's language."""
    contact = sandbox.pro.forms["Contact"]
    async with agent(sandbox) as a:
        await a.ok("translationDraft_update", {"formId": contact, "language": "de", "translations": {
            "field.name.title": "Ihr Name"}})
        await a.ok("translationDraft_publish", {"formId": contact, "language": "de"})
        german = await a.ok("request_create", {"formId": contact, "language": "de", "delivery": "email",
                                               "recipient": {"email": "jonas@example.com", "name": "Jonas"}})
        english = await a.ok("request_create", {"formId": contact, "delivery": "email",
                                                "recipient": {"email": "ada@example.com", "name": "Ada"}})
    await sandbox.helper("deliveries.flush")
    mails = {m["to"]: m for m in (await sandbox.helper("mail.list")).data["items"] if m["kind"] == "invitation"}
    assert mails["jonas@example.com"]["body"].startswith("Hallo Jonas,")
    assert german["url"] in mails["jonas@example.com"]["body"] and "Bitte füllen Sie" in mails["jonas@example.com"]["body"]
    assert mails["ada@example.com"]["body"].startswith("Hello Ada,") and english["url"] in mails["ada@example.com"]["body"]
    reminded = await sandbox.rpc("requests.remind", {"requestId": german["id"]})
    assert reminded.ok, reminded.body
    reminder = [m for m in (await sandbox.helper("mail.list")).data["items"]
                if m["kind"] == "reminder" and m["to"] == "jonas@example.com"]
    assert len(reminder) == 1 and reminder[0]["subject"].startswith("Erinnerung: ")


async def test_minimal_dialect_shapes_tool_results_and_errors_as_the_spec_shows(sandbox):
    contact, approval = sandbox.pro.forms["Contact"], sandbox.pro.forms["Approval"]
    assert (await sandbox.helper("dialect.set", {"dialect": "minimal"})).data == {"dialect": "minimal"}
    async with agent(sandbox) as a:
        created = await a.ok("request_create", {"formId": contact, "recipient": {"email": "ada@example.test"}})
        got = await a.ok("request_get", {"requestId": created["id"]})
        doc = await a.ok("document_create", {"formId": approval, "name": "Quote.pdf",
                                             "contentType": "application/pdf", "size": len(PDF)})
        canceled = await a.ok("request_cancel", {"requestId": created["id"]})
        refused = await a.refused("request_cancel", {"requestId": created["id"]}, "CONFLICT")
    envelope = {"success", "next"}
    assert set(created) - envelope == {"id", "status", "url", "deliveryStatus", "externalId", "deduplicated",
                                       "createdAt", "expiresAt"}
    assert "recipient" not in got and "formId" not in got and got["status"] == "pending"
    assert set(doc) - envelope == {"id", "name", "contentType", "size", "uploadUrl", "expiresAt"}
    assert canceled["canceledBy"] == "api", "a tool the spec does not describe keeps the notes' fields"
    assert "reason" not in refused["details"] and refused["error"].startswith("REQUEST_NOT_PENDING: ")
