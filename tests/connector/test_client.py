"""The connector's async client against the sandbox over loopback: a typed method for
every JSON-RPC method, iterators that follow cursors, one exception class per error code,
retries (RATE_LIMITED, 5xx, dropped connections, timeouts) that never repeat a call that
is not safe to repeat, pacing shared by every client of a token, unknown response fields
ignored, and a token that never shows in a log line, a repr or an exception.

Retries and failures go through a small local proxy in front of the sandbox that fails
its first hits as a test asks (a 500 envelope, a 502 page, a reset connection, a stall,
or an answer lost after the sandbox acted) and counts every hit."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
import socket
import struct
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pydantic
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from pydantic import SecretStr

from connector import errors, models
from connector.client.rpc import FormClient
from connector.config.settings import ServiceSettings
from formservice.domain.base import METHODS
from formservice.service import import_domain

E = TypeVar("E", bound=BaseException)

# Functional tests are marked `dialects` and run against both sandbox dialects (tests/conftest.py);
# the retry and pacing ones are about timing and run on the full dialect only.

# Which API methods each tour test calls through the client (checked against the
# sandbox's own call log); together they must cover every method the service offers.
TOURS: dict[str, set[str]] = {
    "test_identity_methods": {"me.get", "workspaces.list", "methods.list"},
    "test_form_methods": {"forms.list", "forms.get", "forms.create", "forms.update", "forms.publish",
                          "forms.unpublish", "forms.delete", "forms.restore"},
    "test_folder_methods": {"folders.list", "folders.create", "folders.update", "folders.delete"},
    "test_settings_and_translation_methods": {"formSettings.get", "formSettings.update",
                                              "translations.listEntries"},
    "test_submission_and_field_methods": {"submissions.list", "submissions.sample", "submissions.pdf",
                                          "fields.list"},
    "test_request_methods": {"requests.create", "requests.get", "requests.list", "requests.cancel",
                             "requests.remind", "requests.replayCallback", "requests.sample"},
    "test_document_methods": {"documents.create", "requests.create", "requests.get"},
    "test_share_link_and_webhook_methods": {"shareLinks.create", "shareLinks.list", "shareLinks.update",
                                            "webhooks.create", "webhooks.list", "webhooks.delete"},
}


# -- the token watch: every test ends by searching what it produced for secrets ----------

RAISED: list[BaseException] = []  # every exception a test caught with fails()
SHOWN: list[str] = []  # reprs and attributes of every client a test made
SECRETS: list[str] = []  # secrets a test used besides the sandbox's tokens


@pytest.fixture(autouse=True)
def no_secret_leaks(request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """After each test: no token (the sandbox's, or one the test used) appears in a log
    record of any logger at DEBUG, in a client's repr or attributes, or in the str, repr
    or formatted traceback (with its chained aiohttp exceptions) of a caught exception."""
    RAISED.clear()
    SHOWN.clear()
    SECRETS.clear()
    caplog.set_level(logging.DEBUG)
    yield
    sb = request.node.funcargs.get("sandbox")
    secrets = [*SECRETS, *([w.token for w in sb.workspaces.values()] if sb else [])]
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    texts = [formatter.format(r) for phase in ("setup", "call") for r in caplog.get_records(phase)]
    texts += SHOWN
    for exc in RAISED:
        texts += [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    for secret in secrets:
        for text in texts:
            assert secret not in text, f"a secret leaked into: {text[:300]}"


async def fails(cls: type[E], call: Awaitable[Any]) -> E:
    """Await ``call``, assert it raises ``cls``, and keep the exception for the token watch."""
    with pytest.raises(cls) as info:
        await call
    RAISED.append(info.value)
    return info.value


def client(sandbox: Any, ws: str = "pro", *, base_url: str | None = None, **options: Any) -> FormClient:
    fc = FormClient(base_url or sandbox.base_url, sandbox.workspaces[ws].token, **options)
    SHOWN.extend([repr(fc), repr(vars(fc))])
    return fc


async def called(sandbox: Any, ws: str = "pro") -> list[str]:
    """The API methods the workspace's token called, as the sandbox logged them."""
    return [i["method"] for i in (await sandbox.helper("calls.list", ws=ws)).data["items"]]


async def assert_tour(sandbox: Any, name: str, by_ws: dict[str, set[str]] | None = None) -> None:
    """The sandbox logged a call of each method of tour ``name`` (by the pro token unless
    ``by_ws`` says which workspace's token made which calls)."""
    expected = TOURS[name]
    seen: set[str] = set()
    for ws in by_ws or {"pro": expected}:
        seen |= set(await called(sandbox, ws))
    assert expected <= seen, f"not called through the client: {sorted(expected - seen)}"


class SandboxTime:
    """A clock and sleep for the client: sleeping moves this clock and the sandbox's test
    clock forward together, so a minute of waiting takes no real time. Tasks that sleep
    at once wake at their own deadlines: a sleep ending before the clock's time is over."""

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox
        self.now = 0.0
        self.sleeps: list[float] = []
        self._lock = asyncio.Lock()

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        deadline = self.now + seconds
        async with self._lock:
            if deadline > self.now:
                # The sandbox moves first: no task may see the new time before the service does.
                r = await self.sandbox.helper("clock.advance", {"ms": round((deadline - self.now) * 1000)})
                assert r.status == 200, r.body
                self.now = deadline


class Sleeps:
    """A sleep that only records the delays asked for."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


# -- a proxy in front of the sandbox that fails on purpose -----------------------------------


def _reset(request: web.Request) -> web.Response:
    """Drop the connection with a TCP reset (SO_LINGER 0), answering nothing."""
    transport = request.transport
    assert transport is not None
    transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
    return web.Response()


def _internal_error() -> web.Response:
    return web.json_response({"ok": False, "error": {"code": "INTERNAL_ERROR", "message": "Unexpected server "
                                                     "error; the call changed nothing. Retry later."}}, status=500)


class Proxy:
    """Forwards ``POST /api/v1`` to the sandbox, except that its first ``failures`` hits
    fail as ``mode`` says: ``500`` (INTERNAL_ERROR envelope), ``502`` (an HTML page),
    ``404`` (an HTML page), ``reset`` (connection reset), ``stall`` (no answer for 2 s),
    ``teapot`` (an error code this client does not know), or ``lost-500``/``lost-reset``
    (forwarded, so the sandbox acts, then the answer is replaced by a 500 or a reset).
    ``transform`` rewrites every forwarded JSON answer."""

    def __init__(self, sandbox: Any, mode: str, failures: int,
                 transform: Callable[[Any], Any] | None = None) -> None:
        self.sandbox = sandbox
        self.mode = mode
        self.failures = failures
        self.transform = transform
        self.hits = 0
        self.answers: list[tuple[int, Any]] = []  # (status, body) of every forwarded answer
        self.base_url = ""

    async def forward(self, request: web.Request, body: bytes) -> web.Response:
        headers = {"Authorization": request.headers.get("Authorization", ""), "Content-Type": "application/json"}
        async with self.sandbox.http.post(self.sandbox.base_url + "/api/v1", data=body, headers=headers) as r:
            status, answer = r.status, json.loads(await r.read())
        self.answers.append((status, answer))
        if self.transform is not None:
            answer = self.transform(answer)
        return web.json_response(answer, status=status)

    async def handle(self, request: web.Request) -> web.Response:
        self.hits += 1
        body = await request.read()
        if self.hits > self.failures:
            return await self.forward(request, body)
        if self.mode == "500":
            return _internal_error()
        if self.mode in ("502", "404"):
            return web.Response(status=int(self.mode), text="<html><body>gateway says no</body></html>",
                                content_type="text/html")
        if self.mode == "reset":
            return _reset(request)
        if self.mode == "stall":
            await asyncio.sleep(2)
            return _internal_error()
        if self.mode == "teapot":
            return web.json_response({"ok": False, "error": {"code": "TEAPOT", "message": "I am a teapot",
                                                             "details": {"reason": "SHORT_AND_STOUT"}}}, status=418)
        await self.forward(request, body)  # lost-*: the sandbox acts, the caller never hears
        return _internal_error() if self.mode == "lost-500" else _reset(request)


@pytest.fixture
async def proxy(sandbox: Any) -> AsyncIterator[Callable[..., Awaitable[Proxy]]]:
    """Starts proxies in front of this test's sandbox: ``await proxy(mode, failures)``."""
    servers: list[TestServer] = []

    async def start(mode: str = "pass", failures: int = 0, transform: Callable[[Any], Any] | None = None) -> Proxy:
        p = Proxy(sandbox, mode, failures, transform)
        app = web.Application()
        app.router.add_post("/api/v1", p.handle)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        p.base_url = str(server.make_url("")).rstrip("/")
        return p

    yield start
    for server in servers:
        await server.close()


async def requests_with(sandbox: Any, external_id: str, form: str = "Contact") -> int:
    """How many requests of the pro form carry ``external_id`` (read straight from the sandbox)."""
    r = await sandbox.rpc("requests.list", {"formId": sandbox.pro.forms[form], "externalId": external_id,
                                            "includeTest": True})
    return len(r.data["items"])


def most_in_any_window(times: list[int], window: int) -> int:
    """The largest number of ``times`` inside any half-open window ``(t - window, t]``."""
    return max((sum(1 for u in times if t - window < u <= t) for t in times), default=0)


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(120))


