"""The request page in real Chromium (Playwright, async API): a recipient fills in every
field type and submits; readonly inputs refuse typing; a validation error appears next
to its field; an expired link refuses. Screenshots go to ``test-artifacts/``.

Chromium is expected at /usr/bin/chromium (``FORMSYNC_CHROMIUM`` names another path).
Without it these tests skip locally, with the reason, and fail when ``CI`` or
``FORMSYNC_CI`` is set. Playwright's bundled browsers are never used."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from formservice.clock import HOUR_MS

from ..spec.requests_support import Receiver, flush, verify
from .support import (
    BOOKING,
    CONTEXT_SECRET,
    EXPECTED_ANSWERS,
    EXPECTED_DISPLAY,
    PAYMENT,
    PNG,
    create_request,
    record,
)

pytestmark = pytest.mark.browser
CHROMIUM = Path(os.environ.get("FORMSYNC_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PDF = b"%PDF-1.4 browser notes"


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if not CHROMIUM.exists():
        reason = f"Chromium is not installed at {CHROMIUM} (apt-get install -y chromium)"
        if os.environ.get("CI") or os.environ.get("FORMSYNC_CI"):
            pytest.fail(f"{reason}; browser tests must run in CI")
        pytest.skip(f"{reason}; browser tests skip locally")
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True,
            args=["--no-sandbox", "--disable-background-networking", "--disable-gpu"])
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    context = await browser.new_context(viewport={"width": 1000, "height": 900})
    tab = await context.new_page()
    tab.set_default_timeout(10_000)
    try:
        yield tab
    finally:
        await context.close()


async def shot(tab: Any, name: str, *, full_page: bool = True) -> None:
    """Save a screenshot as a test artifact. A full-page shot resizes the page for a
    moment, which can swallow the next click: take viewport shots between steps."""
    ARTIFACTS.mkdir(exist_ok=True)
    await tab.screenshot(path=str(ARTIFACTS / f"pages-{name}.png"), full_page=full_page)


async def submit_with(tab: Any, button: str) -> Any:
    """Click a submit button and return the response of the page it leads to."""
    async with tab.expect_navigation() as nav:
        await tab.get_by_role("button", name=button, exact=True).click()
    return await nav.value


async def test_recipient_fills_every_field_type_and_submits(sandbox, page):
    req = await create_request(sandbox, prefill={"full_name": "Ada Lovelace", "country": "de"},
                               readonly=["full_name"], context={"crm_id": CONTEXT_SECRET})
    response = await page.goto(req["url"])
    assert response.status == 200
    assert CONTEXT_SECRET not in await page.content()
    await shot(page, "request-open")

    # the readonly prefill shows and refuses typing
    full_name = page.get_by_label("Full name")
    assert await full_name.input_value() == "Ada Lovelace"
    assert not await full_name.is_editable()
    await full_name.click()
    await page.keyboard.type("Mallory")
    await page.keyboard.press("Backspace")
    assert await full_name.input_value() == "Ada Lovelace"
    # the editable prefill shows and can change
    assert await page.get_by_label("Country").input_value() == "de"
    await page.get_by_label("Country").select_option("fr")

    await page.get_by_label("Short bio").fill("Wrote the first program.")
    await page.get_by_label("Email").fill("ada@example.test")
    await page.get_by_label("Phone").fill("+44 20 7946 0000")
    await page.get_by_label("Website").fill("https://ada.example.test")
    await page.get_by_label("Quantity").fill("3")
    await page.get_by_label("Unit price").fill("2.5")
    await page.get_by_label("Start date").fill("2026-03-01")
    await page.get_by_label("Start time").fill("09:45")
    await page.get_by_label("4 stars").check()
    await page.locator("#f-likelihood-9").check()
    await page.get_by_label("Subscribe to the newsletter").check()
    await page.get_by_label("Premium").check()
    await page.get_by_label("Billing").check()
    await page.get_by_label("Sales", exact=True).check()
    await page.get_by_label("Position 1").select_option("quality")
    await page.get_by_label("Position 2").select_option("price")
    await page.get_by_label("Position 3").select_option("speed")
    await page.get_by_label("Dog").check()
    await page.get_by_label("Speed: Great").check()
    await page.get_by_label("Friendliness: OK").check()
    await page.locator("#f-attachment").set_input_files(
        files=[{"name": "notes.pdf", "mimeType": "application/pdf", "buffer": PDF}])
    await page.locator("#f-signature").set_input_files(
        files=[{"name": "sig.png", "mimeType": "image/png", "buffer": PNG}])
    await page.get_by_label("Deposit").fill(json.dumps(PAYMENT))
    await page.get_by_label("Book a call").fill(json.dumps(BOOKING))
    await page.locator("#f-line_items-0-item").fill("Bolts")
    await page.locator("#f-line_items-0-amount").fill("12")

    # "add another" works without JavaScript: the page comes back with one more instance
    added = await submit_with(page, "Add another line items")
    assert added.status == 200
    assert await page.locator("#f-line_items-0-item").input_value() == "Bolts"
    assert await page.get_by_label("Keep notes.pdf").is_checked()  # the upload was kept
    assert await page.get_by_label("Speed: Great").is_checked() and await page.get_by_label("Position 1").input_value() == "quality"
    await page.locator("#f-line_items-1-item").fill("Nuts")
    await page.locator("#f-line_items-1-amount").fill("3.5")
    await shot(page, "request-filled", full_page=False)
    done = await submit_with(page, "Submit")
    assert done.status == 200
    assert await page.locator("h1").inner_text() == "Thank you"
    summary = await page.locator("dl.summary").inner_text()
    assert "Bolts / 12, Nuts / 3.5" in summary and "France" in summary
    assert CONTEXT_SECRET not in await page.content()
    await shot(page, "request-thanks")

    rec = await record(sandbox, req["id"])
    assert rec["status"] == "completed"
    answers = rec["answers"]
    for key, value in EXPECTED_ANSWERS.items():
        assert answers[key] == value, key
    for key, text in EXPECTED_DISPLAY.items():
        assert rec["display"][key] == text, key
    assert answers["crm_id"] == CONTEXT_SECRET
    assert [(f["name"], f["type"], f["size"]) for f in answers["attachment"]] == [("notes.pdf", "application/pdf", len(PDF))]
    assert [(f["name"], f["type"]) for f in answers["signature"]] == [("sig.png", "image/png")]
    assert rec["display"]["signature"] == "sig.png"
    assert [e["type"] for e in rec["timeline"]] == ["created", "opened", "started", "completed"]


async def test_readonly_choice_is_disabled_and_keeps_its_prefill(sandbox, page):
    req = await create_request(sandbox, prefill={"full_name": "Ada", "plan": "basic", "country": "us"},
                               readonly=["plan", "country"])
    await page.goto(req["url"])
    assert await page.get_by_label("Basic").is_checked() and await page.get_by_label("Basic").is_disabled()
    assert await page.get_by_label("Premium").is_disabled()
    await page.get_by_label("Premium").click(force=True)  # a click on a disabled radio changes nothing
    assert await page.get_by_label("Basic").is_checked()
    assert await page.get_by_label("Country").is_disabled()
    await page.get_by_label("Email").fill("ada@example.test")
    assert (await submit_with(page, "Submit")).status == 200
    rec = await record(sandbox, req["id"])
    assert rec["answers"]["plan"] == "basic" and rec["answers"]["country"] == "us"


async def test_validation_error_shows_next_to_the_field(sandbox, page):
    req = await create_request(sandbox)
    await page.goto(req["url"])
    await page.get_by_label("Full name").fill("Ada")
    await page.get_by_label("Email").fill("not-an-email")
    await page.get_by_label("Quantity").fill("7")
    response = await submit_with(page, "Submit")
    assert response.status == 422
    email_field = page.locator(".field", has=page.locator("#f-email"))
    assert await email_field.locator(".field-error").inner_text() == "Expects an email address."
    assert await page.locator("#f-email").get_attribute("aria-invalid") == "true"
    assert await page.locator("#f-email").get_attribute("aria-describedby") == "f-email-error"
    plan = page.locator("fieldset#f-plan")
    assert await plan.locator(".field-error").inner_text() == "This question is required."
    assert await page.get_by_role("alert").locator("a[href='#f-email']").count() == 1
    # what the recipient typed is still there
    assert await page.get_by_label("Email").input_value() == "not-an-email"
    assert await page.get_by_label("Quantity").input_value() == "7"
    await shot(page, "request-errors", full_page=False)
    rec = await record(sandbox, req["id"])
    assert rec["status"] == "pending" and rec["answers"] is None
    # fixing the fields completes the request
    await page.get_by_label("Email").fill("ada@example.test")
    await page.get_by_label("Basic").check()
    assert (await submit_with(page, "Submit")).status == 200
    assert (await record(sandbox, req["id"]))["answers"]["quantity"] == 7


async def test_saved_draft_comes_back_on_reopen(sandbox, page):
    req = await create_request(sandbox)
    await page.goto(req["url"])
    await page.get_by_label("Short bio").fill("Half done")
    await page.get_by_label("Support").check()
    assert (await submit_with(page, "Save draft")).status == 200
    assert "Your draft was saved" in await page.locator("[role=status]").inner_text()
    await page.goto(req["url"])
    assert await page.get_by_label("Short bio").input_value() == "Half done"
    assert await page.get_by_label("Support").is_checked()
    rec = await record(sandbox, req["id"])
    assert rec["status"] == "pending" and rec["startedAt"] is not None


async def test_expired_link_refuses(sandbox, page):
    now = (await sandbox.helper("clock.get")).data["now"]
    req = await create_request(sandbox, expiresAt=now + HOUR_MS)
    assert (await page.goto(req["url"])).status == 200
    await page.get_by_label("Full name").fill("Too late")
    await sandbox.helper("clock.advance", {"ms": HOUR_MS + 1000})
    refused = await submit_with(page, "Submit")  # the page was open before the link expired
    assert refused.status == 410
    assert await page.locator("h1").inner_text() == "This link has expired"
    assert await page.locator("form").count() == 0
    response = await page.goto(req["url"])
    assert response.status == 410
    await shot(page, "request-expired")
    rec = await record(sandbox, req["id"])
    assert rec["status"] == "expired" and rec["answers"] is None and rec["startedAt"] is None


async def test_submitted_in_chromium_the_callback_and_the_webhook_arrive_once_each(sandbox, page):
    """The end-to-end path: a request made through the API is opened, filled and submitted
    in the browser; its signed callback and its webhook event each arrive once, with the
    answers, verified by the independent HMAC check."""
    secret = "whsec_" + "5e" * 32
    async with Receiver() as callback, Receiver() as hook:
        sub = await sandbox.rpc("webhooks.create", {
            "formId": sandbox.pro.forms["Contact"], "targetUrl": hook.url, "provider": "n8n",
            "eventType": "request_completed", "signingSecret": secret})
        assert sub.status == 200, sub.body
        req = await create_request(sandbox, "Contact", callbackUrl=callback.url, externalId="browser-1",
                                   context={"source": "e2e"})
        assert (await page.goto(req["url"])).status == 200
        await page.get_by_label("Name").fill("Grace Hopper")
        await page.get_by_label("Email").fill("grace@example.test")
        await page.get_by_label("Topic").select_option("support")
        await page.get_by_label("Message").fill("From the browser")
        assert (await submit_with(page, "Submit")).status == 200
        assert await page.locator("h1").inner_text() == "Thank you"
        await flush(sandbox)
        await flush(sandbox)  # a second flush sends nothing more
        assert len(callback.received) == 1 and len(hook.received) == 1
    rec = await record(sandbox, req["id"])
    want = {"name": "Grace Hopper", "email": "grace@example.test", "topic": "support",
            "message": "From the browser", "source": "e2e"}
    assert {k: rec["answers"].get(k) for k in want} == want
    for got, key in ((callback.received[0], sandbox.pro.signing_secret), (hook.received[0], secret)):
        assert verify(key, got.headers["X-Formstep-Signature"], got.body)
        env = json.loads(got.body)
        assert env["type"] == got.headers["X-Formstep-Event-Type"] == "request.completed"
        assert env["data"]["request"]["id"] == req["id"] and env["data"]["request"]["externalId"] == "browser-1"
        assert env["data"]["answers"] == rec["answers"] and env["data"]["display"] == rec["display"]
