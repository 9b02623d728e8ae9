"""What the request, lifecycle and delivery tests share: creating and reading requests,
the test clock, an independent check of the hosted signature, and a real receiver for
callbacks on a loopback port."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS
ISO_MS_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
ID_RE = r"[0-9A-Za-z]{22}"
SIGNATURE_RE = re.compile(r"^t=(\d+),sha256=([a-f0-9]{64})$")


async def create(sandbox: Any, form: str = "Contact", *, ws: str = "pro", **params: Any) -> Any:
    """requests.create on the seeded form ``form`` of workspace ``ws``."""
    return await sandbox.rpc("requests.create", {"formId": sandbox.workspaces[ws].forms[form], **params}, ws=ws)


async def created_id(sandbox: Any, form: str = "Contact", *, ws: str = "pro", **params: Any) -> str:
    r = await create(sandbox, form, ws=ws, **params)
    assert r.status == 200, r.body
    return r.data["id"]


async def get(sandbox: Any, request_id: str, *, ws: str = "pro") -> dict[str, Any]:
    r = await sandbox.rpc("requests.get", {"requestId": request_id}, ws=ws)
    assert r.status == 200, r.body
    return r.data


async def listed(sandbox: Any, *, ws: str = "pro", **params: Any) -> dict[str, Any]:
    """requests.list over the workspace (unless a formId is given)."""
    if "formId" not in params:
        params.setdefault("workspaceId", sandbox.workspaces[ws].id)
    r = await sandbox.rpc("requests.list", params, ws=ws)
    assert r.status == 200, r.body
    return r.data


async def complete(sandbox: Any, request_id: str, answers: dict[str, Any], *, ws: str = "pro") -> Any:
    return await sandbox.helper("requests.complete", {"requestId": request_id, "answers": answers}, ws=ws)


CONTACT_ANSWERS = {"name": "Grace", "email": "grace@example.test", "topic": "sales"}


async def now(sandbox: Any) -> int:
    r = await sandbox.helper("clock.get")
    assert r.status == 200, r.body
    return r.data["now"]


async def advance(sandbox: Any, ms: int, *, ws: str = "pro") -> None:
    r = await sandbox.helper("clock.advance", {"ms": ms}, ws=ws)
    assert r.status == 200, r.body


async def renew_token(sandbox: Any, *, ws: str = "pro") -> None:
    """Give workspace ``ws`` a new token (API tokens last 30 days on the test clock):
    for tests that move the clock a month ahead."""
    r = await sandbox.helper("tokens.create", {"name": "renewed"}, ws=ws)
    assert r.status == 200, r.body
    sandbox.workspaces[ws].token = r.data["token"]


async def flush(sandbox: Any, *, ws: str = "pro") -> list[dict[str, Any]]:
    r = await sandbox.helper("deliveries.flush", ws=ws)
    assert r.status == 200, r.body
    return r.data["attempts"]


async def events(sandbox: Any, *, ws: str = "pro", **params: Any) -> list[dict[str, Any]]:
    r = await sandbox.helper("events.list", params, ws=ws)
    assert r.status == 200, r.body
    return r.data["items"]


async def mails(sandbox: Any, *, ws: str = "pro", **params: Any) -> list[dict[str, Any]]:
    r = await sandbox.helper("mail.list", params, ws=ws)
    assert r.status == 200, r.body
    return r.data["items"]


async def set_workspace(sandbox: Any, *, ws: str = "pro", **values: Any) -> None:
    r = await sandbox.helper("workspace.update", values, ws=ws)
    assert r.status == 200, r.body


def hosted_signature(secret: str, t: int, body: bytes) -> str:
    """The hosted scheme, written from the notes: ``t=<t>,sha256=<hex>`` of HMAC-SHA256
    keyed with the secret string's UTF-8 bytes over ``"<t>." + raw body``."""
    digest = hmac.new(secret.encode("utf-8"), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},sha256={digest}"


def signature_time(header: str) -> int:
    m = SIGNATURE_RE.match(header)
    assert m, f"signature header {header!r} is not t=<unix seconds>,sha256=<64 hex>"
    return int(m.group(1))


def verify(secret: str, header: str, body: bytes) -> bool:
    """Whether ``header`` signs ``body`` with ``secret`` under the hosted scheme."""
    return hmac.compare_digest(header, hosted_signature(secret, signature_time(header), body))


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    status: int  # what the receiver answered

    @property
    def json(self) -> dict[str, Any]:
        import json

        return json.loads(self.body)


@dataclass
class Receiver:
    """A real HTTP receiver on a loopback port. It answers ``fail_status`` to the first
    ``failures`` deliveries and 200 afterwards, and keeps every delivery it saw."""

    failures: int = 0
    fail_status: int = 500
    received: list[Received] = field(default_factory=list)
    server: TestServer | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        status = self.fail_status if len(self.received) < self.failures else 200
        self.received.append(Received(dict(request.headers), body, status))
        return web.Response(status=status, text="ok" if status == 200 else "try again")

    @property
    def url(self) -> str:
        assert self.server is not None
        return str(self.server.make_url("/hook"))

    async def __aenter__(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        self.server = TestServer(app, host="127.0.0.1")
        await self.server.start_server()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        await self.server.close()