# ======================================================================================
# Every method the service offers has a typed method
# ======================================================================================


@pytest.mark.dialects
async def test_client_has_a_typed_method_for_every_service_method(sandbox):
    import_domain()
    async with client(sandbox) as fc:
        offered = set((await fc.list_methods()).methods)
    registered = set(METHODS)
    assert offered == registered, "methods.list names exactly the registered methods"
    missing = offered - set(FormClient.API_METHODS)
    assert not missing, f"the service offers methods the client lacks: {sorted(missing)}"
    for name, attr in FormClient.API_METHODS.items():
        assert inspect.iscoroutinefunction(getattr(FormClient, attr)), f"{name} -> FormClient.{attr}"
    assert not set(FormClient.API_METHODS) - offered, "every name the client calls is a real method (no typo)"
    toured = set().union(*TOURS.values())
    assert not offered - toured, f"no test calls these through the client: {sorted(offered - toured)}"


# ======================================================================================
# Typed methods, each called at least once, with assertions on the model returned
# ======================================================================================


@pytest.mark.dialects
async def test_identity_methods(sandbox):
    async with client(sandbox) as fc:
        me = await fc.me()
        assert isinstance(me, models.Me)
        assert (me.id, me.email, me.name) == (sandbox.pro.user_id, "owner@pro.example.test", "Pat Pro")
        workspaces = await fc.list_workspaces()
        assert [(w.id, w.name) for w in workspaces] == [(sandbox.pro.id, sandbox.pro.name)]
        methods = await fc.list_methods()
        assert isinstance(methods, models.MethodList)
        assert "requests.create" in methods.methods
        assert [i.name for i in methods.items] == methods.methods
        assert all(i.summary for i in methods.items)
    await assert_tour(sandbox, "test_identity_methods")


