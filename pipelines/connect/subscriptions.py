"""The receiver's webhook subscriptions: list, create (idempotent: a subscription of the
same target, event type and idle window is kept, not doubled), remove, and check that a
signed delivery reaches the receiver and verifies.

The rules are pure (:func:`event_type_of`, :func:`check_target`; the secrets file's in
``connector.config.secrets_file``, the service's own lists in ``connector.client.webhooks``); the service is reached through
``connector.client.FormClient`` and the receiver with one signed POST per secret
(:func:`check_receiver`). The signing secret is chosen by the caller, as the automation
connectors do (``whsec_`` + 64 hex), and is never returned by the service.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

import aiohttp
from pydantic import BaseModel

from connector.client.rpc import FormClient
from connector.client.webhooks import (
    ABANDONED,
    DEFAULT_EVENTS,
    DEFAULT_PROVIDER,
    EVENT_TYPES,
    IDLE_WINDOWS,
    PROVIDERS,
)
from connector.models import WebhookSubscription
from connector.signing import formstep_headers
from formservice.delivery import ATTEMPT_TIMEOUT_S, RETRY_SCHEDULE_MS

CHECK_TYPE = "formsync.check"
API_VERSION = "2026-09-24"
"""The envelope's ``apiVersion`` the hosted service sends now (notes section 3)."""


class SubscriptionError(ValueError):
    """A subscription the service would refuse, said before anything is sent; ``where``
    names the option at fault."""

    def __init__(self, message: str, where: str) -> None:
        super().__init__(message)
        self.where = where


def event_type_of(name: str) -> str:
    """The ``webhooks.create`` eventType for ``name``, given as an eventType
    (``request_completed``) or as the type its deliveries carry (``request.completed``)."""
    if name in EVENT_TYPES:
        return name
    for event_type, delivered in EVENT_TYPES.items():
        if delivered == name:
            return event_type
    raise SubscriptionError(f"unknown event type {name!r}; use one of {', '.join(EVENT_TYPES)}", "--event")


