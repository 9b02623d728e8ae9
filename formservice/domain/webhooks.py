"""Webhook subscriptions of a form (``webhooks.create/list/delete``), as the automation
connectors (Zapier, Make, n8n) manage them. Events reach a subscription through
:func:`events.emit` (one channel, one event); the delivery worker signs each POST with
the subscription's own ``signingSecret``, or the workspace signing secret when it gave
none. The secret is never returned."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from sqlmodel import col, select

from ..errors import ApiError, forbidden, not_found, validation
from ..ids import new_id
from ..tables import Delivery, Subscription
from .base import Ctx, Params, Result, method
from .events import SUBSCRIPTION_TYPES
from .requests import check_https

PROVIDERS = ("zapier", "make", "n8n")
EVENT_TYPES = tuple(SUBSCRIPTION_TYPES)
IDLE_WINDOWS = ("12h", "1d", "3d", "1w")
ABANDONED = "submission_abandoned"
SECRET_MIN, SECRET_MAX = 32, 255


class CreateParams(Params):
    formId: str
    targetUrl: Annotated[str, Field(max_length=2048)]
    provider: str
    eventType: str = "submission_created"
    idleWindow: str | None = None
    signingSecret: str | None = None


class SubscriptionView(Result):
    """A subscription as create and list return it; ``idleWindow`` only for
    ``submission_abandoned``; the signing secret never."""

    subscriptionId: str
    formId: str
    provider: str
    targetUrl: str
    eventType: str
    idleWindow: str | None = None
    status: str
    createdAt: int


class SubscriptionList(Result):
    items: list[SubscriptionView]
    hasMore: bool


def view(sub: Subscription) -> SubscriptionView:
    v = SubscriptionView(subscriptionId=sub.id, formId=sub.form_id, provider=sub.provider, targetUrl=sub.target_url,
                         eventType=sub.event_type, status=sub.status, createdAt=sub.created_at)
    if sub.idle_window is not None:
        v.idleWindow = sub.idle_window
    return v


def _one_of(param: str, value: str, valid: tuple[str, ...]) -> str:
    if value not in valid:
        raise validation(f"{param} must be one of {', '.join(valid)}", field=param, reason="INVALID_VALUE",
                         validValues=list(valid))
    return value


def _idle_window(event_type: str, idle_window: str | None) -> str | None:
    if event_type != ABANDONED:
        if idle_window is not None:
            raise validation(f'idleWindow is only valid when eventType is "{ABANDONED}"', field="idleWindow",
                             reason="NOT_ALLOWED")
        return None
    if idle_window is None:
        raise validation(f'idleWindow is required when eventType is "{ABANDONED}"', field="idleWindow",
                         reason="REQUIRED", validValues=list(IDLE_WINDOWS))
    return _one_of("idleWindow", idle_window, IDLE_WINDOWS)


@method("webhooks.create")
def webhooks_create(ctx: Ctx, p: CreateParams) -> SubscriptionView:
    """Subscribe ``targetUrl`` (https) to one event type of a form, for an automation
    provider (zapier, make, n8n); ``submission_abandoned`` also takes an ``idleWindow``."""
    form = ctx.form(p.formId)
    try:
        check_https(p.targetUrl, "targetUrl")
    except ApiError as err:  # the live server's wording, not the callbackUrl one
        raise validation("targetUrl must use https", **err.details) from None
    provider = _one_of("provider", p.provider, PROVIDERS)
    event_type = _one_of("eventType", p.eventType, EVENT_TYPES)
    idle_window = _idle_window(event_type, p.idleWindow)
    if p.signingSecret is not None and not SECRET_MIN <= len(p.signingSecret) <= SECRET_MAX:
        raise validation(f"signingSecret must be between {SECRET_MIN} and {SECRET_MAX} characters",
                         field="signingSecret", reason="OUT_OF_RANGE")
    sub = Subscription(id=new_id("int"), workspace_id=form.workspace_id, form_id=form.id, target_url=p.targetUrl,
                       provider=provider, event_type=event_type, idle_window=idle_window,
                       signing_secret=p.signingSecret, created_at=ctx.now)
    ctx.session.add(sub)
    return view(sub)


class FormIdParams(Params):
    formId: str


@method("webhooks.list")
def webhooks_list(ctx: Ctx, p: FormIdParams) -> SubscriptionList:
    """The form's active subscriptions, oldest first, without their secrets."""
    form = ctx.form(p.formId, trashed_ok=True)
    rows = ctx.session.exec(select(Subscription).where(Subscription.form_id == form.id,
                                                       Subscription.status == "active")
                            .order_by(col(Subscription.created_at), col(Subscription.id))).all()
    return SubscriptionList(items=[view(r) for r in rows], hasMore=False)


class DeleteParams(Params):
    subscriptionId: str


class DeletedSubscription(Result):
    subscriptionId: str
    deleted: bool


@method("webhooks.delete")
def webhooks_delete(ctx: Ctx, p: DeleteParams) -> DeletedSubscription:
    """Unsubscribe: no further event reaches the subscription, and deliveries still
    waiting for a retry are given up."""
    sub = ctx.session.get(Subscription, p.subscriptionId)
    if sub is None or sub.status != "active":
        raise not_found("Webhook subscription", field="subscriptionId")
    if sub.workspace_id != ctx.workspace.id:
        raise forbidden(f"Webhook subscription {sub.id} belongs to another workspace; this token acts in "
                        f"{ctx.workspace.id} only.", field="subscriptionId", reason="FOREIGN_WORKSPACE")
    sub.status = "deleted"
    waiting = ctx.session.exec(select(Delivery).where(Delivery.subscription_id == sub.id,
                                                      Delivery.state == "pending")).all()
    for d in waiting:
        d.state = "failed"
        d.failed_at = ctx.now
        d.next_attempt_at = None
        d.last_error = "subscription deleted"
    return DeletedSubscription(subscriptionId=sub.id, deleted=True)
