"""The spec's Forms methods and the Form lifecycle table, over loopback against the sandbox.

Each test asserts the HTTP status, the error ``code`` and its ``details``, and where a call
is refused, that nothing stored changed.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from sqlmodel import select

from formservice import tables
from formservice.domain.forms import ICON_NAMES, edit_blocks
from formservice.ids import new_id

FORM_ITEM_KEYS = {"id", "name", "folderId", "workspaceId", "isPublished", "publishedAt", "unpublishedAt",
                  "createdAt", "lastEditedAt", "emoji"}
DETAIL_KEYS = FORM_ITEM_KEYS | {"questions", "hasContent", "cover", "logo", "isDeleted", "trashedAt", "previewUrl"}
MISSING_FORM = "form_0000000000000000000000"


# -- helpers ---------------------------------------------------------------------------


async def get(sb, form_id: str, ws: str = "pro") -> dict[str, Any]:
    return (await sb.rpc("forms.get", {"formId": form_id}, ws=ws)).data


async def list_all(sb, ws: str = "pro", **params: Any) -> list[dict[str, Any]]:
    r = await sb.rpc("forms.list", {"workspaceId": sb.workspaces[ws].id, "limit": 100, **params}, ws=ws)
    assert r.status == 200 and r.data["hasMore"] is False
    return r.data["items"]


async def now(sb) -> int:
    return (await sb.helper("clock.get")).data["now"]


def add_share_link(sb, form_id: str, ws_id: str, *, revoked_at: int | None = None) -> str:
    """A share link row (no JSON-RPC method creates one yet)."""
    with sb.service.session() as s:
        link = tables.ShareLink(id=new_id("shl"), form_id=form_id, workspace_id=ws_id, token=new_id("tok"),
                                revoked=revoked_at is not None, revoked_at=revoked_at, created_at=sb.service.now())
        s.add(link)
        s.commit()
        return link.id


def share_link(sb, link_id: str) -> tables.ShareLink:
    with sb.service.session() as s:
        return s.get(tables.ShareLink, link_id)


def share_links_of(sb, form_id: str) -> list[tables.ShareLink]:
    with sb.service.session() as s:
        return list(s.exec(select(tables.ShareLink).where(tables.ShareLink.form_id == form_id)))


def edit_draft(sb, form_id: str, change) -> None:
    """Edit a form's draft content the way the editor does (there is no JSON-RPC method)."""
    with sb.service.session() as s:
        form = s.get(tables.Form, form_id)
        blocks = [dict(b) for b in form.blocks or []]
        change(blocks)
        edit_blocks(form, blocks, sb.service.now())
        s.add(form)
        s.commit()


async def fields(sb, form_id: str) -> dict[str, Any]:
    r = await sb.rpc("fields.list", {"formId": form_id})
    assert r.status == 200
    return r.data


# -- forms.list ------------------------------------------------------------------------


async def test_list_requires_workspace_id(sandbox):
    r = await sandbox.rpc("forms.list", {})
    r.expect("VALIDATION_ERROR", 400, field="workspaceId", reason="REQUIRED")
    r = await sandbox.rpc("forms.list", {"workspaceId": None})
    r.expect("VALIDATION_ERROR", 400, field="workspaceId", reason="INVALID_TYPE", expectedType="string")


async def test_list_scoped_to_the_token_workspace(sandbox):
    r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.free.id})
    r.expect("FORBIDDEN", 403, field="workspaceId", reason="FOREIGN_WORKSPACE")
    r = await sandbox.rpc("forms.list", {"workspaceId": "ws_0000000000000000000000"})
    r.expect("NOT_FOUND", 404, field="workspaceId")
    items = await list_all(sandbox)
    assert {f["id"] for f in items} == set(sandbox.pro.forms.values())
    assert all(f["workspaceId"] == sandbox.pro.id and set(f) == FORM_ITEM_KEYS for f in items)


async def test_list_folder_filter_null_omitted_and_id(sandbox):
    contact = sandbox.pro.forms["Contact"]
    moved = await sandbox.rpc("forms.update", {"formId": contact, "folderId": sandbox.pro.folder_id})
    assert moved.data["folderId"] == sandbox.pro.folder_id

    everything = {f["id"] for f in await list_all(sandbox)}
    root = {f["id"] for f in await list_all(sandbox, folderId=None)}
    in_folder = await list_all(sandbox, folderId=sandbox.pro.folder_id)
    assert everything == set(sandbox.pro.forms.values())
    assert root == everything - {contact}
    assert [f["id"] for f in in_folder] == [contact] and in_folder[0]["folderId"] == sandbox.pro.folder_id

    r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "folderId": "fld_0000000000000000000000"})
    r.expect("NOT_FOUND", 404, field="folderId")
    r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "folderId": sandbox.free.folder_id})
    r.expect("FORBIDDEN", 403, field="folderId", reason="FOREIGN_WORKSPACE")


