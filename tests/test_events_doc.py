"""docs/events.md shows one real body of every event type, as the sandbox delivers it to a
receiver. This test makes each event happen (through the ``formsync_receiver`` fixture,
over real HTTP) and holds every example in the doc to the body received: the same keys at
every level and the same JSON types, so the doc cannot drift from the wire.
``FORMSYNC_WRITE_EVENTS_DOC=1`` writes the bodies received into the doc instead."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

DOC = Path(__file__).resolve().parent.parent / "docs" / "events.md"
SECTION = re.compile(r"^## `([a-z.]+)`(?: (by callback))?$")
CONTACT = {"name": "Ada Lovelace", "email": "ada@example.com", "topic": "sales", "message": "Hello"}


def shape(value: Any) -> Any:
    """The keys at every level and the JSON type of every leaf (a list by its first item)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def doc_examples(text: str) -> dict[str, tuple[int, int]]:
    """Each section's name -> the character span of its first json block's content."""
    spans: dict[str, tuple[int, int]] = {}
    for m in re.finditer(r"^## .*$", text, re.M):
        head = SECTION.match(m.group(0))
        if head is None:
            continue
        block = re.compile(r"```json\n(.*?)```", re.S).search(text, m.end())
        assert block is not None, f"{head.group(0)} has no json block"
        spans[" ".join(p for p in head.groups() if p)] = block.span(1)
    return spans


async def bodies(sandbox: Any, client: Any, receiver: Any) -> dict[str, dict[str, Any]]:
    """One real body of every type, and a callback, as the receiver stored them."""
    form_id = sandbox.workspace("pro")["forms"]["Contact"]
    await receiver.subscribe(form_id)
    await receiver.subscribe(form_id, "submission_abandoned", idle_window="12h")
    await client.update_form_settings(form_id, editAfterSubmit=True)
    link = (await client.create_share_link(form_id)).url
    sent = await sandbox.helper("shareLinks.submit", {"url": link, "answers": CONTACT})
    token = parse_qs(urlsplit(sent["editUrl"]).query)["edit"][0]
    await sandbox.helper("shareLinks.submit", {"url": link, "editToken": token, "answers": {"topic": "support"}})
    await sandbox.helper("shareLinks.submit", {"url": link, "completed": False, "answers": {"name": "Grace Hopper"}})
    await sandbox.helpers.clock_advance(12 * 3600 * 1000 + 1)  # past the idle window: the draft is abandoned
    done = await client.create_request(form_id, external_id="crm-1001", metadata={"account": "A-17"},
                                       recipient={"email": "ada@example.com", "name": "Ada Lovelace"})
    await sandbox.helpers.requests_complete(done.id, CONTACT)
    # A callback, on a form without subscriptions (one event is stored once, by whichever
    # channel brings it first): an approval with its decision.
    approval = await client.create_request(sandbox.workspace("pro")["forms"]["Approval"], external_id="case-77",
                                           context={"case_id": "C-77"}, callback_url=receiver.callback_url)
    await sandbox.helpers.requests_complete(approval.id, {"reviewer": "Grace Hopper", "decision": "approve",
                                                          "comments": "Looks right."})
    now = (await sandbox.helpers.clock_get()).now_ms
    expiring = await client.create_request(form_id, external_id="crm-1002", expires_at=now + 60_000)
    await sandbox.helpers.clock_advance(60_001)
    canceled = await client.create_request(form_id, external_id="crm-1003")
    await client.cancel_request(canceled.id, reason="Order withdrawn")
    got = {
        "submission.completed": await receiver.wait_for("submission.completed", submission_id=sent["submissionId"]),
        "submission.updated": await receiver.wait_for("submission.updated"),
        "submission.abandoned": await receiver.wait_for("submission.abandoned"),
        "request.completed": await receiver.wait_for("request.completed", request_id=done.id),
        "request.expired": await receiver.wait_for("request.expired", request_id=expiring.id),
        "request.canceled": await receiver.wait_for("request.canceled", request_id=canceled.id),
    }
    stored = {json.loads(body)["id"]: (source, json.loads(body)) for source, body in receiver.store.events.bodies()}
    out = {name: stored[event.id][1] for name, event in got.items()}
    callback = await receiver.wait_for("request.completed", request_id=approval.id, source="callback")
    out["request.completed by callback"] = stored[callback.id][1]
    return out


async def test_every_event_type_in_the_doc_is_the_body_the_sandbox_delivers(formsync_sandbox, formsync_client,
                                                                             formsync_receiver):
    real = await bodies(formsync_sandbox, formsync_client, formsync_receiver)
    text = DOC.read_text(encoding="utf-8")
    spans = doc_examples(text)
    if os.environ.get("FORMSYNC_WRITE_EVENTS_DOC"):
        for name, (start, end) in sorted(spans.items(), key=lambda kv: -kv[1][0]):
            text = text[:start] + json.dumps(real[name], indent=2, ensure_ascii=False) + "\n" + text[end:]
        DOC.write_text(text, encoding="utf-8")
        spans = doc_examples(text)
    assert sorted(spans) == sorted(real), "docs/events.md has one section per event type and the callback"
    for name, (start, end) in spans.items():
        shown = json.loads(text[start:end])
        assert shown["type"] == real[name]["type"], name
        assert shape(shown) == shape(real[name]), f"docs/events.md `{name}` is not the body the sandbox sends"
