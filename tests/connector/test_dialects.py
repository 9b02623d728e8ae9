"""The connector reads every dialect of the service: answers with less than the spec
shows, reasons written in the message, throttled failed authentication, a listing that
answers a record with another status, Retry-After, and documents created with their
sha256. The sandbox runs in its minimal dialect where it can produce the shape; where it
cannot, a small service on loopback answers the odd shape over real HTTP."""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from sqlmodel import select

from connector import errors
from connector.client.rpc import FormClient
from connector.store import Store
from connector.store._tables import RequestRow
from pipelines.sync.poll import poll_once
from pipelines.sync.submissions import sync_all
from tests.conftest import Sandbox

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(120))
TOKEN = "fb_" + "a" * 32
BAD_TOKEN = "fb_" + "z" * 32

# An answer of the odd service: (HTTP status, envelope, headers), or a function of the params.
Answer = tuple[int, dict[str, Any], dict[str, str]]


@dataclass
class OddService:
    """A loopback service that answers each method as the test says and logs the calls."""

    base_url: str = ""
    answers: dict[str, list[Answer | Callable[[dict[str, Any]], Answer]]] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any], float]] = field(default_factory=list)

    def on(self, method: str, *answers: Answer | Callable[[dict[str, Any]], Answer]) -> None:
        """Answer ``method`` with these in turn (the last one repeats)."""
        self.answers[method] = list(answers)

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        method, params = body["method"], body.get("params") or {}
        self.calls.append((method, params, time.monotonic()))
        queue = self.answers[method]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        status, envelope, headers = answer(params) if callable(answer) else answer
        return web.json_response(envelope, status=status, headers=headers)


def ok(data: Any) -> Answer:
    return 200, {"ok": True, "data": data}, {}


def failure(status: int, code: str, message: str, details: dict[str, Any] | None = None,
            headers: dict[str, str] | None = None) -> Answer:
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return status, {"ok": False, "error": error}, headers or {}


@pytest.fixture
async def odd() -> AsyncIterator[OddService]:
    service = OddService()
    app = web.Application()
    app.router.add_post("/api/v1", service.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    service.base_url = str(server.make_url("")).rstrip("/")
    try:
        yield service
    finally:
        await server.close()


def client_of(base_url: str, token: str = TOKEN, **options: Any) -> FormClient:
    return FormClient(base_url, token, calls_per_minute=10_000, creates_per_minute=10_000, **options)


# -- tolerant reading -------------------------------------------------------------------------


async def test_a_forms_list_item_without_created_at_reads_and_sync_covers_every_form(
        odd: OddService, tmp_path: Path) -> None:
    odd.on("forms.list", ok({"items": [{"id": "form_a", "name": "A", "workspaceId": "ws_1", "isPublished": True,
                                        "createdAt": 1},
                                       {"id": "form_b", "name": "B"},  # no createdAt, workspaceId, isPublished
                                       {"id": "form_c"}],
                             "nextCursor": None, "hasMore": False}))
    odd.on("submissions.list", ok({"items": [], "nextCursor": None, "hasMore": False}))
    async with client_of(odd.base_url) as fc:
        forms = [f async for f in fc.iter_forms("ws_1")]
        assert [f.id for f in forms] == ["form_a", "form_b", "form_c"]
        assert (forms[1].createdAt, forms[1].isPublished, forms[2].name) == (None, False, "")
        store = Store(f"sqlite:///{tmp_path}/s.db")
        store.migrate()
        await sync_all(fc, store, "ws_1")
    synced = sorted(p["formId"] for m, p, _ in odd.calls if m == "submissions.list")
    assert synced == ["form_a", "form_b", "form_c"], "sync over all forms reaches the form without createdAt"


async def test_minimal_dialect_answers_only_spec_fields_and_the_client_reads_them(sandbox: Sandbox) -> None:
    assert (await sandbox.helper("dialect.set", {"dialect": "minimal"})).data == {"dialect": "minimal"}
    form = sandbox.pro.forms["Contact"]
    async with client_of(sandbox.base_url, sandbox.pro.token) as fc:
        created = await fc.create_request(form, recipient={"email": "m@example.test", "name": "M"},
                                          metadata={"k": 1})
        record = await fc.get_request(created.id)
        published = await fc.publish_form(form)
        fields = await fc.list_fields(form)
    assert (record.id, record.status, record.metadata) == (created.id, "pending", {"k": 1})
    assert record.recipient is None and record.formId is None, "the spec does not show them"
    assert published.alreadyPublished and published.id is None
    assert fields.items and all(f.maxStars is None for f in fields.items)


# -- reasons ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("message", "reason"), [
    ("REQUEST_NOT_PENDING", "REQUEST_NOT_PENDING"),
    ("FORM_NOT_PUBLISHED", "FORM_NOT_PUBLISHED"),
    ("INVALID_PREFILL_VALUE: plan expects an option key", "INVALID_PREFILL_VALUE"),
    ("Request not found", None),
    ("URL must be https", None),
])
def test_a_reason_shaped_message_fills_reason(message: str, reason: str | None) -> None:
    err = errors.from_envelope({"code": "CONFLICT", "message": message}, 409)
    assert isinstance(err, errors.Conflict) and err.reason == reason
    with_details = errors.from_envelope({"code": "CONFLICT", "message": message,
                                         "details": {"reason": "IDEMPOTENCY_CONFLICT"}}, 409)
    assert with_details.reason == "IDEMPOTENCY_CONFLICT", "details.reason wins over the message"