async def test_list_default_limit_is_20_newest_first(sandbox):
    for i in range(15):
        assert (await sandbox.rpc("forms.create", {"name": f"Bulk {i}", "workspaceId": sandbox.pro.id})).ok
    r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id})
    page = r.data
    assert r.status == 200 and len(page["items"]) == 20
    assert page["hasMore"] is True and page["nextCursor"] and page["canPaginate"] is True
    order = [(f["createdAt"], f["id"]) for f in page["items"]]
    assert order == sorted(order, reverse=True)
    assert page["items"][0]["name"] == "Bulk 14"


async def test_list_cursor_walk_no_duplicates_no_gaps(sandbox):
    for i in range(4):
        await sandbox.rpc("forms.create", {"name": f"Walk {i}", "workspaceId": sandbox.pro.id})
    assert len(await list_all(sandbox)) == 11

    for limit in (1, 3, 12):
        expected = [f["id"] for f in await list_all(sandbox)]
        seen: list[str] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"workspaceId": sandbox.pro.id, "limit": limit}
            if cursor is not None:
                params["cursor"] = cursor
            page = (await sandbox.rpc("forms.list", params)).data
            assert len(page["items"]) <= limit
            assert page["hasMore"] is (page["nextCursor"] is not None)
            seen += [f["id"] for f in page["items"]]
            if limit == 1 and len(seen) == 2:
                # a form created mid-walk sorts before the cursor: the walk neither repeats nor skips
                await sandbox.rpc("forms.create", {"name": "Mid-walk", "workspaceId": sandbox.pro.id})
            cursor = page["nextCursor"]
            if cursor is None:
                assert page["hasMore"] is False and len(page["items"]) > 0
                break
            assert len(page["items"]) == limit
        assert seen == expected, f"limit {limit}"
    assert len(expected) == 12  # the mid-walk form exists, and later walks list it


async def test_list_limit_bounds(sandbox):
    for bad in (0, 101):
        r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limit": bad})
        r.expect("VALIDATION_ERROR", 400, field="limit", reason="OUT_OF_RANGE")
    r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limit": "5"})
    r.expect("VALIDATION_ERROR", 400, field="limit", reason="INVALID_TYPE", expectedType="integer")
    one = (await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limit": 1})).data
    assert len(one["items"]) == 1 and one["hasMore"] is True
    full = (await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limit": 100})).data
    assert len(full["items"]) == 7 and full["hasMore"] is False and full["nextCursor"] is None


async def test_list_refuses_garbage_cursors(sandbox):
    forged = [
        "garbage!!",
        base64.urlsafe_b64encode(b"not json").decode(),
        base64.urlsafe_b64encode(json.dumps([1]).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps(["a", "b"]).encode()).decode(),
    ]
    for cursor in forged:
        r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "cursor": cursor})
        r.expect("VALIDATION_ERROR", 400, field="cursor", reason="INVALID_CURSOR")


async def test_list_fuzzy_query(sandbox):
    for i in range(4):
        await sandbox.rpc("forms.create", {"name": f"Customer feedback {i}", "workspaceId": sandbox.pro.id})
    ws = sandbox.pro.id

    typo = (await sandbox.rpc("forms.list", {"workspaceId": ws, "query": "Contcat"})).data
    assert typo["items"][0]["id"] == sandbox.pro.forms["Contact"]

    wide = (await sandbox.rpc("forms.list", {"workspaceId": ws, "query": "custmer feedbak", "limit": 100})).data
    names = [f["name"] for f in wide["items"]]
    assert set(names[:4]) == {f"Customer feedback {i}" for i in range(4)}
    assert wide["hasMore"] is False and wide["nextCursor"] is None and wide["canPaginate"] is False

    capped = (await sandbox.rpc("forms.list", {"workspaceId": ws, "query": "custmer feedbak", "limit": 2})).data
    assert len(capped["items"]) == 2 and {f["name"] for f in capped["items"]} <= set(names[:4])
    assert capped["hasMore"] is True and capped["nextCursor"] is None and capped["canPaginate"] is False

    none = (await sandbox.rpc("forms.list", {"workspaceId": ws, "query": "zzqxjv"})).data
    assert none["items"] == [] and none["hasMore"] is False

    real_cursor = (await sandbox.rpc("forms.list", {"workspaceId": ws, "limit": 1})).data["nextCursor"]
    r = await sandbox.rpc("forms.list", {"workspaceId": ws, "query": "contact", "cursor": real_cursor})
    r.expect("VALIDATION_ERROR", 400, field="cursor", reason="QUERY_NOT_PAGINATED")
    r = await sandbox.rpc("forms.list", {"workspaceId": ws, "query": "   "})
    r.expect("VALIDATION_ERROR", 400, field="query", reason="INVALID_VALUE")


async def test_list_leaves_out_trashed_forms(sandbox):
    contact = sandbox.pro.forms["Contact"]
    await sandbox.rpc("forms.delete", {"formId": contact})
    assert contact not in {f["id"] for f in await list_all(sandbox)}
    found = (await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "query": "Contact"})).data
    assert contact not in {f["id"] for f in found["items"]}


