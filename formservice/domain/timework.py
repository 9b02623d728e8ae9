"""Time-driven work, run on the service clock: invitations handed to the mail outbox,
request expiry, scheduled reminders, abandoned public-link drafts (event and respondent
reminders, see sharelinks.py) and retention purges. ``run_due`` is called by the
background worker and right after ``clock.advance``."""

from __future__ import annotations

from sqlmodel import Session, col, select

from ..clock import DAY_MS
from ..tables import Form, Request, Submission, Workspace, referenced
from . import sharelinks
from .requests import expire_request, schedule_next_reminder, send_mail, timeline_add
from .settings import DEFAULT_DRAFT_RETENTION_DAYS

# the delivery statuses (and timeline details) an invitation passes through, by mail outcome
INVITATION_STEPS: dict[str, list[tuple[str, str | None]]] = {
    "sent": [("sent", None)],
    "bounced": [("sent", None), ("bounced", "hard bounce")],
    "failed": [("failed", "mail hand-off failed")],
}


def run_due(session: Session, now: int, base_url: str) -> dict[str, int]:
    """Do every piece of time-driven work that is due at ``now``; returns counts."""
    counts = {"invitations": 0, "expired": 0, "reminders": 0, "purged": 0}

    # the session's identity map keeps each row once loaded: no cache of our own
    def form_of(req: Request) -> Form:
        return referenced(session, Form, req.form_id)

    def ws_of(req: Request) -> Workspace:
        return referenced(session, Workspace, req.workspace_id)

    # each query is read whole before its rows change: the loop writes to the same tables
    # a request canceled (or expired) before its invitation went out is not mailed: its link no longer works
    for req in list(session.exec(select(Request).where(Request.delivery_status == "queued",
                                                       Request.status == "pending"))):
        mail = send_mail(session, req, ws_of(req), form_of(req), "invitation", now, base_url)
        # queued -> sent, then bounced when the provider reports a hard bounce after the
        # hand-off; queued -> failed when the hand-off itself fails
        for status, detail in INVITATION_STEPS[mail.status]:
            req.delivery_status = status
            timeline_add(req, "invitation", now, deliveryStatus=status, detail=detail)
        counts["invitations"] += 1
    for req in list(session.exec(select(Request).where(Request.status == "pending", Request.expires_at <= now))):
        expire_request(session, req, now)
        counts["expired"] += 1
    for req in list(session.exec(select(Request).where(Request.status == "pending",
                                                       col(Request.reminder_due_at) <= now))):
        mail = send_mail(session, req, ws_of(req), form_of(req), "reminder", now, base_url)
        req.reminders_sent += 1
        req.reminder_step += 1
        timeline_add(req, "reminder", now, deliveryStatus=mail.status, detail=f"step {req.reminder_step}")
        schedule_next_reminder(form_of(req), req, ws_of(req))
        counts["reminders"] += 1
    # before the purge, so a draft about to go is still reported
    counts["abandoned"] = sharelinks.sweep_abandoned(session, now, base_url)
    counts["respondentReminders"] = sharelinks.remind_abandoned(session, now, base_url)
    counts["purged"] = purge(session, now)
    return counts


def purge(session: Session, now: int) -> int:
    """Delete drafts and submissions past their form's retention, and clear the answers
    of requests whose submission went with them."""
    purged = 0
    for form in session.exec(select(Form)):
        settings = form.settings or {}
        draft_days = settings.get("draftRetentionDays")
        draft_days = DEFAULT_DRAFT_RETENTION_DAYS if draft_days is None else draft_days
        sub_days = settings.get("submissionRetentionDays")
        stale = select(Submission).where(Submission.form_id == form.id, col(Submission.is_completed).is_(False),
                                         Submission.last_activity_at <= now - draft_days * DAY_MS)
        doomed = list(session.exec(stale))
        if sub_days is not None:
            doomed += list(session.exec(select(Submission).where(
                Submission.form_id == form.id, col(Submission.is_completed).is_(True),
                Submission.submitted_at <= now - sub_days * DAY_MS)))
        elif form.fixed_deletion_at is not None and form.fixed_deletion_at <= now:
            doomed += list(session.exec(select(Submission).where(Submission.form_id == form.id,
                                                                 col(Submission.is_completed).is_(True))))
        for sub in doomed:
            remove_submission(session, sub, now)
            purged += 1
    return purged


def remove_submission(session: Session, sub: Submission, now: int) -> None:
    """Delete ``sub``; the request it answered keeps its status, its answers cleared
    (``dataPurgedAt``) as a retention purge clears them."""
    if sub.request_id:
        req = session.get(Request, sub.request_id)
        if req is not None and req.data_purged_at is None:
            req.answers = None
            req.display = None
            req.data_purged_at = now
    session.delete(sub)