@pytest.mark.dialects
@pytest.mark.full_dialect_only(reason="checks snapshotId and publishedAt of publish results, which the spec does not show")
async def test_form_methods(sandbox):
    ws, folder, contact = sandbox.pro.id, sandbox.pro.folder_id, sandbox.pro.forms["Contact"]
    async with client(sandbox) as fc:
        first = await fc.list_forms(ws, limit=3)
        assert isinstance(first, models.Page) and all(isinstance(f, models.Form) for f in first.items)
        assert len(first.items) == 3 and first.hasMore and first.nextCursor
        second = await fc.list_forms(ws, limit=3, cursor=first.nextCursor)
        assert not {f.id for f in first.items} & {f.id for f in second.items}
        found = await fc.list_forms(ws, query="Contact")
        assert [f.name for f in found.items][0] == "Contact"

        detail = await fc.get_form(contact)
        assert isinstance(detail, models.FormDetail)
        assert detail.isPublished and detail.hasContent and not detail.isDeleted
        assert [q.inputType for q in detail.questions][:2] == ["text", "email"]
        assert detail.previewUrl and detail.previewUrl.startswith(sandbox.base_url)

        created = await fc.create_form(ws, "Client tour", folder_id=folder)
        assert isinstance(created, models.FormCreated)
        assert (created.name, created.folderId, created.isPublished) == ("Client tour", folder, False)
        updated = await fc.update_form(created.id, name="Client tour 2", emoji="🧭", folder_id=None)
        assert isinstance(updated, models.FormUpdated)
        assert (updated.name, updated.emoji, updated.folderId, updated.noChange) == ("Client tour 2", "🧭", None,
                                                                                      False)
        assert (await fc.update_form(created.id, name="Client tour 2")).noChange is True
        empty = await fails(errors.ValidationError, fc.publish_form(created.id))
        assert (empty.reason, empty.field, empty.status) == ("FORM_EMPTY", "formId", 400)

        again = await fc.publish_form(contact)
        assert isinstance(again, models.FormPublished)
        assert again.isPublished and again.alreadyPublished and again.snapshotId
        off = await fc.unpublish_form(contact)
        assert isinstance(off, models.FormUnpublished)
        assert (off.isPublished, off.alreadyUnpublished) == (False, False) and off.unpublishedAt
        assert (await fc.unpublish_form(contact)).alreadyUnpublished is True
        back = await fc.publish_form(contact)
        assert (back.isPublished, back.alreadyPublished, back.snapshotId) == (True, False, again.snapshotId)

        trashed = await fc.delete_form(created.id)
        assert isinstance(trashed, models.FormTrashed)
        assert trashed.isDeleted and not trashed.alreadyTrashed and trashed.trashedAt
        twice = await fc.delete_form(created.id)
        assert twice.alreadyTrashed and twice.trashedAt == trashed.trashedAt
        binned = await fc.get_form(created.id)
        assert binned.isDeleted and binned.trashedAt == trashed.trashedAt
        gone = await fails(errors.NotFound, fc.publish_form(created.id))
        assert gone.field == "formId"
        restored = await fc.restore_form(created.id, folder_id=folder)
        assert isinstance(restored, models.FormRestored)
        assert (restored.id, restored.folderId, restored.alreadyRestored) == (created.id, folder, False)
        assert (await fc.restore_form(created.id)).alreadyRestored is True
        assert (await fc.get_form(created.id)).name == "Client tour 2"
    await assert_tour(sandbox, "test_form_methods")


@pytest.mark.dialects
async def test_folder_methods(sandbox):
    async with client(sandbox) as fc:
        folders = await fc.list_folders(sandbox.pro.id)
        assert [(f.id, f.name) for f in folders] == [(sandbox.pro.folder_id, "Archive")]
        made = await fc.create_folder(sandbox.pro.id, "Clients")
        assert isinstance(made, models.Folder) and (made.name, made.formCount) == ("Clients", 0)
        dup = await fails(errors.Conflict, fc.create_folder(sandbox.pro.id, "clients "))
        assert dup.reason == "DUPLICATE_NAME"
        renamed = await fc.rename_folder(made.id, "Customers")
        assert isinstance(renamed, models.FolderUpdated) and renamed.name == "Customers"
        await fc.create_form(sandbox.pro.id, "In a folder", folder_id=made.id)
        deleted = await fc.delete_folder(made.id)
        assert isinstance(deleted, models.FolderDeleted) and (deleted.deleted, deleted.movedForms) == (True, 1)
    await assert_tour(sandbox, "test_folder_methods")


@pytest.mark.dialects
async def test_settings_and_translation_methods(sandbox):
    contact = sandbox.pro.forms["Contact"]
    async with client(sandbox) as fc:
        got = await fc.get_form_settings(contact)
        assert isinstance(got, models.FormSettings) and isinstance(got.settings, models.FormSettingsValues)
        assert got.isDefault and got.settings.language == "en" and got.settings.reminderSteps == []
        assert [d.domain for d in got.availableEmailDomains] == ["mail.pro.example.test"]
        assert got.payment is not None and got.payment.connected is False

        saved = await fc.update_form_settings(contact, language="de", reminderSteps=["3d", "1d", "1d"],
                                              respondentNotificationSubject="Danke, {{name}}")
        assert isinstance(saved, models.FormSettingsValues)
        assert (saved.language, saved.reminderSteps) == ("de", ["1d", "3d"])
        again = await fc.get_form_settings(contact)
        assert not again.isDefault and again.settings.respondentNotificationSubject == "Danke, {{name}}"

        page = await fc.list_translation_entries(contact, language="de", limit=2)
        assert isinstance(page, models.Page) and all(isinstance(e, models.TranslationEntry) for e in page.items)
        assert page.items[0].key == "settings.respondentNotificationSubject"
        assert page.items[0].source == "Danke, {{name}}" and page.items[0].translation is None
        assert page.hasMore and page.nextCursor
        every = [e async for e in fc.iter_translation_entries(contact, limit=3)]
        keys = [e.key for e in every]
        assert len(keys) == len(set(keys)) == 9 and "field.topic.option.sales" in keys
    await assert_tour(sandbox, "test_settings_and_translation_methods")


