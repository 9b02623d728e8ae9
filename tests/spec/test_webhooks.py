"""Webhook subscriptions (notes section 1: webhooks.create/list/delete; section 3: events,
one channel one event; section 4: delivery and signing), over loopback against the
seeded sandbox. Deliveries are received by a real aiohttp server started by the test and
their signatures checked independently of the service's code."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from aiohttp import web

from formservice.tables import Subscription

MISSING_FORM = "form_0000000000000000000000"
SECRET = "whsec_" + "5e" * 32
VIEW_KEYS = {"subscriptionId", "formId", "provider", "targetUrl", "eventType", "status", "createdAt"}
EVENT_TYPES = ["submission_created", "submission_updated", "submission_abandoned", "request_completed",
               "request_expired", "request_canceled"]
SIGNATURE_RE = re.compile(r"^t=(\d+),sha256=([a-f0-9]{64})$")
CONTACT = {"name": "Ada Lovelace", "email": "ada@example.test", "topic": "sales"}


# -- a receiver: a real HTTP server that records what it is sent --------------------------


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.body)


class Receiver:
    """An aiohttp server on a loopback port; every POST to ``/<name>`` is recorded."""

    def __init__(self) -> None:
        self.hits: list[Hit] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{name}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> Receiver:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.Response:
        self.hits.append(Hit(request.match_info["name"], dict(request.headers), await request.read()))
        return web.Response(status=200)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def at(self, name: str) -> list[Hit]:
        return [h for h in self.hits if h.path == name]

    async def wait(self, name: str, count: int, within_s: float = 5.0) -> list[Hit]:
        """The hits at ``name`` once there are at least ``count`` (fails after ``within_s``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        while len(self.at(name)) < count:
            assert loop.time() < deadline, f"{name}: {len(self.at(name))} deliveries, expected {count}"
            await asyncio.sleep(0.05)
        return self.at(name)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with Receiver() as r:
        yield r


def signature_valid(hit: Hit, secret: str) -> bool:
    """The hosted scheme, computed here from the raw body: HMAC-SHA256 keyed with the
    secret string over ``<t>.<raw body>``."""
    m = SIGNATURE_RE.match(hit.headers["X-Formstep-Signature"])
    assert m, hit.headers["X-Formstep-Signature"]
    t, sig = m.groups()
    want = hmac.new(secret.encode(), f"{t}.".encode() + hit.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, sig)


# -- helpers ---------------------------------------------------------------------------------


async def subscribe(sb, target: str, ws: str = "pro", form: str = "Contact", **params: Any) -> dict[str, Any]:
    body = {"formId": sb.workspaces[ws].forms[form], "targetUrl": target, "provider": "zapier", **params}
    r = await sb.rpc("webhooks.create", body, ws=ws)
    assert r.status == 200, r.body
    return r.data


async def listed(sb, ws: str = "pro", form: str = "Contact") -> list[dict[str, Any]]:
    r = await sb.rpc("webhooks.list", {"formId": sb.workspaces[ws].forms[form]}, ws=ws)
    assert r.status == 200 and r.data["hasMore"] is False
    return r.data["items"]


async def share_link(sb, ws: str = "pro", form: str = "Contact") -> str:
    r = await sb.rpc("shareLinks.create", {"formId": sb.workspaces[ws].forms[form]}, ws=ws)
    assert r.status == 200, r.body
    return r.data["url"]


async def submit(sb, url: str, answers: dict[str, Any], ws: str = "pro", **extra: Any) -> dict[str, Any]:
    r = await sb.helper("shareLinks.submit", {"url": url, "answers": answers, **extra}, ws=ws)
    assert r.status == 200, r.body
    return r.data


async def events_of(sb, ws: str = "pro", **params: Any) -> list[dict[str, Any]]:
    return (await sb.helper("events.list", params, ws=ws)).data["items"]


async def flush(sb) -> None:
    assert (await sb.helper("deliveries.flush")).status == 200


def delivered_to(event: dict[str, Any]) -> set[str | None]:
    """The subscription ids an event was queued for (None: the request's callback)."""
    return {d["subscriptionId"] for d in event["deliveries"]}


def ms_of(iso_text: str) -> int:
    return int(datetime.fromisoformat(iso_text.replace("Z", "+00:00")).timestamp() * 1000)


async def set_settings(sb, ws: str = "pro", form: str = "Contact", **fields: Any) -> None:
    r = await sb.rpc("formSettings.update", {"formId": sb.workspaces[ws].forms[form], **fields}, ws=ws)
    assert r.status == 200, r.body


# -- webhooks.create / list / delete -------------------------------------------------------------


async def test_create_returns_the_subscription_without_its_secret(sandbox, receiver):
    form_id = sandbox.pro.forms["Contact"]
    before = (await sandbox.helper("clock.get")).data["now"]
    r = await sandbox.rpc("webhooks.create", {"formId": form_id, "targetUrl": "https://hooks.example.com/a",
                                              "provider": "n8n", "signingSecret": SECRET})
    assert r.status == 200
    sub = r.data
    assert set(sub) == VIEW_KEYS  # no idleWindow for other event types, no secret
    assert re.fullmatch(r"int_[0-9A-Za-z]{22}", sub["subscriptionId"])
    assert sub["formId"] == form_id and sub["provider"] == "n8n" and sub["status"] == "active"
    assert sub["eventType"] == "submission_created"  # the default
    assert sub["targetUrl"] == "https://hooks.example.com/a"
    assert before <= sub["createdAt"] <= before + 60_000
    items = await listed(sandbox)
    assert items == [sub]
    assert SECRET not in json.dumps(items) and SECRET not in json.dumps(r.body)


async def test_create_abandoned_shows_its_idle_window(sandbox):
    sub = await subscribe(sandbox, "https://hooks.example.com/x", eventType="submission_abandoned", idleWindow="3d",
                          provider="make")
    assert set(sub) == VIEW_KEYS | {"idleWindow"}
    assert sub["idleWindow"] == "3d" and sub["eventType"] == "submission_abandoned"
    assert (await listed(sandbox))[0]["idleWindow"] == "3d"


@pytest.mark.parametrize("event_type", EVENT_TYPES)
async def test_create_takes_each_event_type(sandbox, event_type):
    extra = {"idleWindow": "12h"} if event_type == "submission_abandoned" else {}
    sub = await subscribe(sandbox, "https://hooks.example.com/t", eventType=event_type, **extra)
    assert sub["eventType"] == event_type


@pytest.mark.parametrize("target", ["http://127.0.0.1:9/hook", "http://localhost:8080/h", "http://[::1]:9/h",
                                    "https://example.com/h"])
async def test_target_url_https_or_loopback_http(sandbox, target):
    assert (await subscribe(sandbox, target))["targetUrl"] == target


BAD_PARAMS = [
    ({"targetUrl": "http://hooks.example.com/a"}, "targetUrl must use https", "targetUrl", "HTTPS_REQUIRED"),
    ({"targetUrl": "ftp://hooks.example.com/a"}, "targetUrl must use https", "targetUrl", "HTTPS_REQUIRED"),
    ({"targetUrl": "not a url"}, "targetUrl must use https", "targetUrl", "HTTPS_REQUIRED"),
    ({"provider": "ifttt"}, "provider must be one of zapier, make, n8n", "provider", "INVALID_VALUE"),
    ({"eventType": "submission.completed"},
     "eventType must be one of submission_created, submission_updated, submission_abandoned, request_completed, "
     "request_expired, request_canceled", "eventType", "INVALID_VALUE"),
    ({"eventType": "submission_abandoned"}, 'idleWindow is required when eventType is "submission_abandoned"',
     "idleWindow", "REQUIRED"),
    ({"eventType": "submission_abandoned", "idleWindow": None},
     'idleWindow is required when eventType is "submission_abandoned"', "idleWindow", "REQUIRED"),
    ({"idleWindow": "1d"}, 'idleWindow is only valid when eventType is "submission_abandoned"', "idleWindow",
     "NOT_ALLOWED"),
    ({"eventType": "request_completed", "idleWindow": "1d"},
     'idleWindow is only valid when eventType is "submission_abandoned"', "idleWindow", "NOT_ALLOWED"),
    ({"eventType": "submission_abandoned", "idleWindow": "2d"}, "idleWindow must be one of 12h, 1d, 3d, 1w",
     "idleWindow", "INVALID_VALUE"),
    ({"signingSecret": "x" * 31}, "signingSecret must be between 32 and 255 characters", "signingSecret",
     "OUT_OF_RANGE"),
    ({"signingSecret": "x" * 256}, "signingSecret must be between 32 and 255 characters", "signingSecret",
     "OUT_OF_RANGE"),
]


@pytest.mark.parametrize(("change", "message", "field", "reason"), BAD_PARAMS)
async def test_create_refuses_bad_params_and_stores_nothing(sandbox, change, message, field, reason):
    body = {"formId": sandbox.pro.forms["Contact"], "targetUrl": "https://hooks.example.com/a",
            "provider": "zapier", **change}
    err = (await sandbox.rpc("webhooks.create", body)).expect("VALIDATION_ERROR", 400, field=field, reason=reason)
    assert err["message"] == message
    assert await listed(sandbox) == []


async def test_create_secret_bounds_are_inclusive(sandbox):
    for n in (32, 255):
        await subscribe(sandbox, "https://hooks.example.com/s", signingSecret="y" * n)
    assert len(await listed(sandbox)) == 2


@pytest.mark.parametrize("missing", ["formId", "targetUrl", "provider"])
async def test_create_required_params(sandbox, missing):
    body = {"formId": sandbox.pro.forms["Contact"], "targetUrl": "https://hooks.example.com/a", "provider": "make"}
    del body[missing]
    (await sandbox.rpc("webhooks.create", body)).expect("VALIDATION_ERROR", 400, field=missing, reason="REQUIRED")
    assert await listed(sandbox) == []


async def test_create_unknown_or_foreign_form(sandbox):
    body = {"formId": MISSING_FORM, "targetUrl": "https://hooks.example.com/a", "provider": "zapier"}
    err = (await sandbox.rpc("webhooks.create", body)).expect("NOT_FOUND", 404, field="formId")
    assert err["message"] == "Form not found"
    body["formId"] = sandbox.free.forms["Contact"]
    (await sandbox.rpc("webhooks.create", body)).expect("FORBIDDEN", 403, reason="FOREIGN_WORKSPACE")
    assert await listed(sandbox, ws="free") == []


async def test_list_is_per_form_and_scoped(sandbox):
    a = await subscribe(sandbox, "https://hooks.example.com/a")
    b = await subscribe(sandbox, "https://hooks.example.com/b", eventType="request_completed")
    await subscribe(sandbox, "https://hooks.example.com/c", form="Approval")
    assert [i["subscriptionId"] for i in await listed(sandbox)] == [a["subscriptionId"], b["subscriptionId"]]
    assert len(await listed(sandbox, form="Approval")) == 1
    err = (await sandbox.rpc("webhooks.list", {"formId": MISSING_FORM})).expect("NOT_FOUND", 404, field="formId")
    assert err["message"] == "Form not found"
    (await sandbox.rpc("webhooks.list", {"formId": sandbox.pro.forms["Contact"]}, ws="free")).expect(
        "FORBIDDEN", 403)


async def test_delete(sandbox):
    a = await subscribe(sandbox, "https://hooks.example.com/a")
    b = await subscribe(sandbox, "https://hooks.example.com/b")
    r = await sandbox.rpc("webhooks.delete", {"subscriptionId": a["subscriptionId"]})
    assert r.status == 200 and r.data == {"subscriptionId": a["subscriptionId"], "deleted": True}
    assert await listed(sandbox) == [b]
    again = await sandbox.rpc("webhooks.delete", {"subscriptionId": a["subscriptionId"]})
    assert again.expect("NOT_FOUND", 404, field="subscriptionId")["message"] == "Webhook subscription not found"
    unknown = await sandbox.rpc("webhooks.delete", {"subscriptionId": "int_0000000000000000000000"})
    assert unknown.expect("NOT_FOUND", 404)["message"] == "Webhook subscription not found"
    foreign = await sandbox.rpc("webhooks.delete", {"subscriptionId": b["subscriptionId"]}, ws="free")
    foreign.expect("FORBIDDEN", 403, reason="FOREIGN_WORKSPACE")
    assert await listed(sandbox) == [b]


async def test_deleted_subscription_gets_nothing_more(sandbox, receiver):
    sub = await subscribe(sandbox, receiver.url("gone"))
    await sandbox.rpc("webhooks.delete", {"subscriptionId": sub["subscriptionId"]})
    url = await share_link(sandbox)
    await submit(sandbox, url, CONTACT)
    [event] = await events_of(sandbox, type="submission.completed")
    assert event["deliveries"] == []
    await flush(sandbox)
    assert receiver.at("gone") == []


async def test_delete_gives_up_waiting_retries(sandbox):
    # a target that refuses connections: the first attempt fails and a retry waits
    sub = await subscribe(sandbox, "http://127.0.0.1:9/closed")
    await submit(sandbox, await share_link(sandbox), CONTACT)
    for _ in range(100):  # the worker may hold the first attempt while flush skips it
        await flush(sandbox)
        [event] = await events_of(sandbox, type="submission.completed")
        [d] = event["deliveries"]
        if d["attemptCount"]:
            break
        await asyncio.sleep(0.05)
    assert d["state"] == "pending" and d["attemptCount"] == 1 and d["nextAttemptAt"] is not None
    await sandbox.rpc("webhooks.delete", {"subscriptionId": sub["subscriptionId"]})
    [event] = await events_of(sandbox, type="submission.completed")
    assert event["deliveries"][0]["state"] == "failed"


# -- one channel, one event ------------------------------------------------------------------------


async def test_one_channel_one_event(sandbox, receiver):
    created = await subscribe(sandbox, receiver.url("created"))
    updated = await subscribe(sandbox, receiver.url("updated"), eventType="submission_updated")
    req_done = await subscribe(sandbox, receiver.url("request"), eventType="request_completed")
    await set_settings(sandbox, editAfterSubmit=True)
    form_id = sandbox.pro.forms["Contact"]

    # a request's completion reaches request_completed only
    req = (await sandbox.rpc("requests.create", {"formId": form_id})).data
    assert (await sandbox.helper("requests.complete", {"requestId": req["id"], "answers": CONTACT})).status == 200
    [completed] = await events_of(sandbox, type="request.completed")
    assert delivered_to(completed) == {req_done["subscriptionId"]}
    [hit] = await receiver.wait("request", 1)
    assert hit.json["type"] == "request.completed" and hit.json["data"]["request"]["id"] == req["id"]

    # a public-link submit reaches submission_created only, without data.request
    url = await share_link(sandbox)
    sent = await submit(sandbox, url, CONTACT)
    [public] = await events_of(sandbox, type="submission.completed")
    assert delivered_to(public) == {created["subscriptionId"]}
    [hit] = await receiver.wait("created", 1)
    payload = hit.json
    assert payload["type"] == "submission.completed" and "request" not in payload["data"]
    assert payload["data"]["submission"]["id"] == sent["submissionId"]
    assert payload["data"]["submission"]["editCount"] == 0 and payload["data"]["submission"]["updatedAt"] is None
    assert payload["data"]["answers"]["topic"] == "sales" and payload["data"]["display"]["topic"] == "Sales"
    submitted_at = payload["data"]["submission"]["submittedAt"]

    # an edit, an hour later, reaches submission_updated only, keeping submittedAt
    await sandbox.helper("clock.advance", {"ms": 3_600_000})
    token = sent["editUrl"].split("edit=")[1]
    edited = await submit(sandbox, url, {"topic": "support"}, editToken=token)
    assert edited["editCount"] == 1
    [update] = await events_of(sandbox, type="submission.updated")
    assert delivered_to(update) == {updated["subscriptionId"]}
    [hit] = await receiver.wait("updated", 1)
    data = hit.json["data"]
    assert hit.json["type"] == "submission.updated" and "request" not in data
    assert data["submission"]["submittedAt"] == submitted_at
    assert data["submission"]["editCount"] == 1
    assert ms_of(hit.json["createdAt"]) >= ms_of(submitted_at) + 3_600_000
    assert data["submission"]["updatedAt"] == hit.json["createdAt"]
    assert data["answers"]["topic"] == "support" and data["answers"]["name"] == "Ada Lovelace"

    # nothing else went anywhere: requests never produce submission.updated
    await flush(sandbox)
    await asyncio.sleep(0.3)
    assert [len(receiver.at(n)) for n in ("created", "updated", "request")] == [1, 1, 1]
    types = [e["type"] for e in await events_of(sandbox)]
    assert sorted(types) == ["request.completed", "submission.completed", "submission.updated"]
    assert all(e["requestId"] is None for e in await events_of(sandbox, type="submission.updated"))


async def test_request_terminal_events_reach_their_own_subscriptions(sandbox, receiver):
    canceled = await subscribe(sandbox, receiver.url("canceled"), eventType="request_canceled")
    expired = await subscribe(sandbox, receiver.url("expired"), eventType="request_expired")
    await subscribe(sandbox, receiver.url("done"), eventType="request_completed")
    form_id = sandbox.pro.forms["Contact"]
    a = (await sandbox.rpc("requests.create", {"formId": form_id})).data
    await sandbox.rpc("requests.cancel", {"requestId": a["id"], "reason": "Order withdrawn"})
    [ev] = await events_of(sandbox, type="request.canceled")
    assert delivered_to(ev) == {canceled["subscriptionId"]}
    b = (await sandbox.rpc("requests.create", {"formId": form_id, "expiresAt": a["createdAt"] + 3_600_000})).data
    await sandbox.helper("clock.advance", {"ms": 2 * 3_600_000})
    [ev] = await events_of(sandbox, type="request.expired")
    assert ev["requestId"] == b["id"] and delivered_to(ev) == {expired["subscriptionId"]}
    [hit] = await receiver.wait("canceled", 1)
    assert hit.json["data"] == {"request": hit.json["data"]["request"]}  # data.request only
    await receiver.wait("expired", 1)
    assert receiver.at("done") == []


async def test_test_requests_reach_the_callback_but_no_subscription(sandbox, receiver):
    await subscribe(sandbox, receiver.url("sub"), eventType="request_completed")
    req = (await sandbox.rpc("requests.create", {"formId": sandbox.pro.forms["Contact"], "test": True,
                                                 "callbackUrl": receiver.url("callback")})).data
    await sandbox.helper("requests.complete", {"requestId": req["id"], "answers": CONTACT})
    [event] = await events_of(sandbox, type="request.completed")
    assert event["test"] is True and delivered_to(event) == {None}
    [hit] = await receiver.wait("callback", 1)
    assert hit.json["test"] is True and hit.json["type"] == "request.completed"
    assert signature_valid(hit, sandbox.pro.signing_secret)
    await flush(sandbox)
    await asyncio.sleep(0.3)
    assert receiver.at("sub") == []


# -- signing ----------------------------------------------------------------------------------------


async def test_deliveries_are_signed_with_the_subscription_secret_or_the_workspace_one(sandbox, receiver):
    await subscribe(sandbox, receiver.url("own"), signingSecret=SECRET)
    await subscribe(sandbox, receiver.url("none"))
    await submit(sandbox, await share_link(sandbox), CONTACT)
    await flush(sandbox)
    [own] = await receiver.wait("own", 1)
    [plain] = await receiver.wait("none", 1)
    assert signature_valid(own, SECRET) and not signature_valid(own, sandbox.pro.signing_secret)
    assert signature_valid(plain, sandbox.pro.signing_secret) and not signature_valid(plain, SECRET)
    [event] = await events_of(sandbox, type="submission.completed")
    for hit in (own, plain):
        assert hit.headers["Content-Type"] == "application/json"
        assert hit.headers["X-Formstep-Event-Id"] == hit.json["id"] == event["id"]
        assert hit.headers["X-Formstep-Event-Type"] == "submission.completed"
        assert abs(int(SIGNATURE_RE.match(hit.headers["X-Formstep-Signature"]).group(1))
                   - datetime.now().timestamp()) < 300
    assert own.body == plain.body  # one event, the same bytes to every subscriber


async def test_secret_is_stored_but_never_returned(sandbox):
    sub = await subscribe(sandbox, "https://hooks.example.com/a", signingSecret=SECRET)
    with sandbox.service.session() as s:
        assert s.get(Subscription, sub["subscriptionId"]).signing_secret == SECRET
    r = await sandbox.rpc("webhooks.list", {"formId": sandbox.pro.forms["Contact"]})
    assert SECRET not in json.dumps(r.body)


async def test_submission_event_links_the_retained_pdf(sandbox):
    """Business Contact has an automation integration that keeps PDFs: the event's pdfUrl
    serves the PDF; elsewhere pdfUrl is null."""
    sent = await submit(sandbox, await share_link(sandbox, ws="business"), CONTACT, ws="business")
    [event] = await events_of(sandbox, ws="business", type="submission.completed")
    pdf_url = event["payload"]["data"]["submission"]["pdfUrl"]
    assert pdf_url.startswith(sandbox.base_url + "/api/storage/")
    async with sandbox.http.get(pdf_url) as resp:
        assert resp.status == 200 and resp.content_type == "application/pdf"
        assert (await resp.read()).startswith(b"%PDF")
    r = await sandbox.rpc("submissions.pdf", {"formId": sandbox.business.forms["Contact"],
                                              "submissionId": sent["submissionId"]}, ws="business")
    assert r.status == 200 and r.data["url"] == pdf_url
    await submit(sandbox, await share_link(sandbox), CONTACT)
    [plain] = await events_of(sandbox, type="submission.completed")
    assert plain["payload"]["data"]["submission"]["pdfUrl"] is None
    assert plain["payload"]["data"]["form"] == {"id": sandbox.pro.forms["Contact"], "name": "Contact",
                                                "snapshotId": plain["payload"]["data"]["form"]["snapshotId"]}
    assert plain["payload"]["data"]["form"]["snapshotId"].startswith("snap_")
    assert plain["payload"]["apiVersion"] == "2026-09-24" and plain["payload"]["test"] is False
