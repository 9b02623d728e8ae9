"""Spec "Fields" (fields.list) and the "Field descriptor" table: one descriptor per
question of the published version, keys frozen at publish, content blocks never listed."""

from __future__ import annotations

import re
from typing import Any

from formservice.domain.forms import edit_blocks
from formservice.tables import Form

KEY = re.compile(r"^[A-Za-z0-9_.-]+$")
NOT_PREFILLABLE = {"file", "signature", "payment", "schedule-appointment", "documents", "hidden", "calculated"}
CHOICE_TYPES = {"select", "radio", "checkbox", "ranking", "picture-choice", "decision"}


async def fields(sandbox, form: str, ws: str = "pro") -> dict[str, Any]:
    r = await sandbox.rpc("fields.list", {"formId": sandbox.workspaces[ws].forms[form]}, ws=ws)
    assert r.status == 200
    return r.data


def by_key(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f["key"]: f for f in items}


def edit_draft(sandbox, form_id: str, change) -> None:
    """Edit a form's draft as the editor does (forms.edit_blocks), outside the API."""
    with sandbox.service.session() as s:
        form = s.get(Form, form_id)
        blocks = [dict(b) for b in form.blocks or []]
        change(blocks)
        edit_blocks(form, blocks, sandbox.service.now())
        s.add(form)
        s.commit()


def title_key(title: str) -> str:
    """The key the spec's rules imply for a title: lower case, runs of other characters as ``_``."""
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")


def assert_option_list(items: Any) -> None:
    assert isinstance(items, list) and items
    for o in items:
        assert set(o) == {"key", "label"}, o
        assert KEY.match(o["key"]) and isinstance(o["label"], str) and o["label"]


# -- descriptors --------------------------------------------------------------------------


async def test_wrapper_and_one_descriptor_per_question(sandbox):
    data = await fields(sandbox, "Everything")
    assert set(data) == {"published", "items", "hasMore"}
    assert data["published"] is True and data["hasMore"] is False
    detail = (await sandbox.rpc("forms.get", {"formId": sandbox.pro.forms["Everything"]})).data
    assert len(data["items"]) == len(detail["questions"])
    assert [f["title"] for f in data["items"]] == [q["title"] for q in detail["questions"]]
    keys = [f["key"] for f in data["items"]]
    assert len(set(keys)) == len(keys), "keys are unique in a form"
    types = {f["type"] for f in data["items"]}
    # the types the descriptor table names, all on the seed's Everything form
    assert {"text", "email", "select", "radio", "matrix", "hidden", "number", "file", "group",
            "documents"} <= types


async def test_every_descriptor_has_the_common_fields(sandbox):
    for f in (await fields(sandbox, "Everything"))["items"]:
        assert KEY.match(f["key"]), f
        assert isinstance(f["type"], str) and isinstance(f["title"], str) and f["title"]
        assert isinstance(f["required"], bool)
        assert f["prefillable"] is (f["type"] not in NOT_PREFILLABLE), f
    items = by_key((await fields(sandbox, "Everything"))["items"])
    assert items["full_name"]["required"] is True and items["plan"]["required"] is True
    assert items["bio"]["required"] is False


async def test_choice_questions_list_options(sandbox):
    items = (await fields(sandbox, "Everything"))["items"]
    choices = [f for f in items if f["type"] in CHOICE_TYPES]
    assert {f["type"] for f in choices} == {"select", "radio", "checkbox", "ranking", "picture-choice"}
    for f in choices:
        assert_option_list(f["options"])
    assert by_key(items)["country"]["options"][0] == {"key": "de", "label": "Germany"}
    for f in items:
        if f["type"] not in CHOICE_TYPES:
            assert "options" not in f, f
    decision = by_key((await fields(sandbox, "Approval"))["items"])["decision"]
    assert [o["key"] for o in decision["options"]] == ["approve", "changes", "decline"]


async def test_matrix_lists_rows_and_columns(sandbox):
    matrix = [f for f in (await fields(sandbox, "Everything"))["items"] if f["type"] == "matrix"]
    assert len(matrix) == 1
    assert_option_list(matrix[0]["rows"])
    assert_option_list(matrix[0]["columns"])
    assert [r["key"] for r in matrix[0]["rows"]] == ["speed", "friendliness"]


async def test_hidden_and_calculated_flags(sandbox):
    items = (await fields(sandbox, "Everything"))["items"]
    for f in items:
        assert f.get("context") is (True if f["type"] == "hidden" else None), f
        assert f.get("calculated") is (True if f["type"] == "calculated" else None), f
    hidden = [f for f in items if f.get("context")]
    calculated = [f for f in items if f.get("calculated")]
    assert [f["key"] for f in hidden] == ["crm_id"] and hidden[0]["prefillable"] is False
    assert [f["key"] for f in calculated] == ["total"] and calculated[0]["prefillable"] is False


async def test_repeating_group_lists_its_members(sandbox):
    groups = [f for f in (await fields(sandbox, "Everything"))["items"] if f["type"] == "group"]
    assert len(groups) == 1
    group = groups[0]
    assert group["repeating"] is True
    members = by_key(group["members"])
    assert list(members) == ["item", "amount"]
    for m in group["members"]:
        assert KEY.match(m["key"]) and m["prefillable"] is True
        assert isinstance(m["required"], bool)
    assert members["item"]["required"] is True and members["amount"]["type"] == "number"