async def test_a_message_only_reason_over_http_fills_reason(odd: OddService) -> None:
    odd.on("requests.cancel", failure(409, "CONFLICT", "REQUEST_NOT_PENDING"))
    async with client_of(odd.base_url) as fc:
        with pytest.raises(errors.Conflict) as info:
            await fc.cancel_request("req_1")
    assert (info.value.reason, info.value.details) == ("REQUEST_NOT_PENDING", {})


async def test_minimal_dialect_moves_unnamed_reasons_into_the_message(sandbox: Sandbox) -> None:
    await sandbox.helper("dialect.set", {"dialect": "minimal"})
    form = sandbox.pro.forms["Contact"]
    async with client_of(sandbox.base_url, sandbox.pro.token) as fc:
        req = await fc.create_request(form, test=True)
        await fc.cancel_request(req.id)
        with pytest.raises(errors.Conflict) as again:
            await fc.cancel_request(req.id)
        with pytest.raises(errors.ValidationError) as unknown:
            await fc.create_request(form, prefill={"nope": "x"})
    assert "reason" not in again.value.details and again.value.reason == "REQUEST_NOT_PENDING"
    assert again.value.message.startswith("REQUEST_NOT_PENDING: ")
    assert unknown.value.details["reason"] == "UNKNOWN_FIELD_KEY", "a reason the spec names stays in details"


# -- throttled failed authentication -------------------------------------------------------------


@pytest.mark.parametrize("dialect", ["full", "minimal"])
async def test_a_429_on_a_bad_token_is_auth_throttling_and_is_not_retried(sandbox: Sandbox, dialect: str) -> None:
    await sandbox.helper("dialect.set", {"dialect": dialect})
    await sandbox.helper("limits.set", {"failedAuth": 2})
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    async with client_of(sandbox.base_url, BAD_TOKEN, sleep=sleep) as fc:
        for _ in range(2):
            with pytest.raises(errors.Unauthorized):
                await fc.me()
        with pytest.raises(errors.AuthRateLimited) as known_bad:
            await fc.me()
    async with client_of(sandbox.base_url, "fb_" + "y" * 32, sleep=sleep) as fresh:
        with pytest.raises(errors.AuthRateLimited) as first_call:
            await fresh.me()  # never accepted, and asked to wait longer than any per-token window
    assert known_bad.value.attempts == first_call.value.attempts == 1 and slept == []
    assert known_bad.value.status == 429 and known_bad.value.retry_after
    async with client_of(sandbox.base_url, sandbox.pro.token) as good:
        assert (await good.me()).id, "a good token from the same address still works"