@pytest.mark.dialects
async def test_submission_and_field_methods(sandbox):
    contact = sandbox.pro.forms["Contact"]
    async with client(sandbox) as fc:
        page = await fc.list_submissions(contact, limit=2)
        assert isinstance(page, models.SubmissionPage)
        assert (page.formId, page.formName, len(page.items), page.hasMore) == (contact, "Contact", 2, True)
        completed = await fc.list_submissions(contact, include_drafts=False)
        assert len(completed.items) == 3 and all(s.isCompleted for s in completed.items)
        assert {s.answers["name"] for s in completed.items} == {"Ada Lovelace", "Alan Turing", "Grace Hopper"}

        sample = await fc.sample_submission(contact)
        assert isinstance(sample, models.Event)
        assert (sample.type, sample.test) == ("submission.completed", True)
        assert sample.data.form is not None and sample.data.form.id == contact
        assert sample.data.answers and set(sample.data.answers) >= {"name", "email"}

        fields = await fc.list_fields(contact)
        assert isinstance(fields, models.FieldList) and fields.published
        assert [f.key for f in fields.items] == ["name", "email", "topic", "message", "source"]
        topic = fields.items[2]
        assert topic.options and [o.key for o in topic.options] == ["sales", "support", "other"]
        assert fields.items[4].context and not fields.items[4].prefillable

        seeded = completed.items[0].id
        none = await fails(errors.NotFound, fc.submission_pdf(contact, seeded))
        assert (none.reason, none.field) == ("PDF_NOT_RETAINED", "submissionId")

    # The business workspace's Contact form has an integration that keeps PDFs.
    b_contact = sandbox.business.forms["Contact"]
    async with client(sandbox, "business") as bfc:
        link = await bfc.create_share_link(b_contact)
        sent = await sandbox.helper("shareLinks.submit", {"url": link.url, "answers": {
            "name": "Barbara Liskov", "email": "barbara@example.test"}}, ws="business")
        pdf = await bfc.submission_pdf(b_contact, sent.data["submissionId"])
        assert isinstance(pdf, models.SubmissionPdf)
        assert pdf.contentType == "application/pdf" and sent.data["submissionId"] in pdf.filename
        async with sandbox.http.get(pdf.url) as resp:
            body = await resp.read()
        assert body.startswith(b"%PDF-") and len(body) == pdf.byteLength
    await assert_tour(sandbox, "test_submission_and_field_methods", {"pro": set(), "business": set()})


@pytest.mark.dialects
@pytest.mark.full_dialect_only(reason="checks record fields the spec leaves 'not shown' (recipient, prefill, readonlyKeys, context, hasCallback)")
async def test_request_methods(sandbox):
    contact = sandbox.pro.forms["Contact"]
    expires = datetime.now(UTC).replace(microsecond=0) + timedelta(days=3)
    async with client(sandbox) as fc:
        created = await fc.create_request(
            contact, recipient=models.Recipient(email="rita@example.test", name="Rita"),
            prefill={"name": "Rita", "topic": "sales"}, readonly=["name"], context={"source": "crm"},
            metadata={"row": 7}, external_id="row-7", expires_at=expires, callback_url="http://127.0.0.1:9/cb")
        assert isinstance(created, models.RequestCreated)
        assert (created.status, created.externalId, created.deduplicated) == ("pending", "row-7", False)
        assert created.url.startswith(f"{sandbox.base_url}/r/")
        assert created.expires_at == expires and created.expires_at_ms == int(expires.timestamp() * 1000)

        record = await fc.get_request(created.id)
        assert isinstance(record, models.RequestRecord)
        assert record.recipient == models.Recipient(email="rita@example.test", name="Rita")
        assert (record.prefill, record.readonlyKeys, record.context) == ({"name": "Rita", "topic": "sales"},
                                                                         ["name"], {"source": "crm"})
        assert (record.metadata, record.hasCallback, record.answers) == ({"row": 7}, True, None)
        assert record.timeline and record.timeline[0].type == "created"

        listed = await fc.list_requests(form_id=contact)
        assert [r.id for r in listed.items] == [created.id] and listed.items[0].timeline is None

        reminded = await fc.remind_request(created.id)
        assert isinstance(reminded, models.RequestRecord) and reminded.remindersSent == 1
        done = await sandbox.helper("requests.complete", {"requestId": created.id, "answers": {
            "name": "Rita", "email": "rita@example.test"}})
        assert done.status == 200, done.body
        completed = await fc.get_request(created.id)
        assert completed.status == "completed" and completed.answers and completed.answers["email"] == "rita@example.test"
        replay = await fc.replay_callback(created.id)
        assert isinstance(replay, models.Replay)
        assert replay.dispatchId.startswith("disp_") and replay.eventId.startswith("evt_")

        keyed = await fc.create_request(contact, test=True, idempotency_key="tour-1", external_id="tour-1")
        same = await fc.create_request(contact, test=True, idempotency_key="tour-1", external_id="tour-1")
        assert (same.id, same.deduplicated, keyed.deduplicated) == (keyed.id, True, False)
        canceled = await fc.cancel_request(keyed.id, reason="Not needed")
        assert (canceled.status, canceled.canceledBy, canceled.cancelReason) == ("canceled", "api", "Not needed")

        sample = await fc.sample_request_event(contact, "request_canceled")
        assert isinstance(sample, models.Event) and (sample.type, sample.test) == ("request.canceled", True)
        assert sample.data.request is not None and sample.data.request.cancelReason == "Order withdrawn"
    await assert_tour(sandbox, "test_request_methods")


@pytest.mark.dialects
@pytest.mark.full_dialect_only(reason="checks a record's documents, a field the spec leaves 'not shown'")
async def test_document_methods(sandbox):
    approval = sandbox.pro.forms["Approval"]
    async with client(sandbox) as fc:
        upload = await fc.create_document(approval, "Map.png", "image/png", len(PNG),
                                          sha256=hashlib.sha256(PNG).hexdigest())
        assert isinstance(upload, models.DocumentUpload)
        assert upload.id.startswith("doc_") and upload.uploadUrl.startswith(sandbox.base_url)
        assert (upload.contentType, upload.size) == ("image/png", len(PNG)) and upload.expiresAt
        stored = await fc.upload_document(upload, PNG)
        assert isinstance(stored, models.DocumentUploaded)
        assert (stored.id, stored.sha256) == (upload.id, hashlib.sha256(PNG).hexdigest())
        twice = await fails(errors.Conflict, fc.upload_document(upload, PNG))
        assert twice.reason == "DOCUMENT_ALREADY_UPLOADED"

        created = await fc.create_request(approval, documents=[models.DocumentRef(documentId=upload.id,
                                                                                  name="Site map")])
        record = await fc.get_request(created.id)
        assert record.documents == [models.RequestDocument(field="review_docs", name="Site map", size=len(PNG),
                                                           contentType="image/png")]
    await assert_tour(sandbox, "test_document_methods")