async def test_documents_blocks_name_their_files(sandbox):
    docs = [f for f in (await fields(sandbox, "Everything"))["items"] if f["type"] == "documents"]
    assert [d["documents"] for d in docs] == [[{"name": "Terms.pdf"}]]
    assert docs[0]["prefillable"] is False
    two = by_key((await fields(sandbox, "Two documents"))["items"])
    assert two["nda"]["documents"] == [{"name": "NDA.pdf"}]
    assert two["annex"]["documents"] == []
    for f in (await fields(sandbox, "Everything"))["items"]:
        if f["type"] != "documents":
            assert "documents" not in f


# -- publish state --------------------------------------------------------------------------


async def test_never_published_form_has_no_items(sandbox):
    for name in ("Draft survey", "Announcement", "Empty"):
        data = await fields(sandbox, name)
        assert data == {"published": False, "items": [], "hasMore": False}, name


async def test_content_blocks_never_appear(sandbox):
    form_id = sandbox.pro.forms["Announcement"]
    r = await sandbox.rpc("forms.publish", {"formId": form_id})
    assert r.status == 200
    data = await fields(sandbox, "Announcement")
    assert data["published"] is True and data["items"] == []
    for f in (await fields(sandbox, "Everything"))["items"] + (await fields(sandbox, "Approval"))["items"]:
        assert f["type"] not in ("heading", "paragraph"), f


async def test_keys_are_frozen_at_publish(sandbox):
    form_id = sandbox.pro.forms["Draft survey"]
    assert (await sandbox.rpc("forms.publish", {"formId": form_id})).status == 200
    first = (await fields(sandbox, "Draft survey"))["items"]
    assert [f["key"] for f in first] == [title_key(f["title"]) for f in first]
    assert first[0]["key"] == "what_should_we_build_next"

    def change(blocks: list[dict[str, Any]]) -> None:
        blocks[0]["title"] = "Which feature matters most?"
        blocks.append({"type": "textarea", "title": "Anything else?"})
        blocks.append({"type": "text", "title": "What should we build next?"})

    edit_draft(sandbox, form_id, change)
    before = await fields(sandbox, "Draft survey")
    assert before["items"] == first, "a draft edit changes nothing until it is published"

    r = await sandbox.rpc("forms.publish", {"formId": form_id})
    assert r.status == 200 and r.data.get("alreadyPublished") is not True
    after = (await fields(sandbox, "Draft survey"))["items"]
    assert [f["key"] for f in after[:2]] == [f["key"] for f in first], "published keys never change"
    assert after[0]["title"] == "Which feature matters most?"
    assert after[2]["key"] == title_key("Anything else?") == "anything_else"
    # the original title's key is taken: the new question gets its own
    assert after[3]["key"] == "what_should_we_build_next_2"


async def test_explicit_keys_survive_an_edit_that_drops_them(sandbox):
    form_id = sandbox.pro.forms["Everything"]
    old = by_key((await fields(sandbox, "Everything"))["items"])

    def change(blocks: list[dict[str, Any]]) -> None:
        name = next(b for b in blocks if b.get("key") == "full_name")
        name["title"] = "Legal name"
        name.pop("key")
        blocks.insert(1, {"type": "email", "title": "Work email"})

    edit_draft(sandbox, form_id, change)
    assert by_key((await fields(sandbox, "Everything"))["items"]) == old
    assert (await sandbox.rpc("forms.publish", {"formId": form_id})).status == 200
    new = by_key((await fields(sandbox, "Everything"))["items"])
    assert set(old) < set(new) and set(new) - set(old) == {"work_email"}
    assert new["full_name"]["title"] == "Legal name"


async def test_unpublished_form_keeps_reporting_its_last_version(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    published = await fields(sandbox, "Contact")
    assert (await sandbox.rpc("forms.unpublish", {"formId": form_id})).status == 200
    data = await fields(sandbox, "Contact")
    assert data["published"] is False
    assert data["items"] == published["items"]


# -- scoping and params ------------------------------------------------------------------------


async def test_foreign_form_is_forbidden(sandbox):
    r = await sandbox.rpc("fields.list", {"formId": sandbox.free.forms["Everything"]}, ws="pro")
    r.expect("FORBIDDEN", 403, field="formId")


async def test_unknown_and_trashed_forms_are_not_found(sandbox):
    r = await sandbox.rpc("fields.list", {"formId": "form_0000000000000000000000"})
    r.expect("NOT_FOUND", 404, field="formId")
    form_id = sandbox.pro.forms["Contact"]
    assert (await sandbox.rpc("forms.delete", {"formId": form_id})).status == 200
    r = await sandbox.rpc("fields.list", {"formId": form_id})
    r.expect("NOT_FOUND", 404, field="formId")


async def test_bad_params(sandbox):
    (await sandbox.rpc("fields.list", {})).expect("VALIDATION_ERROR", 400, field="formId", reason="REQUIRED")
    r = await sandbox.rpc("fields.list", {"formId": sandbox.pro.forms["Contact"], "limit": 5})
    r.expect("VALIDATION_ERROR", 400, field="limit", reason="UNKNOWN_PARAM", validKeys=["formId"])
    r = await sandbox.rpc("fields.list", {"formId": 5})
    r.expect("VALIDATION_ERROR", 400, field="formId", reason="INVALID_TYPE", expectedType="string")
