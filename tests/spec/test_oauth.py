"""Spec "Authentication" 8 and notes section 6: OAuth 2.1 over loopback. Metadata
documents (RFC 9728, RFC 8414), dynamic client registration (RFC 7591), the
authorization request with mandatory PKCE S256 and the consent page that picks one
workspace, the token endpoint's two grants with rotating refresh tokens, and the
``fbo_`` access token acting in exactly the chosen workspace for one hour."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from sqlmodel import func, select

from formservice.tables import ApiToken, OAuthClient, OAuthCode, RefreshToken

from ..conftest import Reply

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS
REDIRECT = "https://app.example.test/oauth/callback"
ALL_SCOPES = ["mcp:read", "mcp:write", "offline_access", "api:read", "api:write"]


# -- helpers ------------------------------------------------------------------------------


def pkce() -> tuple[str, str]:
    """A code verifier and its S256 challenge (RFC 7636 section 4.2)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).decode().rstrip("=")
    return verifier, challenge


async def get_json(sandbox: Any, path: str) -> tuple[int, Any]:
    async with sandbox.http.get(sandbox.base_url + path) as resp:
        return resp.status, await resp.json(content_type=None)


async def register(sandbox: Any, **meta: Any) -> Reply:
    body = {"redirect_uris": [REDIRECT], "client_name": "Test app", **meta}
    async with sandbox.http.post(sandbox.base_url + "/oauth/register", json=body) as resp:
        return Reply(resp.status, await resp.json(content_type=None), resp.headers)


async def client(sandbox: Any, **meta: Any) -> dict[str, Any]:
    r = await register(sandbox, **meta)
    assert r.status == 201, r.body
    return r.body