# -- forms.get -------------------------------------------------------------------------


async def test_get_detail(sandbox):
    d = await get(sandbox, sandbox.pro.forms["Everything"])
    assert set(d) == DETAIL_KEYS
    assert d["name"] == "Everything" and d["emoji"] == "🧪" and d["workspaceId"] == sandbox.pro.id
    assert d["isPublished"] is True and d["publishedAt"] and d["unpublishedAt"] is None
    assert d["hasContent"] is True and d["cover"] is None and d["logo"] is None
    assert d["isDeleted"] is False and d["trashedAt"] is None
    assert d["previewUrl"].startswith(sandbox.base_url) and d["id"] in d["previewUrl"]
    for q in d["questions"]:
        assert set(q) == {"id", "type", "inputType", "title", "metadata"} and q["id"] and q["title"]
    by_title = {q["title"]: q for q in d["questions"]}
    assert "Every field type" not in by_title  # a heading is content, not a question
    rating = by_title["Satisfaction"]
    assert rating["type"] == "rating-input" and rating["inputType"] == "rating"
    assert set(rating["metadata"]) >= {"kind", "maxStars"} and rating["metadata"]["maxStars"] == 5
    assert by_title["Email"]["type"] == "email-input" and by_title["Email"]["inputType"] == "email"
    assert by_title["Full name"]["metadata"] is None

    announcement = await get(sandbox, sandbox.pro.forms["Announcement"])
    assert announcement["hasContent"] is True and announcement["questions"] == []
    empty = await get(sandbox, sandbox.pro.forms["Empty"])
    assert empty["hasContent"] is False and empty["questions"] == [] and empty["isPublished"] is False


async def test_get_trashed_form(sandbox):
    form_id = sandbox.pro.forms["Draft survey"]
    trashed = (await sandbox.rpc("forms.delete", {"formId": form_id})).data
    d = await get(sandbox, form_id)
    assert d["isDeleted"] is True and d["trashedAt"] == trashed["trashedAt"]


async def test_get_unknown_and_foreign(sandbox):
    r = await sandbox.rpc("forms.get", {"formId": MISSING_FORM})
    r.expect("NOT_FOUND", 404, field="formId")
    r = await sandbox.rpc("forms.get", {"formId": sandbox.free.forms["Contact"]})
    r.expect("FORBIDDEN", 403, field="formId", reason="FOREIGN_WORKSPACE")
    r = await sandbox.rpc("forms.get", {})
    r.expect("VALIDATION_ERROR", 400, field="formId", reason="REQUIRED")


# -- forms.create ----------------------------------------------------------------------


