"""connector.receiver over real HTTP on loopback: the sandbox's own signed deliveries end
to end into the store (SQLite file and PostgreSQL), every bad input refused with its
status and nothing stored, the database going away (503), group commit, /healthz,
/metrics, the ``formsync receive`` command, and properties: no mutation of a validly
signed delivery is ever accepted or answered with a 5xx."""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import os
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr
from sqlalchemy import func
from sqlmodel import SQLModel, select

from connector.config.settings import ReceiverSettings
from connector.receiver.app import create_receiver_app, event_paths, run_receiver
from connector.signing import GITHUB, custom_headers, formstep_headers, sign_formstep, standard_headers
from connector.store import Store
from connector.store._mapping import answer_tuples
from connector.store._tables import RawEvent, RequestRow, SubmissionRow, request_answers

from .conftest import pg_connect, pg_unavailable

CB_SECRET = "whsec_" + "c4" * 32
WH_SECRET = "whsec_" + "7e" * 32
OTHER_SECRET = "whsec_" + "00" * 32
CONTACT = {"name": "Grace Hopper", "email": "grace@example.test", "topic": "sales"}
FORMSYNC = Path(sys.executable).parent / "formsync"


# -- building deliveries -------------------------------------------------------------------------


def envelope(eid: str = "evt_a", type: str = "request.completed", **extra: Any) -> dict[str, Any]:
    """A request.completed envelope shaped like the hosted service's (notes section 3)."""
    env: dict[str, Any] = {
        "id": eid, "type": type, "createdAt": "2026-05-01T10:00:00.000Z", "apiVersion": "2026-09-24", "test": False,
        "data": {
            "request": {"id": f"req_{eid}", "externalId": "x-1", "status": "completed", "outcome": None,
                        "createdAt": "2026-05-01T09:00:00.000Z", "completedAt": "2026-05-01T10:00:00.000Z"},
            "form": {"id": "form_1", "name": "Contact", "snapshotId": "snap_1"},
            "submission": {"id": f"sub_{eid}", "respondentEmail": None, "submittedAt": "2026-05-01T10:00:00.000Z",
                           "updatedAt": None, "editCount": 0, "pdfUrl": None, "language": None},
            "answers": {"name": "Ada", "topic": "sales"}, "display": {"name": "Ada", "topic": "Sales"},
        },
    }
    env.update(extra)
    return env