@pytest.mark.dialects
async def test_share_link_and_webhook_methods(sandbox):
    contact = sandbox.pro.forms["Contact"]
    secret = "whsec_" + "5e" * 32
    SECRETS.append(secret)
    async with client(sandbox) as fc:
        link = await fc.create_share_link(contact, name="Newsletter")
        assert isinstance(link, models.ShareLink)
        assert (link.formId, link.name, link.revoked) == (contact, "Newsletter", False)
        assert link.url and link.url.startswith(sandbox.base_url)
        assert [x.id for x in await fc.list_share_links(contact)] == [link.id]
        unnamed = await fc.update_share_link(link.id, name=None)
        assert unnamed.name is None and not unnamed.revoked
        revoked = await fc.update_share_link(link.id, revoked=True)
        assert revoked.revoked and revoked.revokedAt
        final = await fails(errors.Conflict, fc.update_share_link(link.id, revoked=False))
        assert (final.reason, final.field) == ("SHARE_LINK_REVOKED", "revoked")

        hook = await fc.create_webhook(contact, "https://hooks.example.test/in", "zapier",
                                       event_type="submission_created", signing_secret=SecretStr(secret))
        assert isinstance(hook, models.WebhookSubscription)
        assert hook.subscriptionId.startswith("int_") and (hook.status, hook.eventType) == ("active",
                                                                                           "submission_created")
        assert await fc.list_webhooks(contact) == [hook]
        deleted = await fc.delete_webhook(hook.subscriptionId)
        assert isinstance(deleted, models.WebhookDeleted) and deleted.deleted
        assert await fc.list_webhooks(contact) == []
        SHOWN.append(repr(hook))
    await assert_tour(sandbox, "test_share_link_and_webhook_methods")


# ======================================================================================
# Pagination: the iterators follow nextCursor over many rows
# ======================================================================================


@pytest.mark.dialects
async def test_iter_forms_follows_cursors(sandbox):
    ws = sandbox.pro.id
    async with client(sandbox) as fc:
        made = [(await fc.create_form(ws, f"Bulk {i:02d}")).id for i in range(23)]
        since = (await sandbox.helper("clock.get")).data["now"]
        forms = [f async for f in fc.iter_forms(ws, limit=4)]
    ids = [f.id for f in forms]
    assert len(ids) == len(set(ids)) == 23 + 7
    assert set(made) <= set(ids)
    assert [f.createdAt for f in forms] == sorted((f.createdAt for f in forms), reverse=True)
    pages = (await sandbox.helper("calls.list", {"since": since, "method": "forms.list"})).data["count"]
    assert pages == 8, "30 forms in pages of 4: 8 calls, no more"


@pytest.mark.dialects
async def test_iter_submissions_follows_cursors(sandbox):
    contact = sandbox.pro.forms["Contact"]
    for i in range(27):
        r = await sandbox.helper("submissions.create", {"formId": contact, "answers": {
            "name": f"Person {i}", "email": f"p{i}@example.test"}, "respondentEmail": f"p{i}@example.test"})
        assert r.status == 200, r.body
    async with client(sandbox) as fc:
        every = [s async for s in fc.iter_submissions(contact, limit=5)]
        completed = [s async for s in fc.iter_submissions(contact, include_drafts=False, limit=5)]
    assert len({s.id for s in every}) == len(every) == 27 + 4
    assert len({s.id for s in completed}) == len(completed) == 27 + 3
    assert {f"Person {i}" for i in range(27)} <= {s.answers.get("name") for s in completed}


@pytest.mark.dialects
async def test_iter_requests_follows_cursors(sandbox):
    contact = sandbox.pro.forms["Contact"]
    async with client(sandbox) as fc:
        made = [(await fc.create_request(contact, external_id=f"row-{i}")).id for i in range(26)]
        listed = [r async for r in fc.iter_requests(form_id=contact, limit=6)]
        one = [r async for r in fc.iter_requests(workspace_id=sandbox.pro.id, external_id="row-3")]
    assert [r.id for r in listed] == made[::-1], "every request once, newest first"
    assert all(isinstance(r, models.RequestRecord) and r.status == "pending" for r in listed)
    assert [r.externalId for r in one] == ["row-3"]


# ======================================================================================
# One exception class per error code, with code, status, reason, field and details
# ======================================================================================


@pytest.mark.dialects
async def test_unknown_prefill_key_raises_validation_error_with_valid_keys(sandbox):
    contact = sandbox.pro.forms["Contact"]
    async with client(sandbox) as fc:
        err = await fails(errors.ValidationError, fc.create_request(contact, prefill={"nmae": "Ada"},
                                                                    external_id="bad-key"))
    assert (err.code, err.status, err.reason, err.field) == ("VALIDATION_ERROR", 400, "UNKNOWN_FIELD_KEY",
                                                             "prefill.nmae")
    assert sorted(err.details["validKeys"]) == ["email", "message", "name", "topic"]
    assert err.method == "requests.create" and "prefill.nmae" in str(err) and err.message
    assert await requests_with(sandbox, "bad-key") == 0, "a refused create stores nothing"


@pytest.mark.dialects
async def test_bad_token_raises_unauthorized(sandbox):
    bad = "fb_" + "Z" * 32
    SECRETS.append(bad)
    fc = FormClient(sandbox.base_url, bad)
    SHOWN.extend([repr(fc), repr(vars(fc))])
    async with fc:
        err = await fails(errors.Unauthorized, fc.me())
    assert (err.code, err.status) == ("UNAUTHORIZED", 401) and err.message


@pytest.mark.dialects
async def test_plan_gate_raises_upgrade_required(sandbox):
    async with client(sandbox, "free") as fc:
        req = await fc.create_request(sandbox.free.forms["Contact"], recipient={"email": "f@example.test"})
        err = await fails(errors.UpgradeRequired, fc.remind_request(req.id))
        after = await fc.get_request(req.id)
    assert (err.code, err.status, err.feature, err.reason) == ("UPGRADE_REQUIRED", 402, "reminders", "PLAN_REQUIRED")
    assert after.remindersSent == 0, "the refused reminder was not sent"


@pytest.mark.dialects
async def test_foreign_form_raises_forbidden(sandbox):
    async with client(sandbox) as fc:
        err = await fails(errors.Forbidden, fc.get_form(sandbox.business.forms["Contact"]))
    assert (err.code, err.status, err.reason, err.field) == ("FORBIDDEN", 403, "FOREIGN_WORKSPACE", "formId")


