"""The ``formsync_receiver`` fixture: a real receiver (``connector.receiver``) on a free
loopback port with its own SQLite store in the test's ``tmp_path``, taking the sandbox's
callbacks and the deliveries of the subscriptions it makes, and a way to wait for one
event::

    req = await formsync_client.create_request(form_id, callback_url=formsync_receiver.callback_url)
    await formsync_sandbox.helpers.requests_complete(req.id, answers)
    event = await formsync_receiver.wait_for("request.completed", request_id=req.id)

The connector is imported when the fixture runs, not with the plugin.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from aiohttp import web

    from connector.models import Event, WebhookSubscription
    from connector.store import Store

    from .sandbox.handle import SandboxHandle

try:
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pytest-asyncio absent: the plugin still loads; its fixtures then need it
    async_fixture = pytest.fixture  # type: ignore[assignment]


@dataclass
class ReceiverHandle:
    """A running receiver: its URLs, its store, its webhook secret, and the sandbox whose
    deliveries it takes (flushed while waiting)."""

    base_url: str
    callback_url: str
    webhook_url: str
    store: Store
    webhook_secret: str
    sandbox: SandboxHandle
    plan: str = "pro"

    async def subscribe(self, form_id: str, *event_types: str, idle_window: str | None = None,
                        ) -> list[WebhookSubscription]:
        """Subscribe :attr:`webhook_url` to ``event_types`` (``webhooks.create`` names such
        as ``submission_created``; default: every type but ``submission_abandoned``) on
        ``form_id``, signed with :attr:`webhook_secret`."""
        from connector.client.rpc import FormClient
        from connector.client.webhooks import ABANDONED, DEFAULT_EVENTS, DEFAULT_PROVIDER

        made = []
        async with FormClient(self.sandbox.base_url, self.sandbox.workspace(self.plan)["token"]) as fc:
            for event_type in event_types or DEFAULT_EVENTS:
                window = {"idle_window": idle_window} if event_type == ABANDONED and idle_window else {}
                made.append(await fc.create_webhook(form_id, self.webhook_url, DEFAULT_PROVIDER, event_type=event_type,
                                                    signing_secret=self.webhook_secret, **window))
        return made

    def events(self, type_: str | None = None) -> list[Event]:
        """The events stored so far (only of ``type_`` when given), oldest first."""
        from connector.models import Event

        return [Event.model_validate_json(body) for _source, body in self.store.events.bodies(type_)]

    async def wait_for(self, type_: str, *, request_id: str | None = None, external_id: str | None = None,
                       submission_id: str | None = None, form_id: str | None = None, source: str | None = None,
                       timeout: float = 10.0) -> Event:  # noqa: ASYNC109 (a deadline over many awaits)
        """The first stored event of ``type_`` (``request.completed``, ``submission.updated``,
        …) matching every filter given (``source``: ``callback`` or ``webhook``; an event
        that came both ways is stored once, with the source of the first), waiting up to
        ``timeout`` seconds while the sandbox's due deliveries are flushed. Raises
        AssertionError naming what did arrive when none does."""
        from connector.models import Event

        wanted = {("request", "id"): request_id, ("request", "externalId"): external_id,
                  ("submission", "id"): submission_id, ("form", "id"): form_id}
        deadline = time.monotonic() + timeout
        pause = 0.02
        while True:
            await self.sandbox.helpers_for(self.plan).deliveries_flush()
            for got_source, body in self.store.events.bodies(type_):
                if source in (None, got_source) and _matches(json.loads(body), wanted):
                    return Event.model_validate_json(body)
            if time.monotonic() >= deadline:
                raise AssertionError(self._none_arrived(type_, wanted, source, timeout))
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.25)

    def _none_arrived(self, type_: str, wanted: dict[tuple[str, str], str | None], source: str | None,
                      timeout: float) -> str:
        said = ", ".join(f"{block}.{key}={value}" for (block, key), value in wanted.items() if value is not None)
        if source is not None:
            said = f"{said}, source={source}" if said else f"source={source}"
        got = Counter(e.type for e in self.events())
        seen = ", ".join(f"{t} x{n}" for t, n in sorted(got.items())) or "none"
        return (f"no {type_} event{f' with {said}' if said else ''} arrived at {self.base_url} within {timeout:g} s; "
                f"stored: {seen}. Was the request created with callback_url=formsync_receiver.callback_url, or "
                "the form subscribed with formsync_receiver.subscribe(form_id)?")


def _matches(envelope: dict[str, Any], wanted: dict[tuple[str, str], str | None]) -> bool:
    data = envelope.get("data") or {}
    for (block, key), value in wanted.items():
        if value is not None and (data.get(block) or {}).get(key) != value:
            return False
    return True


def _secrets(values: Iterable[str]) -> list[Any]:
    from pydantic import SecretStr

    return [SecretStr(v) for v in values]


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    from aiohttp import web

    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


@async_fixture
async def formsync_receiver(formsync_sandbox: SandboxHandle, tmp_path: Path) -> AsyncIterator[ReceiverHandle]:
    """A receiver on a free loopback port storing into SQLite in the test's tmp_path
    (``formsync-receiver.db``): callbacks verified with the sandbox workspaces' signing
    secrets, webhook deliveries with a secret of its own (``subscribe`` uses it)."""
    from connector.client.webhooks import new_secret
    from connector.config.settings import ReceiverSettings
    from connector.receiver.app import create_receiver_app, event_paths
    from connector.store import Store

    store = Store(f"sqlite:///{tmp_path / 'formsync-receiver.db'}")
    store.migrate()
    secret = new_secret()
    settings = ReceiverSettings(
        callback_secrets=_secrets(w["signingSecret"] for w in formsync_sandbox.credentials["workspaces"]),
        webhook_secrets=_secrets([secret]), store_process=False)
    runner, base = await _serve(create_receiver_app(store, settings))
    paths = event_paths(settings)
    try:
        yield ReceiverHandle(base, base + paths["callbacks"], base + paths["webhooks"], store, secret, formsync_sandbox)
    finally:
        await runner.cleanup()
        store.close()