def encode(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def signed(body: bytes, secret: str = CB_SECRET, t: int | None = None) -> dict[str, str]:
    """Headers of a hosted-style delivery of ``body`` (event id and type headers are
    informative only: the envelope is what counts)."""
    return formstep_headers(secret, body, int(time.time()) if t is None else t, event_id="evt_hdr",
                            event_type="request.completed")


def now() -> int:
    return int(time.time())


def counts(store: Store) -> dict[str, int]:
    out = {}
    with store.database.reader() as s:
        for name, model in (("events", RawEvent), ("submissions", SubmissionRow), ("requests", RequestRow)):
            out[name] = s.exec(select(func.count()).select_from(model)).one()
        out["answers"] = sum(len(answer_tuples(r.id, r.answers, r.display))
                             for r in s.exec(select(SubmissionRow)).all())
    return out


def events_in(db: Path) -> int:
    """How many events the SQLite store at ``db`` holds, read by a store of its own."""
    reopened = Store(f"sqlite:///{db}")
    try:
        return counts(reopened)["events"]
    finally:
        reopened.close()


NOTHING = {"events": 0, "submissions": 0, "answers": 0, "requests": 0}


def rows(store: Store, model: type[SQLModel]) -> list[Any]:
    with store.database.reader() as s:
        return list(s.exec(select(model)).all())


def metric(text: str, name: str, **labels: str) -> float:
    """The value of sample ``name`` with ``labels`` in a Prometheus text exposition (0 if absent)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


# -- a running receiver --------------------------------------------------------------------------


@dataclass
class Rx:
    base: str
    http: aiohttp.ClientSession
    settings: ReceiverSettings
    store: Store

    def url(self, channel: str = "any") -> str:
        return self.base + event_paths(self.settings)[channel]

    async def post(self, body: Any, headers: dict[str, str], channel: str = "any") -> tuple[int, Any, Any]:
        async with self.http.post(self.url(channel), data=body, headers=headers) as resp:
            text = await resp.text()
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = text
            return resp.status, parsed, resp.headers

    async def get(self, path: str) -> tuple[int, str]:
        async with self.http.get(self.base + path) as resp:
            return resp.status, await resp.text()

    async def metrics(self) -> str:
        status, text = await self.get("/metrics")
        assert status == 200
        return text


def receiver_settings(**overrides: Any) -> ReceiverSettings:
    values: dict[str, Any] = {"callback_secrets": [CB_SECRET], "webhook_secrets": [WH_SECRET]}
    values.update(overrides)
    return ReceiverSettings(**values)


@asynccontextmanager
async def running(store: Store, rs: ReceiverSettings | None = None, **kwargs: Any) -> AsyncIterator[Rx]:
    rs = rs or receiver_settings()
    runner = web.AppRunner(create_receiver_app(store, rs, **kwargs))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    http = aiohttp.ClientSession()
    try:
        yield Rx(f"http://127.0.0.1:{port}", http, rs, store)
    finally:
        await http.close()
        await runner.cleanup()


# -- the sandbox's real deliveries, end to end ---------------------------------------------------


async def flush(sandbox: Any) -> list[dict[str, Any]]:
    r = await sandbox.helper("deliveries.flush")
    assert r.status == 200, r.body
    return r.data["attempts"]


async def test_sandbox_callbacks_land_in_the_store(sandbox, store, caplog):
    caplog.set_level(logging.DEBUG)
    rs = receiver_settings(callback_secrets=[sandbox.pro.signing_secret])
    async with running(store, rs) as rx:
        form = sandbox.pro.forms["Contact"]
        r = await sandbox.rpc("requests.create", {"formId": form, "callbackUrl": rx.url("callbacks"),
                                                  "externalId": "e2e-1", "metadata": {"runId": "r-9"},
                                                  "recipient": {"email": "ada@example.test", "name": "Ada"}})
        assert r.status == 200, r.body
        rid = r.data["id"]
        done = await sandbox.helper("requests.complete", {"requestId": rid, "answers": CONTACT})
        assert done.status == 200, done.body
        [attempt] = await flush(sandbox)
        assert attempt["status"] == 200 and attempt["state"] == "delivered"

        [req] = rows(store, RequestRow)
        assert (req.id, req.status, req.form_id, req.external_id) == (rid, "completed", form, "e2e-1")
        assert req.metadata_ == {"runId": "r-9"} and req.recipient_email == "ada@example.test"
        assert req.source == "callback" and req.last_event_id == attempt["eventId"]
        assert req.answers is None and req.submission_id, "a completion's answers are stored once, on the submission"
        with store.database.reader() as s:
            assert s.connection().execute(request_answers()).one().answers == CONTACT
        [sub] = rows(store, SubmissionRow)
        assert (sub.id, sub.request_id, sub.form_id, sub.answers) == (req.submission_id, rid, form, CONTACT)
        answers = {a[1]: json.loads(a[5]) for a in answer_tuples(sub.id, sub.answers, sub.display)}
        assert answers == CONTACT
        [raw] = rows(store, RawEvent)
        assert raw.id == attempt["eventId"] and raw.type == "request.completed" and raw.source == "callback"

        # The sender retries with the same event id: acknowledged, nothing written twice.
        replay = await sandbox.rpc("requests.replayCallback", {"requestId": rid})
        assert replay.status == 200 and replay.data["eventId"] == raw.id
        [again] = await flush(sandbox)
        assert again["status"] == 200 and again["eventId"] == raw.id
        assert counts(store) == {"events": 1, "submissions": 1, "answers": 3, "requests": 1}

        # A cancellation callback updates the request row of another request.
        r = await sandbox.rpc("requests.create", {"formId": form, "callbackUrl": rx.url("callbacks")})
        gone = r.data["id"]
        assert (await sandbox.rpc("requests.cancel", {"requestId": gone, "reason": "Withdrawn"})).status == 200
        [attempt] = await flush(sandbox)
        assert attempt["status"] == 200
        with store.database.reader() as s:
            row = s.get(RequestRow, gone)
        assert row.status == "canceled" and row.cancel_reason == "Withdrawn" and row.canceled_at

        metrics = await rx.metrics()
        assert metric(metrics, "formsync_receiver_stored_total", source="callback") == 2
        assert metric(metrics, "formsync_receiver_duplicates_total") == 1
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert raw.id in text, "log lines name the event id"
    for secret in (sandbox.pro.signing_secret, CB_SECRET, WH_SECRET, sandbox.pro.token):
        assert secret not in text, "no secret or token in a log line"
    assert "sha256=" not in text, "no signature header in a log line"


async def test_sandbox_webhook_subscription_lands_in_the_store(sandbox, store):
    form = sandbox.pro.forms["Contact"]
    sub_secret = "whsec_" + "5a" * 32
    rs = receiver_settings(callback_secrets=[sandbox.pro.signing_secret], webhook_secrets=[OTHER_SECRET, sub_secret])
    async with running(store, rs) as rx:
        r = await sandbox.rpc("webhooks.create", {"formId": form, "targetUrl": rx.url("webhooks"),
                                                  "provider": "zapier", "signingSecret": sub_secret})
        assert r.status == 200, r.body
        link = await sandbox.rpc("shareLinks.create", {"formId": form})
        assert link.status == 200, link.body
        sent = await sandbox.helper("shareLinks.submit", {"url": link.data["url"], "answers": CONTACT})
        assert sent.status == 200, sent.body
        [attempt] = await flush(sandbox)
        assert attempt["status"] == 200
        [sub] = rows(store, SubmissionRow)
        assert (sub.id, sub.form_id, sub.source, sub.answers) == (sent.data["submissionId"], form, "webhook", CONTACT)
        assert sub.request_id is None and sub.form_name == "Contact"
        [raw] = rows(store, RawEvent)
        assert (raw.type, raw.source) == ("submission.completed", "webhook")
        assert counts(store)["answers"] == 3 and rows(store, RequestRow) == []


async def test_a_delivery_signed_for_the_other_channel_is_refused_and_retried(sandbox, sqlite_store):
    """A request callback (workspace secret) sent to the webhook path is 401 there: the
    sandbox records the refusal and keeps the delivery for a retry; nothing is stored."""
    rs = receiver_settings(callback_secrets=[sandbox.pro.signing_secret], webhook_secrets=[WH_SECRET])
    async with running(sqlite_store, rs, store_process=False) as rx:  # refused: nothing to commit
        r = await sandbox.rpc("requests.create", {"formId": sandbox.pro.forms["Contact"],
                                                  "callbackUrl": rx.url("webhooks")})
        rid = r.data["id"]
        assert (await sandbox.helper("requests.complete", {"requestId": rid, "answers": CONTACT})).status == 200
        [attempt] = await flush(sandbox)
        assert attempt["status"] == 401 and attempt["state"] == "pending"
        assert counts(sqlite_store) == NOTHING


async def test_the_plain_path_takes_either_secret_and_keeps_the_source(sqlite_store):
    async with running(sqlite_store) as rx:
        a, b = encode(envelope("evt_cb")), encode(envelope("evt_wh", type="submission.completed"))
        assert (await rx.post(a, signed(a, CB_SECRET)))[0] == 200
        assert (await rx.post(b, signed(b, WH_SECRET)))[0] == 200
        assert (await rx.post(encode(envelope("evt_x")), signed(encode(envelope("evt_x")), OTHER_SECRET)))[0] == 401
    sources = {e.id: e.source for e in rows(sqlite_store, RawEvent)}
    assert sources == {"evt_cb": "callback", "evt_wh": "webhook"}


async def test_rotated_secrets_are_all_accepted(sqlite_store):
    rs = receiver_settings(callback_secrets=[OTHER_SECRET, CB_SECRET])
    async with running(sqlite_store, rs) as rx:
        for i, secret in enumerate((OTHER_SECRET, CB_SECRET)):
            body = encode(envelope(f"evt_rot{i}"))
            status, answer, _ = await rx.post(body, signed(body, secret), "callbacks")
            assert (status, answer["status"]) == (200, "stored")
    assert counts(sqlite_store)["events"] == 2


# -- the bad-input table -------------------------------------------------------------------------

GOOD = encode(envelope())


def deep(n: int) -> bytes:
    return encode(envelope(data={"answers": {"x": "["}})).replace(b'"["', b"[" * n + b"]" * n)


Headers = Callable[[bytes], dict[str, str]] | None
BAD_INPUT: list[tuple[str, bytes, Headers, str, int, str, str | None]] = [
    # (case, body, headers of the body (None: signed now with the callback secret), channel, status, code,
    # signing reason)
    ("missing signature", GOOD, lambda b: {"Content-Type": "application/json"}, "callbacks", 401, "UNAUTHORIZED",
     "missing_header"),
    ("malformed signature", GOOD, lambda b: {"X-Formstep-Signature": f"t={now()},sha256=nothex"}, "callbacks", 401,
     "UNAUTHORIZED", "malformed_header"),
    ("forged signature", GOOD, lambda b: {"X-Formstep-Signature": f"t={now()},sha256={'0' * 64}"}, "callbacks", 401,
     "UNAUTHORIZED", "signature_mismatch"),
    ("stale signature", GOOD, lambda b: signed(b, t=now() - 310), "callbacks", 401, "UNAUTHORIZED",
     "timestamp_out_of_tolerance"),
    ("future signature", GOOD, lambda b: signed(b, t=now() + 310), "callbacks", 401, "UNAUTHORIZED",
     "timestamp_out_of_tolerance"),
    ("wrong secret", GOOD, lambda b: signed(b, OTHER_SECRET), "any", 401, "UNAUTHORIZED", "signature_mismatch"),
    ("webhook secret on the callback path", GOOD, lambda b: signed(b, WH_SECRET), "callbacks", 401, "UNAUTHORIZED",
     "signature_mismatch"),
    ("body changed after signing", GOOD + b" ", lambda b: signed(GOOD), "callbacks", 401, "UNAUTHORIZED",
     "signature_mismatch"),
    ("signature header twice", GOOD, None, "callbacks", 401, "UNAUTHORIZED", "malformed_header"),
    ("malformed JSON", b'{"id": "evt_1", "type": ', None, "callbacks", 400, "INVALID_JSON", None),
    ("not UTF-8", b'{"id": "evt_\xff", "type": "x"}', None, "callbacks", 400, "INVALID_JSON", None),
    ("NaN", b'{"id": "evt_1", "type": "x", "createdAt": "2026-05-01T10:00:00Z", "n": NaN}', None, "callbacks",
     400, "INVALID_JSON", None),
    ("empty body", b"", None, "callbacks", 400, "INVALID_JSON", None),
    ("a JSON array", b"[1, 2]", None, "callbacks", 400, "NOT_AN_EVENT", None),
    ("no id", encode({k: v for k, v in envelope().items() if k != "id"}), None, "callbacks", 400, "NOT_AN_EVENT",
     None),
    ("no type", encode({k: v for k, v in envelope().items() if k != "type"}), None, "callbacks", 400,
     "NOT_AN_EVENT", None),
    ("numeric id", encode(envelope(id=42)), None, "callbacks", 400, "NOT_AN_EVENT", None),
    ("no createdAt", encode({k: v for k, v in envelope().items() if k != "createdAt"}), None, "callbacks", 400,
     "NOT_AN_EVENT", None),
    ("known type, data of the wrong shape", encode(envelope(data={"form": "form_1"})), None, "callbacks", 400,
     "NOT_AN_EVENT", None),
    ("nested past the parser", deep(5000), None, "callbacks", 400, "INVALID_JSON", None),
]
# An event holding what no database can store is set aside, not refused: tests/connector/test_dead_letters.py.
UNSTORABLE: list[tuple[str, bytes, str]] = [
    # (case, body, the field named)
    ("U+0000 in an answer", encode(envelope(data={"answers": {"name": "a\u0000b"}})), "data.answers.name"),
    ("lone surrogate", encode(envelope(data={"answers": {"name": "\ud800"}})), "data.answers.name"),
    ("number out of range", encode(envelope()).replace(b'"editCount":0', b'"editCount":1e999'),
     "data.submission.editCount"),
    ("nested too deeply", deep(100), "data.answers.x"),
]


@pytest.mark.parametrize(("case", "body", "headers", "channel", "status", "code", "reason"), BAD_INPUT,
                         ids=[c[0] for c in BAD_INPUT])
async def test_bad_input_is_refused_and_nothing_is_stored(store, case, body, headers, channel, status, code, reason):
    # Run on both databases: what PostgreSQL would refuse (U+0000, lone surrogates) must be
    # refused before it reaches either. Nothing is committed: no store process to start.
    async with running(store, store_process=False) as rx:
        if case == "signature header twice":
            sig = signed(body)["X-Formstep-Signature"]
            async with rx.http.post(rx.url(channel), data=body,
                                    headers=[("X-Formstep-Signature", sig), ("X-Formstep-Signature", sig)]) as resp:
                got_status, answer = resp.status, await resp.json()
        else:
            got_status, answer, _ = await rx.post(body, signed(body) if headers is None else headers(body), channel)
        assert got_status == status, answer
        assert answer["ok"] is False and answer["error"]["code"] == code
        assert answer["error"]["message"]
        if reason is not None:
            assert answer["error"]["details"]["reason"] == reason
        assert counts(store) == NOTHING


async def test_bad_input_messages_say_what_was_wrong(sqlite_store):
    async with running(sqlite_store) as rx:
        _, a, _ = await rx.post(GOOD, signed(GOOD, t=int(time.time()) - 1000), "callbacks")
        assert "old" in a["error"]["message"] and "300" in a["error"]["message"]
        body = encode({k: v for k, v in envelope().items() if k != "id"})
        _, a, _ = await rx.post(body, signed(body), "callbacks")
        assert a["error"]["details"]["field"] == "id" and "envelope" in a["error"]["message"]
        body = encode(envelope(data={"answers": {"name": "a\u0000b"}}))
        _, a, _ = await rx.post(body, signed(body), "callbacks")
        assert "$.data.answers.name" in a["reason"] and "U+0000" in a["reason"]


async def test_oversized_bodies_are_413_before_and_while_reading(store):
    rs = receiver_settings(max_body_bytes=1024)
    async with running(store, rs) as rx:
        big = encode(envelope(data={"answers": {"note": "x" * 2000}}))
        status, answer, _ = await rx.post(big, signed(big), "callbacks")  # Content-Length says it all
        assert status == 413 and answer["error"]["code"] == "PAYLOAD_TOO_LARGE"
        assert answer["error"]["details"]["maxBytes"] == 1024

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted while reading
            for i in range(0, len(big), 256):
                yield big[i:i + 256]

        async with rx.http.post(rx.url("callbacks"), data=chunks(), headers=signed(big)) as resp:
            assert resp.status == 413 and "Content-Length" not in resp.request_info.headers
        assert counts(store) == NOTHING
        # Exactly at the limit is accepted.
        fit = encode(envelope("evt_fit"))
        fit = fit.replace(b'"Sales"}', b'"Sales' + b"y" * (1024 - len(fit)) + b'"}', 1)
        assert len(fit) == 1024
        status, answer, _ = await rx.post(fit, signed(fit), "callbacks")
        assert status == 200, answer
        metrics = await rx.metrics()
        assert metric(metrics, "formsync_receiver_responses_total", status="413") == 2


async def test_an_unknown_type_is_stored_raw(store):
    async with running(store) as rx:
        payload = {"id": "evt_new", "type": "form.archived", "createdAt": "2026-05-01T10:00:00.000Z",
                   "data": {"form": "an unexpected shape", "extra": [1, 2, 3]}, "newField": True}
        body = encode(payload)
        status, answer, _ = await rx.post(body, signed(body))
        assert (status, answer["status"], answer["type"]) == (200, "stored", "form.archived")
    [raw] = rows(store, RawEvent)
    assert raw.body == body.decode() and raw.payload == payload and raw.source == "callback"
    assert counts(store) == {"events": 1, "submissions": 0, "answers": 0, "requests": 0}


async def test_a_duplicate_is_200_and_never_a_second_row(store):
    async with running(store) as rx:
        body = encode(envelope("evt_dup"))
        first = await rx.post(body, signed(body))
        second = await rx.post(body, signed(body))
        assert (first[0], first[1]["status"]) == (200, "stored")
        assert (second[0], second[1]["status"]) == (200, "duplicate")
        # Two copies at once land in one batch: one is stored, the other is the duplicate.
        twin = encode(envelope("evt_twin"))
        got = await asyncio.gather(rx.post(twin, signed(twin)), rx.post(twin, signed(twin)))
        assert sorted(g[1]["status"] for g in got) == ["duplicate", "stored"] and {g[0] for g in got} == {200}
    assert counts(store) == {"events": 2, "submissions": 2, "answers": 4, "requests": 2}


@pytest.mark.parametrize("store_process", [True, False], ids=["process", "thread"])
async def test_group_commit_batches_and_one_bad_event_does_not_fail_the_others(store, store_process):
    async with running(store, store_process=store_process) as rx:
        bodies = [encode(envelope(f"evt_g{i:03d}")) for i in range(60)]
        bad = [(b"{not json", signed(b"{not json")), (bodies[0], signed(bodies[0], OTHER_SECRET)),
               (encode({"type": "x"}), signed(encode({"type": "x"})))]
        tasks = [rx.post(b, signed(b)) for b in bodies] + [rx.post(b, h) for b, h in bad]
        got = await asyncio.gather(*tasks)
        assert [g[0] for g in got[:60]] == [200] * 60 and all(g[1]["status"] == "stored" for g in got[:60])
        assert [g[0] for g in got[60:]] == [400, 401, 400]
        metrics = await rx.metrics()
    assert counts(store) == {"events": 60, "submissions": 60, "answers": 120, "requests": 60}
    # the two bodies refused with 400 were read by the committer, in a batch
    assert metric(metrics, "formsync_receiver_batch_size_sum") == 62
    batches = metric(metrics, "formsync_receiver_batch_size_count")
    assert 1 <= batches < 60, "concurrent deliveries share commits"
    assert metric(metrics, "formsync_receiver_commit_seconds_count") == batches


@pytest.mark.parametrize("store_process", [True, False], ids=["process", "thread"])
async def test_an_event_the_database_refuses_does_not_fail_its_batch(store, store_process):
    """The database itself refuses one event type (a constraint added here): the batch is
    retried event by event, so the others are stored and only that one fails."""
    with store.database.engine.begin() as conn:
        if conn.dialect.name in ("postgresql", "mysql"):
            conn.exec_driver_sql("ALTER TABLE formsync_events ADD CONSTRAINT no_poison CHECK (type <> 'poison.type')")
        else:
            conn.exec_driver_sql("CREATE TRIGGER no_poison BEFORE INSERT ON formsync_events "
                                 "WHEN NEW.type = 'poison.type' BEGIN SELECT RAISE(ABORT, 'poison'); END")
    async with running(store, store_process=store_process) as rx:
        bodies = [encode(envelope(f"evt_ok{i:02d}")) for i in range(20)]
        poison = encode({"id": "evt_poison", "type": "poison.type", "createdAt": "2026-05-01T10:00:00Z"})
        got = await asyncio.gather(*(rx.post(b, signed(b)) for b in [*bodies[:10], poison, *bodies[10:]]))
        statuses = [g[0] for g in got]
        assert statuses[:10] + statuses[11:] == [200] * 20
        assert statuses[10] == 500 and got[10][1]["error"]["code"] == "STORE_FAILED"
        assert "evt_poison" in got[10][1]["error"]["message"]
    assert counts(store) == {"events": 20, "submissions": 20, "answers": 40, "requests": 20}


async def test_shutdown_finishes_the_pending_batch(tmp_path):
    """Shutdown starts while 30 deliveries wait for a commit (another connection holds
    the SQLite write lock): each still gets its 200 after its commit, and all are stored."""
    path = tmp_path / "slow.db"
    store = Store(f"sqlite:///{path}")
    store.migrate()
    runner = web.AppRunner(create_receiver_app(store, receiver_settings()), shutdown_timeout=30)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/formsync/events"
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        async with aiohttp.ClientSession() as http:

            async def send(body: bytes) -> tuple[int, str]:
                async with http.post(url, data=body, headers=signed(body)) as resp:
                    return resp.status, (await resp.json())["status"]

            posts = [asyncio.create_task(send(encode(envelope(f"evt_sd{i:02d}")))) for i in range(30)]
            for _ in range(200):  # until the first batch is waiting on the lock
                async with http.get(url.rsplit("/formsync", 1)[0] + "/metrics") as resp:
                    text = await resp.text()
                if metric(text, "formsync_receiver_received_total", channel="any") == 30:
                    break
                await asyncio.sleep(0.02)
            assert not any(p.done() for p in posts)
            shutdown = asyncio.create_task(runner.cleanup())
            await asyncio.sleep(0.3)
            assert not shutdown.done(), "shutdown waits for the deliveries in flight"
            blocker.execute("COMMIT")
            got = await asyncio.gather(*posts)
            await shutdown
        assert got == [(200, "stored")] * 30
        assert counts(store)["events"] == 30
    finally:
        blocker.close()
        store.close()


# -- the database going away ---------------------------------------------------------------------


async def test_sqlite_unavailable_is_503_then_recovers(tmp_path):
    path = tmp_path / "gone.db"
    store = Store(f"sqlite:///{path}")
    store.migrate()
    try:
        async with running(store) as rx:
            assert (await rx.get("/healthz"))[0] == 200
            # The file is replaced by a directory: no connection can open it.
            store.close()
            aside = tmp_path / "aside.db"
            path.rename(aside)
            path.mkdir()
            body = encode(envelope("evt_outage"))
            statuses = set()
            for _ in range(3):
                status, answer, headers = await rx.post(body, signed(body))
                statuses.add(status)
                assert answer["error"]["code"] == "UNAVAILABLE" and headers["Retry-After"]
            assert statuses == {503}
            assert (await rx.get("/healthz"))[0] == 503
            status, text = await rx.get("/readyz")
            assert status == 503 and json.loads(text)["database"] == "not writable (unable to open database file)"
            metrics = await rx.metrics()
            assert metric(metrics, "formsync_receiver_responses_total", status="503") == 3
            assert metric(metrics, "formsync_receiver_responses_total", status="500") == 0
            path.rmdir()
            aside.rename(path)
            assert counts(store) == NOTHING
            status, answer, _ = await rx.post(body, signed(body))
            assert (status, answer["status"]) == (200, "stored")
            assert (await rx.get("/healthz"))[0] == 200
            assert (await rx.get("/readyz"))[0] == 200
        assert counts(store)["events"] == 1
    finally:
        store.close()


async def test_postgresql_dropped_is_503_never_500():
    try:
        admin = pg_connect("postgres")
    except Exception as e:  # noqa: BLE001 - any failure to reach the server means "no server"
        pg_unavailable(str(e))
    name = f"formsync_rx_{os.getpid()}_{int(time.time())}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    store = Store(f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}")
    try:
        store.migrate()
        async with running(store) as rx:
            body = encode(envelope("evt_before"))
            assert (await rx.post(body, signed(body)))[0] == 200
            with pg_connect("postgres") as conn:
                conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            got = await asyncio.gather(*(rx.post(b, signed(b)) for b in
                                         [encode(envelope(f"evt_during{i}")) for i in range(5)]))
            assert [g[0] for g in got] == [503] * 5
            assert all(g[1]["error"]["code"] == "UNAVAILABLE" for g in got)
            assert (await rx.get("/healthz"))[0] == 503
            status, text = await rx.get("/readyz")
            assert (status, json.loads(text)["database"]) == (503, "unavailable")
            metrics = await rx.metrics()
            assert metric(metrics, "formsync_receiver_rejected_total", reason="unavailable") == 5
    finally:
        store.close()
        with pg_connect("postgres") as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- health, metrics, schemes, configuration ----------------------------------------------------


async def test_healthz_and_metrics_move(sqlite_store):
    async with running(sqlite_store, receiver_settings(max_body_bytes=2048)) as rx:
        status, text = await rx.get("/healthz")
        assert status == 200 and json.loads(text)["database"] == "up"
        async with rx.http.get(rx.base + "/metrics") as resp:
            assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
        before = await rx.metrics()
        assert metric(before, "formsync_receiver_stored_total", source="callback") == 0
        body = encode(envelope("evt_m"))
        await rx.post(body, signed(body))                            # stored
        await rx.post(body, signed(body))                            # duplicate
        await rx.post(body, signed(body, OTHER_SECRET))              # 401
        await rx.post(b"[]", signed(b"[]"))                          # 400
        await rx.post(b"x" * 4096, signed(b"x" * 4096))              # 413
        after = await rx.metrics()
    assert metric(after, "formsync_receiver_received_total", channel="any") == 5
    assert metric(after, "formsync_receiver_stored_total", source="callback") == 1
    assert metric(after, "formsync_receiver_duplicates_total") == 1
    assert metric(after, "formsync_receiver_rejected_total", reason="signature_mismatch") == 1
    assert metric(after, "formsync_receiver_rejected_total", reason="not_an_event") == 1
    assert metric(after, "formsync_receiver_rejected_total", reason="too_large") == 1
    for status, n in (("200", 2), ("401", 1), ("400", 1), ("413", 1), ("503", 0)):
        assert metric(after, "formsync_receiver_responses_total", status=status) == n
    assert metric(after, "formsync_receiver_commit_seconds_count") >= 1


async def test_readyz_is_200_only_when_a_delivery_would_be_stored(sqlite_store):
    async with running(sqlite_store) as rx:
        status, text = await rx.get("/readyz")
        assert (status, json.loads(text)) == (200, {"ok": True, "database": "up", "queued": 0})
    # No secret: the database is up (/healthz 200), but every delivery would be refused.
    async with running(sqlite_store, receiver_settings(callback_secrets=[], webhook_secrets=[])) as rx:
        assert (await rx.get("/healthz"))[0] == 200
        status, text = await rx.get("/readyz")
        assert status == 503
        assert json.loads(text) == {"ok": False, "database": "up", "secrets": "none: every delivery is refused "
                                    "with 401", "queued": 0}


async def test_two_receivers_in_one_process_keep_their_own_metrics(tmp_path):
    a, b = Store(f"sqlite:///{tmp_path / 'a.db'}"), Store(f"sqlite:///{tmp_path / 'b.db'}")
    a.migrate()
    b.migrate()
    try:
        async with running(a) as ra, running(b) as rb:
            body = encode(envelope("evt_one"))
            assert (await ra.post(body, signed(body)))[0] == 200
            assert metric(await ra.metrics(), "formsync_receiver_stored_total", source="callback") == 1
            assert metric(await rb.metrics(), "formsync_receiver_stored_total", source="callback") == 0
    finally:
        a.close()
        b.close()


async def test_standard_webhooks_scheme(sqlite_store):
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    async with running(sqlite_store, receiver_settings(scheme="standard", webhook_secrets=[secret])) as rx:
        body = encode(envelope("evt_std"))
        headers = standard_headers(secret, "msg_1", body, int(time.time()))
        assert (await rx.post(body, headers, "webhooks"))[0] == 200
        assert (await rx.post(body, signed(body, secret), "webhooks"))[0] == 401  # the hosted scheme is not it
    assert [e.source for e in rows(sqlite_store, RawEvent)] == ["webhook"]


async def test_custom_scheme_needs_its_definition(sqlite_store):
    rs = receiver_settings(scheme="custom", webhook_secrets=["It's a Secret to Everybody"])
    with pytest.raises(ValueError, match="custom_scheme"):
        create_receiver_app(sqlite_store, rs)
    async with running(sqlite_store, rs, custom_scheme=GITHUB) as rx:
        body = encode(envelope("evt_gh"))
        assert (await rx.post(body, custom_headers(GITHUB, "It's a Secret to Everybody", body), "webhooks"))[0] == 200


async def test_a_custom_scheme_from_the_settings(sqlite_store):
    secret = "It's a Secret to Everybody"
    rs = ReceiverSettings.model_validate({"scheme": "custom", "webhook_secrets": [secret], "custom": {
        "name": "github", "signature_header": "X-Hub-Signature-256", "prefix": "sha256="}})
    async with running(sqlite_store, rs) as rx:
        body = encode(envelope("evt_cfg"))
        assert (await rx.post(body, custom_headers(GITHUB, secret, body), "webhooks"))[0] == 200
        other = encode(envelope("evt_hosted"))
        status, answer, _ = await rx.post(other, signed(other, secret), "webhooks")
        assert status == 401 and answer["error"]["details"]["reason"] == "missing_header"
    assert [r.id for r in rows(sqlite_store, RawEvent)] == ["evt_cfg"]


def test_an_unusable_secret_is_refused_at_startup(sqlite_store):
    with pytest.raises(ValueError, match="unusable"):
        create_receiver_app(sqlite_store, receiver_settings(scheme="standard", webhook_secrets=["whsec_!!notb64"]))


async def test_without_secrets_everything_is_401(sqlite_store):
    async with running(sqlite_store, ReceiverSettings(), store_process=False) as rx:  # nothing to commit
        body = encode(envelope())
        status, answer, _ = await rx.post(body, signed(body))
        assert status == 401 and answer["error"]["details"]["reason"] == "no_secret"
    assert counts(sqlite_store) == NOTHING


# -- the `formsync receive` command --------------------------------------------------------------


async def test_formsync_receive_serves_and_stops_gracefully(tmp_path):
    config = tmp_path / "formsync.toml"
    config.write_text(f'[receiver]\npath = "/hooks"\ncallback_secrets = ["{CB_SECRET}"]\n')
    db = tmp_path / "cli.db"
    proc = await asyncio.create_subprocess_exec(
        str(FORMSYNC), "receive", "--config", str(config), "--port", "0", "--db", f"sqlite:///{db}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert "listening on http://127.0.0.1:" in line, line + (await proc.stderr.read()).decode()
        base = line.split("listening on ", 1)[1].split()[0]
        assert base.endswith("/hooks")
        async with aiohttp.ClientSession() as http:

            async def send(body: bytes) -> int:
                async with http.post(base + "/callbacks", data=body, headers=signed(body)) as resp:
                    return resp.status

            statuses = await asyncio.gather(*(send(encode(envelope(f"evt_cli{i}"))) for i in range(20)))
            assert statuses == [200] * 20
            async with http.get(base.rsplit("/hooks", 1)[0] + "/healthz") as resp:
                assert resp.status == 200
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, err.decode()
        assert CB_SECRET not in err.decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert events_in(db) == 20


@pytest.mark.slow
async def test_every_acknowledged_event_survives_kill_9(tmp_path, db_url):
    """A 2xx is only sent after the commit: events acknowledged by ``formsync receive``
    are all in the database after the process is killed with SIGKILL under load."""
    config = tmp_path / "formsync.toml"
    config.write_text(f'[receiver]\ncallback_secrets = ["{CB_SECRET}"]\n')
    proc = await asyncio.create_subprocess_exec(
        str(FORMSYNC), "receive", "--config", str(config), "--port", "0", "--db", db_url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    acked: list[str] = []
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert "listening on http://" in line, line + (await proc.stderr.read()).decode()
        url = line.split("listening on ", 1)[1].split()[0] + "/callbacks"
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(timeout=timeout) as http:

            async def sender(n: int) -> None:
                for i in range(10_000):
                    eid = f"evt_k{n:02d}_{i:05d}"
                    body = encode(envelope(eid))
                    try:
                        async with http.post(url, data=body, headers=signed(body)) as resp:
                            if resp.status == 200:
                                acked.append(eid)
                    except (aiohttp.ClientError, TimeoutError):
                        return  # the receiver is gone

            senders = [asyncio.create_task(sender(n)) for n in range(16)]
            for _ in range(300):  # until a few hundred events are acknowledged (at most 15 s)
                if len(acked) >= 300:
                    break
                await asyncio.sleep(0.05)
            proc.kill()
            await asyncio.wait_for(proc.wait(), 10)
            await asyncio.wait_for(asyncio.gather(*senders), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert len(acked) >= 50, "the receiver acknowledged events before it was killed"
    reopened = Store(db_url)
    try:
        with reopened.database.reader() as s:
            stored = set(s.exec(select(RawEvent.id)).all())
    finally:
        reopened.close()
    lost = set(acked) - stored
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged events are missing after kill -9"


async def test_formsync_receive_refuses_a_missing_config(tmp_path):
    proc = await asyncio.create_subprocess_exec(
        str(FORMSYNC), "receive", "--config", str(tmp_path / "nope.toml"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "400"})  # a wide terminal: the message is not wrapped
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2 and "does not exist" in err.decode()


# -- properties: no mutation of a signed delivery gets through ----------------------------------


class ThreadedReceiver:
    """A receiver served by ``run_receiver`` on its own event loop in a thread, for the
    synchronous property tests (hypothesis drives plain functions)."""

    def __init__(self, store: Store, rs: ReceiverSettings) -> None:
        self.store, self.rs = store, rs
        self.ready = threading.Event()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()

            def on_ready(url: str) -> None:
                self.port = int(url.rsplit(":", 1)[1])
                self.ready.set()

            await run_receiver(self.store, self.rs, host="127.0.0.1", port=0, on_ready=on_ready, stop=self._stop)

        asyncio.run(serve())

    def __enter__(self) -> ThreadedReceiver:
        self._thread.start()
        assert self.ready.wait(30), "receiver did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def post(self, path: str, body: bytes, headers: list[tuple[str, str]]) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.putrequest("POST", path)
            conn.putheader("Content-Length", str(len(body)))
            for name, value in headers:
                conn.putheader(name, value)
            conn.endheaders(body)
            resp = conn.getresponse()
            resp.read()
            return resp.status
        finally:
            conn.close()


@pytest.fixture
def threaded(sqlite_store: Store) -> Iterator[ThreadedReceiver]:
    with ThreadedReceiver(sqlite_store, receiver_settings()) as rx:
        yield rx


PROP_BODY = encode(envelope("evt_prop", data={"answers": {f"q{i}": f"answer {i}" for i in range(5)}}))
ASCII = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=80)


KINDS = ["flip", "insert", "truncate_body", "timestamp", "stale", "truncate_sig", "case", "space", "duplicate",
         "drop", "garbage", "wrong_secret", "legacy_garbage"]
SIG_LENGTH = len(sign_formstep(CB_SECRET, PROP_BODY, 1_700_000_000))  # t has 10 digits until 2286


@st.composite
def mutations(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """What to change in a validly signed delivery: a kind and its parameters. Drawn
    without looking at the signature (which depends on the clock), so every run draws
    the same examples; ``apply`` makes the change."""
    kind = draw(st.sampled_from(KINDS))
    p: dict[str, Any] = {}
    if kind == "flip":
        p = {"at": draw(st.integers(0, len(PROP_BODY) - 1)), "xor": draw(st.integers(1, 255))}
    elif kind == "insert":
        p = {"at": draw(st.integers(0, len(PROP_BODY))), "bytes": draw(st.binary(min_size=1, max_size=4))}
    elif kind == "truncate_body":
        p = {"to": draw(st.integers(0, len(PROP_BODY) - 1))}
    elif kind == "timestamp":  # the same digest under another t
        p = {"delta": draw(st.integers(-10**6, 10**6).filter(lambda d: d != 0))}
    elif kind == "stale":  # correctly signed, but out of tolerance
        p = {"delta": draw(st.integers(301, 10**7)) * draw(st.sampled_from([-1, 1]))}
    elif kind == "truncate_sig":
        p = {"to": draw(st.integers(0, SIG_LENGTH - 1))}
    elif kind == "case":  # upper-case some letters (the n-th letters of the value)
        p = {"letters": draw(st.sets(st.integers(0, 30), min_size=1, max_size=10))}
    elif kind == "space":  # inside the value: leading and trailing spaces are not part of a header value
        p = {"at": draw(st.integers(1, SIG_LENGTH - 1)), "n": draw(st.integers(1, 3))}
    elif kind == "duplicate":
        p = {"name": draw(st.sampled_from(["X-Formstep-Signature", "x-formstep-signature", "X-FORMSTEP-SIGNATURE"])),
             "other": draw(st.one_of(st.none(), ASCII))}
    elif kind in ("garbage", "legacy_garbage"):
        p = {"value": draw(ASCII)}
    elif kind == "wrong_secret":
        p = {"secret": draw(ASCII.filter(lambda x: x != CB_SECRET))}
    return kind, p


def apply(kind: str, p: dict[str, Any], t: int) -> tuple[bytes, list[tuple[str, str]]]:
    """The delivery of PROP_BODY signed at ``t`` with the change ``kind`` made."""
    body = PROP_BODY
    sig = sign_formstep(CB_SECRET, body, t)
    if kind == "flip":
        body = body[:p["at"]] + bytes([body[p["at"]] ^ p["xor"]]) + body[p["at"] + 1:]
    elif kind == "insert":
        body = body[:p["at"]] + p["bytes"] + body[p["at"]:]
    elif kind == "truncate_body":
        body = body[:p["to"]]
    elif kind == "timestamp":
        sig = sig.replace(f"t={t}", f"t={t + p['delta']}")
    elif kind == "stale":
        sig = sign_formstep(CB_SECRET, body, t + p["delta"])
    elif kind == "truncate_sig":
        sig = sig[:p["to"]]
    elif kind == "case":
        letters = [i for i, c in enumerate(sig) if c.isalpha()]
        chosen = {letters[n % len(letters)] for n in p["letters"]}
        sig = "".join(c.upper() if i in chosen else c for i, c in enumerate(sig))
    elif kind == "space":
        sig = sig[:p["at"]] + " " * p["n"] + sig[p["at"]:]
    elif kind == "garbage":
        sig = p["value"]
    elif kind == "wrong_secret":
        sig = sign_formstep(p["secret"], body, t)
    headers = [("Content-Type", "application/json")]
    if kind == "duplicate":
        headers += [("X-Formstep-Signature", sig), (p["name"], sig if p["other"] is None else p["other"])]
    elif kind == "legacy_garbage":  # only the legacy header, with anything in it
        headers.append(("X-formbase-Signature", p["value"]))
    elif kind != "drop":
        headers.append(("X-Formstep-Signature", sig))
    return body, headers


@pytest.mark.slow  # 200 mutated deliveries through a real receiver: about 10 s
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutations(), st.sampled_from(["callbacks", "any"]))
def test_no_mutated_delivery_is_accepted_or_answered_5xx(threaded, mutation, channel):
    kind, params = mutation
    body, headers = apply(kind, params, int(time.time()))
    status = threaded.post(event_paths(threaded.rs)[channel], body, headers)
    assert 400 <= status < 500, f"{kind} {params}: {status}"
    with threaded.store.database.reader() as s:
        assert s.exec(select(func.count()).select_from(RawEvent)).one() == 0, kind


def test_the_unmutated_delivery_is_accepted(threaded):
    """The baseline of the property test passes, so the mutations are what is refused."""
    t = int(time.time())
    headers = [("Content-Type", "application/json"), ("X-Formstep-Signature", sign_formstep(CB_SECRET, PROP_BODY, t))]
    assert threaded.post(event_paths(threaded.rs)["callbacks"], PROP_BODY, headers) == 200
    assert threaded.post(event_paths(threaded.rs)["callbacks"], PROP_BODY, headers) == 200
    with threaded.store.database.reader() as s:
        assert s.exec(select(func.count()).select_from(RawEvent)).one() == 1


def test_secret_settings_never_print():
    rs = receiver_settings()
    assert CB_SECRET not in repr(rs) and CB_SECRET not in str(rs.model_dump())
    assert isinstance(rs.callback_secrets[0], SecretStr)



# The integer columns an event fills from the wire (its times are datetimes, always in range).
WIRE_INTEGERS = [("edit_count", "editCount")]


@pytest.mark.parametrize(("column", "wire"), WIRE_INTEGERS)
@pytest.mark.parametrize("value", [2**31, 2**63 - 1, -(2**63)])
async def test_an_integer_a_64_bit_column_holds_is_stored(store, column, wire, value):
    """Past PostgreSQL's 32-bit integers but within 64 bits: stored as sent, on each database."""
    ev = envelope()
    ev["data"]["submission"][wire] = value
    body = encode(ev)
    async with running(store) as rx:
        status, answer, _ = await rx.post(body, signed(body), "callbacks")
    assert status == 200 and answer["status"] == "stored", answer
    [sub] = rows(store, SubmissionRow)
    assert getattr(sub, column) == value


@pytest.mark.parametrize(("column", "wire"), WIRE_INTEGERS)
@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 10**30])
async def test_an_integer_no_database_column_holds_is_set_aside_with_its_field(store, column, wire, value):
    """Beyond 64 bits no supported database has a column for it: the event is set aside
    naming the field and acknowledged (the sender stops retrying what can never be
    stored as is), and nothing is stored as an event."""
    ev = envelope()
    ev["data"]["submission"][wire] = value
    body = encode(ev)
    async with running(store) as rx:
        status, answer, _ = await rx.post(body, signed(body), "callbacks")
    assert status == 200 and answer["status"] == "set_aside", answer
    assert str(value) in answer["reason"]
    [letter] = list(store.dead_letters)
    assert (letter.code, letter.field, letter.body) == ("UNSTORABLE_EVENT", f"data.submission.{wire}", body)
    assert counts(store) == NOTHING
