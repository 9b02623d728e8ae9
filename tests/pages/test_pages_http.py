"""The recipient pages over plain HTTP on loopback: request links (/r/), share links
(/f/) and previews. Status codes, labels, readonly controls, context never shown,
errors next to their fields, drafts, and closed links that store nothing."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import aiohttp
import pytest

from formservice.clock import DAY_MS, HOUR_MS

from .support import (
    CONTEXT_SECRET,
    EXPECTED_ANSWERS,
    EXPECTED_DISPLAY,
    PNG,
    add_document,
    create_request,
    everything_fields,
    fetch,
    record,
    send,
)

FILES = [("attachment", "notes.pdf", "application/pdf", b"%PDF-1.4 notes"),
         ("signature", "sig.png", "image/png", PNG)]


def types(rec: dict) -> list[str]:
    return [e["type"] for e in rec["timeline"]]


def without(fields: list[tuple[str, str]], *names: str) -> list[tuple[str, str]]:
    return [(n, v) for n, v in fields if n not in names]


def replace(fields: list[tuple[str, str]], name: str, value: str) -> list[tuple[str, str]]:
    return [(n, value if n == name else v) for n, v in fields]


@pytest.fixture
async def browser_like() -> AsyncIterator[aiohttp.ClientSession]:
    """A client that keeps cookies set by 127.0.0.1, as a browser does."""
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        yield http


# -- the request page -----------------------------------------------------------------


async def test_every_control_has_a_label_and_choices_sit_in_fieldsets(sandbox):
    req = await create_request(sandbox)
    page = await fetch(sandbox.http, req["url"])
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    doc = page.doc
    controls = doc.visible()
    assert len(controls) > 40
    for c in controls:
        assert c.get("id") in doc.labels and doc.labels[c.get("id")], f"no label for {c.attrs}"
    for c in controls:
        if c.get("type") in ("radio", "checkbox") and c.get("role") != "switch" and ".kept" not in (c.get("id") or ""):
            assert c.fieldsets, f"{c.get('id')} is not inside a fieldset"
            assert doc.legends.get(c.fieldsets[-1]), f"{c.get('id')}'s fieldset has no legend"
    # each matrix row is its own fieldset, its legend the row label
    speed = doc.by_id("f-service_quality-0-2")
    assert doc.legends[speed.fieldsets[-1]] == "Speed" and doc.legends[speed.fieldsets[0]] == "Rate our service"
    assert doc.labels["f-full_name"].startswith("Full name")


async def test_each_field_type_gets_a_fitting_control(sandbox):
    req = await create_request(sandbox)
    doc = (await fetch(sandbox.http, req["url"])).doc
    kinds = {"full_name": "text", "email": "email", "phone": "tel", "website": "url", "quantity": "number",
             "start_date": "date", "start_time": "time"}
    for name, kind in kinds.items():
        assert [c.get("type") for c in doc.named(name)] == [kind], name
    assert doc.named("bio")[0].tag == "textarea"
    assert [c.get("value") for c in doc.named("satisfaction") if c.get("type") == "radio"] == ["1", "2", "3", "4", "5"]
    assert [c.get("value") for c in doc.named("likelihood") if c.get("type") == "radio"] == [str(i) for i in range(11)]
    switch = [c for c in doc.named("newsletter") if c.get("type") == "checkbox"]
    assert len(switch) == 1 and switch[0].get("role") == "switch"
    assert doc.named("country")[0].tag == "select"
    assert [v for v, _ in doc.options["f-country"]] == ["", "de", "fr", "us"]
    assert [c.get("value") for c in doc.named("plan") if c.get("type") == "radio"] == ["basic", "premium"]
    assert [c.get("value") for c in doc.named("topics") if c.get("type") == "checkbox"] == ["billing", "support", "sales"]
    assert [c.get("value") for c in doc.named("avatar") if c.get("type") == "radio"] == ["cat", "dog"]
    for pos in range(3):  # ranking: one select per position
        assert doc.named(f"priorities[{pos}]")[0].tag == "select"
    assert doc.labels["f-priorities-0"] == "Position 1"
    assert [c.get("value") for c in doc.named("service_quality[friendliness]")] == ["poor", "ok", "great"]
    assert doc.named("attachment")[-1].get("type") == "file" and doc.named("attachment")[-1].has("multiple")
    assert doc.named("signature")[-1].get("accept") == "image/*"
    assert doc.named("deposit")[0].tag == "textarea" and "as JSON" in doc.texts["f-deposit-help"]
    assert doc.named("meeting")[0].tag == "textarea" and "as JSON" in doc.texts["f-meeting-help"]
    assert doc.named("line_items[0][item]")[0].get("type") == "text"
    assert doc.named("line_items[0][amount]")[0].get("type") == "number"
    assert [c.get("value") for c in doc.named("__add")] == ["line_items"]
    assert doc.named("crm_id") == [] and doc.named("total") == []  # hidden: never; calculated: not an input
    assert doc.texts["f-contract_docs-title"] == "Contract documents"
    assert "<li>Terms.pdf</li>" in (await fetch(sandbox.http, req["url"])).text  # authored, no file to link


async def test_decision_field_renders_its_three_choices_and_sets_the_outcome(sandbox):
    req = await create_request(sandbox, "Approval", context={"case_id": CONTEXT_SECRET})
    doc = (await fetch(sandbox.http, req["url"])).doc
    radios = [c for c in doc.named("decision") if c.get("type") == "radio"]
    assert [c.get("value") for c in radios] == ["approve", "changes", "decline"]
    assert [doc.labels[c.get("id")] for c in radios] == ["Approve", "Request changes", "Decline"]
    page = await send(sandbox.http, req["url"], [("reviewer", "Grace"), ("decision", ""), ("decision", "changes"),
                                                 ("comments", "Fix page 2"), ("__action", "submit")])
    assert page.status == 200 and "Thank you" in page.text
    assert CONTEXT_SECRET not in page.text
    rec = await record(sandbox, req["id"])
    assert rec["status"] == "completed" and rec["outcome"] == "changes"
    assert rec["answers"]["case_id"] == CONTEXT_SECRET  # merged on the server from the context


async def test_prefill_is_shown_and_readonly_fields_cannot_be_edited(sandbox):
    req = await create_request(sandbox, prefill={"full_name": "Ada Lovelace", "country": "de", "plan": "basic",
                                                 "topics": ["support"], "newsletter": True},
                               readonly=["full_name", "country"])
    doc = (await fetch(sandbox.http, req["url"])).doc
    name = doc.by_id("f-full_name")
    assert name.get("value") == "Ada Lovelace" and name.has("readonly") and name.get("aria-readonly") == "true"
    country = doc.by_id("f-country")
    assert country.has("disabled") and ("de", True) in doc.options["f-country"]
    plan = [c for c in doc.named("plan") if c.get("value") == "basic"][0]
    assert plan.has("checked") and not plan.has("disabled")
    assert [c.get("value") for c in doc.named("topics") if c.has("checked")] == ["support"]
    assert doc.by_id("f-newsletter").has("checked")


async def test_readonly_values_posted_differently_are_ignored(sandbox):
    req = await create_request(sandbox, prefill={"full_name": "Ada Lovelace", "country": "de"},
                               readonly=["full_name", "country"])
    fields = replace(replace(everything_fields(), "full_name", "Mallory"), "country", "us")
    page = await send(sandbox.http, req["url"], fields)
    assert page.status == 200, page.text
    rec = await record(sandbox, req["id"])
    assert rec["answers"]["full_name"] == "Ada Lovelace" and rec["answers"]["country"] == "de"


async def test_a_disabled_readonly_field_keeps_its_prefill_when_nothing_is_posted(sandbox):
    req = await create_request(sandbox, prefill={"plan": "basic", "full_name": "Ada"}, readonly=["plan"])
    page = await send(sandbox.http, req["url"], without(everything_fields(), "plan"))
    assert page.status == 200
    assert (await record(sandbox, req["id"]))["answers"]["plan"] == "basic"


async def test_context_values_never_appear_in_any_page(sandbox):
    req = await create_request(sandbox, context={"crm_id": CONTEXT_SECRET})
    pages = [await fetch(sandbox.http, req["url"])]
    pages.append(await send(sandbox.http, req["url"], [("email", "nope"), ("__action", "submit")]))  # 422
    pages.append(await send(sandbox.http, req["url"], [("bio", "x"), ("__action", "save")]))
    pages.append(await send(sandbox.http, req["url"], [("line_items", ""), ("__add", "line_items")]))
    pages.append(await send(sandbox.http, req["url"], everything_fields(), FILES))  # thanks
    pages.append(await fetch(sandbox.http, req["url"]))  # already submitted
    assert [p.status for p in pages] == [200, 422, 200, 200, 200, 200]
    assert "Thank you" in pages[4].text
    for p in pages:
        assert CONTEXT_SECRET not in p.text
        assert 'name="crm_id"' not in p.text
    rec = await record(sandbox, req["id"])
    assert rec["answers"]["crm_id"] == CONTEXT_SECRET and rec["display"]["crm_id"] == CONTEXT_SECRET


async def test_a_post_naming_a_hidden_field_cannot_override_the_context(sandbox):
    req = await create_request(sandbox, context={"crm_id": CONTEXT_SECRET})
    page = await send(sandbox.http, req["url"], [*everything_fields(), ("crm_id", "forged")])
    assert page.status == 200
    assert (await record(sandbox, req["id"]))["answers"]["crm_id"] == CONTEXT_SECRET


async def test_submit_completes_the_request_with_every_field_type(sandbox):
    req = await create_request(sandbox)
    await fetch(sandbox.http, req["url"])
    page = await send(sandbox.http, req["url"], everything_fields(), FILES)
    assert page.status == 200 and "<h1>Thank you</h1>" in page.text
    assert "Bolts / 12, Nuts / 3.5" in page.text and "$40.00 USD · Paid" in page.text
    rec = await record(sandbox, req["id"])
    assert rec["status"] == "completed" and rec["submissionId"]
    answers = rec["answers"]
    for key, value in EXPECTED_ANSWERS.items():
        assert answers[key] == value, key
    for key, text in EXPECTED_DISPLAY.items():
        assert rec["display"][key] == text, key
    attachment, signature = answers["attachment"][0], answers["signature"][0]
    assert attachment["name"] == "notes.pdf" and attachment["type"] == "application/pdf" and attachment["size"] == 14
    assert re.fullmatch(re.escape(sandbox.base_url) + r"/api/storage/[0-9a-f-]{36}", attachment["url"])
    async with sandbox.http.get(attachment["url"]) as resp:
        assert resp.status == 200 and await resp.read() == b"%PDF-1.4 notes"
    async with sandbox.http.get(signature["url"]) as resp:
        assert resp.status == 200 and await resp.read() == PNG and resp.content_type == "image/png"
    assert rec["display"]["attachment"] == "notes.pdf"
    assert types(rec) == ["created", "opened", "started", "completed"]
    assert rec["startedAt"] == rec["completedAt"] and rec["openedAt"] <= rec["startedAt"]
    events = (await sandbox.helper("events.list", {"requestId": req["id"]})).data["items"]
    assert [e["type"] for e in events] == ["request.completed"]
    assert events[0]["payload"]["data"]["answers"]["line_items"] == EXPECTED_ANSWERS["line_items"]


async def test_opening_marks_opened_once(sandbox):
    req = await create_request(sandbox)
    assert (await record(sandbox, req["id"]))["openedAt"] is None
    first = await fetch(sandbox.http, req["url"])
    opened = (await record(sandbox, req["id"]))["openedAt"]
    await sandbox.helper("clock.advance", {"ms": 60_000})
    second = await fetch(sandbox.http, req["url"])
    rec = await record(sandbox, req["id"])
    assert first.status == second.status == 200
    assert opened is not None and rec["openedAt"] == opened
    assert types(rec) == ["created", "opened"] and rec["startedAt"] is None


async def test_validation_errors_show_next_to_each_field_with_422(sandbox):
    req = await create_request(sandbox)
    fields = replace(replace(without(everything_fields(), "plan", "line_items[1][item]"), "email", "not-an-email"),
                     "quantity", "lots")
    page = await send(sandbox.http, req["url"], fields)
    assert page.status == 422
    doc = page.doc
    for field_id in ("f-email", "f-quantity"):
        control = doc.by_id(field_id)
        assert control.get("aria-invalid") == "true"
        assert f"{field_id}-error" in (control.get("aria-describedby") or "").split()
    assert doc.texts["f-email-error"] == "Expects an email address."
    assert doc.texts["f-quantity-error"] == "Expects a number."
    assert doc.texts["f-plan-error"] == "This question is required."
    assert doc.elements["f-plan"]["aria-describedby"] == "f-plan-error"  # the radio group's fieldset
    # a required member of a group instance: the error sits at that member
    assert doc.texts["f-line_items-1-item-error"] == "This question is required."
    assert doc.by_id("f-line_items-1-item").get("aria-invalid") == "true"
    # the summary lists every problem at once, linking to the fields
    for anchor in ("#f-email", "#f-quantity", "#f-plan", "#f-line_items-1-item"):
        assert anchor in doc.links
    # what the user typed is kept
    assert doc.by_id("f-email").get("value") == "not-an-email"
    assert doc.by_id("f-quantity").get("value") == "lots"
    assert doc.by_id("f-bio").tag == "textarea" and "Wrote the first program." in page.text
    assert [c.get("value") for c in doc.named("topics") if c.has("checked")] == ["billing", "sales"]
    rec = await record(sandbox, req["id"])
    assert rec["status"] == "pending" and rec["answers"] is None and rec["startedAt"] is None
    assert "started" not in types(rec)
    subs = await sandbox.rpc("submissions.list", {"formId": sandbox.pro.forms["Everything"]})
    assert all(s.get("requestId") != req["id"] for s in subs.data["items"])


async def test_an_uploaded_file_is_kept_when_the_page_comes_back_with_errors(sandbox):
    req = await create_request(sandbox)
    page = await send(sandbox.http, req["url"], replace(everything_fields(), "email", "bad"), FILES)
    assert page.status == 422
    kept = [c for c in page.doc.named("attachment") if c.get("type") == "checkbox"]
    assert len(kept) == 1 and kept[0].has("checked") and json.loads(kept[0].get("value"))["name"] == "notes.pdf"
    # the browser posts the kept file back (checkbox) with the fix: the answer holds it
    fixed = [*everything_fields(), ("attachment", kept[0].get("value"))]
    assert (await send(sandbox.http, req["url"], fixed)).status == 200
    assert (await record(sandbox, req["id"]))["answers"]["attachment"][0]["name"] == "notes.pdf"


async def test_an_upload_over_25_mb_is_refused_at_its_field(sandbox):
    req = await create_request(sandbox)
    big = [("attachment", "big.pdf", "application/pdf", b"0" * (25 * 1024 * 1024 + 1))]
    page = await send(sandbox.http, req["url"], everything_fields(), big)
    assert page.status == 422
    assert page.doc.texts["f-attachment-error"] == "big.pdf is larger than 25 MB; attach a smaller file."
    assert (await record(sandbox, req["id"]))["status"] == "pending"


async def test_save_draft_stores_values_and_reopening_shows_them(sandbox):
    req = await create_request(sandbox, prefill={"full_name": "Ada"})
    page = await send(sandbox.http, req["url"], [("full_name", "Ada L."), ("bio", "Draft bio"), ("topics", ""),
                                                 ("topics", "support"), ("__action", "save")])
    assert page.status == 200 and "Your draft was saved" in page.text
    rec = await record(sandbox, req["id"])
    assert rec["status"] == "pending" and rec["answers"] is None
    assert rec["startedAt"] is not None and rec["lastActivityAt"] == rec["startedAt"]
    assert types(rec) == ["created", "started"]
    again = await fetch(sandbox.http, req["url"])
    doc = again.doc
    assert "Your saved draft was restored." in again.text
    assert doc.by_id("f-full_name").get("value") == "Ada L." and "Draft bio" in again.text
    assert [c.get("value") for c in doc.named("topics") if c.has("checked")] == ["support"]
    await sandbox.helper("clock.advance", {"ms": 5_000})
    await send(sandbox.http, req["url"], [("bio", "Second"), ("__action", "save")])
    rec2 = await record(sandbox, req["id"])
    assert types(rec2).count("started") == 1 and rec2["startedAt"] == rec["startedAt"]
    assert rec2["lastActivityAt"] > rec["lastActivityAt"]
    # the final submit still needs every required answer, and completes with them
    done = await send(sandbox.http, req["url"], everything_fields())
    assert done.status == 200
    assert types(await record(sandbox, req["id"])) == ["created", "started", "opened", "completed"]


async def test_a_draft_with_a_wrong_value_is_refused_and_nothing_stored(sandbox):
    req = await create_request(sandbox)
    page = await send(sandbox.http, req["url"], [("email", "nope"), ("__action", "save")])
    assert page.status == 422 and page.doc.texts["f-email-error"] == "Expects an email address."
    assert "f-full_name-error" not in page.doc.texts  # a draft does not need required answers
    rec = await record(sandbox, req["id"])
    assert rec["startedAt"] is None and rec["lastActivityAt"] is None and "started" not in types(rec)


async def test_add_another_draws_one_more_group_instance_and_stores_nothing(sandbox):
    req = await create_request(sandbox)
    page = await send(sandbox.http, req["url"], [("line_items", ""), ("line_items[0][item]", "Bolts"),
                                                 ("line_items[0][amount]", "2"), ("__add", "line_items")])
    assert page.status == 200
    doc = page.doc
    assert doc.by_id("f-line_items-0-item").get("value") == "Bolts"
    assert doc.by_id("f-line_items-1-item").get("value") == ""
    assert doc.named("line_items[2][item]") == []
    rec = await record(sandbox, req["id"])
    assert rec["startedAt"] is None and "started" not in types(rec)


async def test_request_documents_are_listed_with_download_links(sandbox):
    doc_id = add_document(sandbox, "pro", "Approval", "Contract.pdf", b"%PDF-1.4 contract")
    req = await create_request(sandbox, "Approval", documents=[{"documentId": doc_id, "name": "Your contract.pdf"}])
    page = await fetch(sandbox.http, req["url"])
    links = [u for u in page.doc.links if "/api/storage/" in u]
    assert len(links) == 1 and links[0].startswith(f"{sandbox.base_url}/api/storage/")
    assert "Your contract.pdf" in page.text
    async with sandbox.http.get(links[0]) as resp:
        assert resp.status == 200 and await resp.read() == b"%PDF-1.4 contract"


async def test_calculated_field_is_shown_from_current_values(sandbox):
    req = await create_request(sandbox, prefill={"quantity": 4, "unit_price": 2.5})
    doc = (await fetch(sandbox.http, req["url"])).doc
    assert doc.by_id("f-total").tag == "output" and doc.texts["f-total"] == "10"
    bare = await create_request(sandbox)
    assert (await fetch(sandbox.http, bare["url"])).doc.named("total") == []
    assert 'id="f-total"' not in (await fetch(sandbox.http, bare["url"])).text


async def test_pages_send_no_cache_and_no_referrer_and_css_is_served(sandbox):
    req = await create_request(sandbox)
    page = await fetch(sandbox.http, req["url"])
    assert page.headers["Cache-Control"] == "no-store" and page.headers["Referrer-Policy"] == "no-referrer"
    assert '<link rel="stylesheet" href="/static/pages/form.css">' in page.text
    async with sandbox.http.get(f"{sandbox.base_url}/static/pages/form.css") as resp:
        assert resp.status == 200 and resp.content_type == "text/css" and ".field-error" in await resp.text()
    assert "<script" not in page.text  # works without JavaScript


# -- closed request links ----------------------------------------------------------------


async def assert_refuses(sb, url: str, request_id: str, status: int, post_status: int, words: str) -> None:
    before = await record(sb, request_id)
    got = await fetch(sb.http, url)
    assert got.status == status and words in got.text, got.text
    assert got.doc.named("full_name") == [] and "<form" not in got.text
    posted = await send(sb.http, url, everything_fields(), FILES)
    assert posted.status == post_status and words in posted.text
    after = await record(sb, request_id)
    for key in ("status", "answers", "startedAt", "openedAt", "submissionId", "timeline"):
        assert after[key] == before[key], key


async def test_expired_link_shows_410_and_takes_nothing(sandbox):
    now = (await sandbox.helper("clock.get")).data["now"]
    req = await create_request(sandbox, expiresAt=now + HOUR_MS)
    await fetch(sandbox.http, req["url"])
    await sandbox.helper("clock.advance", {"ms": HOUR_MS + 1000})
    await assert_refuses(sandbox, req["url"], req["id"], 410, 410, "This link has expired")
    assert (await record(sandbox, req["id"]))["status"] == "expired"


async def test_closed_test_link_shows_410(sandbox):
    req = await create_request(sandbox, test=True)
    await sandbox.helper("clock.advance", {"ms": DAY_MS + HOUR_MS})
    await assert_refuses(sandbox, req["url"], req["id"], 410, 410, "This test link has closed")


async def test_canceled_link_shows_410_and_takes_nothing(sandbox):
    req = await create_request(sandbox)
    assert (await sandbox.rpc("requests.cancel", {"requestId": req["id"]})).status == 200
    await assert_refuses(sandbox, req["url"], req["id"], 410, 410, "This request was canceled")


async def test_completed_link_says_already_submitted_and_a_second_submit_is_409(sandbox):
    req = await create_request(sandbox)
    assert (await send(sandbox.http, req["url"], everything_fields())).status == 200
    await assert_refuses(sandbox, req["url"], req["id"], 200, 409, "Already submitted")


async def test_unpublished_and_trashed_forms_close_their_links_with_410(sandbox):
    req = await create_request(sandbox)
    form_id = sandbox.pro.forms["Everything"]
    assert (await sandbox.rpc("forms.unpublish", {"formId": form_id})).status == 200
    await assert_refuses(sandbox, req["url"], req["id"], 410, 410, "This form is not available")
    assert (await sandbox.rpc("forms.publish", {"formId": form_id})).status == 200
    assert (await fetch(sandbox.http, req["url"])).status == 200
    assert (await sandbox.rpc("forms.delete", {"formId": form_id})).status == 200
    await assert_refuses(sandbox, req["url"], req["id"], 410, 410, "This form is not available")


async def test_unknown_token_is_404(sandbox):
    for method in ("get", "post"):
        async with sandbox.http.request(method, f"{sandbox.base_url}/r/rq_doesnotexist0000000000") as resp:
            assert resp.status == 404 and "Link not found" in await resp.text()


# -- preview -----------------------------------------------------------------------------


async def test_preview_shows_the_draft_read_only(sandbox):
    form_id = sandbox.pro.forms["Draft survey"]
    detail = (await sandbox.rpc("forms.get", {"formId": form_id})).data
    assert detail["previewUrl"] == f"{sandbox.base_url}/preview/{form_id}"
    page = await fetch(sandbox.http, detail["previewUrl"])
    assert page.status == 200 and "Preview" in page.text
    doc = page.doc
    assert doc.labels and all(c.has("disabled") for c in doc.visible())
    assert "What should we build next?" in page.text and "How do you rate us?" in page.text
    assert not [c for c in doc.controls if c.tag == "button"]
    assert (await fetch(sandbox.http, f"{sandbox.base_url}/preview/form_0000000000000000000000")).status == 404
    assert (await sandbox.rpc("forms.delete", {"formId": form_id})).status == 200
    assert (await fetch(sandbox.http, detail["previewUrl"])).status == 410


# -- share links ------------------------------------------------------------------------


async def share_link(sb, form: str = "Contact", ws: str = "pro") -> dict:
    r = await sb.rpc("shareLinks.create", {"formId": sb.workspaces[ws].forms[form]}, ws=ws)
    assert r.status == 200, r.body
    return r.data


CONTACT = [("name", "Grace"), ("email", "grace@example.test"), ("topic", "support"), ("message", "Hi"),
           ("__action", "submit")]


async def submissions(sb, form: str = "Contact") -> list[dict]:
    return (await sb.rpc("submissions.list", {"formId": sb.pro.forms[form], "limit": 100})).data["items"]


async def test_share_link_page_submits_a_response(sandbox):
    link = await share_link(sandbox)
    page = await fetch(sandbox.http, link["url"])
    assert page.status == 200 and page.doc.by_id("f-email").get("type") == "email"
    assert page.doc.named("source") == []  # hidden field
    done = await send(sandbox.http, link["url"], CONTACT)
    assert done.status == 200 and "Thank you" in done.text and "Edit your response" not in done.text
    newest = (await submissions(sandbox))[0]
    assert newest["isCompleted"] is True and newest["answers"]["email"] == "grace@example.test"


async def test_share_link_errors_come_back_with_422_and_nothing_stored(sandbox):
    link = await share_link(sandbox)
    before = len(await submissions(sandbox))
    page = await send(sandbox.http, link["url"], [("name", ""), ("email", "x"), ("__action", "submit")])
    assert page.status == 422
    assert page.doc.texts["f-name-error"] == "This question is required."
    assert page.doc.texts["f-email-error"] == "Expects an email address."
    assert len(await submissions(sandbox)) == before


async def test_share_link_redirects_after_submit_when_the_form_says_so(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    r = await sandbox.rpc("formSettings.update", {"formId": form_id, "redirectUrl": "https://example.test/done"})
    assert r.status == 200, r.body
    link = await share_link(sandbox)
    done = await send(sandbox.http, link["url"], CONTACT)
    assert done.status == 303 and done.headers["Location"].startswith("https://example.test/done")


async def test_share_link_offers_another_response_when_the_form_allows_it(sandbox):
    link = await share_link(sandbox)
    plain = await send(sandbox.http, link["url"], CONTACT)
    assert "Submit another response" not in plain.text
    form_id = sandbox.pro.forms["Contact"]
    assert (await sandbox.rpc("formSettings.update", {"formId": form_id, "allowAnotherResponse": True})).status == 200
    again = await send(sandbox.http, link["url"], CONTACT)
    path = "/f/" + link["url"].rsplit("/", 1)[1]
    assert again.status == 200 and path in again.doc.links and "Submit another response" in again.text


async def test_share_link_edit_link_after_submit(sandbox, browser_like):
    form_id = sandbox.pro.forms["Contact"]
    assert (await sandbox.rpc("formSettings.update", {"formId": form_id, "editAfterSubmit": True})).status == 200
    link = await share_link(sandbox)
    done = await send(browser_like, link["url"], CONTACT)
    assert done.status == 200
    edit = [u for u in done.doc.links if "?edit=" in u]
    assert len(edit) == 1 and edit[0].startswith(f"{link['url']}?edit=")
    page = await fetch(browser_like, edit[0])
    assert page.status == 200 and page.doc.by_id("f-name").get("value") == "Grace"
    assert "save" not in [c.get("value") for c in page.doc.named("__action")]  # an edit is not a draft
    edited = await send(browser_like, edit[0], replace(CONTACT, "message", "Edited"))
    assert edited.status == 200 and "Thank you" in edited.text
    newest = (await submissions(sandbox))[0]
    assert newest["answers"]["message"] == "Edited" and newest["editCount"] == 1
    bad = await fetch(browser_like, f"{link['url']}?edit=not-a-token")
    assert bad.status == 404 and "Edit link not valid" in bad.text


async def test_share_link_draft_is_kept_in_a_cookie_and_finished_later(sandbox, browser_like):
    link = await share_link(sandbox)
    saved = await send(browser_like, link["url"], [("name", "Half"), ("__action", "save")])
    assert saved.status == 200 and "Your draft was saved" in saved.text
    assert any(c.key.startswith("fs_draft_") for c in browser_like.cookie_jar)
    drafts = [s for s in await submissions(sandbox) if not s["isCompleted"] and s["answers"].get("name") == "Half"]
    assert len(drafts) == 1
    page = await fetch(browser_like, link["url"])
    assert "Your saved draft was restored." in page.text and page.doc.by_id("f-name").get("value") == "Half"
    done = await send(browser_like, link["url"], replace(CONTACT, "name", "Whole"))
    assert done.status == 200
    same = [s for s in await submissions(sandbox) if s["id"] == drafts[0]["id"]]
    assert same[0]["isCompleted"] is True and same[0]["answers"]["name"] == "Whole"
    fresh = await fetch(browser_like, link["url"])  # the cookie was cleared: a new, empty page
    assert "restored" not in fresh.text and fresh.doc.by_id("f-name").get("value") == ""


async def test_share_link_password_gate(sandbox, browser_like):
    form_id = sandbox.pro.forms["Contact"]
    assert (await sandbox.rpc("formSettings.update", {"formId": form_id, "password": "open sesame"})).status == 200
    link = await share_link(sandbox)
    before = len(await submissions(sandbox))
    gate = await fetch(browser_like, link["url"])
    assert gate.status == 200 and gate.doc.by_id("f-password").get("type") == "password"
    assert gate.doc.named("email") == []
    blocked = await send(browser_like, link["url"], CONTACT)  # answers without the password: refused
    assert blocked.status == 403 and blocked.doc.named("password")
    wrong = await send(browser_like, link["url"], [("password", "nope"), ("__action", "unlock")])
    assert wrong.status == 403 and wrong.doc.texts["f-password-error"].startswith("That password is not right")
    assert wrong.doc.by_id("f-password").get("aria-invalid") == "true"
    right = await send(browser_like, link["url"], [("password", "open sesame"), ("__action", "unlock")])
    assert right.status == 303 and right.headers["Location"] == f"/f/{link['url'].rsplit('/', 1)[1]}"
    page = await fetch(browser_like, link["url"])
    assert page.status == 200 and page.doc.named("email")
    assert len(await submissions(sandbox)) == before
    assert (await send(browser_like, link["url"], CONTACT)).status == 200
    assert len(await submissions(sandbox)) == before + 1
    # a new password shuts the door on the old cookie
    assert (await sandbox.rpc("formSettings.update", {"formId": form_id, "password": "new one"})).status == 200
    assert (await fetch(browser_like, link["url"])).doc.named("password")


async def test_revoked_unpublished_and_unknown_share_links(sandbox):
    link = await share_link(sandbox)
    r = await sandbox.rpc("shareLinks.update", {"shareLinkId": link["id"], "revoked": True})
    assert r.status == 200, r.body
    before = len(await submissions(sandbox))
    for page in (await fetch(sandbox.http, link["url"]), await send(sandbox.http, link["url"], CONTACT)):
        assert page.status == 410 and "This link was revoked" in page.text
    other = await share_link(sandbox)
    assert (await sandbox.rpc("forms.unpublish", {"formId": sandbox.pro.forms["Contact"]})).status == 200
    for page in (await fetch(sandbox.http, other["url"]), await send(sandbox.http, other["url"], CONTACT)):
        assert page.status == 410 and "not available" in page.text
    assert len(await submissions(sandbox)) == before
    assert (await fetch(sandbox.http, f"{sandbox.base_url}/f/nosuchtoken")).status == 404