@pytest.mark.dialects
async def test_unknown_request_raises_not_found(sandbox):
    async with client(sandbox) as fc:
        err = await fails(errors.NotFound, fc.get_request("req_" + "x" * 22))
    assert (err.code, err.status, err.field) == ("NOT_FOUND", 404, "requestId")


@pytest.mark.dialects
async def test_unknown_method_raises_method_not_found(sandbox):
    async with client(sandbox) as fc:
        err = await fails(errors.MethodNotFound, fc.call("forms.lst"))
    assert (err.code, err.status, err.reason) == ("METHOD_NOT_FOUND", 404, "UNKNOWN_METHOD")
    assert "forms.list" in err.message, "the message suggests the close name"


@pytest.mark.dialects
async def test_state_conflicts_raise_conflict(sandbox):
    contact = sandbox.pro.forms["Contact"]
    async with client(sandbox) as fc:
        req = await fc.create_request(contact, test=True, idempotency_key="k-1")
        await fc.cancel_request(req.id)
        again = await fails(errors.Conflict, fc.cancel_request(req.id))
        reused = await fails(errors.Conflict, fc.create_request(contact, test=True, idempotency_key="k-1",
                                                                metadata={"other": "body"}))
    assert (again.code, again.status, again.reason) == ("CONFLICT", 409, "REQUEST_NOT_PENDING")
    assert (reused.reason, reused.field) == ("IDEMPOTENCY_CONFLICT", "idempotencyKey")


@pytest.mark.dialects
async def test_throttled_call_raises_rate_limited_when_retries_are_off(sandbox):
    await sandbox.helper("limits.set", {"callsPerMinute": 1})
    async with client(sandbox, max_retries=0) as fc:
        await fc.me()
        err = await fails(errors.RateLimited, fc.me())
    assert (err.code, err.status, err.reason) == ("RATE_LIMITED", 429, "RATE_LIMITED")
    assert 0 < err.retry_after_ms <= 60_000 and err.retry_after_ms == err.details["retryAfterMs"]


@pytest.mark.dialects
async def test_internal_error_and_unknown_codes(sandbox, proxy):
    p500 = await proxy("500", failures=1)
    async with client(sandbox, base_url=p500.base_url, max_retries=0) as fc:
        err = await fails(errors.InternalError, fc.me())
    assert (err.code, err.status, err.retryable, err.attempts) == ("INTERNAL_ERROR", 500, True, 1)
    teapot = await proxy("teapot", failures=1)
    sleeps = Sleeps()
    async with client(sandbox, base_url=teapot.base_url, sleep=sleeps) as fc:
        odd = await fails(errors.ApiError, fc.me())
    assert type(odd) is errors.ApiError, "a code this version does not know maps to the base class"
    assert (odd.code, odd.status, odd.reason) == ("TEAPOT", 418, "SHORT_AND_STOUT")
    assert teapot.hits == 1 and sleeps.delays == [], "a 4xx is never retried"


# ======================================================================================
# Retries
# ======================================================================================


async def test_rate_limited_call_waits_exactly_retry_after(sandbox, proxy):
    await sandbox.helper("limits.set", {"callsPerMinute": 2})
    p = await proxy()
    t = SandboxTime(sandbox)
    async with client(sandbox, base_url=p.base_url, sleep=t.sleep, clock=t.clock) as fc:
        got = [await fc.me() for _ in range(5)]
    assert [m.email for m in got] == ["owner@pro.example.test"] * 5
    waits = [body["error"]["details"]["retryAfterMs"] for status, body in p.answers if status == 429]
    assert waits, "the tiny limit throttled some calls"
    assert t.sleeps == [ms / 1000 for ms in waits], "each wait is exactly the retryAfterMs the service gave"
    statuses = [status for status, _ in p.answers]
    assert all(statuses[i + 1] == 200 for i, s in enumerate(statuses) if s == 429), "the call after a wait passes"
    assert fc.stats["rate_limited"] == len(waits)


async def test_rate_limited_create_without_key_is_retried_because_nothing_ran(sandbox):
    await sandbox.helper("limits.set", {"createsPerMinute": 1})
    t = SandboxTime(sandbox)
    contact = sandbox.pro.forms["Contact"]
    async with client(sandbox, sleep=t.sleep, clock=t.clock) as fc:
        first = await fc.create_request(contact, external_id="throttled")
        second = await fc.create_request(contact, external_id="throttled")
    assert first.id != second.id
    assert len(t.sleeps) == 1 and 0 < t.sleeps[0] <= 60
    assert await requests_with(sandbox, "throttled") == 2, "exactly the two requests asked for"


@pytest.mark.parametrize("mode", ["500", "502", "reset", "stall"])
async def test_safe_call_retries_server_errors_and_dropped_connections(sandbox, proxy, mode):
    failures = 2 if mode == "stall" else 3
    p = await proxy(mode, failures)
    sleeps = Sleeps()
    async with client(sandbox, base_url=p.base_url, sleep=sleeps, timeout=0.5) as fc:
        me = await fc.me()
    assert me.email == "owner@pro.example.test"
    assert p.hits == failures + 1
    assert len(sleeps.delays) == failures == fc.stats["retries"]
    for attempt, delay in enumerate(sleeps.delays):
        assert 0 <= delay <= 0.5 * 2 ** attempt, "full-jitter exponential backoff"


async def test_retries_stop_at_max_retries(sandbox, proxy):
    p = await proxy("502", failures=100)
    sleeps = Sleeps()
    async with client(sandbox, base_url=p.base_url, sleep=sleeps, max_retries=2) as fc:
        err = await fails(errors.TransportError, fc.list_forms(sandbox.pro.id))
    assert (p.hits, err.attempts, err.status, len(sleeps.delays)) == (3, 3, 502, 2)
    assert "gave up after 3 attempts" in str(err) and "not an API envelope" in str(err)


async def test_non_envelope_client_error_is_not_retried(sandbox, proxy):
    p = await proxy("404", failures=100)
    sleeps = Sleeps()
    async with client(sandbox, base_url=p.base_url, sleep=sleeps) as fc:
        err = await fails(errors.TransportError, fc.me())
    assert (p.hits, err.status, err.retryable, sleeps.delays) == (1, 404, False, [])


