"""The per-type insert tools of the agent endpoint, over real HTTP through the official
``mcp`` client SDK: a form built with them alone is published, a request is sent and its
answers read back; each tool's schema names exactly what its element takes, and a call
missing what the element needs is refused like any other tool call, storing nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from formservice.agent import reference
from formservice.domain.editor_inserts import BY_TOOL, spec_for
from formservice.service import import_domain

from ..pages.support import fetch
from .test_mcp_endpoint import README_TOOLS, agent, stored

OPTIONS = [{"label": "Small", "key": "s"}, {"label": "Large", "key": "l"}]

# One call per tool: its arguments (beside formId), the element type it makes, its key.
BUILD: list[tuple[str, dict[str, Any], str, str | None]] = [
    ("editor_insertHeader", {"text": "Supplier onboarding"}, "heading", None),
    ("editor_insertParagraph", {"text": "A few questions about your company."}, "paragraph", None),
    ("editor_insertTextQuestion", {"title": "Company", "key": "company", "required": True}, "text", "company"),
    ("editor_insertTextQuestion", {"title": "Notes", "key": "notes", "multiline": True}, "textarea", "notes"),
    ("editor_insertContactQuestion", {"title": "Email", "key": "email"}, "email", "email"),
    ("editor_insertContactQuestion", {"title": "Phone", "key": "phone", "contactType": "phone"}, "phone", "phone"),
    ("editor_insertNumberQuestion", {"title": "Employees", "key": "employees"}, "number", "employees"),
    ("editor_insertDateQuestion", {"title": "Founded", "key": "founded"}, "date", "founded"),
    ("editor_insertTimeQuestion", {"title": "Opens at", "key": "opens"}, "time", "opens"),
    ("editor_insertRadioQuestion", {"title": "Size", "key": "size", "options": OPTIONS}, "radio", "size"),
    ("editor_insertCheckboxQuestion", {"title": "Markets", "key": "markets", "options": [
        {"label": "EU"}, {"label": "US"}]}, "checkbox", "markets"),
    ("editor_insertSelectQuestion", {"title": "Tier", "key": "tier", "options": OPTIONS}, "select", "tier"),
    ("editor_insertPictureChoiceQuestion", {"title": "Logo style", "key": "style", "options": OPTIONS},
     "picture-choice", "style"),
    ("editor_insertSwitchQuestion", {"title": "Certified", "key": "certified"}, "switch", "certified"),
    ("editor_insertRatingQuestion", {"title": "Rating", "key": "rating", "maxStars": 4}, "rating", "rating"),
    ("editor_insertLinearScaleQuestion", {"title": "Fit", "key": "fit", "min": 1, "max": 5}, "scale", "fit"),
    ("editor_insertRankingQuestion", {"title": "Priorities", "key": "priorities", "options": OPTIONS}, "ranking",
     "priorities"),
    ("editor_insertMatrixQuestion", {"title": "Service", "key": "service", "rows": [{"label": "Speed", "key": "speed"}],
                                     "columns": [{"label": "Good", "key": "good"}, {"label": "Bad", "key": "bad"}]},
     "matrix", "service"),
    ("editor_insertFileQuestion", {"title": "Certificate", "key": "certificate"}, "file", "certificate"),
    ("editor_insertSignatureQuestion", {"title": "Signature", "key": "signature"}, "signature", "signature"),
    ("editor_insertPaymentQuestion", {"title": "Deposit", "key": "deposit"}, "payment", "deposit"),
    ("editor_insertScheduleAppointmentQuestion", {"title": "Kick-off", "key": "kickoff"}, "schedule-appointment",
     "kickoff"),
    ("editor_insertHiddenField", {"title": "Account", "key": "account"}, "hidden", "account"),
    ("editor_insertCalculatedField", {"title": "Seats", "key": "seats", "formula": "employees * 2"}, "calculated",
     "seats"),
    ("editor_insertVariable", {"key": "score", "value": "employees + 1"}, "calculated", "score"),
    ("editor_insertRepeatingGroup", {"title": "Sites", "key": "sites", "members": [
        {"type": "text", "title": "City", "key": "city"}]}, "group", "sites"),
    ("editor_insertImage", {"url": "https://example.com/logo.png", "alt": "Logo"}, "image", None),
    ("editor_insertList", {"items": ["Fast", "Fair"], "ordered": True}, "list", None),
    ("editor_insertTable", {"cells": [["Plan", "Price"], ["Basic", "10"]]}, "table", None),
    ("editor_insertRow", {"items": ["Left", "Right"]}, "row", None),
    ("editor_insertPageDivider", {}, "divider", None),
    ("editor_insertDecisionQuestion", {}, "decision", "decision"),
]


async def test_a_form_built_with_the_per_type_tools_publishes_takes_a_request_and_answers(sandbox):
    await sandbox.helpers.limits_set(calls_per_minute=1000)
    async with agent(sandbox) as a:
        form = (await a.ok("form_create", {"workspaceId": sandbox.pro.id, "name": "Built by type"}))["id"]
        for tool, args, element, key in BUILD:
            made = (await a.ok(tool, {"formId": form, **args}))["element"]
            assert made["type"] == element and made.get("key") == key, (tool, made)
        assert {t for t, *_ in BUILD} == set(BY_TOOL) | {"editor_insertDecisionQuestion"}, "every insert tool"

        doc = await a.ok("editor_getDocument", {"formId": form})
        assert [e["type"] for e in doc["elements"]] == [b[2] for b in BUILD], "in the order inserted"
        table = next(e for e in doc["elements"] if e["type"] == "table")
        assert table["cells"] == [["Plan", "Price"], ["Basic", "10"]]
        group = next(e for e in doc["elements"] if e["type"] == "group")
        assert group["repeating"] is True and [m["key"] for m in group["members"]] == ["city"]

        await a.ok("form_publish", {"formId": form})
        fields = {f["key"]: f for f in (await a.ok("fields_list", {"formId": form}))["items"]}
        assert {k for *_, k in BUILD if k} == set(fields)
        assert fields["notes"]["type"] == "textarea" and fields["phone"]["type"] == "phone"
        assert [o["key"] for o in fields["size"]["options"]] == ["s", "l"]
        assert fields["account"]["context"] is True and fields["seats"]["calculated"] is True

        made = await a.ok("request_create", {"formId": form, "prefill": {"company": "Analytical Engines"},
                                             "readonly": ["company"], "context": {"account": "A-7"},
                                             "externalId": "supplier-2041", "test": True})
        page = await fetch(sandbox.http, made["url"])
        assert page.status == 200
        assert "<ol class=\"content-list\"><li>Fast</li>" in page.text and "<th scope=\"col\">Plan</th>" in page.text
        assert "<td>Basic</td>" in page.text and "Analytical Engines" in page.text

        await sandbox.helpers.requests_complete(made["id"], {
            "size": "l", "markets": ["eu"], "employees": 12, "founded": "1843-07-10", "decision": "approve",
            "service": {"speed": "good"}, "sites": [{"city": "London"}], "certified": True})
        got = await a.ok("request_get", {"requestId": made["id"]})
        assert got["status"] == "completed" and got["outcome"] == "approve"
        answers = got["answers"]
        assert answers["company"] == "Analytical Engines" and answers["account"] == "A-7"
        assert answers["size"] == "l" and answers["employees"] == 12 and answers["seats"] == 24
        assert answers["score"] == 13 and answers["sites"] == [{"city": "London"}]
        assert got["display"]["size"] == "Large"


async def test_each_insert_tool_takes_exactly_what_its_element_takes(sandbox):
    form = sandbox.pro.forms["Contact"]
    async with agent(sandbox) as a:
        schemas = {t.name: t.inputSchema for t in (await a.session.list_tools()).tools}
        placement = {"formId", "index", "afterElementId"}
        assert set(schemas["editor_insertRadioQuestion"]["required"]) == {"formId", "title", "options"}
        assert set(schemas["editor_insertMatrixQuestion"]["required"]) == {"formId", "title", "rows", "columns"}
        assert set(schemas["editor_insertTable"]["properties"]) - placement == {"cells"}
        assert set(schemas["editor_insertPageDivider"]["properties"]) == placement
        assert "maxStars" not in schemas["editor_insertTextQuestion"]["properties"]
        assert schemas["editor_insertContactQuestion"]["properties"]["contactType"]["enum"] == ["email", "phone", "url"]

        before = stored(sandbox)
        await a.refused("editor_insertRadioQuestion", {"formId": form, "title": "Size"}, "VALIDATION_ERROR",
                        field="options")
        await a.refused("editor_insertTextQuestion", {"formId": form, "title": "T", "maxStars": 3},
                        "VALIDATION_ERROR", reason="UNKNOWN_PARAM", field="maxStars")
        await a.refused("editor_insertLinearScaleQuestion", {"formId": form, "title": "S", "min": 5, "max": 1},
                        "VALIDATION_ERROR", reason="OUT_OF_RANGE", field="min")
        await a.refused("editor_insertList", {"formId": form, "items": []}, "VALIDATION_ERROR", field="items")
        await a.refused("editor_insertCalculatedField", {"formId": form, "title": "C", "formula": "import os"},
                        "VALIDATION_ERROR", reason="INVALID_FORMULA")
        await a.refused("editor_insertRepeatingGroup", {"formId": form, "title": "G", "members": [
            {"type": "group", "title": "Inner"}]}, "VALIDATION_ERROR", field="members.0.type")
        assert stored(sandbox) == before, "a refused insert stores nothing"

        # the older, general tools still work
        old = await a.ok("editor_insertQuestion", {"formId": form, "type": "rating", "title": "Old way"})
        assert old["element"]["type"] == "rating"
        old = await a.ok("editor_insertContent", {"formId": form, "type": "list", "items": ["a"]})
        assert old["element"] == {**old["element"], "type": "list", "items": ["a"]}


def test_spec_for_maps_a_tools_params_onto_the_one_insert():
    ins = BY_TOOL["editor_insertVariable"]
    p = ins.params.model_validate({"formId": "form_x", "key": "score", "value": "a + 1", "index": 2})
    assert spec_for(ins, p) == {"type": "calculated", "formId": "form_x", "index": 2, "key": "score",
                                "title": "score", "formula": "a + 1"}
    ins = BY_TOOL["editor_insertTextQuestion"]
    p = ins.params.model_validate({"formId": "form_x", "title": "Notes", "multiline": True})
    assert spec_for(ins, p) == {"type": "textarea", "formId": "form_x", "title": "Notes"}
    ins = BY_TOOL["editor_insertHeader"]
    assert spec_for(ins, ins.params.model_validate({"formId": "f", "text": "Hi"})) == {
        "type": "heading", "formId": "f", "title": "Hi"}
    ins = BY_TOOL["editor_insertRatingQuestion"]
    assert spec_for(ins, ins.params.model_validate({"formId": "f", "title": "R"})) == {
        "type": "rating", "formId": "f", "title": "R", "maxStars": 5}


def test_the_docs_list_what_the_endpoint_offers_as_the_code_makes_it():
    import_domain()
    path = Path(__file__).parents[2] / "docs" / "agent-endpoint.md"
    text = path.read_text(encoding="utf-8")
    assert reference.rewrite(text) == text, (
        "docs/agent-endpoint.md is stale: run python -m formservice.agent.reference docs/agent-endpoint.md")
    assert all(f"`{name}`" in text for name in README_TOOLS)


async def test_update_element_moves_a_block_and_keeps_jumps_forward(sandbox):
    async with agent(sandbox) as a:
        form = (await a.ok("form_create", {"workspaceId": sandbox.pro.id, "name": "Moves"}))["id"]
        ids = []
        for tool, args in [("editor_insertRadioQuestion", {"title": "Q1", "key": "q1", "options": OPTIONS}),
                           ("editor_insertTextQuestion", {"title": "Q2", "key": "q2"}),
                           ("editor_insertTextQuestion", {"title": "Q3", "key": "q3"})]:
            ids.append((await a.ok(tool, {"formId": form, **args}))["element"]["id"])
        moved = await a.ok("editor_updateElement", {"formId": form, "elementId": ids[2], "index": 0})
        assert moved["index"] == 0
        order = [e["key"] for e in (await a.ok("editor_getDocument", {"formId": form}))["elements"]]
        assert order == ["q3", "q1", "q2"]
        moved = await a.ok("editor_updateElement", {"formId": form, "elementId": ids[2], "afterElementId": ids[1],
                                                    "title": "Q3 again"})
        assert moved["index"] == 2 and moved["element"]["title"] == "Q3 again"

        await a.ok("editor_insertLogic", {"formId": form, "when": {"field": "q1", "op": "equals", "value": "s"},
                                          "then": {"action": "jump", "target": "q3"}})
        before = await a.ok("editor_getDocument", {"formId": form})
        await a.refused("editor_updateElement", {"formId": form, "elementId": ids[2], "index": 0},
                        "VALIDATION_ERROR", reason="INVALID_JUMP")
        assert await a.ok("editor_getDocument", {"formId": form}) == before, "a refused move changes nothing"