def test_a_per_token_429_is_not_auth_throttling() -> None:
    throttled = {"code": "RATE_LIMITED", "message": "slow down", "details": {"retryAfterMs": 900}}
    assert type(errors.from_envelope(throttled, 429)) is errors.RateLimited
    assert type(errors.from_envelope(throttled, 429, token="accepted")) is errors.RateLimited
    assert type(errors.from_envelope(throttled, 429, token="refused")) is errors.AuthRateLimited
    long = {"code": "RATE_LIMITED", "message": "slow down", "details": {"retryAfterMs": 600_000}}
    assert type(errors.from_envelope(long, 429, token="unknown")) is errors.AuthRateLimited
    assert type(errors.from_envelope(long, 429, token="accepted")) is errors.RateLimited


# -- poll does not trust the status filter ---------------------------------------------------------


async def test_poll_rereads_a_record_the_pending_listing_answers_as_completed(odd: OddService,
                                                                              tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/s.db")
    store.migrate()
    store.upsert_requests([{"id": "req_done", "status": "pending", "formId": "form_1", "createdAt": 10,
                            "expiresAt": 10**13},
                           {"id": "req_wait", "status": "pending", "formId": "form_1", "createdAt": 5,
                            "expiresAt": 10**13}])
    summary = {"id": "req_done", "status": "completed", "createdAt": 10, "expiresAt": 10**13}
    odd.on("requests.list", ok({"items": [summary, {"id": "req_wait", "status": "pending", "createdAt": 5}],
                                "nextCursor": None, "hasMore": False}))
    odd.on("requests.get", ok({**summary, "answers": {"name": "Ada"}, "display": {"name": "Ada"}}))
    async with client_of(odd.base_url) as fc:
        report = await poll_once(fc, store, now_ms=1000)
    assert (report.completed, report.still_pending, report.updated) == (1, 1, 1)
    assert [(m, p.get("requestId")) for m, p, _ in odd.calls if m == "requests.get"] == [("requests.get", "req_done")]
    with store.database.reader() as s:
        rows = {r.id: r for r in s.exec(select(RequestRow))}
    assert rows["req_done"].status == "completed"
    assert store.requests.answers(["req_done"])["req_done"][0] == {"name": "Ada"}
    assert rows["req_wait"].status == "pending"


# -- documents carry their sha256 ------------------------------------------------------------------


async def test_create_document_computes_sha256_from_the_bytes(odd: OddService, sandbox: Sandbox) -> None:
    odd.on("documents.create", lambda p: ok({"id": "doc_1", "contentType": p["contentType"],
                                             "uploadUrl": "http://127.0.0.1:9/u"}))
    async with client_of(odd.base_url) as fc:
        await fc.create_document("form_1", "map.png", "image/png", PNG)
    params = odd.calls[0][1]
    assert (params["size"], params["sha256"]) == (len(PNG), hashlib.sha256(PNG).hexdigest())
    approval = sandbox.pro.forms["Approval"]
    async with client_of(sandbox.base_url, sandbox.pro.token) as fc:
        upload = await fc.create_document(approval, "map.png", "image/png", PNG)
        stored = await fc.upload_document(upload, PNG)
        created = await fc.create_request(approval, documents=[{"documentId": upload.id}])
    assert stored.sha256 == hashlib.sha256(PNG).hexdigest() and created.status == "pending"


# -- Retry-After -----------------------------------------------------------------------------------


@pytest.mark.parametrize("with_ms", [False, True])
async def test_retry_after_header_is_honoured(odd: OddService, with_ms: bool) -> None:
    details = {"retryAfterMs": 300} if with_ms else None
    odd.on("me.get", failure(429, "RATE_LIMITED", "Too many calls", details, {"Retry-After": "1"}),
           ok({"id": "usr_1"}))
    async with client_of(odd.base_url) as fc:
        me = await fc.me()
    assert me.id == "usr_1"
    (_, _, first), (_, _, second) = odd.calls
    waited = second - first
    if with_ms:  # the finer retryAfterMs wins over the whole seconds of the header
        assert 0.3 <= waited < 0.9, waited
    else:
        assert 1.0 <= waited < 1.6, waited


def test_retry_after_header_takes_seconds_and_http_dates() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert errors.retry_after_header("3") == 3.0
    assert errors.retry_after_header(format_datetime(now.replace(second=5), usegmt=True), now) == 5.0
    assert errors.retry_after_header(format_datetime(now.replace(minute=0, hour=11), usegmt=True), now) == 0.0
    assert errors.retry_after_header("soon") is None and errors.retry_after_header(None) is None