class FormReader(HTMLParser):
    """The consent page's form: action, hidden fields, workspace radios, buttons."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.hidden: list[tuple[str, str]] = []
        self.radios: list[dict[str, str]] = []
        self.buttons: list[tuple[str, str]] = []
        self._label: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.action = a.get("action")
        elif tag == "input" and a.get("type") == "hidden":
            self.hidden.append((a["name"], a["value"]))
        elif tag == "input" and a.get("type") == "radio":
            self._label = {"name": a["name"], "value": a["value"], "text": ""}
            self.radios.append(self._label)
        elif tag == "button":
            self.buttons.append((a.get("name", ""), a.get("value", "")))

    def handle_data(self, data: str) -> None:
        if self._label is not None:
            self._label["text"] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "label":
            self._label = None


def authorize_query(cl: dict[str, Any], challenge: str | None, **over: Any) -> list[tuple[str, str]]:
    params = {"client_id": cl["client_id"], "redirect_uri": REDIRECT, "response_type": "code",
              "scope": "mcp:read mcp:write offline_access", "state": "st-" + secrets.token_hex(4),
              "code_challenge": challenge, "code_challenge_method": "S256", **over}
    return [(k, v) for k, v in params.items() if v is not None]


async def open_consent(sandbox: Any, query: list[tuple[str, str]]) -> tuple[int, str, Any]:
    async with sandbox.http.get(f"{sandbox.base_url}/oauth/authorize?{urlencode(query)}",
                                allow_redirects=False) as resp:
        return resp.status, await resp.text(), resp.headers


async def decide(sandbox: Any, page: str, *, workspace: str | None, decision: str = "approve",
                 ) -> tuple[int, str | None, str]:
    """Submit the consent form as a person would: its hidden fields, the radio of the
    workspace named ``workspace``, and the button pressed."""
    form = FormReader()
    form.feed(page)
    assert form.action == "/oauth/authorize"
    assert (("decision", decision) in form.buttons), form.buttons
    fields = list(form.hidden)
    if workspace is not None:
        fields.append(("workspace_id", next(r["value"] for r in form.radios if workspace in r["text"])))
    fields.append(("decision", decision))
    async with sandbox.http.post(sandbox.base_url + form.action, data=fields, allow_redirects=False) as resp:
        return resp.status, resp.headers.get("Location"), await resp.text()


def query_of(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


async def get_code(sandbox: Any, cl: dict[str, Any], *, workspace: str = "Pro Workspace",
                   scope: str = "mcp:read mcp:write offline_access", redirect: str = REDIRECT
                   ) -> tuple[str, str]:
    """Run authorize and consent; returns (code, verifier)."""
    verifier, challenge = pkce()
    query = authorize_query(cl, challenge, scope=scope, redirect_uri=redirect)
    status, page, _ = await open_consent(sandbox, query)
    assert status == 200, page
    status, location, body = await decide(sandbox, page, workspace=workspace)
    assert status == 302, body
    assert location.startswith(redirect + "?")
    got = query_of(location)
    assert got["state"] == dict(query)["state"]
    return got["code"], verifier


async def token(sandbox: Any, fields: dict[str, str] | list[tuple[str, str]]) -> Reply:
    async with sandbox.http.post(sandbox.base_url + "/oauth/token", data=fields) as resp:
        assert resp.headers.get("Cache-Control") == "no-store"
        return Reply(resp.status, await resp.json(content_type=None), resp.headers)


def expect_oauth(r: Reply, status: int, error: str, text: str | None = None) -> None:
    assert r.status == status, (r.status, r.body)
    assert r.body["error"] == error, r.body
    assert r.body["error_description"]
    if text is not None:
        assert text in r.body["error_description"], r.body


async def exchange(sandbox: Any, cl: dict[str, Any], code: str, verifier: str, **over: str) -> Reply:
    fields = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
              "client_id": cl["client_id"], "code_verifier": verifier, **over}
    if "client_secret" in cl:
        fields.setdefault("client_secret", cl["client_secret"])
    return await token(sandbox, {k: v for k, v in fields.items() if v is not None})


async def tokens_for(sandbox: Any, cl: dict[str, Any], **kw: Any) -> dict[str, Any]:
    code, verifier = await get_code(sandbox, cl, **kw)
    r = await exchange(sandbox, cl, code, verifier)
    assert r.status == 200, r.body
    return r.body


async def refresh(sandbox: Any, cl: dict[str, Any], value: str, **over: str) -> Reply:
    fields = {"grant_type": "refresh_token", "refresh_token": value, "client_id": cl["client_id"], **over}
    if "client_secret" in cl:
        fields.setdefault("client_secret", cl["client_secret"])
    return await token(sandbox, fields)


async def me(sandbox: Any, access: str) -> Reply:
    return await sandbox.post("/api/v1", {"method": "me.get"}, token=access)


async def advance(sandbox: Any, ms: int, token: str | None = None) -> None:
    r = await sandbox.helper("clock.advance", {"ms": ms}, token=token)
    assert r.status == 200, r.body


def count(sandbox: Any, table: Any) -> int:
    with sandbox.service.session() as s:
        return s.exec(select(func.count()).select_from(table)).one()


# -- metadata ---------------------------------------------------------------------------------


async def test_protected_resource_metadata(sandbox):
    status, doc = await get_json(sandbox, "/.well-known/oauth-protected-resource")
    assert status == 200
    assert doc["resource"] == sandbox.base_url + "/api/mcp"
    assert doc["authorization_servers"] == [sandbox.base_url]
    assert {"mcp:read", "mcp:write", "offline_access"} <= set(doc["scopes_supported"])
    assert (await get_json(sandbox, "/.well-known/oauth-protected-resource/api/mcp"))[1] == doc
    status, v1 = await get_json(sandbox, "/.well-known/oauth-protected-resource/api/v1")
    assert status == 200 and v1["resource"] == sandbox.base_url + "/api/v1"
    assert v1["authorization_servers"] == [sandbox.base_url]


async def test_authorization_server_metadata(sandbox):
    status, doc = await get_json(sandbox, "/.well-known/oauth-authorization-server")
    assert status == 200
    base = sandbox.base_url
    assert doc["issuer"] == base
    assert doc["authorization_endpoint"] == base + "/oauth/authorize"
    assert doc["token_endpoint"] == base + "/oauth/token"
    assert doc["registration_endpoint"] == base + "/oauth/register"
    assert doc["code_challenge_methods_supported"] == ["S256"]
    assert set(doc["grant_types_supported"]) == {"authorization_code", "refresh_token"}
    assert doc["token_endpoint_auth_methods_supported"] == ["client_secret_post", "none"]
    assert doc["response_types_supported"] == ["code"]
    assert set(doc["scopes_supported"]) == set(ALL_SCOPES)


# -- dynamic client registration ---------------------------------------------------------------


async def test_register_a_confidential_client_secret_stored_hashed(sandbox):
    r = await register(sandbox, scope="mcp:read offline_access")
    assert r.status == 201, r.body
    body = r.body
    secret = body["client_secret"]
    assert body["redirect_uris"] == [REDIRECT] and body["client_name"] == "Test app"
    assert body["token_endpoint_auth_method"] == "client_secret_post"
    assert body["client_secret_expires_at"] == 0 and isinstance(body["client_id_issued_at"], int)
    assert body["scope"] == "mcp:read offline_access"
    assert r.headers.get("Cache-Control") == "no-store"
    with sandbox.service.session() as s:
        row = s.get(OAuthClient, body["client_id"])
        rows = s.exec(select(OAuthClient)).all()
    assert row.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    for r_ in rows:
        assert secret not in json.dumps(r_.model_dump(), default=str), "the secret itself is never stored"
    db = Path(sandbox.service.engine.url.database)
    for path in (db, db.with_name(db.name + "-wal")):
        if path.exists():
            assert secret.encode() not in path.read_bytes(), f"the client secret is in {path}"
    other = await client(sandbox)
    assert other["client_id"] != body["client_id"], "registered client ids are random"


async def test_register_a_public_client(sandbox):
    body = await client(sandbox, token_endpoint_auth_method="none")
    assert "client_secret" not in body
    assert body["token_endpoint_auth_method"] == "none"
    with sandbox.service.session() as s:
        assert s.get(OAuthClient, body["client_id"]).secret_hash is None


@pytest.mark.parametrize("uri", ["http://127.0.0.1:8123/cb", "http://localhost/cb", "http://[::1]:9/cb",
                                 "https://app.example.test/cb?x=1"])
async def test_register_accepts_https_and_loopback_http(sandbox, uri):
    assert (await client(sandbox, redirect_uris=[uri]))["redirect_uris"] == [uri]


@pytest.mark.parametrize(("meta", "error"), [
    ({"redirect_uris": None}, "invalid_redirect_uri"),
    ({"redirect_uris": []}, "invalid_redirect_uri"),
    ({"redirect_uris": ["http://app.example.test/cb"]}, "invalid_redirect_uri"),
    ({"redirect_uris": ["https://app.example.test/cb#frag"]}, "invalid_redirect_uri"),
    ({"redirect_uris": ["/relative/cb"]}, "invalid_redirect_uri"),
    ({"redirect_uris": ["javascript:alert(1)"]}, "invalid_redirect_uri"),
    ({"redirect_uris": ["https://app.example.test:99999/cb"]}, "invalid_redirect_uri"),
    ({"redirect_uris": [REDIRECT, "ftp://app.example.test/cb"]}, "invalid_redirect_uri"),
    ({"redirect_uris": "https://app.example.test/cb"}, "invalid_redirect_uri"),
    ({"token_endpoint_auth_method": "client_secret_basic"}, "invalid_client_metadata"),
    ({"grant_types": ["implicit"]}, "invalid_client_metadata"),
    ({"response_types": ["token"]}, "invalid_client_metadata"),
    ({"scope": "admin"}, "invalid_client_metadata"),
    ({"client_name": "n" * 256}, "invalid_client_metadata"),
])
async def test_register_refuses_bad_metadata(sandbox, meta, error):
    before = count(sandbox, OAuthClient)
    body = {"redirect_uris": [REDIRECT], **meta}
    if meta.get("redirect_uris", 0) is None:
        del body["redirect_uris"]
    async with sandbox.http.post(sandbox.base_url + "/oauth/register", json=body) as resp:
        got = await resp.json(content_type=None)
        assert resp.status == 400, got
    assert got["error"] == error and got["error_description"], got
    assert count(sandbox, OAuthClient) == before


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b""])
async def test_register_needs_a_json_object(sandbox, raw):
    async with sandbox.http.post(sandbox.base_url + "/oauth/register", data=raw,
                                 headers={"Content-Type": "application/json"}) as resp:
        got = await resp.json(content_type=None)
        assert resp.status == 400 and got["error"] == "invalid_client_metadata", got


async def test_register_ignores_unknown_metadata(sandbox):
    body = await client(sandbox, logo_uri="https://app.example.test/logo.png", software_id="x")
    assert body["client_id"]


async def test_unused_registered_clients_are_collected_after_30_days(sandbox):
    idle = await client(sandbox)
    busy = await client(sandbox)
    grant = await tokens_for(sandbox, busy)
    await advance(sandbox, 20 * DAY_MS)
    assert (await refresh(sandbox, busy, grant["refresh_token"])).status == 200
    await advance(sandbox, 11 * DAY_MS)
    await client(sandbox)  # registering collects
    with sandbox.service.session() as s:
        assert s.get(OAuthClient, idle["client_id"]) is None
        assert s.get(OAuthClient, busy["client_id"]) is not None, "used 11 days ago: kept"
        assert s.get(OAuthClient, "fboc_zapier") is not None, "system clients are never collected"


# -- the whole flow -------------------------------------------------------------------------------


async def test_consent_page_lists_the_workspaces(sandbox):
    cl = await client(sandbox)
    _, challenge = pkce()
    status, page, headers = await open_consent(sandbox, authorize_query(cl, challenge))
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert headers.get("X-Frame-Options") == "DENY"
    form = FormReader()
    form.feed(page)
    shown = {r["text"].strip() for r in form.radios}
    assert shown == {"Free Workspace (free)", "Pro Workspace (pro)", "Business Workspace (business)"}
    assert {r["value"] for r in form.radios} == {sandbox.free.id, sandbox.pro.id, sandbox.business.id}
    assert {r["name"] for r in form.radios} == {"workspace_id"}
    assert ("decision", "approve") in form.buttons and ("decision", "deny") in form.buttons
    assert "Test app" in page
    assert "<script" not in page.lower(), "the page works without JavaScript"


async def test_full_flow_token_acts_in_the_chosen_workspace_only(sandbox):
    cl = await client(sandbox)
    code, verifier = await get_code(sandbox, cl, workspace="Business Workspace")
    r = await exchange(sandbox, cl, code, verifier)
    assert r.status == 200, r.body
    body = r.body
    assert body["access_token"].startswith("fbo_") and body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert body["scope"] == "mcp:read mcp:write offline_access"
    assert body["refresh_token"]
    access = body["access_token"]
    got = await me(sandbox, access)
    assert got.status == 200 and got.data["email"] == "owner@business.example.test", got.body
    listed = await sandbox.post("/api/v1", {"method": "forms.list", "params": {"workspaceId": sandbox.business.id}},
                                token=access)
    assert listed.status == 200 and len(listed.data["items"]) > 0
    for other in (sandbox.pro, sandbox.free):
        r = await sandbox.post("/api/v1", {"method": "forms.list", "params": {"workspaceId": other.id}},
                               token=access)
        r.expect("FORBIDDEN", 403, field="workspaceId")
    with sandbox.service.session() as s:
        row = s.exec(select(ApiToken).where(ApiToken.token_hash == hashlib.sha256(access.encode()).hexdigest())).one()
    assert (row.kind, row.workspace_id, row.client_id) == ("oauth", sandbox.business.id, cl["client_id"])


async def test_access_token_lasts_one_hour(sandbox):
    cl = await client(sandbox)
    access = (await tokens_for(sandbox, cl))["access_token"]
    await advance(sandbox, HOUR_MS - MINUTE_MS)
    assert (await me(sandbox, access)).status == 200
    await advance(sandbox, MINUTE_MS)
    r = await me(sandbox, access)
    r.expect("UNAUTHORIZED", 401, reason="TOKEN_EXPIRED")
    assert "refresh" in r.error["message"]


async def test_refresh_rotates(sandbox):
    cl = await client(sandbox)
    first = await tokens_for(sandbox, cl, workspace="Free Workspace")
    await advance(sandbox, HOUR_MS)
    assert (await me(sandbox, first["access_token"])).status == 401
    r = await refresh(sandbox, cl, first["refresh_token"])
    assert r.status == 200, r.body
    second = r.body
    assert second["refresh_token"] != first["refresh_token"]
    assert second["access_token"] != first["access_token"] and second["expires_in"] == 3600
    assert second["scope"] == first["scope"]
    got = await me(sandbox, second["access_token"])
    assert got.status == 200 and got.data["email"] == "owner@free.example.test"
    # the used refresh token stops working; the new one works once
    expect_oauth(await refresh(sandbox, cl, first["refresh_token"]), 400, "invalid_grant", "already used")
    assert (await refresh(sandbox, cl, second["refresh_token"])).status == 200
    expect_oauth(await refresh(sandbox, cl, second["refresh_token"]), 400, "invalid_grant")
    with sandbox.service.session() as s:
        rows = {r.token_hash: r for r in s.exec(select(RefreshToken)).all()}
    assert len(rows) == 3 and sum(r.used_at is None for r in rows.values()) == 1
    for value in (first["refresh_token"], second["refresh_token"]):
        row = rows[hashlib.sha256(value.encode()).hexdigest()]  # only the hash is kept
        assert row.used_at is not None
        assert value not in json.dumps(row.model_dump(), default=str)


async def test_refresh_may_narrow_the_scope_but_not_widen_it(sandbox):
    cl = await client(sandbox)
    grant = await tokens_for(sandbox, cl)
    expect_oauth(await refresh(sandbox, cl, grant["refresh_token"], scope="api:write"), 400, "invalid_scope")
    r = await refresh(sandbox, cl, grant["refresh_token"], scope="mcp:read")
    assert r.status == 200 and r.body["scope"] == "mcp:read", r.body
    r = await refresh(sandbox, cl, r.body["refresh_token"])
    assert r.body["scope"] == "mcp:read mcp:write offline_access", "the grant keeps its whole scope"


async def test_refresh_lasts_30_days_from_its_last_use(sandbox):
    cl = await client(sandbox)
    grant = await tokens_for(sandbox, cl)
    current, access = grant["refresh_token"], sandbox.pro.token
    for _ in range(3):  # 87 days in all, never 30 days idle
        await advance(sandbox, 29 * DAY_MS, token=access)
        r = await refresh(sandbox, cl, current)
        assert r.status == 200, r.body
        # the seeded API token is gone after 30 days: the fresh access token moves the clock
        current, access = r.body["refresh_token"], r.body["access_token"]
    await advance(sandbox, 30 * DAY_MS, token=access)
    expect_oauth(await refresh(sandbox, cl, current), 400, "invalid_grant", "expired")


async def test_no_offline_access_no_refresh_token(sandbox):
    cl = await client(sandbox)
    body = await tokens_for(sandbox, cl, scope="mcp:read mcp:write")
    assert "refresh_token" not in body and body["scope"] == "mcp:read mcp:write"
    assert count(sandbox, RefreshToken) == 0


async def test_refresh_token_of_another_client_is_refused(sandbox):
    a, b = await client(sandbox), await client(sandbox)
    grant = await tokens_for(sandbox, a)
    expect_oauth(await refresh(sandbox, b, grant["refresh_token"]), 400, "invalid_grant")
    assert (await refresh(sandbox, a, grant["refresh_token"])).status == 200, "the refusal did not spend it"


async def test_deny_sends_access_denied_and_issues_nothing(sandbox):
    cl = await client(sandbox)
    _, challenge = pkce()
    query = authorize_query(cl, challenge, state="keep-me")
    _, page, _ = await open_consent(sandbox, query)
    status, location, _ = await decide(sandbox, page, workspace=None, decision="deny")
    assert status == 302 and location.startswith(REDIRECT)
    assert query_of(location) == {"error": "access_denied", "state": "keep-me",
                                  "error_description": query_of(location)["error_description"]}
    assert count(sandbox, OAuthCode) == 0


async def test_approve_without_a_workspace_is_asked_again(sandbox):
    cl = await client(sandbox)
    _, challenge = pkce()
    _, page, _ = await open_consent(sandbox, authorize_query(cl, challenge))
    status, location, body = await decide(sandbox, page, workspace=None)
    assert status == 400 and location is None
    assert "Pick the workspace" in body and 'name="workspace_id"' in body
    assert count(sandbox, OAuthCode) == 0


async def test_codes_are_stored_hashed(sandbox):
    cl = await client(sandbox)
    code, _ = await get_code(sandbox, cl)
    with sandbox.service.session() as s:
        row = s.exec(select(OAuthCode)).one()
    assert row.code_hash == hashlib.sha256(code.encode()).hexdigest()
    assert code not in json.dumps(row.model_dump(), default=str)
    assert row.expires_at - row.created_at == 10 * MINUTE_MS
    assert row.workspace_id == sandbox.pro.id and row.user_id == sandbox.pro.user_id


# -- PKCE and the authorization request ------------------------------------------------------------


@pytest.mark.parametrize(("over", "text"), [
    ({"code_challenge": None}, "code_challenge is required"),
    ({"code_challenge_method": "plain"}, "only S256"),
    ({"code_challenge_method": None}, "only S256"),
    ({"code_challenge": "short"}, "43 characters"),
    ({"response_type": "token"}, "response_type"),
    ({"scope": "mcp:read admin"}, "Unknown scope"),
    ({"resource": "https://elsewhere.example.test/api"}, "not served here"),
])
async def test_bad_authorization_requests_go_back_with_an_error(sandbox, over, text):
    cl = await client(sandbox)
    _, challenge = pkce()
    query = authorize_query(cl, challenge, state="s-1", **over)
    status, body, headers = await open_consent(sandbox, query)
    assert status == 302, body
    got = query_of(headers["Location"])
    assert headers["Location"].startswith(REDIRECT + "?")
    assert got["state"] == "s-1" and "code" not in got
    assert text in got["error_description"], got
    assert got["error"] in {"invalid_request", "unsupported_response_type", "invalid_scope", "invalid_target"}
    # the consent POST checks the same rules: a forged form cannot skip them
    fields = [*query, ("workspace_id", sandbox.pro.id), ("decision", "approve")]
    async with sandbox.http.post(f"{sandbox.base_url}/oauth/authorize", data=fields, allow_redirects=False) as resp:
        assert resp.status == 302 and "code" not in query_of(resp.headers["Location"])
    assert count(sandbox, OAuthCode) == 0


@pytest.mark.parametrize(("over", "text"), [
    ({"redirect_uri": "https://evil.example.test/cb"}, "redirect_uri not registered for this client"),
    ({"redirect_uri": None}, "Missing required parameter: redirect_uri"),
    ({"client_id": None}, "Missing required parameter: client_id"),
    ({"client_id": "fboc_nosuchclient"}, "Unknown client_id"),
])
async def test_client_or_redirect_problems_are_never_redirected(sandbox, over, text):
    cl = await client(sandbox)
    _, challenge = pkce()
    status, body, headers = await open_consent(sandbox, authorize_query(cl, challenge, **over))
    assert status == 400 and "Location" not in headers
    assert text in body


async def test_loopback_redirect_may_use_any_port(sandbox):
    cl = await client(sandbox, redirect_uris=["http://127.0.0.1/callback"])
    port_uri = "http://127.0.0.1:53123/callback"
    code, verifier = await get_code(sandbox, cl, redirect=port_uri)
    r = await exchange(sandbox, cl, code, verifier, redirect_uri=port_uri)
    assert r.status == 200, r.body
    _, challenge = pkce()
    status, body, _ = await open_consent(sandbox, authorize_query(cl, challenge,
                                                                  redirect_uri="http://127.0.0.1:53123/other"))
    assert status == 400 and "redirect_uri not registered" in body


async def test_duplicated_parameters_the_first_wins(sandbox):
    cl = await client(sandbox)
    verifier, challenge = pkce()
    query = [("client_id", cl["client_id"]), ("client_id", "fboc_impostor"),
             ("redirect_uri", REDIRECT), ("redirect_uri", "https://evil.example.test/cb"),
             ("response_type", "code"), ("response_type", "token"),
             ("scope", "mcp:read offline_access"), ("scope", "api:write"),
             ("state", "first"), ("state", "second"),
             ("code_challenge", challenge), ("code_challenge", "x" * 43),
             ("code_challenge_method", "S256"), ("code_challenge_method", "plain")]
    status, page, _ = await open_consent(sandbox, query)
    assert status == 200, page
    status, location, _ = await decide(sandbox, page, workspace="Pro Workspace")
    assert status == 302 and location.startswith(REDIRECT + "?")
    got = query_of(location)
    assert got["state"] == "first"
    r = await exchange(sandbox, cl, got["code"], verifier)
    assert r.status == 200 and r.body["scope"] == "mcp:read offline_access", r.body
    # the token endpoint reads the first value too
    other = await tokens_for(sandbox, cl)
    r = await token(sandbox, [("grant_type", "refresh_token"), ("grant_type", "authorization_code"),
                              ("refresh_token", other["refresh_token"]), ("refresh_token", "bogus"),
                              ("client_id", cl["client_id"]), ("client_secret", cl["client_secret"]),
                              ("client_secret", "wrong")])
    assert r.status == 200, r.body


# -- the token endpoint --------------------------------------------------------------------------------


async def test_wrong_verifier_is_refused_and_does_not_spend_the_code(sandbox):
    cl = await client(sandbox)
    code, verifier = await get_code(sandbox, cl)
    wrong, _ = pkce()
    before = count(sandbox, ApiToken)
    expect_oauth(await exchange(sandbox, cl, code, wrong), 400, "invalid_grant", "code_verifier does not match")
    assert count(sandbox, ApiToken) == before, "no access token was issued"
    assert (await exchange(sandbox, cl, code, verifier)).status == 200


async def test_a_code_works_once(sandbox):
    cl = await client(sandbox)
    code, verifier = await get_code(sandbox, cl)
    assert (await exchange(sandbox, cl, code, verifier)).status == 200
    expect_oauth(await exchange(sandbox, cl, code, verifier), 400, "invalid_grant", "already used")


async def test_a_code_expires_after_10_minutes(sandbox):
    cl = await client(sandbox)
    code, verifier = await get_code(sandbox, cl)
    await advance(sandbox, 10 * MINUTE_MS)
    expect_oauth(await exchange(sandbox, cl, code, verifier), 400, "invalid_grant", "expired")


async def test_a_code_belongs_to_its_client(sandbox):
    a, b = await client(sandbox), await client(sandbox)
    code, verifier = await get_code(sandbox, a)
    expect_oauth(await exchange(sandbox, b, code, verifier), 400, "invalid_grant")
    assert (await exchange(sandbox, a, code, verifier)).status == 200


async def test_redirect_uri_must_match_the_authorization_request(sandbox):
    second = "https://app.example.test/second"
    cl = await client(sandbox, redirect_uris=[REDIRECT, second])
    code, verifier = await get_code(sandbox, cl)
    expect_oauth(await exchange(sandbox, cl, code, verifier, redirect_uri="https://evil.example.test/cb"), 400,
                 "invalid_request", "redirect_uri not registered for this client")
    expect_oauth(await exchange(sandbox, cl, code, verifier, redirect_uri=second), 400, "invalid_grant")
    assert (await exchange(sandbox, cl, code, verifier)).status == 200


@pytest.mark.parametrize(("fields", "status", "error", "text"), [
    ({}, 400, "invalid_request", "grant_type <missing>"),
    ({"grant_type": "password"}, 400, "unsupported_grant_type", "password"),
    ({"grant_type": "authorization_code"}, 400, "invalid_request", "Missing required parameter: client_id"),
    ({"grant_type": "authorization_code", "client_id": "CL", "client_secret": "SECRET"}, 400,
     "invalid_request", "code, redirect_uri, and code_verifier are required"),
    ({"grant_type": "authorization_code", "client_id": "CL", "client_secret": "SECRET", "code": "x",
      "code_verifier": "v" * 43}, 400, "invalid_request", "code, redirect_uri, and code_verifier are required"),
    ({"grant_type": "authorization_code", "client_id": "CL"}, 401, "invalid_client", "client_secret is required"),
    ({"grant_type": "authorization_code", "client_id": "CL", "client_secret": "nope"}, 401, "invalid_client",
     "wrong"),
    ({"grant_type": "authorization_code", "client_id": "fboc_unknown"}, 401, "invalid_client", "Unknown"),
    ({"grant_type": "refresh_token", "client_id": "CL", "client_secret": "SECRET"}, 400, "invalid_request",
     "refresh_token is required"),
    ({"grant_type": "refresh_token", "client_id": "CL", "client_secret": "SECRET", "refresh_token": "nope"}, 400,
     "invalid_grant", "unknown"),
    ({"grant_type": "authorization_code", "client_id": "CL", "client_secret": "SECRET", "code": "nope",
      "redirect_uri": REDIRECT, "code_verifier": "short"}, 400, "invalid_request", "code_verifier"),
])
async def test_token_errors(sandbox, fields, status, error, text):
    cl = await client(sandbox)
    sub = {"CL": cl["client_id"], "SECRET": cl["client_secret"]}
    before = count(sandbox, ApiToken), count(sandbox, RefreshToken)
    expect_oauth(await token(sandbox, {k: sub.get(v, v) for k, v in fields.items()}), status, error, text)
    assert (count(sandbox, ApiToken), count(sandbox, RefreshToken)) == before, "a refusal issues nothing"


async def test_token_request_must_be_form_encoded(sandbox):
    cl = await client(sandbox)
    async with sandbox.http.post(sandbox.base_url + "/oauth/token",
                                 json={"grant_type": "refresh_token", "client_id": cl["client_id"]}) as resp:
        got = await resp.json(content_type=None)
        assert resp.status == 400 and got["error"] == "invalid_request"
        assert "x-www-form-urlencoded" in got["error_description"]


async def test_public_client_needs_no_secret(sandbox):
    cl = await client(sandbox, token_endpoint_auth_method="none")
    grant = await tokens_for(sandbox, cl)
    assert (await refresh(sandbox, cl, grant["refresh_token"])).status == 200


# -- the seeded system clients -------------------------------------------------------------------------


async def test_seeded_connector_clients(sandbox):
    creds = json.loads((Path(sandbox.service.engine.url.database).parent / "sandbox-credentials.json").read_text())
    seeded = {c["clientId"]: c for c in creds["oauthClients"]}
    assert set(seeded) == {"fboc_zapier", "fboc_make"}
    with sandbox.service.session() as s:
        for client_id, c in seeded.items():
            row = s.get(OAuthClient, client_id)
            assert row.is_system and row.secret_hash == hashlib.sha256(c["clientSecret"].encode()).hexdigest()
    # Zapier's flow: the connectors' scopes, client_secret_post, a local callback on any port
    zapier = {"client_id": "fboc_zapier", "client_secret": seeded["fboc_zapier"]["clientSecret"]}
    local = "http://127.0.0.1:40123/callback"
    code, verifier = await get_code(sandbox, zapier, scope="api:read api:write offline_access", redirect=local)
    r = await exchange(sandbox, zapier, code, verifier, redirect_uri=local)
    assert r.status == 200 and r.body["scope"] == "api:read api:write offline_access", r.body
    assert (await me(sandbox, r.body["access_token"])).data["email"] == "owner@pro.example.test"
    r = await refresh(sandbox, zapier, r.body["refresh_token"])
    assert r.status == 200 and r.body["refresh_token"], r.body


# -- the official MCP SDK's OAuth client --------------------------------------------------------------


class MemoryStorage:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client_info: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client_info

    async def set_client_info(self, client_info: Any) -> None:
        self.client_info = client_info


async def test_mcp_sdk_oauth_client_completes_the_flow(sandbox):
    """``mcp.client.auth.OAuthClientProvider`` discovers the metadata from a 401, registers
    itself, runs authorize with PKCE (its redirect handler submits the consent page) and
    the token exchange, and then calls the API with the token it got."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    callback = "http://127.0.0.1:47001/callback"
    returned: dict[str, str] = {}

    async def redirect_handler(authorization_url: str) -> None:
        async with sandbox.http.get(authorization_url, allow_redirects=False) as resp:
            assert resp.status == 200, await resp.text()
            page = await resp.text()
        status, location, body = await decide(sandbox, page, workspace="Pro Workspace")
        assert status == 302, body
        returned.update(query_of(location))

    async def callback_handler() -> tuple[str, str | None]:
        return returned["code"], returned.get("state")

    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=sandbox.base_url + "/api/v1",
        client_metadata=OAuthClientMetadata(client_name="SDK client", redirect_uris=[callback]),
        storage=storage, redirect_handler=redirect_handler, callback_handler=callback_handler,
    )
    async with httpx.AsyncClient(auth=provider, timeout=30) as http:
        resp = await http.post(sandbox.base_url + "/api/v1", json={"method": "me.get"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["data"]["email"] == "owner@pro.example.test"
    assert storage.tokens.access_token.startswith("fbo_") and storage.tokens.refresh_token
    assert set(storage.tokens.scope.split()) == set(ALL_SCOPES)
    with sandbox.service.session() as s:
        registered = s.get(OAuthClient, storage.client_info.client_id)
    assert registered is not None and registered.name == "SDK client"