async def test_create_result_shape(sandbox):
    before = await now(sandbox)
    r = await sandbox.rpc("forms.create", {"name": "Onboarding", "workspaceId": sandbox.pro.id})
    after = await now(sandbox)
    c = r.data
    assert r.status == 200
    assert set(c) == {"id", "name", "workspaceId", "folderId", "isPublished", "createdAt", "previewUrl"}
    assert c["id"].startswith("form_") and c["name"] == "Onboarding" and c["workspaceId"] == sandbox.pro.id
    assert c["folderId"] is None and c["isPublished"] is False and before <= c["createdAt"] <= after
    assert c["previewUrl"].startswith(sandbox.base_url) and c["id"] in c["previewUrl"]
    d = await get(sandbox, c["id"])
    assert d["hasContent"] is False and d["questions"] == [] and d["createdAt"] == c["createdAt"]
    first = (await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limit": 1})).data["items"][0]
    assert first["id"] == c["id"]


async def test_create_name_rules(sandbox):
    ws = sandbox.pro.id
    for name, reason in (("", "OUT_OF_RANGE"), ("x" * 256, "OUT_OF_RANGE"), ("   ", "INVALID_VALUE")):
        r = await sandbox.rpc("forms.create", {"name": name, "workspaceId": ws})
        r.expect("VALIDATION_ERROR", 400, field="name", reason=reason)
    r = await sandbox.rpc("forms.create", {"workspaceId": ws})
    r.expect("VALIDATION_ERROR", 400, field="name", reason="REQUIRED")
    assert len(await list_all(sandbox)) == 7  # nothing was created by the refusals
    assert (await sandbox.rpc("forms.create", {"name": "x" * 255, "workspaceId": ws})).data["name"] == "x" * 255
    assert (await sandbox.rpc("forms.create", {"name": "Q", "workspaceId": ws})).data["name"] == "Q"


async def test_create_workspace_is_required_and_scoped(sandbox):
    r = await sandbox.rpc("forms.create", {"name": "Nope"})
    r.expect("VALIDATION_ERROR", 400, field="workspaceId", reason="REQUIRED")
    r = await sandbox.rpc("forms.create", {"name": "Nope", "workspaceId": sandbox.free.id})
    r.expect("FORBIDDEN", 403, field="workspaceId", reason="FOREIGN_WORKSPACE")
    r = await sandbox.rpc("forms.create", {"name": "Nope", "workspaceId": "ws_0000000000000000000000"})
    r.expect("NOT_FOUND", 404, field="workspaceId")
    assert len(await list_all(sandbox, ws="free")) == 7 and len(await list_all(sandbox)) == 7


async def test_create_in_a_folder(sandbox):
    folder = sandbox.pro.folder_id
    c = (await sandbox.rpc("forms.create", {"name": "Filed", "workspaceId": sandbox.pro.id, "folderId": folder})).data
    assert c["folderId"] == folder
    assert [f["id"] for f in await list_all(sandbox, folderId=folder)] == [c["id"]]
    r = await sandbox.rpc("forms.create", {"name": "Lost", "workspaceId": sandbox.pro.id,
                                           "folderId": "fld_0000000000000000000000"})
    r.expect("NOT_FOUND", 404, field="folderId")
    r = await sandbox.rpc("forms.create", {"name": "Lost", "workspaceId": sandbox.pro.id,
                                           "folderId": sandbox.free.folder_id})
    r.expect("FORBIDDEN", 403, field="folderId", reason="FOREIGN_WORKSPACE")
    assert "Lost" not in {f["name"] for f in await list_all(sandbox)}


# -- forms.update ----------------------------------------------------------------------


async def test_update_needs_one_of_five(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    r = await sandbox.rpc("forms.update", {"formId": form_id})
    err = r.expect("VALIDATION_ERROR", 400, reason="NOTHING_TO_UPDATE")
    assert sorted(err["details"]["validKeys"]) == ["cover", "emoji", "folderId", "logo", "name"]
    r = await sandbox.rpc("forms.update", {"formId": form_id, "title": "x"})
    r.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_PARAM", field="title")


async def test_update_name_rules(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    r = await sandbox.rpc("forms.update", {"formId": form_id, "name": "Contact us"})
    assert r.status == 200 and r.data["name"] == "Contact us" and set(r.data) == {"id", "name", "folderId", "emoji"}
    for name, reason in (("", "OUT_OF_RANGE"), ("y" * 256, "OUT_OF_RANGE"), (" \t", "INVALID_VALUE"),
                         (None, "INVALID_TYPE")):
        r = await sandbox.rpc("forms.update", {"formId": form_id, "name": name, "emoji": "✅"})
        r.expect("VALIDATION_ERROR", 400, field="name", reason=reason)
    d = await get(sandbox, form_id)
    assert d["name"] == "Contact us" and d["emoji"] is None  # the refused calls stored nothing


async def test_update_folder_and_root(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    r = await sandbox.rpc("forms.update", {"formId": form_id, "folderId": sandbox.pro.folder_id})
    assert r.data["folderId"] == sandbox.pro.folder_id
    r = await sandbox.rpc("forms.update", {"formId": form_id, "folderId": None})
    assert r.data["folderId"] is None and (await get(sandbox, form_id))["folderId"] is None
    r = await sandbox.rpc("forms.update", {"formId": form_id, "folderId": "fld_0000000000000000000000"})
    r.expect("NOT_FOUND", 404, field="folderId")
    r = await sandbox.rpc("forms.update", {"formId": form_id, "folderId": sandbox.free.folder_id})
    r.expect("FORBIDDEN", 403, field="folderId", reason="FOREIGN_WORKSPACE")
    assert (await get(sandbox, form_id))["folderId"] is None


async def test_update_emoji(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    assert (await sandbox.rpc("forms.update", {"formId": form_id, "emoji": "🚀"})).data["emoji"] == "🚀"
    assert (await sandbox.rpc("forms.update", {"formId": form_id, "emoji": "a" * 10})).data["emoji"] == "a" * 10
    r = await sandbox.rpc("forms.update", {"formId": form_id, "emoji": "b" * 11})
    r.expect("VALIDATION_ERROR", 400, field="emoji", reason="OUT_OF_RANGE")
    assert (await get(sandbox, form_id))["emoji"] == "a" * 10
    r = await sandbox.rpc("forms.update", {"formId": form_id, "emoji": None})
    assert r.data["emoji"] is None and (await get(sandbox, form_id))["emoji"] is None


async def test_update_cover_variants(sandbox):
    form_id = sandbox.pro.forms["Contact"]

    async def cover(value: dict[str, Any]) -> Any:
        return await sandbox.rpc("forms.update", {"formId": form_id, "cover": value})

    assert (await cover({"type": "color", "color": "#1f6feb"})).data["cover"] == {"type": "color", "color": "#1f6feb"}
    assert (await get(sandbox, form_id))["cover"] == {"type": "color", "color": "#1f6feb"}
    for bad in ("blue", "#12345", "1f6feb", "#gggggg"):
        (await cover({"type": "color", "color": bad})).expect("VALIDATION_ERROR", 400, field="cover.color",
                                                              reason="INVALID_VALUE")
    (await cover({"type": "color"})).expect("VALIDATION_ERROR", 400, field="cover.color", reason="REQUIRED")

    img = (await cover({"type": "image", "url": "https://img.example.test/a.png"})).data["cover"]
    assert img == {"type": "image", "url": "https://img.example.test/a.png", "offsetY": 50}
    assert (await get(sandbox, form_id))["cover"] == img
    for offset in (0, 100, 37.5):
        r = await cover({"type": "image", "url": "http://img.example.test/b.png", "offsetY": offset})
        assert r.data["cover"]["offsetY"] == offset
    data_uri = "data:image/png;base64,iVBORw0KGgo="
    assert (await cover({"type": "image", "url": data_uri})).data["cover"]["url"] == data_uri
    for offset in (-1, 101):
        (await cover({"type": "image", "url": data_uri, "offsetY": offset})).expect(
            "VALIDATION_ERROR", 400, field="cover.offsetY", reason="OUT_OF_RANGE")
    for url in ("ftp://img.example.test/a.png", "javascript:alert(1)", "data:text/html,hi"):
        (await cover({"type": "image", "url": url})).expect("VALIDATION_ERROR", 400, field="cover.url",
                                                            reason="INVALID_VALUE")
    assert (await get(sandbox, form_id))["cover"]["url"] == data_uri  # refusals kept the stored cover

    assert (await cover({"type": "none"})).data["cover"] == {"type": "none"}
    assert (await get(sandbox, form_id))["cover"] is None
    r = await sandbox.rpc("forms.update", {"formId": form_id, "cover": None})
    r.expect("VALIDATION_ERROR", 400, field="cover", reason="INVALID_TYPE", expectedType="object")


async def test_update_logo_variants(sandbox):
    form_id = sandbox.pro.forms["Contact"]

    async def logo(value: dict[str, Any]) -> Any:
        return await sandbox.rpc("forms.update", {"formId": form_id, "logo": value})

    for name in ICON_NAMES:
        assert (await logo({"type": "icon", "name": name})).data["logo"] == {"type": "icon", "name": name}
    assert len(ICON_NAMES) == 14
    err = (await logo({"type": "icon", "name": "SmileyIcon"})).expect(
        "VALIDATION_ERROR", 400, field="logo.name", reason="INVALID_VALUE")
    assert err["details"]["validValues"] == [
        "QuestionMarkIcon", "ListBulletsIcon", "ChartBarIcon", "ClockCountdownIcon", "HeartIcon", "LightbulbIcon",
        "CheckCircleIcon", "MagnifyingGlassIcon", "TrendUpIcon", "EnvelopeIcon", "PhoneIcon", "CalendarIcon",
        "LinkIcon", "UsersIcon"]
    assert (await get(sandbox, form_id))["logo"] == {"type": "icon", "name": "UsersIcon"}

    url = "https://img.example.test/logo.svg"
    assert (await logo({"type": "image", "url": url})).data["logo"] == {"type": "image", "url": url}
    assert (await get(sandbox, form_id))["logo"] == {"type": "image", "url": url}
    (await logo({"type": "image", "url": "logo.svg"})).expect("VALIDATION_ERROR", 400, field="logo.url",
                                                              reason="INVALID_VALUE")
    assert (await logo({"type": "none"})).data["logo"] == {"type": "none"}
    assert (await get(sandbox, form_id))["logo"] is None


async def test_update_unknown_key_and_wrong_type_in_decorations(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    cases = [
        ("cover", {"type": "color", "color": "#fff", "size": 3}, "cover.size", ["color", "type"]),
        ("cover", {"type": "image", "url": "https://a.test/x.png", "offsetX": 3}, "cover.offsetX",
         ["offsetY", "type", "url"]),
        ("cover", {"type": "none", "color": "#fff"}, "cover.color", ["type"]),
        ("logo", {"type": "icon", "name": "HeartIcon", "colour": "red"}, "logo.colour", ["name", "type"]),
        ("logo", {"type": "image", "url": "https://a.test/x.png", "name": "HeartIcon"}, "logo.name", ["type", "url"]),
    ]
    for key, value, field, valid in cases:
        r = await sandbox.rpc("forms.update", {"formId": form_id, key: value})
        err = r.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_PARAM", field=field)
        assert sorted(err["details"]["validKeys"]) == valid, field

    r = await sandbox.rpc("forms.update", {"formId": form_id, "cover": {"type": "gradient"}})
    r.expect("VALIDATION_ERROR", 400, field="cover.type", reason="INVALID_VALUE", validValues=["color", "image", "none"])
    r = await sandbox.rpc("forms.update", {"formId": form_id, "logo": {"type": "emoji", "name": "x"}})
    r.expect("VALIDATION_ERROR", 400, field="logo.type", reason="INVALID_VALUE", validValues=["icon", "image", "none"])
    r = await sandbox.rpc("forms.update", {"formId": form_id, "cover": {"color": "#fff"}})
    r.expect("VALIDATION_ERROR", 400, field="cover.type", validValues=["color", "image", "none"])
    d = await get(sandbox, form_id)
    assert d["cover"] is None and d["logo"] is None


async def test_update_returns_decorations_only_when_sent(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    both = (await sandbox.rpc("forms.update", {"formId": form_id, "cover": {"type": "color", "color": "#abc"},
                                               "logo": {"type": "icon", "name": "HeartIcon"}})).data
    assert both["cover"] == {"type": "color", "color": "#abc"} and both["logo"] == {"type": "icon", "name": "HeartIcon"}
    renamed = (await sandbox.rpc("forms.update", {"formId": form_id, "name": "Renamed"})).data
    assert set(renamed) == {"id", "name", "folderId", "emoji"}
    only_logo = (await sandbox.rpc("forms.update", {"formId": form_id, "logo": {"type": "none"}})).data
    assert "cover" not in only_logo and only_logo["logo"] == {"type": "none"}
    d = await get(sandbox, form_id)
    assert d["cover"] == {"type": "color", "color": "#abc"} and d["logo"] is None


async def test_update_no_change(sandbox):
    form_id = sandbox.pro.forms["Everything"]
    before = await get(sandbox, form_id)
    await sandbox.helper("clock.advance", {"ms": 60000})
    same = (await sandbox.rpc("forms.update", {"formId": form_id, "name": "Everything", "emoji": "🧪",
                                               "folderId": None})).data
    assert same["noChange"] is True
    assert (await get(sandbox, form_id))["lastEditedAt"] == before["lastEditedAt"]
    changed = (await sandbox.rpc("forms.update", {"formId": form_id, "name": "Everything", "emoji": "🔬"})).data
    assert "noChange" not in changed and changed["emoji"] == "🔬"
    assert (await get(sandbox, form_id))["lastEditedAt"] > before["lastEditedAt"]
    removed = (await sandbox.rpc("forms.update", {"formId": form_id, "cover": {"type": "none"}})).data
    assert removed["noChange"] is True and removed["cover"] == {"type": "none"}
    await sandbox.rpc("forms.update", {"formId": form_id, "cover": {"type": "color", "color": "#abc"}})
    again = (await sandbox.rpc("forms.update", {"formId": form_id, "cover": {"type": "color", "color": "#abc"}})).data
    assert again["noChange"] is True


async def test_update_does_not_touch_content(sandbox):
    form_id = sandbox.pro.forms["Everything"]
    before = await get(sandbox, form_id)
    keys_before = [f["key"] for f in (await fields(sandbox, form_id))["items"]]
    r = await sandbox.rpc("forms.update", {
        "formId": form_id, "name": "Everything (renamed)", "folderId": sandbox.pro.folder_id, "emoji": "📋",
        "cover": {"type": "color", "color": "#000000"}, "logo": {"type": "icon", "name": "LinkIcon"}})
    assert r.status == 200 and "noChange" not in r.data
    after = await get(sandbox, form_id)
    assert after["questions"] == before["questions"] and after["hasContent"] is True
    assert after["isPublished"] is True and after["publishedAt"] == before["publishedAt"]
    assert [f["key"] for f in (await fields(sandbox, form_id))["items"]] == keys_before


# -- forms.publish ---------------------------------------------------------------------


async def test_publish_first_time_freezes_field_keys(sandbox):
    form_id = sandbox.pro.forms["Draft survey"]
    assert await fields(sandbox, form_id) == {"published": False, "items": [], "hasMore": False}
    before = await now(sandbox)
    r = await sandbox.rpc("forms.publish", {"formId": form_id})
    first = r.data
    assert r.status == 200 and first["isPublished"] is True and first["snapshotId"].startswith("snap_")
    assert "alreadyPublished" not in first and "warning" not in first and first["publishedAt"] >= before
    d = await get(sandbox, form_id)
    assert d["isPublished"] is True and d["publishedAt"] == first["publishedAt"]
    published = await fields(sandbox, form_id)
    assert published["published"] is True
    keys = [f["key"] for f in published["items"]]
    assert len(keys) == 2 and len(set(keys)) == 2

    def rename(blocks: list[dict[str, Any]]) -> None:
        blocks[0]["title"] = "Which feature matters most to you?"
        blocks[1] = {k: v for k, v in blocks[1].items() if k != "key"}  # an editor that drops the key
        blocks.append({"type": "email", "title": "Your email"})
        # a copy of the first question, placed before it, carrying its key
        blocks.insert(0, {"type": "text", "title": "Copied question", "key": keys[0]})

    edit_draft(sandbox, form_id, rename)
    second = (await sandbox.rpc("forms.publish", {"formId": form_id})).data
    assert second["snapshotId"] != first["snapshotId"] and "alreadyPublished" not in second
    by_title = {f["title"]: f for f in (await fields(sandbox, form_id))["items"]}
    # existing questions keep their keys, whatever the edit did to titles and keys
    assert by_title["Which feature matters most to you?"]["key"] == keys[0]
    assert by_title["How do you rate us?"]["key"] == keys[1]
    assert len({f["key"] for f in by_title.values()}) == 4
    assert by_title["Copied question"]["key"] not in keys and by_title["Your email"]["key"] not in keys


async def test_publish_blocks_without_questions_warns(sandbox):
    form_id = sandbox.pro.forms["Announcement"]
    r = await sandbox.rpc("forms.publish", {"formId": form_id})
    assert r.status == 200 and r.data["isPublished"] is True and r.data["snapshotId"]
    assert "no questions" in r.data["warning"]
    assert (await get(sandbox, form_id))["isPublished"] is True
    assert await fields(sandbox, form_id) == {"published": True, "items": [], "hasMore": False}


async def test_publish_empty_form_fails_and_stays_unpublished(sandbox):
    form_id = sandbox.pro.forms["Empty"]
    r = await sandbox.rpc("forms.publish", {"formId": form_id})
    r.expect("VALIDATION_ERROR", 400, reason="FORM_EMPTY", field="formId")
    d = await get(sandbox, form_id)
    assert d["isPublished"] is False and d["publishedAt"] is None
    assert (await fields(sandbox, form_id))["published"] is False
    created = (await sandbox.rpc("forms.create", {"name": "Blank", "workspaceId": sandbox.pro.id})).data
    (await sandbox.rpc("forms.publish", {"formId": created["id"]})).expect("VALIDATION_ERROR", 400,
                                                                          reason="FORM_EMPTY")
    assert (await get(sandbox, created["id"]))["isPublished"] is False


async def test_publish_already_published_then_republish_from_last_snapshot(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    published_at = (await get(sandbox, form_id))["publishedAt"]
    again = (await sandbox.rpc("forms.publish", {"formId": form_id})).data
    assert again["alreadyPublished"] is True and again["isPublished"] is True
    assert again["publishedAt"] == published_at and again["snapshotId"].startswith("snap_")
    keys = [f["key"] for f in (await fields(sandbox, form_id))["items"]]

    await sandbox.rpc("forms.unpublish", {"formId": form_id})
    await sandbox.helper("clock.advance", {"ms": 60000})
    back = (await sandbox.rpc("forms.publish", {"formId": form_id})).data
    assert back["snapshotId"] == again["snapshotId"] and "alreadyPublished" not in back
    assert back["isPublished"] is True and back["publishedAt"] >= published_at + 60000
    assert (await get(sandbox, form_id))["isPublished"] is True
    assert [f["key"] for f in (await fields(sandbox, form_id))["items"]] == keys


async def test_publish_creates_no_public_url(sandbox):
    for name in ("Draft survey", "Announcement", "Contact"):
        form_id = sandbox.pro.forms[name]
        r = await sandbox.rpc("forms.publish", {"formId": form_id})
        assert r.status == 200 and "url" not in r.data
        assert share_links_of(sandbox, form_id) == []


# -- forms.unpublish -------------------------------------------------------------------


async def test_unpublish(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    before = await now(sandbox)
    r = await sandbox.rpc("forms.unpublish", {"formId": form_id})
    u = r.data
    assert r.status == 200 and u["isPublished"] is False and u["unpublishedAt"] >= before
    assert "alreadyUnpublished" not in u
    d = await get(sandbox, form_id)
    assert d["isPublished"] is False and d["unpublishedAt"] == u["unpublishedAt"]
    assert (await fields(sandbox, form_id))["published"] is False

    await sandbox.helper("clock.advance", {"ms": 60000})
    twice = (await sandbox.rpc("forms.unpublish", {"formId": form_id})).data
    assert twice["alreadyUnpublished"] is True and twice["unpublishedAt"] == u["unpublishedAt"]
    never = (await sandbox.rpc("forms.unpublish", {"formId": sandbox.pro.forms["Draft survey"]})).data
    assert never["alreadyUnpublished"] is True and never["isPublished"] is False and never["unpublishedAt"] is None


# -- forms.delete ----------------------------------------------------------------------


async def test_delete_trashes_revokes_links_and_keeps_trash_date(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    active = add_share_link(sandbox, form_id, sandbox.pro.id)
    old = add_share_link(sandbox, form_id, sandbox.pro.id, revoked_at=1)
    other = add_share_link(sandbox, sandbox.pro.forms["Everything"], sandbox.pro.id)

    r = await sandbox.rpc("forms.delete", {"formId": form_id})
    t = r.data
    assert r.status == 200 and t["isDeleted"] is True and t["revokedShareLinks"] == 1
    assert "alreadyTrashed" not in t
    link = share_link(sandbox, active)
    assert link.revoked is True and link.revoked_at == t["trashedAt"]
    assert share_link(sandbox, old).revoked_at == 1  # an earlier revocation keeps its date
    assert share_link(sandbox, other).revoked is False
    d = await get(sandbox, form_id)
    assert d["isDeleted"] is True and d["trashedAt"] == t["trashedAt"]

    await sandbox.helper("clock.advance", {"ms": 60000})
    again = (await sandbox.rpc("forms.delete", {"formId": form_id})).data
    assert again["alreadyTrashed"] is True and again["trashedAt"] == t["trashedAt"]
    assert (await get(sandbox, form_id))["trashedAt"] == t["trashedAt"]


async def test_trashed_form_refuses_edits(sandbox):
    form_id = sandbox.pro.forms["Draft survey"]
    await sandbox.rpc("forms.delete", {"formId": form_id})
    for method, extra in (("forms.update", {"name": "x"}), ("forms.publish", {}), ("forms.unpublish", {})):
        r = await sandbox.rpc(method, {"formId": form_id, **extra})
        r.expect("NOT_FOUND", 404, field="formId", reason="FORM_TRASHED")
    d = await get(sandbox, form_id)
    assert d["name"] == "Draft survey" and d["isPublished"] is False and d["isDeleted"] is True


# -- forms.restore ---------------------------------------------------------------------


async def test_restore_into_original_folder_links_stay_revoked(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    folder = sandbox.pro.folder_id
    await sandbox.rpc("forms.update", {"formId": form_id, "folderId": folder})
    link = add_share_link(sandbox, form_id, sandbox.pro.id)
    await sandbox.rpc("forms.delete", {"formId": form_id})
    assert share_link(sandbox, link).revoked is True

    r = await sandbox.rpc("forms.restore", {"formId": form_id})
    back = r.data
    assert r.status == 200 and back["id"] == form_id and back["folderId"] == folder
    assert set(back) == FORM_ITEM_KEYS and "alreadyRestored" not in back
    d = await get(sandbox, form_id)
    assert d["isDeleted"] is False and d["trashedAt"] is None and d["folderId"] == folder
    assert form_id in {f["id"] for f in await list_all(sandbox, folderId=folder)}
    assert share_link(sandbox, link).revoked is True


async def test_restore_to_root_or_named_folder(sandbox):
    contact, survey = sandbox.pro.forms["Contact"], sandbox.pro.forms["Draft survey"]
    folder = sandbox.pro.folder_id
    await sandbox.rpc("forms.update", {"formId": contact, "folderId": folder})
    await sandbox.rpc("forms.delete", {"formId": contact})
    await sandbox.rpc("forms.delete", {"formId": survey})

    assert (await sandbox.rpc("forms.restore", {"formId": contact, "folderId": None})).data["folderId"] is None
    assert (await get(sandbox, contact))["folderId"] is None

    for bad, code, status in (("fld_0000000000000000000000", "NOT_FOUND", 404),
                              (sandbox.free.folder_id, "FORBIDDEN", 403)):
        r = await sandbox.rpc("forms.restore", {"formId": survey, "folderId": bad})
        r.expect(code, status, field="folderId")
        assert (await get(sandbox, survey))["isDeleted"] is True  # still in the trash
    named = (await sandbox.rpc("forms.restore", {"formId": survey, "folderId": folder})).data
    assert named["folderId"] == folder and (await get(sandbox, survey))["isDeleted"] is False


async def test_restore_when_original_folder_is_gone_goes_to_root(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    await sandbox.rpc("forms.update", {"formId": form_id, "folderId": sandbox.pro.folder_id})
    await sandbox.rpc("forms.delete", {"formId": form_id})
    with sandbox.service.session() as s:
        s.delete(s.get(tables.Folder, sandbox.pro.folder_id))
        s.commit()
    assert (await sandbox.rpc("forms.restore", {"formId": form_id})).data["folderId"] is None


async def test_restore_not_trashed(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    r = await sandbox.rpc("forms.restore", {"formId": form_id, "folderId": sandbox.pro.folder_id})
    assert r.status == 200 and r.data["alreadyRestored"] is True and r.data["folderId"] is None
    assert (await get(sandbox, form_id))["folderId"] is None


# -- scoping of every form method -----------------------------------------------------

FORM_CALLS = [
    ("forms.get", {}),
    ("forms.update", {"name": "Taken over"}),
    ("forms.publish", {}),
    ("forms.unpublish", {}),
    ("forms.delete", {}),
    ("forms.restore", {}),
]


async def test_every_form_method_forbids_foreign_forms(sandbox):
    foreign = sandbox.free.forms["Contact"]
    before = await get(sandbox, foreign, ws="free")
    for method, extra in FORM_CALLS:
        r = await sandbox.rpc(method, {"formId": foreign, **extra})
        r.expect("FORBIDDEN", 403, field="formId", reason="FOREIGN_WORKSPACE")
    assert await get(sandbox, foreign, ws="free") == before

    trashed = sandbox.free.forms["Draft survey"]
    await sandbox.rpc("forms.delete", {"formId": trashed}, ws="free")
    for method, extra in FORM_CALLS:  # a trashed foreign form is just as out of reach
        r = await sandbox.rpc(method, {"formId": trashed, **extra})
        r.expect("FORBIDDEN", 403, field="formId", reason="FOREIGN_WORKSPACE")
    assert (await get(sandbox, trashed, ws="free"))["isDeleted"] is True


async def test_every_form_method_404s_unknown_forms(sandbox):
    for method, extra in FORM_CALLS:
        r = await sandbox.rpc(method, {"formId": MISSING_FORM, **extra})
        r.expect("NOT_FOUND", 404, field="formId")
