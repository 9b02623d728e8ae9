"""Helpers that show what the sandbox sent: mail, and events with their deliveries."""

from __future__ import annotations

from sqlmodel import col, func, select

from ...clock import from_ms
from ...domain.base import Ctx
from ...tables import Delivery, DeliveryAttempt, Event, Mail
from ..models import (
    AttemptItem,
    DeliveryItem,
    EventItem,
    EventList,
    EventsParams,
    MailItem,
    MailList,
    MailParams,
    PendingItem,
    PendingList,
    PendingParams,
)
from .registry import helper


@helper("mail.list")
def mail_list(ctx: Ctx, p: MailParams) -> MailList:
    """Every invitation and reminder the sandbox "sent" for this workspace, oldest first."""
    stmt = select(Mail).where(Mail.workspace_id == ctx.workspace.id)
    if p.to is not None:
        stmt = stmt.where(Mail.to == p.to)
    if p.requestId is not None:
        stmt = stmt.where(Mail.request_id == p.requestId)
    rows = ctx.session.exec(stmt.order_by(col(Mail.created_at))).all()
    return MailList(items=[MailItem(id=m.id, kind=m.kind, to=m.to, from_=m.sender, subject=m.subject, body=m.body,
                                    status=m.status, request_id=m.request_id, submission_id=m.submission_id,
                                    created_at=from_ms(m.created_at)) for m in rows])


@helper("events.list")
def events_list(ctx: Ctx, p: EventsParams) -> EventList:
    """The workspace's events, oldest first, each with its deliveries and their attempts."""
    stmt = select(Event).where(Event.workspace_id == ctx.workspace.id)
    if p.requestId is not None:
        stmt = stmt.where(Event.request_id == p.requestId)
    if p.type is not None:
        stmt = stmt.where(Event.type == p.type)
    if p.formId is not None:
        stmt = stmt.where(Event.form_id == p.formId)
    return EventList(items=[
        EventItem(id=ev.id, type=ev.type, created_at=from_ms(ev.created_at), test=ev.test, request_id=ev.request_id,
                  submission_id=ev.submission_id, payload=ev.payload, deliveries=deliveries_of(ctx, ev.id))
        for ev in ctx.session.exec(stmt.order_by(col(Event.created_at))).all()])


@helper("deliveries.pending")
def deliveries_pending(ctx: Ctx, p: PendingParams) -> PendingList:
    """Per webhook subscription of the workspace, the deliveries still pending (neither
    answered 2xx nor given up) and when the next attempt is due: what a subscription's
    removal would give up."""
    stmt = (select(Delivery.subscription_id, func.count(), func.min(Delivery.next_attempt_at))
            .where(Delivery.workspace_id == ctx.workspace.id, Delivery.state == "pending",
                   col(Delivery.subscription_id).is_not(None))
            .group_by(Delivery.subscription_id).order_by(Delivery.subscription_id))
    if p.subscriptionIds is not None:
        stmt = stmt.where(col(Delivery.subscription_id).in_(p.subscriptionIds))
    return PendingList(items=[PendingItem(subscription_id=sid, pending=n, next_attempt_at=from_ms(at))
                              for sid, n, at in ctx.session.exec(stmt).all() if sid is not None])


def deliveries_of(ctx: Ctx, event_id: str) -> list[DeliveryItem]:
    """The deliveries of one event, oldest first, each with its attempts."""
    out: list[DeliveryItem] = []
    for d in ctx.session.exec(select(Delivery).where(Delivery.event_id == event_id).order_by(col(Delivery.created_at))):
        attempts = ctx.session.exec(select(DeliveryAttempt).where(DeliveryAttempt.delivery_id == d.id)
                                    .order_by(col(DeliveryAttempt.id))).all()
        out.append(DeliveryItem(id=d.id, kind=d.kind, target_url=d.target_url, state=d.state,
                                attempt_count=d.attempt_count, next_attempt_at=from_ms(d.next_attempt_at),
                                subscription_id=d.subscription_id,
                                attempts=[AttemptItem(at=from_ms(a.at), status=a.status, error=a.error, signature=a.signature,
                                                      duration_ms=a.duration_ms) for a in attempts]))
    return out
