"""Spec "Events" with the notes' sections 3 and 4: a real receiver takes each request
callback, checks its signature with an HMAC written here from the notes, and sees the
retry schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, then given up) on the test
clock; requests.replayCallback sends the same event again."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

from formservice.ids import new_id
from formservice.tables import Subscription

from .requests_support import (
    CONTACT_ANSWERS,
    HOUR_MS,
    ID_RE,
    ISO_MS_Z,
    MINUTE_MS,
    Receiver,
    advance,
    complete,
    created_id,
    events,
    flush,
    get,
    hosted_signature,
    now,
    signature_time,
    verify,
)

RETRY_WAITS_MS = [5_000, 5 * MINUTE_MS, 30 * MINUTE_MS, 2 * HOUR_MS, 5 * HOUR_MS, 10 * HOUR_MS, 10 * HOUR_MS]
ENVELOPE_KEYS = {"id", "type", "createdAt", "apiVersion", "test", "data"}
REQUEST_DATA_KEYS = {"id", "externalId", "status", "outcome", "language", "recipient", "metadata", "context",
                     "createdAt"}


def only_delivery(evs: list[dict[str, Any]]) -> dict[str, Any]:
    [ev] = evs
    [d] = ev["deliveries"]
    return d


def subscribe(sandbox: Any, form: str, url: str, event_type: str, ws: str = "pro") -> str:
    """A webhook subscription of ``form``, stored as webhooks.create stores one."""
    w = sandbox.workspaces[ws]
    sub = Subscription(id=new_id("int"), workspace_id=w.id, form_id=w.forms[form], target_url=url, provider="n8n",
                       event_type=event_type, created_at=int(time.time() * 1000))
    with sandbox.service.session() as s:
        s.add(sub)
        s.commit()
    return sub.id


# -- the signature ----------------------------------------------------------------------------


def test_the_independent_checker_reproduces_the_published_vector():
    secret = "whsec_" + "ab" * 32
    body = b'{"id":"evt_01example","type":"request.completed","test":true}'
    header = "t=1700000000,sha256=0693fdb507d63901918d9742024797e116c2d84a880e394063e7c296d9f0ad5d"
    assert hosted_signature(secret, 1700000000, body) == header
    assert verify(secret, header, body)
    assert not verify(secret, header, body + b" ")
    assert not verify(secret, header.replace("t=1700000000", "t=1700000001"), body)


# -- callbacks ----------------------------------------------------------------------------------


async def test_completion_callback_is_signed_with_the_workspace_secret(sandbox):
    async with Receiver() as rx:
        rid = await created_id(sandbox, callbackUrl=rx.url, externalId="cb-1", metadata={"runId": "r-1"},
                               recipient={"email": "ada@example.test", "name": "Ada"})
        assert (await complete(sandbox, rid, CONTACT_ANSWERS)).status == 200
        await flush(sandbox)
        [got] = rx.received
        await flush(sandbox)
        assert len(rx.received) == 1, "one delivery per terminal event"
    h = got.headers
    assert h["Content-Type"].startswith("application/json")
    header = h["X-Formstep-Signature"]
    assert verify(sandbox.pro.signing_secret, header, got.body), "HMAC over '<t>.' + raw body, workspace secret"
    assert not verify(sandbox.business.signing_secret, header, got.body)
    assert abs(signature_time(header) - time.time()) <= 300, "t is wall-clock unix seconds"
    assert not any(k.lower().startswith("x-formbase-") for k in h), "legacy headers are no longer sent"
    env = got.json
    assert set(env) == ENVELOPE_KEYS
    assert h["X-Formstep-Event-Id"] == env["id"] and re.fullmatch(f"evt_{ID_RE}", env["id"])
    assert h["X-Formstep-Event-Type"] == env["type"] == "request.completed"
    assert env["test"] is False and env["apiVersion"] == "2026-09-24" and ISO_MS_Z.match(env["createdAt"])
    data = env["data"]
    assert set(data) == {"request", "form", "submission", "answers", "display"}
    req = data["request"]
    assert set(req) == REQUEST_DATA_KEYS | {"completedAt"}
    assert req["id"] == rid and req["status"] == "completed" and req["outcome"] is None
    assert req["externalId"] == "cb-1" and req["metadata"] == {"runId": "r-1"}
    assert req["recipient"] == {"email": "ada@example.test", "name": "Ada"}
    assert req["language"] == "en" and req["context"] == {}, "as the request record shows them"
    assert ISO_MS_Z.match(req["createdAt"]) and ISO_MS_Z.match(req["completedAt"])
    rec = await get(sandbox, rid)
    assert data["answers"] == rec["answers"] and data["display"] == rec["display"]
    assert data["form"] == {"id": sandbox.pro.forms["Contact"], "name": "Contact", "snapshotId": rec["formSnapshotId"]}
    sub = data["submission"]
    assert set(sub) == {"id", "respondentEmail", "submittedAt", "updatedAt", "editCount", "pdfUrl", "language"}
    assert sub["id"] == rec["submissionId"] and sub["updatedAt"] is None and sub["editCount"] == 0
    assert ISO_MS_Z.match(sub["submittedAt"])
    # the attempt is recorded, and the request's timeline shows the callback
    d = only_delivery(await events(sandbox, requestId=rid))
    assert d["kind"] == "callback" and d["state"] == "delivered" and d["attemptCount"] == 1
    assert [(a["status"], a["signature"]) for a in d["attempts"]] == [(200, header)]
    entry = rec["timeline"][-1]
    assert (entry["id"], entry["type"], entry["attemptCount"], entry["eventType"]) == \
        (f"{rid}:callback", "callback", 1, "request.completed")
    assert rec["callbackFailedAt"] is None
    # the secret is only on the dashboard: never in an API answer
    for method, params in (("requests.get", {"requestId": rid}), ("me.get", {}),
                           ("workspaces.list", {})):
        r = await sandbox.rpc(method, params)
        assert r.status == 200 and sandbox.pro.signing_secret not in json.dumps(r.body), method


async def test_expiry_and_cancellation_callbacks_carry_the_request_only(sandbox):
    async with Receiver() as rx:
        t = await now(sandbox)
        late = await created_id(sandbox, callbackUrl=rx.url, expiresAt=t + HOUR_MS, externalId="late",
                                metadata={"m": 1})
        gone = await created_id(sandbox, callbackUrl=rx.url, externalId="gone")
        assert (await sandbox.rpc("requests.cancel", {"requestId": gone, "reason": "Duplicate"})).status == 200
        await advance(sandbox, HOUR_MS)
        await flush(sandbox)
        await flush(sandbox)
        by_type = {r.json["type"]: r for r in rx.received}
        assert len(rx.received) == 2 and set(by_type) == {"request.expired", "request.canceled"}
    for r in rx.received:
        assert verify(sandbox.pro.signing_secret, r.headers["X-Formstep-Signature"], r.body)
        assert set(r.json) == ENVELOPE_KEYS and set(r.json["data"]) == {"request"}
        assert r.headers["X-Formstep-Event-Type"] == r.json["type"]
    expired = by_type["request.expired"].json["data"]["request"]
    assert set(expired) == REQUEST_DATA_KEYS | {"expiredAt"}
    assert expired["id"] == late and expired["status"] == "expired" and expired["externalId"] == "late"
    assert expired["metadata"] == {"m": 1} and ISO_MS_Z.match(expired["expiredAt"])
    canceled = by_type["request.canceled"].json["data"]["request"]
    assert set(canceled) == REQUEST_DATA_KEYS | {"canceledAt", "cancelReason"}
    assert canceled["id"] == gone and canceled["status"] == "canceled" and canceled["cancelReason"] == "Duplicate"


async def test_test_request_callback_says_test_and_no_subscription_gets_it(sandbox):
    async with Receiver() as callback, Receiver() as hook:
        subscribe(sandbox, "Contact", hook.url, "request_completed")
        test = await created_id(sandbox, callbackUrl=callback.url, test=True, externalId="t")
        real = await created_id(sandbox, callbackUrl=callback.url, externalId="r")
        for rid in (test, real):
            assert (await complete(sandbox, rid, CONTACT_ANSWERS)).status == 200
        await flush(sandbox)
        assert sorted((r.json["data"]["request"]["externalId"], r.json["test"]) for r in callback.received) == [
            ("r", False), ("t", True)]
        [webhook] = hook.received
    assert webhook.json["data"]["request"]["id"] == real, "only the real request reaches the subscription"
    assert webhook.json["type"] == "request.completed"
    assert verify(sandbox.pro.signing_secret, webhook.headers["X-Formstep-Signature"], webhook.body), \
        "a subscription without its own secret is signed with the workspace secret"
    [ev] = await events(sandbox, requestId=test)
    assert [d["kind"] for d in ev["deliveries"]] == ["callback"]


# -- retries ------------------------------------------------------------------------------------


async def test_failed_callbacks_are_retried_with_the_same_event_and_a_fresh_signature(sandbox):
    async with Receiver(failures=2) as rx:
        rid = await created_id(sandbox, callbackUrl=rx.url)
        assert (await complete(sandbox, rid, CONTACT_ANSWERS)).status == 200
        await flush(sandbox)
        assert [r.status for r in rx.received] == [500]
        await advance(sandbox, 4_000)
        await flush(sandbox)
        assert len(rx.received) == 1, "not before the 5 s wait"
        await asyncio.sleep(1.1)  # t is whole wall-clock seconds: the next one must differ
        await flush(sandbox)
        assert [r.status for r in rx.received] == [500, 500]
        await advance(sandbox, 5 * MINUTE_MS)
        await flush(sandbox)
        assert [r.status for r in rx.received] == [500, 500, 200]
    first, second, third = rx.received
    assert len({r.headers["X-Formstep-Event-Id"] for r in rx.received}) == 1, "the same event id every attempt"
    assert first.body == second.body == third.body
    signatures = [r.headers["X-Formstep-Signature"] for r in rx.received]
    assert all(verify(sandbox.pro.signing_secret, s, first.body) for s in signatures), "each attempt is signed"
    assert signature_time(signatures[1]) > signature_time(signatures[0]), "a fresh t on the retry"
    assert signatures[1] != signatures[0]
    d = only_delivery(await events(sandbox, requestId=rid))
    assert d["state"] == "delivered" and d["attemptCount"] == 3
    assert [a["status"] for a in d["attempts"]] == [500, 500, 200]
    assert [a["signature"] for a in d["attempts"]] == signatures
    ats = [a["at"] for a in d["attempts"]]
    assert ats[1] - ats[0] >= 5_000 and ats[2] - ats[1] >= 5 * MINUTE_MS
    rec = await get(sandbox, rid)
    assert rec["callbackFailedAt"] is None
    assert [(e["attemptCount"], e["detail"]) for e in rec["timeline"] if e["type"] == "callback"] == [(3, "delivered")]


async def test_the_whole_retry_schedule_then_the_callback_is_given_up(sandbox):
    async with Receiver(failures=1000, fail_status=503) as rx:
        rid = await created_id(sandbox, callbackUrl=rx.url)
        assert (await complete(sandbox, rid, CONTACT_ANSWERS)).status == 200
        await flush(sandbox)
        for i, wait in enumerate(RETRY_WAITS_MS):
            await advance(sandbox, wait - 1_000)
            await flush(sandbox)
            assert len(rx.received) == i + 1, f"retry {i + 1} came before its wait of {wait} ms"
            await advance(sandbox, 1_000)
            await flush(sandbox)
            assert len(rx.received) == i + 2, f"retry {i + 1} did not come after {wait} ms"
        await advance(sandbox, 24 * HOUR_MS)
        await flush(sandbox)
        assert len(rx.received) == 8, "given up after 8 attempts"
    assert len({r.headers["X-Formstep-Event-Id"] for r in rx.received}) == 1
    assert all(verify(sandbox.pro.signing_secret, r.headers["X-Formstep-Signature"], r.body) for r in rx.received)
    d = only_delivery(await events(sandbox, requestId=rid))
    assert d["state"] == "failed" and d["attemptCount"] == 8 and d["nextAttemptAt"] is None
    assert [a["status"] for a in d["attempts"]] == [503] * 8
    assert all(a["error"] == "HTTP 503" for a in d["attempts"])
    ats = [a["at"] for a in d["attempts"]]
    for i, wait in enumerate(RETRY_WAITS_MS):
        assert wait <= ats[i + 1] - ats[i] < wait + 5_000, (i, ats[i + 1] - ats[i])
    rec = await get(sandbox, rid)
    assert rec["callbackFailedAt"] == ats[-1]
    [entry] = [e for e in rec["timeline"] if e["type"] == "callback"]
    assert entry == {"id": f"{rid}:callback", "at": ats[-1], "type": "callback", "attemptCount": 8,
                     "eventType": "request.completed", "detail": "failed"}
    assert rec["status"] == "completed", "a failed callback does not change the request"


async def test_an_unreachable_receiver_counts_as_a_failed_attempt(sandbox):
    async with Receiver() as rx:
        url = rx.url
    # the receiver is closed: its port refuses connections
    rid = await created_id(sandbox, callbackUrl=url)
    assert (await complete(sandbox, rid, CONTACT_ANSWERS)).status == 200
    await flush(sandbox)
    d = only_delivery(await events(sandbox, requestId=rid))
    [attempt] = d["attempts"]
    assert attempt["status"] is None and attempt["error"]
    assert d["state"] == "pending" and d["nextAttemptAt"] == attempt["at"] + 5_000


# -- requests.replayCallback ---------------------------------------------------------------------


async def test_replay_sends_the_same_event_again(sandbox):
    async with Receiver() as rx:
        rid = await created_id(sandbox, callbackUrl=rx.url)
        (await sandbox.rpc("requests.replayCallback", {"requestId": rid})).expect(
            "CONFLICT", 409, reason="REQUEST_NOT_TERMINAL", field="requestId")
        assert (await complete(sandbox, rid, CONTACT_ANSWERS)).status == 200
        await flush(sandbox)
        await asyncio.sleep(1.1)  # so the replay's signature carries a later t
        r = await sandbox.rpc("requests.replayCallback", {"requestId": rid})
        assert r.status == 200, r.body
        assert set(r.data) == {"dispatchId", "eventId"}
        assert re.fullmatch(f"disp_{ID_RE}", r.data["dispatchId"])
        await flush(sandbox)
        first, again = rx.received
    assert r.data["eventId"] == first.json["id"] == again.json["id"] == again.headers["X-Formstep-Event-Id"]
    assert again.body == first.body
    assert verify(sandbox.pro.signing_secret, again.headers["X-Formstep-Signature"], again.body)
    assert again.headers["X-Formstep-Signature"] != first.headers["X-Formstep-Signature"]
    [ev] = await events(sandbox, requestId=rid)
    assert [d["id"] for d in ev["deliveries"]][1] == r.data["dispatchId"]
    assert [d["state"] for d in ev["deliveries"]] == ["delivered", "delivered"]


async def test_replay_needs_a_callback_url_and_a_request_of_this_workspace(sandbox):
    rid = await created_id(sandbox)
    assert (await sandbox.rpc("requests.cancel", {"requestId": rid})).status == 200
    (await sandbox.rpc("requests.replayCallback", {"requestId": rid})).expect(
        "CONFLICT", 409, reason="NO_CALLBACK_TO_REPLAY", field="requestId")
    foreign = await created_id(sandbox, ws="business", callbackUrl="https://hooks.example.com/x")
    (await sandbox.rpc("requests.replayCallback", {"requestId": foreign})).expect(
        "FORBIDDEN", 403, field="requestId")
    (await sandbox.rpc("requests.replayCallback", {"requestId": "req_nope"})).expect(
        "NOT_FOUND", 404, field="requestId")
    assert [e["deliveries"] for e in await events(sandbox, requestId=rid)] == [[]]


async def test_replay_of_a_canceled_request_sends_its_cancellation(sandbox):
    async with Receiver() as rx:
        rid = await created_id(sandbox, callbackUrl=rx.url)
        assert (await sandbox.rpc("requests.cancel", {"requestId": rid, "reason": "No longer needed"})).status == 200
        r = await sandbox.rpc("requests.replayCallback", {"requestId": rid})
        assert r.status == 200, r.body
        await flush(sandbox)
        assert [x.json["type"] for x in rx.received] == ["request.canceled", "request.canceled"]
        assert {x.json["id"] for x in rx.received} == {r.data["eventId"]}