async def test_connection_refused_is_retried_then_raised(sandbox):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = Sleeps()
    async with client(sandbox, base_url=f"http://127.0.0.1:{port}", sleep=sleeps, max_retries=3) as fc:
        err = await fails(errors.TransportError, fc.me())
    assert err.retryable and err.attempts == 4 and len(sleeps.delays) == 3
    assert "could not be reached" in str(err)


async def test_a_refused_default_address_is_said_at_once_naming_the_unset_setting(sandbox):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = Sleeps()
    async with client(sandbox, base_url=f"http://127.0.0.1:{port}", sleep=sleeps, base_url_unset=True) as fc:
        err = await fails(errors.DefaultServiceAbsent, fc.me())
    assert (err.retryable, sleeps.delays) == (False, [])
    assert "is not set" in str(err) and "FORMSYNC_SERVICE__BASE_URL" in str(err)


def test_base_url_given_is_told_from_the_default_and_needs_a_scheme():
    assert not ServiceSettings().base_url_given
    assert ServiceSettings(base_url="http://127.0.0.1:1").base_url_given
    with pytest.raises(pydantic.ValidationError, match="not an http"):
        ServiceSettings(base_url="127.0.0.1:41501")


async def test_a_malformed_base_url_is_not_retried(sandbox):
    sleeps = Sleeps()
    async with client(sandbox, base_url="http://127.0.0.1:notaport", sleep=sleeps) as fc:
        err = await fails(errors.TransportError, fc.me())
    assert (err.retryable, err.attempts, sleeps.delays) == (False, 1, [])
    assert "could not be reached" in str(err)


@pytest.mark.parametrize(("mode", "created"), [("500", 0), ("reset", 0), ("lost-500", 1), ("lost-reset", 1)])
async def test_create_request_without_key_is_never_retried(sandbox, proxy, mode, created):
    p = await proxy(mode, failures=100)
    sleeps = Sleeps()
    async with client(sandbox, base_url=p.base_url, sleep=sleeps) as fc:
        err = await fails(errors.FormsyncError, fc.create_request(sandbox.pro.forms["Contact"],
                                                                  external_id="no-key"))
    assert p.hits == 1 and sleeps.delays == [], "sent exactly once"
    assert err.outcome_unknown and "outcome is unknown" in str(err) and "idempotencyKey" in str(err)
    assert await requests_with(sandbox, "no-key") == created, "at most one request, never a second"


@pytest.mark.parametrize("mode", ["lost-500", "lost-reset"])
async def test_create_request_with_key_is_retried_and_deduplicated(sandbox, proxy, mode):
    p = await proxy(mode, failures=2)
    sleeps = Sleeps()
    async with client(sandbox, base_url=p.base_url, sleep=sleeps) as fc:
        got = await fc.create_request(sandbox.pro.forms["Contact"], external_id="keyed", idempotency_key="keyed")
    assert p.hits == 3 and len(sleeps.delays) == 2
    assert got.deduplicated, "the retry found the request the lost attempt created"
    assert await requests_with(sandbox, "keyed") == 1


async def test_a_refused_retry_after_a_lost_attempt_says_the_outcome_is_unknown(sandbox, proxy):
    """requests.cancel is safe to repeat, but when its first attempt canceled the request
    and the answer was lost, the retry is refused (CONFLICT): the error says so."""
    rid = (await sandbox.rpc("requests.create", {"formId": sandbox.pro.forms["Contact"]})).data["id"]
    p = await proxy("lost-500", failures=1)
    sleeps = Sleeps()
    async with client(sandbox, base_url=p.base_url, sleep=sleeps) as fc:
        err = await fails(errors.Conflict, fc.cancel_request(rid, reason="Withdrawn"))
    assert p.hits == 2 and len(sleeps.delays) == 1, "retried once"
    assert err.outcome_unknown and "may have taken effect" in str(err)
    assert (await sandbox.rpc("requests.get", {"requestId": rid})).data["status"] == "canceled"
    async with client(sandbox) as fc:
        plain = await fails(errors.Conflict, fc.cancel_request(rid))
    assert not plain.outcome_unknown and "may have taken effect" not in str(plain), "no lost attempt, no caveat"


@pytest.mark.parametrize("method", ["create_form", "create_share_link", "create_webhook"])
async def test_other_creates_are_never_retried(sandbox, proxy, method):
    calls: dict[str, Callable[[FormClient], Awaitable[Any]]] = {
        "create_form": lambda fc: fc.create_form(sandbox.pro.id, "Once"),
        "create_share_link": lambda fc: fc.create_share_link(sandbox.pro.forms["Contact"]),
        "create_webhook": lambda fc: fc.create_webhook(sandbox.pro.forms["Contact"], "https://h.example.test/x",
                                                       "make"),
    }
    p = await proxy("lost-500", failures=100)
    async with client(sandbox, base_url=p.base_url, sleep=Sleeps()) as fc:
        err = await fails(errors.InternalError, calls[method](fc))
    assert p.hits == 1 and err.outcome_unknown
    assert "outcome is unknown" in str(err) and "Check whether it took effect" in str(err)


# ======================================================================================
# Pacing shared by every client of a token
# ======================================================================================


async def test_two_clients_of_one_token_share_one_pacer(sandbox):
    t = SandboxTime(sandbox)
    token = sandbox.pro.token
    since = (await sandbox.helper("clock.get")).data["now"]
    async with FormClient(sandbox.base_url, token, clock=t.clock, sleep=t.sleep) as a, \
            FormClient(sandbox.base_url + "/", SecretStr(token), clock=t.clock, sleep=t.sleep) as b:
        SHOWN.extend([repr(a), repr(vars(b))])
        assert a.pacer is not None and a.pacer is b.pacer

        async def run(fc: FormClient, n: int) -> None:
            for _ in range(n):
                await fc.me()

        await asyncio.gather(run(a, 100), run(b, 100))
    items = (await sandbox.helper("calls.list", {"since": since})).data["items"]
    times = [i["at"] for i in items]
    assert len(times) == 200
    assert most_in_any_window(times, 60_000) <= 120
    assert a.stats["rate_limited"] == b.stats["rate_limited"] == 0, "the pacer kept both under the limit"
    assert t.now == pytest.approx(60.02), "one wait, as long as the window (plus its margin) demands"


