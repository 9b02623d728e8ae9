"""Helpers that show what the sandbox sent: mail, and events with their deliveries."""

from __future__ import annotations

from sqlmodel import col, select

from ...domain.base import Ctx
from ...tables import Delivery, DeliveryAttempt, Event, Mail
from ..models import DeliveryItem, EventItem, EventList, EventsParams, MailItem, MailList, MailParams
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
    items: list[MailItem] = [{"id": m.id, "kind": m.kind, "to": m.to, "from": m.sender, "subject": m.subject,
                              "body": m.body, "status": m.status, "requestId": m.request_id,
                              "submissionId": m.submission_id, "createdAt": m.created_at}
                             for m in rows]
    return {"items": items}


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
    items = [EventItem(id=ev.id, type=ev.type, createdAt=ev.created_at, test=ev.test, requestId=ev.request_id,
                       submissionId=ev.submission_id, payload=ev.payload, deliveries=deliveries_of(ctx, ev.id))
             for ev in ctx.session.exec(stmt.order_by(col(Event.created_at))).all()]
    return {"items": items}


def deliveries_of(ctx: Ctx, event_id: str) -> list[DeliveryItem]:
    """The deliveries of one event, oldest first, each with its attempts."""
    out: list[DeliveryItem] = []
    for d in ctx.session.exec(select(Delivery).where(Delivery.event_id == event_id).order_by(col(Delivery.created_at))):
        attempts = ctx.session.exec(select(DeliveryAttempt).where(DeliveryAttempt.delivery_id == d.id)
                                    .order_by(col(DeliveryAttempt.id))).all()
        out.append(DeliveryItem(id=d.id, kind=d.kind, targetUrl=d.target_url, state=d.state,
                                attemptCount=d.attempt_count, nextAttemptAt=d.next_attempt_at,
                                subscriptionId=d.subscription_id,
                                attempts=[{"at": a.at, "status": a.status, "error": a.error,
                                           "signature": a.signature, "durationMs": a.duration_ms}
                                          for a in attempts]))
    return out