def _loopback(host: str | None) -> bool:
    if host is None:
        return False
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_target(url: str, service_url: str) -> str:
    """``url`` when the service can deliver to it: https, or http to a loopback address
    when the service itself runs on this machine (the sandbox)."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and _loopback(parts.hostname) and _loopback(urlsplit(service_url).hostname):
        return url
    if parts.scheme == "http" and _loopback(parts.hostname):
        raise SubscriptionError(f"{url} is this machine, which the service at {service_url} cannot reach; give the "
                                "receiver's public https URL", "--url")
    raise SubscriptionError(f"{url} is not an https URL; the service delivers only to https (http only to a "
                            "loopback address, and only from the sandbox)", "--url")


class SubscriptionRow(BaseModel):
    """A subscription as the reports show it (never a secret)."""

    formId: str
    subscriptionId: str
    eventType: str
    idleWindow: str | None = None
    targetUrl: str | None = None
    provider: str | None = None
    createdAt: int | None = None


def _row(form_id: str, sub: WebhookSubscription) -> SubscriptionRow:
    return SubscriptionRow(formId=form_id, subscriptionId=sub.subscription_id, eventType=sub.event_type,
                           idleWindow=sub.idle_window, targetUrl=sub.target_url, provider=sub.provider,
                           createdAt=sub.created_at_ms)


class SubscriptionReport(BaseModel):
    """What a command found, created and removed."""

    forms: int
    subscriptions: list[SubscriptionRow] = []
    created: list[SubscriptionRow] = []
    kept: list[SubscriptionRow] = []
    removed: list[SubscriptionRow] = []


async def workspace_forms(client: FormClient, workspace_id: str | None) -> list[str]:
    """Every form id of the workspace (``workspace_id``, or the token's own)."""
    ws = workspace_id or (await client.list_workspaces())[0].id
    return [form.id async for form in client.iter_forms(ws)]


async def list_subscriptions(client: FormClient, forms: Iterable[str], target: str | None = None) -> SubscriptionReport:
    """The forms' active subscriptions, only those to ``target`` when given."""
    forms = list(forms)
    rows = [_row(f, s) for f in forms for s in await client.list_webhooks(f) if target in (None, s.target_url)]
    return SubscriptionReport(forms=len(forms), subscriptions=rows)


@dataclass(frozen=True)
class Wanted:
    """The subscriptions to make on each form: ``target`` for each of ``event_types``."""

    target: str
    event_types: tuple[str, ...]
    provider: str = DEFAULT_PROVIDER
    idle_window: str | None = None

    def window_of(self, event_type: str) -> str | None:
        return self.idle_window if event_type == ABANDONED else None


def wanted(target: str, events: Sequence[str], provider: str, idle_window: str | None, service_url: str) -> Wanted:
    """The subscriptions a ``create`` asks for, checked as the service would check them."""
    event_types = tuple(dict.fromkeys(event_type_of(e) for e in events or DEFAULT_EVENTS))
    if provider not in PROVIDERS:
        raise SubscriptionError(f"unknown provider {provider!r}; use one of {', '.join(PROVIDERS)}", "--provider")
    if ABANDONED in event_types and idle_window not in IDLE_WINDOWS:
        said = "is missing" if idle_window is None else f"{idle_window!r} is not one of {', '.join(IDLE_WINDOWS)}"
        raise SubscriptionError(f"{ABANDONED} needs an idle window: {said}", "--idle-window")
    if ABANDONED not in event_types and idle_window is not None:
        raise SubscriptionError(f"an idle window applies only to {ABANDONED}; add --event {ABANDONED} or leave it "
                                "out", "--idle-window")
    return Wanted(check_target(target, service_url), event_types, provider, idle_window)


@dataclass(frozen=True)
class Missing:
    """A subscription to make on ``form_id``."""

    form_id: str
    event_type: str


async def plan_subscriptions(client: FormClient, forms: Iterable[str], want: Wanted, *,
                             rotate: bool = False) -> tuple[SubscriptionReport, list[Missing]]:
    """What :func:`create_subscriptions` would do: the report with the subscriptions kept
    (the same target, event type and idle window exists), and the ones to make. With
    ``rotate`` each is made again beside those that exist, which stay until
    :func:`remove_subscriptions` removes them as ``superseded``."""
    forms = list(forms)
    report, missing = SubscriptionReport(forms=len(forms)), []
    for form_id in forms:
        existing = await client.list_webhooks(form_id)
        for event_type in want.event_types:
            same = [s for s in existing if s.target_url == want.target and s.event_type == event_type
                    and s.idle_window == want.window_of(event_type)]
            report.kept += [_row(form_id, s) for s in same]
            if rotate or not same:
                missing.append(Missing(form_id, event_type))
    return report, missing


async def make_subscriptions(client: FormClient, want: Wanted, missing: Iterable[Missing], secret: str,
                             report: SubscriptionReport) -> SubscriptionReport:
    """Make each missing subscription, signed with ``secret``."""
    for m in missing:
        window = want.window_of(m.event_type)
        made = await client.create_webhook(m.form_id, want.target, want.provider, event_type=m.event_type,
                                           **({"idle_window": window} if window else {}), signing_secret=secret)
        report.created.append(_row(m.form_id, made))
    return report


async def create_subscriptions(client: FormClient, forms: Iterable[str], want: Wanted, secret: str, *,
                               rotate: bool = False) -> SubscriptionReport:
    """On each form, one subscription of ``want.target`` per event type signed with
    ``secret``. One that exists already (same target, event type and idle window) is kept;
    with ``rotate`` a new one is made beside it (see :func:`plan_subscriptions`)."""
    report, missing = await plan_subscriptions(client, forms, want, rotate=rotate)
    return await make_subscriptions(client, want, missing, secret, report)


# How long the service may hold a delivery: its retries (after 5 s, 5 min, 30 min, 2 h, 5 h,
# 10 h and 10 h, the sandbox's schedule as the hosted service's) and each attempt's timeout
# (about 27.6 h). The hosted service cannot list what it holds; past this, nothing is held.
RETRY_HORIZON_MS = sum(RETRY_SCHEDULE_MS) + (len(RETRY_SCHEDULE_MS) + 1) * ATTEMPT_TIMEOUT_S * 1000


def _superseded(subs: Sequence[WebhookSubscription]) -> dict[str, WebhookSubscription]:
    """The subscriptions with a newer one of the same target, event type and idle window
    (``webhooks.list`` lists the oldest first): id -> the newest, which replaces it."""
    newest = {(s.target_url, s.event_type, s.idle_window): s for s in subs}
    return {s.subscription_id: newest[(s.target_url, s.event_type, s.idle_window)] for s in subs
            if newest[(s.target_url, s.event_type, s.idle_window)] is not s}


PendingOf = Callable[[list[str]], Awaitable[dict[str, int]]]
"""The deliveries the service holds per subscription id (the sandbox's ``deliveries.pending``)."""


class StillDelivering(SubscriptionError):
    """Superseded subscriptions whose deliveries the service may still hold: removing them
    would give those up."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "--superseded")


def held_back(old: Mapping[str, int | None], pending: Mapping[str, int] | None, now_ms: int) -> str | None:
    """Why the superseded subscriptions ``old`` (id -> when the one replacing it was made,
    epoch ms) may not be removed yet, or None: the service holds ``pending`` deliveries for
    them (when it can say, as the sandbox does), else the retry horizon after the rotation
    has not passed."""
    if pending is not None:
        held = {sid: n for sid, n in pending.items() if sid in old and n}
        if not held:
            return None
        return (f"the service still holds {sum(held.values())} deliveries for {len(held)} of the {len(old)} superseded "
                f"subscriptions; run it again once they are answered (the receiver, holding both secrets, answers "
                f"each at its next attempt), or add --force to give them up")
    rotated = max((at or 0 for at in old.values()), default=0)
    if not old or now_ms >= rotated + RETRY_HORIZON_MS:
        return None
    until = datetime.fromtimestamp((rotated + RETRY_HORIZON_MS) / 1000, UTC).isoformat(timespec="minutes")
    return (f"the service may still retry deliveries to the {len(old)} superseded subscriptions until {until} (its "
            f"retry horizon, about {RETRY_HORIZON_MS / 3_600_000:.1f} h after the rotation), and it cannot say which "
            f"it holds; run it again then, or add --force to give them up")


async def remove_subscriptions(client: FormClient, forms: Iterable[str], target: str, events: Sequence[str] = (),
                               *, superseded: bool = False, pending_of: PendingOf | None = None,
                               force: bool = False, now_ms: int | None = None) -> SubscriptionReport:
    """Remove the forms' subscriptions to ``target`` (only of ``events`` when given; with
    ``superseded``, only those that a newer one of the same event type replaces: the old
    half of a rotation). The service gives up the deliveries still waiting for a retry to a
    subscription removed, so superseded ones are removed only once the service holds none
    for them (``pending_of``, when the service can say) or the retry horizon after the
    rotation has passed (when it cannot), unless ``force``: else a ``StillDelivering``,
    and nothing is removed."""
    only = {event_type_of(e) for e in events}
    forms = list(forms)
    report = SubscriptionReport(forms=len(forms))
    doomed: list[tuple[str, WebhookSubscription, WebhookSubscription | None]] = []
    for form_id in forms:
        subs = [s for s in await client.list_webhooks(form_id) if s.target_url == target]
        old = _superseded(subs) if superseded else {s.subscription_id: None for s in subs}
        doomed += [(form_id, sub, old[sub.subscription_id]) for sub in subs
                   if sub.subscription_id in old and (not only or sub.event_type in only)]
    if superseded and doomed and not force:
        ids = {sub.subscription_id: (new.created_at_ms if new else None) for _, sub, new in doomed}
        pending = await pending_of(list(ids)) if pending_of is not None else None
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        if (why := held_back(ids, pending, now)) is not None:
            raise StillDelivering(why)
    for form_id, sub, _ in doomed:
        await client.delete_webhook(sub.subscription_id)
        report.removed.append(_row(form_id, sub))
    return report


def sandbox_pending(base_url: str, token: str) -> PendingOf | None:
    """What the service holds per subscription, asked of the sandbox (a service on this
    machine, ``deliveries.pending``); None for another service, which cannot say."""
    if not _loopback(urlsplit(base_url).hostname):
        return None

    async def pending_of(ids: list[str]) -> dict[str, int]:
        from formservice.sandbox.client import SandboxHelpers

        helpers = SandboxHelpers(base_url, token)
        try:
            return {item.subscription_id: item.pending for item in (await helpers.deliveries_pending(ids)).items}
        finally:
            await helpers.close()

    return pending_of


class CheckResult(BaseModel):
    """The receiver's answer to a check delivery signed with secret number ``secret``
    (1-based, in the order of ``receiver.webhook_secrets``)."""

    secret: int
    status: int
    verified: bool
    answer: str


def check_event(now: datetime | None = None) -> bytes:
    """A test event of a type of its own, stored raw by the receiver like any type it
    does not map (``formsync.check``), with a fresh id."""
    at = now or datetime.now(UTC)
    envelope = {"id": "evt_check_" + secrets.token_hex(11), "type": CHECK_TYPE,
                "createdAt": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "apiVersion": API_VERSION, "test": True, "data": {}}
    return json.dumps(envelope, separators=(",", ":")).encode()


async def check_receiver(target: str, secrets_: Sequence[str], *, seconds: float = 15.0) -> list[CheckResult]:
    """POST one check event to ``target`` per secret, signed as the service signs; each
    verified when the receiver answers 200."""
    results = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds)) as http:
        for n, secret in enumerate(secrets_, 1):
            body = check_event()
            event_id = json.loads(body)["id"]
            headers = formstep_headers(secret, body, int(time.time()), event_id=event_id, event_type=CHECK_TYPE)
            async with http.post(target, data=body, headers=headers) as resp:
                text = (await resp.text())[:300]
                results.append(CheckResult(secret=n, status=resp.status, verified=resp.status == 200, answer=text))
    return results


def require_sandbox(base_url: str) -> None:
    """Refuse a delivery check through a service that is not on this machine (the hosted
    service has no test delivery, and no way to see a delivery's answer)."""
    if not _loopback(urlsplit(base_url).hostname):
        raise SubscriptionError(f"a delivery through the service is checked on the sandbox only (the service at "
                                f"{base_url} has no test delivery); leave it out to check the receiver and its "
                                "secrets", "--through-service")


class ServiceCheck(BaseModel):
    """A real delivery through the service: the request made and canceled for it, its
    ``request.canceled`` event, the receiver's answers to the service's attempts (None
    for an attempt that got no answer) and the errors of those that got none."""

    formId: str
    requestId: str
    eventId: str | None
    statuses: list[int | None]
    errors: list[str] = []
    verified: bool

    def untrusted(self) -> bool:
        """Whether an attempt failed on the receiver's certificate (the sandbox does not
        trust the authority that signed it)."""
        return any("CERTIFICATE_VERIFY_FAILED" in e or "Certificate" in e for e in self.errors)


async def _check_form(client: FormClient, forms: Iterable[str], target: str) -> str:
    """The first published form with a ``request_canceled`` subscription to ``target``
    (a request can be made only on a published form)."""
    subscribed = [f for f in forms if any(s.target_url == target and s.event_type == "request_canceled"
                                          for s in await client.list_webhooks(f))]
    for form_id in subscribed:
        if (await client.get_form(form_id)).is_published:
            return form_id
    if subscribed:
        raise SubscriptionError(f"no form with a request_canceled subscription to {target} is published "
                                f"({', '.join(subscribed)}); publish one, or subscribe a published form with "
                                "'formsync subscribe create --event request_canceled --form FORM_ID'", "--form")
    raise SubscriptionError(f"no form has a request_canceled subscription to {target}; make one with "
                            "'formsync subscribe create --event request_canceled'", "--url")


async def check_through_sandbox(client: FormClient, base_url: str, forms: Iterable[str], target: str) -> ServiceCheck:
    """Have the sandbox deliver a real event to ``target``: a request made and canceled on
    the first published form of ``forms`` with a ``request_canceled`` subscription to it, its delivery
    attempted at once; verified when the receiver answered it 200. The hosted service
    has no test delivery, so this needs the sandbox (a service on this machine)."""
    from formservice.sandbox.client import SandboxHelpers

    require_sandbox(base_url)
    form_id = await _check_form(client, forms, target)
    req = await client.create_request(form_id, external_id="formsync-check-" + secrets.token_hex(6))
    await client.cancel_request(req.id, reason="formsync subscribe check")
    helpers = SandboxHelpers(base_url, (await client.token()).get_secret_value())  # the client's: token or grant
    try:
        await helpers.call("deliveries.flush")
        events = (await helpers.call("events.list", {"requestId": req.id, "type": "request.canceled"}))["items"]
    finally:
        await helpers.close()
    attempts = [a for e in events for d in e["deliveries"] if d["targetUrl"] == target for a in d["attempts"]]
    statuses = [a.get("status") for a in attempts]
    return ServiceCheck(formId=form_id, requestId=req.id, eventId=events[0]["id"] if events else None,
                        statuses=statuses, errors=[a["error"] for a in attempts if a.get("error") and a.get("status") is None],
                        verified=bool(statuses) and statuses[-1] == 200)