async def test_creates_of_two_clients_share_the_creates_limit(sandbox):
    t = SandboxTime(sandbox)
    contact = sandbox.pro.forms["Contact"]
    since = (await sandbox.helper("clock.get")).data["now"]
    async with client(sandbox, clock=t.clock, sleep=t.sleep) as a, client(sandbox, clock=t.clock,
                                                                            sleep=t.sleep) as b:
        assert a.pacer is b.pacer

        async def run(fc: FormClient, tag: str) -> None:
            for i in range(40):
                await fc.create_request(contact, external_id=f"{tag}-{i}", test=True)

        await asyncio.gather(run(a, "a"), run(b, "b"))
    items = (await sandbox.helper("calls.list", {"since": since, "method": "requests.create"})).data["items"]
    times = [i["at"] for i in items]
    assert len(times) == 80 and most_in_any_window(times, 60_000) <= 60
    assert a.stats["rate_limited"] == b.stats["rate_limited"] == 0
    assert t.now == pytest.approx(60.02)


async def test_pacing_limits_are_configurable_and_documents_count_as_creates(sandbox):
    t = SandboxTime(sandbox)
    async with client(sandbox, calls_per_minute=10, creates_per_minute=3, clock=t.clock, sleep=t.sleep) as fc:
        assert fc.pacer is not None and (fc.pacer.calls.limit, fc.pacer.creates.limit) == (10, 3)
        for _ in range(3):
            await fc.create_document(sandbox.pro.forms["Approval"], "a.png", "image/png", len(PNG))
        assert t.now == 0
        await fc.create_request(sandbox.pro.forms["Contact"], test=True)
        assert t.now == pytest.approx(60.02), "the 4th create waited: documents.create counts as a create"
        for _ in range(9):
            await fc.me()
        assert t.now == pytest.approx(60.02), "10 calls fit the new window"
        await fc.me()
        assert t.now == pytest.approx(120.04), "the 11th waited for the window"
    assert fc.stats["rate_limited"] == 0


async def test_client_from_settings(sandbox):
    settings = ServiceSettings(base_url=sandbox.base_url, token=SecretStr(sandbox.pro.token), calls_per_minute=7,
                               creates_per_minute=2, max_retries=1, timeout_seconds=5)
    fc = FormClient.from_settings(settings)
    SHOWN.extend([repr(fc), repr(vars(fc)), repr(settings)])
    async with fc:
        assert (await fc.me()).email == "owner@pro.example.test"
        assert fc.pacer is not None and (fc.pacer.calls.limit, fc.pacer.creates.limit) == (7, 2)
        assert (fc.max_retries, fc.timeout) == (1, 5)
    with pytest.raises(ValueError, match="FORMSYNC_SERVICE__TOKEN"):
        FormClient.from_settings(ServiceSettings(base_url=sandbox.base_url))


# ======================================================================================
# Unknown response fields are ignored; the token never leaks
# ======================================================================================


# Objects whose keys are data (field keys, the caller's own names), not the API's members.
OPEN_MAPS = {"answers", "display", "metadata", "context", "prefill", "cover", "logo"}


def with_future_fields(value: Any) -> Any:
    """``value`` with an unknown member added to every object of the API's own shape, as
    a newer service might send."""
    if isinstance(value, dict):
        kept = {k: v if k in OPEN_MAPS else with_future_fields(v) for k, v in value.items()}
        return {**kept, "zzFuture": {"added": [1, "two"]}}
    if isinstance(value, list):
        return [with_future_fields(v) for v in value]
    return value


@pytest.mark.dialects
async def test_unknown_response_fields_are_ignored(sandbox, proxy):
    p = await proxy(transform=with_future_fields)
    contact = sandbox.pro.forms["Contact"]
    async with client(sandbox, base_url=p.base_url) as fc:
        req = await fc.create_request(contact, prefill={"name": "Ada"}, external_id="future")
        await sandbox.helper("requests.complete", {"requestId": req.id, "answers": {
            "name": "Ada", "email": "ada@example.test"}})
        results: list[Any] = [
            req, await fc.me(), await fc.list_forms(sandbox.pro.id), await fc.get_form(contact),
            await fc.get_form_settings(contact), await fc.list_fields(sandbox.pro.forms["Everything"]),
            await fc.list_submissions(contact), await fc.get_request(req.id), await fc.list_requests(form_id=contact),
            await fc.sample_request_event(contact), await fc.list_translation_entries(contact),
        ]
    assert len(p.answers) == len(results)
    for result, (status, original) in zip(results, p.answers, strict=True):
        assert status == 200
        assert "zzFuture" not in result.model_dump_json(), "an unknown member is dropped, not kept"
        assert result == type(result).model_validate(original["data"]), "and changes nothing else"


@pytest.mark.dialects
async def test_token_never_leaks_into_logs_reprs_or_errors(sandbox, proxy, caplog):
    token = sandbox.pro.token
    reset = await proxy("reset", failures=100)
    async with client(sandbox, base_url=reset.base_url, sleep=Sleeps(), max_retries=1) as fc:
        dropped = await fails(errors.TransportError, fc.me())
        unsure = await fails(errors.TransportError, fc.create_request(sandbox.pro.forms["Contact"]))
    gateway = await proxy("502", failures=100)
    async with client(sandbox, base_url=gateway.base_url, sleep=Sleeps(), max_retries=0) as fc:
        await fails(errors.TransportError, fc.me())
    async with client(sandbox) as fc:
        await fails(errors.NotFound, fc.get_form("form_missing"))
        await fc.me()
    assert "ClientOSError" in str(dropped) and unsure.outcome_unknown
    assert any(r.name == "formsync.client" and r.levelno == logging.DEBUG for r in caplog.records), \
        "the client logs at DEBUG, so the search below covers its log lines"
    assert any(r.name == "formsync.client" and r.levelno == logging.INFO for r in caplog.records)
    assert token not in repr(fc) and "**********" in repr(fc)
    # The autouse watch searches all of it; this repeats the essential check in place.
    for exc in RAISED:
        assert token not in "".join(traceback.format_exception(exc)) + repr(exc) + str(exc)
    assert token not in caplog.text

