"""Spec "Authentication" 1-10: bearer tokens, their format and storage, expiry, deletion,
the per-person limit, names, OAuth access tokens, the failed-authentication limit and
the one-workspace scope."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from sqlmodel import select

from formservice.domain import auth
from formservice.tables import ApiToken, Member, User

DAY_MS = 24 * 3600 * 1000
MINUTE_MS = 60 * 1000


async def me(sandbox, token: str):
    return await sandbox.post("/api/v1", {"method": "me.get"}, token=token)


async def mint(sandbox, name: str = "x", kind: str = "api", ws: str = "pro") -> dict:
    r = await sandbox.helper("tokens.create", {"name": name, "kind": kind}, ws=ws)
    assert r.status == 200, r.body
    return r.data


async def advance(sandbox, ms: int, token: str | None = None) -> None:
    r = await sandbox.helper("clock.advance", {"ms": ms}, token=token)
    assert r.status == 200, r.body


# -- 1. missing or invalid token ---------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Basic dXNlcjpwYXNz",
        "Token fb_" + "a" * 32,
        "Bearer",
        "Bearer ",
        "fb_" + "a" * 32,
        "Bearer fb_short",
        "Bearer fb_" + "a" * 31 + "!",
        "Bearer sk_live_" + "a" * 32,
        "Bearer fb_" + "a" * 32,  # well formed, never issued
        "Bearer fbo_" + "b" * 40,  # well formed OAuth, never issued
    ],
    ids=["missing", "empty", "basic", "token-scheme", "bearer-only", "bearer-blank", "no-scheme", "short",
         "bad-char", "foreign-format", "unknown-api", "unknown-oauth"],
)
async def test_bad_authorization_is_unauthorized(sandbox, header):
    headers = {} if header is None else {"Authorization": header}
    r = await sandbox.post("/api/v1", {"method": "me.get"}, headers=headers)
    r.expect("UNAUTHORIZED", 401)


async def test_token_in_another_case_of_scheme_works(sandbox):
    r = await sandbox.post("/api/v1", {"method": "me.get"},
                           headers={"Authorization": f"bearer {sandbox.pro.token}"})
    assert r.status == 200, r.body


async def test_unauthorized_changes_nothing(sandbox):
    params = {"workspaceId": sandbox.pro.id, "name": "Sneaky"}
    r = await sandbox.post("/api/v1", {"method": "forms.create", "params": params}, token="fb_" + "z" * 32)
    r.expect("UNAUTHORIZED", 401)
    names = [f["name"] for f in (await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id,
                                                                   "limit": 100})).data["items"]]
    assert "Sneaky" not in names


# -- 2, 3. format, storage, listing ---------------------------------------------------------


async def test_minted_token_format_and_listing(sandbox):
    created = await mint(sandbox, "ci")
    value = created["token"]
    assert len(value) == 35 and re.fullmatch(r"fb_[A-Za-z0-9]{32}", value)
    assert (await me(sandbox, value)).status == 200
    listed = (await sandbox.helper("tokens.list")).data["items"]
    row = next(i for i in listed if i["id"] == created["id"])
    assert row["prefix"] == value[:11]
    assert row["name"] == "ci"
    assert row["expiresAt"] - row["createdAt"] == 30 * DAY_MS
    assert all("token" not in i for i in listed), "a token's value is shown once, at creation"


async def test_only_the_sha256_is_stored(sandbox):
    value = (await mint(sandbox, "stored"))["token"]
    with sandbox.service.session() as s:
        rows = s.exec(select(ApiToken)).all()
    row = next(r for r in rows if r.prefix == value[:11])
    assert row.token_hash == hashlib.sha256(value.encode()).hexdigest()
    for r in rows:
        for column, stored in r.model_dump().items():
            assert value not in str(stored), f"ApiToken.{column} holds the token value"
    # nor anywhere else in the database files
    db = Path(sandbox.service.engine.url.database)
    files = [p for p in (db, db.with_name(db.name + "-wal")) if p.exists()]
    assert files
    for path in files:
        assert value.encode() not in path.read_bytes(), f"the token value is in {path}"


# -- 4. one workspace ------------------------------------------------------------------------


async def test_token_reaches_only_its_workspace(sandbox):
    r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.free.id}, ws="pro")
    r.expect("FORBIDDEN", 403, field="workspaceId")
    r = await sandbox.rpc("forms.get", {"formId": sandbox.free.forms["Contact"]}, ws="pro")
    r.expect("FORBIDDEN", 403, field="formId")
    r = await sandbox.rpc("forms.create", {"workspaceId": sandbox.business.id, "name": "Intruder"}, ws="pro")
    r.expect("FORBIDDEN", 403, field="workspaceId")
    names = [f["name"] for f in (await sandbox.rpc("forms.list", {"workspaceId": sandbox.business.id,
                                                                   "limit": 100}, ws="business")).data["items"]]
    assert "Intruder" not in names


async def test_foreign_form_is_not_changed(sandbox):
    form_id = sandbox.free.forms["Contact"]
    before = (await sandbox.rpc("forms.get", {"formId": form_id}, ws="free")).data
    for method, params in [("forms.update", {"formId": form_id, "name": "Taken over"}),
                           ("forms.delete", {"formId": form_id}),
                           ("forms.unpublish", {"formId": form_id})]:
        r = await sandbox.rpc(method, params, ws="business")
        r.expect("FORBIDDEN", 403, field="formId")
    assert (await sandbox.rpc("forms.get", {"formId": form_id}, ws="free")).data == before


async def test_unknown_workspace_is_not_found(sandbox):
    r = await sandbox.rpc("forms.list", {"workspaceId": "ws_nosuchworkspace000000"})
    r.expect("NOT_FOUND", 404, field="workspaceId")


# -- 5. ten API tokens per person per workspace -------------------------------------------------


async def test_at_most_ten_api_tokens_oauth_not_counted(sandbox):
    for _ in range(3):
        await mint(sandbox, kind="oauth")
    # the seed already gave this person one API token
    for i in range(9):
        await mint(sandbox, f"t{i}")
    r = await sandbox.helper("tokens.create", {"name": "eleventh"})
    r.expect("CONFLICT", 409, reason="TOKEN_LIMIT_REACHED")
    assert "10" in r.error["message"]
    listed = (await sandbox.helper("tokens.list")).data["items"]
    assert sum(1 for i in listed if i["kind"] == "api") == 10
    assert "eleventh" not in {i["name"] for i in listed}
    # OAuth tokens can still be minted, and other workspaces are not affected
    assert (await mint(sandbox, kind="oauth"))["token"].startswith("fbo_")
    assert (await mint(sandbox, "other", ws="free"))["token"].startswith("fb_")


async def test_deleting_a_token_frees_a_slot(sandbox):
    made = [await mint(sandbox, f"t{i}") for i in range(9)]
    (await sandbox.helper("tokens.create", {"name": "full"})).expect("CONFLICT", 409)
    r = await sandbox.helper("tokens.delete", {"tokenId": made[0]["id"]})
    assert r.status == 200 and r.data["deleted"] is True
    assert (await mint(sandbox, "again"))["name"] == "again"


# -- 6. expiry -------------------------------------------------------------------------------


async def test_api_token_expires_after_30_days(sandbox):
    value = (await mint(sandbox, "month"))["token"]
    await advance(sandbox, 30 * DAY_MS - MINUTE_MS)
    assert (await me(sandbox, value)).status == 200, "still valid just before 30 days"
    await advance(sandbox, MINUTE_MS, token=value)
    r = await me(sandbox, value)
    r.expect("UNAUTHORIZED", 401, reason="TOKEN_EXPIRED")
    assert "30 days" in r.error["message"]


# -- 7. rename and delete -------------------------------------------------------------------------


async def test_rename_keeps_the_value(sandbox):
    made = await mint(sandbox, "before")
    r = await sandbox.helper("tokens.rename", {"tokenId": made["id"], "name": "n" * 64})
    assert r.status == 200 and r.data["name"] == "n" * 64
    assert r.data["prefix"] == made["token"][:11]
    assert (await me(sandbox, made["token"])).status == 200


async def test_token_name_at_most_64_characters(sandbox):
    assert (await mint(sandbox, "a" * 64))["name"] == "a" * 64
    r = await sandbox.helper("tokens.create", {"name": "b" * 65})
    r.expect("VALIDATION_ERROR", 400, field="name")
    assert "64" in r.error["message"]
    made = await mint(sandbox, "keep")
    r = await sandbox.helper("tokens.rename", {"tokenId": made["id"], "name": "c" * 65})
    r.expect("VALIDATION_ERROR", 400, field="name")
    names = {i["name"] for i in (await sandbox.helper("tokens.list")).data["items"]}
    assert "keep" in names and "b" * 65 not in names and "c" * 65 not in names


async def test_empty_token_name_refused(sandbox):
    r = await sandbox.helper("tokens.create", {"name": ""})
    r.expect("VALIDATION_ERROR", 400, field="name")


async def test_deleted_token_stops_on_next_call(sandbox):
    made = await mint(sandbox, "doomed")
    assert (await me(sandbox, made["token"])).status == 200
    assert (await sandbox.helper("tokens.delete", {"tokenId": made["id"]})).status == 200
    r = await me(sandbox, made["token"])
    r.expect("UNAUTHORIZED", 401)
    ids = {i["id"] for i in (await sandbox.helper("tokens.list")).data["items"]}
    assert made["id"] not in ids


async def test_a_token_deletes_itself(sandbox):
    made = await mint(sandbox, "self")
    r = await sandbox.helper("tokens.delete", {"tokenId": made["id"]}, token=made["token"])
    assert r.status == 200
    (await me(sandbox, made["token"])).expect("UNAUTHORIZED", 401)


async def test_tokens_visible_only_to_their_owner(sandbox):
    other = await mint(sandbox, "free-owner", ws="free")
    r = await sandbox.helper("tokens.delete", {"tokenId": other["id"]}, ws="pro")
    r.expect("NOT_FOUND", 404, field="tokenId")
    assert (await me(sandbox, other["token"])).status == 200
    assert other["id"] not in {i["id"] for i in (await sandbox.helper("tokens.list", ws="pro")).data["items"]}


async def test_leaving_the_workspace_deletes_the_persons_tokens(sandbox):
    """Rule 7: leaving or being removed from the workspace deletes the person's tokens,
    API and OAuth alike; the other members' tokens keep working. (No API removes a
    member, as in the hosted service where it is the dashboard's job: the domain
    function the dashboard would call is used here, the effect is checked over HTTP.)"""
    ws, now = sandbox.pro.id, (await sandbox.helper("clock.get")).data["now"]
    with sandbox.service.session() as s:
        s.add(User(id="usr_leaver00000000000000000", email="leaver@example.test", name="Lee Leaver"))
        s.add(Member(workspace_id=ws, user_id="usr_leaver00000000000000000", role="member"))
        s.flush()
        api_value, _ = auth.create_api_token(s, "usr_leaver00000000000000000", ws, "leaver's", now)
        oauth_value, _ = auth.create_oauth_token(s, "usr_leaver00000000000000000", ws, now)
        s.commit()
    for value in (api_value, oauth_value):
        got = await me(sandbox, value)
        assert got.status == 200 and got.data["email"] == "leaver@example.test"
    with sandbox.service.session() as s:
        assert auth.remove_member(s, ws, "usr_leaver00000000000000000") == 2
        s.commit()
    for value in (api_value, oauth_value):
        (await me(sandbox, value)).expect("UNAUTHORIZED", 401)
    with sandbox.service.session() as s:
        assert s.exec(select(ApiToken).where(ApiToken.user_id == "usr_leaver00000000000000000")).all() == []
        assert s.get(Member, (ws, "usr_leaver00000000000000000")) is None
        try:
            auth.remove_member(s, ws, "usr_leaver00000000000000000")
            raise AssertionError("removing a non-member must fail")
        except auth.ApiError as err:
            assert err.code == "NOT_FOUND" and err.details["field"] == "userId"
    assert (await me(sandbox, sandbox.pro.token)).status == 200, "the owner's token is untouched"


async def test_sandbox_helpers_add_and_remove_a_member(sandbox):
    added = (await sandbox.helper("members.add", {"email": "lee@example.test", "name": "Lee"})).data
    got = await me(sandbox, added["token"])
    assert got.status == 200 and got.data["email"] == "lee@example.test"
    (await sandbox.helper("members.remove", {"userId": sandbox.pro.user_id})).expect(
        "VALIDATION_ERROR", 400, reason="CANNOT_REMOVE_SELF", field="userId")
    removed = (await sandbox.helper("members.remove", {"userId": added["userId"]})).data
    assert removed == {"userId": added["userId"], "removed": True, "tokensDeleted": 1}
    (await me(sandbox, added["token"])).expect("UNAUTHORIZED", 401)
    (await sandbox.helper("members.remove", {"userId": added["userId"]})).expect("NOT_FOUND", 404, field="userId")
    with sandbox.service.session() as s:
        before = len(s.exec(select(Member)).all()), len(s.exec(select(User)).all())
    (await sandbox.helper("members.add", {"email": "not-an-email", "name": "X"})).expect(
        "VALIDATION_ERROR", 400, field="email")
    with sandbox.service.session() as s:
        assert (len(s.exec(select(Member)).all()), len(s.exec(select(User)).all())) == before, "nothing stored"
    assert (await me(sandbox, sandbox.pro.token)).status == 200, "the caller's token is untouched"


# -- 8. OAuth access tokens ----------------------------------------------------------------------


async def test_oauth_token_works_and_expires_after_one_hour(sandbox):
    made = await mint(sandbox, kind="oauth")
    value = made["token"]
    assert value.startswith("fbo_")
    assert made["expiresAt"] - made["createdAt"] == 60 * MINUTE_MS
    r = await me(sandbox, value)
    assert r.status == 200 and r.data["id"] == sandbox.pro.user_id
    r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id}, token=value)
    assert r.status == 200
    await advance(sandbox, 59 * MINUTE_MS)
    assert (await me(sandbox, value)).status == 200, "still valid just before one hour"
    await advance(sandbox, MINUTE_MS)
    r = await me(sandbox, value)
    r.expect("UNAUTHORIZED", 401, reason="TOKEN_EXPIRED")
    assert "hour" in r.error["message"]


async def test_oauth_token_bound_to_one_workspace(sandbox):
    value = (await mint(sandbox, kind="oauth", ws="free"))["token"]
    r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id}, token=value)
    r.expect("FORBIDDEN", 403)


# -- 9. failed authentications per IP ------------------------------------------------------------


async def test_failed_authentications_limited_per_ip(sandbox):
    bad = ["fb_" + "q" * 32, "Basic abc", None]
    for i in range(30):
        header = bad[i % 3]
        headers = {} if header is None else {"Authorization": header if " " in header else f"Bearer {header}"}
        r = await sandbox.post("/api/v1", {"method": "me.get"}, headers=headers)
        r.expect("UNAUTHORIZED", 401)
    r = await me(sandbox, "fb_" + "q" * 32)
    r.expect("RATE_LIMITED", 429)
    wait = r.details["retryAfterMs"]
    assert 0 < wait <= 15 * MINUTE_MS
    # a good token is not locked out
    ok = await me(sandbox, sandbox.pro.token)
    assert ok.status == 200
    # refused attempts are not counted: the wait does not grow
    r2 = await sandbox.post("/api/v1", {"method": "me.get"})
    r2.expect("RATE_LIMITED", 429)
    assert r2.details["retryAfterMs"] <= wait
    await advance(sandbox, 15 * MINUTE_MS)
    (await me(sandbox, "fb_" + "q" * 32)).expect("UNAUTHORIZED", 401)


async def test_failed_auth_limit_also_guards_the_helpers(sandbox):
    for _ in range(30):
        (await sandbox.helper("clock.get", token="fb_" + "w" * 32)).expect("UNAUTHORIZED", 401)
    (await sandbox.helper("clock.get", token="fb_" + "w" * 32)).expect("RATE_LIMITED", 429)
    (await me(sandbox, "fb_" + "w" * 32)).expect("RATE_LIMITED", 429)
