"""Events: envelopes built from state, written to the outbox in the caller's transaction,
with one delivery per destination (the request's callback, matching subscriptions).

One channel, one event: a request-born submission produces ``request.completed`` only;
submission events never carry ``data.request``; test requests reach callbacks, never
subscriptions.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from ..clock import iso
from ..ids import new_id
from ..tables import Delivery, Event, Form, Request, Submission, Subscription

API_VERSION = "2026-09-24"
SUBSCRIPTION_TYPES = {
    "submission_created": "submission.completed",
    "submission_updated": "submission.updated",
    "submission_abandoned": "submission.abandoned",
    "request_completed": "request.completed",
    "request_expired": "request.expired",
    "request_canceled": "request.canceled",
}
TERMINAL_TYPES = {"request.completed", "request.expired", "request.canceled"}


def form_data(form: Form) -> dict[str, Any]:
    return {"id": form.id, "name": form.name, "snapshotId": form.snapshot_id if form.is_published else None}


def submission_data(sub: Submission, pdf_url: str | None = None) -> dict[str, Any]:
    return {"id": sub.id, "respondentEmail": sub.respondent_email, "submittedAt": iso(sub.submitted_at),
            "updatedAt": iso(sub.updated_at), "editCount": sub.edit_count, "pdfUrl": pdf_url,
            "language": sub.language}


def request_data(req: Request) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": req.id, "externalId": req.external_id, "status": req.status, "outcome": req.outcome,
        # the same default the request record shows, so a poll and a callback agree
        "language": req.language or "en", "recipient": {"email": req.recipient_email, "name": req.recipient_name},
        "metadata": req.metadata_, "context": req.context or {}, "createdAt": iso(req.created_at),
    }
    if req.status == "completed":
        data["completedAt"] = iso(req.completed_at)
    elif req.status == "expired":
        data["expiredAt"] = iso(req.expired_at)
    elif req.status == "canceled":
        data["canceledAt"] = iso(req.canceled_at)
        data["cancelReason"] = req.cancel_reason
    return data


def envelope(event_id: str, type_: str, created_at: int, test: bool, data: dict[str, Any]) -> dict[str, Any]:
    return {"id": event_id, "type": type_, "createdAt": iso(created_at), "apiVersion": API_VERSION, "test": test,
            "data": data}


def emit(session: Session, *, type_: str, workspace_id: str, form: Form, data: dict[str, Any], now: int,
         request: Request | None = None, submission: Submission | None = None, test: bool = False) -> Event:
    """Write an event and its deliveries to the outbox (same transaction as the change)."""
    event_id = new_id("evt")
    payload = envelope(event_id, type_, now, test, data)
    event = Event(id=event_id, type=type_, workspace_id=workspace_id, form_id=form.id,
                  request_id=request.id if request else None, submission_id=submission.id if submission else None,
                  test=test, created_at=now, payload=payload)
    session.add(event)
    if request is not None and request.callback_url and type_ in TERMINAL_TYPES:
        add_delivery(session, event, "callback", request.callback_url, now, request_id=request.id)
    if not test:
        wanted = [k for k, v in SUBSCRIPTION_TYPES.items() if v == type_]
        subs = session.exec(select(Subscription).where(Subscription.form_id == form.id,
                                                       Subscription.status == "active",
                                                       col(Subscription.event_type).in_(wanted))).all()
        for sub in subs:
            add_delivery(session, event, "webhook", sub.target_url, now, subscription_id=sub.id,
                         request_id=request.id if request else None)
    return event


def add_delivery(session: Session, event: Event, kind: str, url: str, now: int, *, request_id: str | None = None,
                 subscription_id: str | None = None) -> Delivery:
    d = Delivery(id=new_id("disp"), event_id=event.id, workspace_id=event.workspace_id, kind=kind,
                 request_id=request_id, subscription_id=subscription_id, target_url=url, created_at=now,
                 next_attempt_at=now)
    session.add(d)
    return d


def request_completed_data(form: Form, req: Request, sub: Submission, pdf_url: str | None = None) -> dict[str, Any]:
    return {"request": request_data(req), "form": form_data(form), "submission": submission_data(sub, pdf_url),
            "answers": req.answers or {}, "display": req.display or {}}
