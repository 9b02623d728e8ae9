"""The pure parts of seeding from a workspace and of the diff, on fixed inputs: the shape
comparison, the seed built from read results, and the masking of emails."""

from __future__ import annotations

import yaml

from formservice.sandbox.seed import load_seed
from pipelines.connect.seed_from import (
    FormRead,
    WorkspaceRead,
    build_seed,
    mask_answers,
    mask_email,
    planned_calls,
)
from pipelines.connect.shape_diff import differences, json_type

FIELDS = {"published": True, "hasMore": False, "items": [
    {"key": "email", "type": "email", "title": "Email", "required": True, "prefillable": True},
    {"key": "size", "type": "radio", "title": "Size", "required": False, "prefillable": True,
     "options": [{"key": "s", "label": "S"}]},
    {"key": "total", "type": "calculated", "title": "Total", "required": False, "calculated": True},
    {"key": "sites", "type": "group", "title": "Sites", "repeating": True, "required": False,
     "members": [{"key": "city", "type": "text", "title": "City", "required": False}]},
]}


def test_json_types_and_null_are_told_apart() -> None:
    assert [json_type(v) for v in (None, True, 1, 1.5, "x", [], {})] == [
        "null", "boolean", "number", "number", "string", "array", "object"]


def test_same_shape_other_values_ids_times_urls_and_lengths_are_no_difference() -> None:
    up = {"id": "form_a", "name": "A", "createdAt": 1, "previewUrl": "https://a", "publishedAt": 5,
          "items": [{"key": "a"}, {"key": "b"}]}
    sb = {"id": "form_b", "name": "B", "createdAt": 2, "previewUrl": "http://b", "publishedAt": None,
          "items": [{"key": "z"}]}
    assert differences(up, sb) == []


def test_keys_types_nulls_and_error_codes_are_named_by_path() -> None:
    up = {"items": [{"key": "a", "options": []}], "emoji": "x", "n": 1}
    sb = {"items": [{"key": "a", "extra": 1}], "emoji": None, "n": "1"}
    assert differences(up, sb) == ["emoji: string upstream, null in the sandbox", "items[0].extra: only in the sandbox",
                                   "items[0].options: only upstream", "n: number upstream, string in the sandbox"]
    refused = {"error": {"code": "NOT_FOUND", "reason": None}}
    assert differences(refused, {"error": {"code": "FORBIDDEN", "reason": None}}) == [
        "error.code: 'NOT_FOUND' upstream, 'FORBIDDEN' in the sandbox"]
    assert differences(refused, {"items": []}) != []


def test_masking_is_consistent_and_hides_the_address() -> None:
    assert mask_email("Ada@Example.com") == mask_email(" ada@example.com")
    assert mask_email("ada@example.com") != mask_email("alan@example.com")
    assert "ada" not in mask_email("ada@example.com") and mask_email("ada@example.com").endswith("@example.test")
    assert mask_answers({"email": "ada@example.com", "size": "s"}, {"email"}) == {
        "email": mask_email("ada@example.com"), "size": "s"}


def test_the_seed_keeps_ids_folders_fields_settings_and_masks_submissions(tmp_path) -> None:
    read = FormRead(item={"id": "form_keep", "name": "Every type", "folderId": "fld_1", "emoji": None},
                    detail={"cover": {"type": "color", "color": "#fff"}, "logo": None, "questions": []},
                    fields=FIELDS, settings={"isDefault": False, "settings": {"language": "de"}},
                    submissions=[{"answers": {"email": "ada@example.com", "size": "s"}, "isCompleted": True}])
    draft = FormRead(item={"id": "form_draft", "name": "Draft", "folderId": None},
                     detail={"questions": [{"inputType": "rating", "title": "Rate", "metadata": {"maxStars": 3}}]},
                     fields={"published": False, "items": []}, settings={"isDefault": True, "settings": {}})
    seed = build_seed(WorkspaceRead(name="Real", folders=[{"id": "fld_1", "name": "Clients"}], forms=[draft, read]))
    ws = seed["workspaces"][0]
    assert ws["name"] == "Real" and ws["folders"] == ["Clients"]
    every, drafted = ws["forms"]
    assert every["id"] == "form_keep" and every["folder"] == "Clients" and every["published"] is True
    assert every["cover"] == {"type": "color", "color": "#fff"} and "logo" not in every
    assert every["settings"] == {"language": "de"}
    assert [b["key"] for b in every["blocks"]] == ["email", "size", "total", "sites"]
    assert every["blocks"][1]["options"] == [{"key": "s", "label": "S"}]
    assert every["blocks"][3]["members"] == [{"key": "city", "type": "text", "title": "City", "required": False}]
    assert every["submissions"] == [{"answers": {"email": mask_email("ada@example.com"), "size": "s"},
                                     "completed": True}]
    assert drafted == {"id": "form_draft", "name": "Draft", "published": False,
                       "blocks": [{"type": "rating", "title": "Rate", "maxStars": 3}]}
    path = tmp_path / "seed.yaml"
    path.write_text(yaml.safe_dump(seed), encoding="utf-8")
    assert load_seed(path) == seed, "a seed file the sandbox reads"
    assert planned_calls(2) == 3 + 3 * 2
